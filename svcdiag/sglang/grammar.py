"""SGLang's start-up log grammar: the one place that knows what SGLang prints.

Formats follow docs/sglang.md#start-up-milestones (SGLang's source, old and new
variants). `LineParser.feed` turns one line into zero or more typed events. It keeps the
little state a log needs (an open traceback) and does no I/O. The hot path (a line that
is no milestone, e.g. a decode batch) costs one prefix check and one dict lookup, since
every line an operator's journal carries goes through it.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, replace

from svcdiag.sglang import endings, lazy_re, milestone_lines, quiet
from svcdiag.sglang.causes import UNNAMED, Place
from svcdiag.sglang.events import (
    DEATH,
    ROOT,
    SUSPECT,
    Event,
    Failure,
    Ready,
    Recovered,
    StopRequested,
    Uvicorn,
)
from svcdiag.sglang.quiet import LEVEL_HEADS, LEVEL_RE
from svcdiag.sglang.registry import classify, own
from svcdiag.sglang.traceback import (
    CHAIN_LINES,
    CUT_OFF,
    FINAL_EXC_RE,
    FRAME_RE,
    TRACEBACK_OPEN,
    Took,
    Traceback,
    close,
    phase_said,
    take,
)

try:  # the C type itself: Python 3.11's datetime.py defines each of its classes in Python before it takes
    from _datetime import datetime  # _datetime's in their place (~1.3 ms, with math), and a replay reads time
except ImportError:  # a Python without it
    from datetime import datetime

TYPE_CHECKING = False
if TYPE_CHECKING:
    from svcdiag.sglang.failures import Said

#: ≤ 0.2.13: `Initialization failed. detoken_init_state: init ok`, `detoken init state: init ok` (≤ 0.1.16): a
#: process that started, said after the traceback of the one that did not
INIT_OK = ("init_state: init ok", "init state: init ok")
#: `Exception ignored in: <function X.__del__ …>`: Python printed an exception it did not raise (a finaliser's)
IGNORED = "Exception ignored in"
#: the prefixes before the dated one: `[gpu_id=0] ` (0.1.17-0.2.5), `[gpu=0] ` (0.2.7-0.2.13), `[rank=0] ` (0.1.17's
#: router), `[00:19:29] `, `[00:19:29 TP0] ` (0.2.14-0.3.2)
OLD_PREFIX_RE = lazy_re.compile(r"\[(?:(?:gpu_id|gpu|rank)=(\d+)|(\d\d:\d\d:\d\d)(?: ([^\]]*))?)\] ")
#: SGLang's diffusion runtime (`sglang generate`, `sglang serve` of a diffusion model, multimodal_gen, 0.5.6+): a
#: month, a day and a time, no year (`[12-16 14:27:08] Exit code: -9`, audit R14)
DIFFUSION_PREFIX_RE = lazy_re.compile(r"\[([01]\d-[0-3]\d) (\d\d:\d\d:\d\d)\] ")
OLD_PREFIX_DATE = "2000-01-01"  # a time of day alone: the phases' durations are right, the date is not known
#: a library's own line at a level that says it carries on (NCCL INFO, glog's I/W lines): never fatal alone
CHATTER_RE = lazy_re.compile(r"\b(?:INFO|DEBUG|TRACE)\b|^[IWD]\d{4} ")
#: argparse's last word under a program's name: `sglang serve: error: …` (0.5.10+), `launch_server.py: error: …` (≤ 0.5.9)
ARGPARSE_PROGRAM_RE = lazy_re.compile(r"(?:[\w.-]+\.py|sglang(?: [\w-]+)?|launch_server|python3? -m [\w.]+): error: ")
ANSI_RE = lazy_re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
#: the warmup request `_wait_and_warmup` sends, answered: ≤ 0.1.17's only word that the server is up
WARMUP_OK_RE = lazy_re.compile(r'"POST /generate HTTP/1\.[01]" 200')
#: a record of vLLM's logger (its ops imported under SGLang): `INFO 06-26 18:37:03 [__init__.py:248] …`, a line of its own
VLLM_RECORD_RE = lazy_re.compile(r"(?:DEBUG|INFO|WARNING|ERROR|CRITICAL) \d\d-\d\d \d\d:\d\d:\d\d ")
#: ≤ 0.1.16's only prefix, `Rank 0: ` (`Rank 0: load weight begin.`, `Rank 0: max_total_num_token=38103, …`)
RANK_COLON_RE = lazy_re.compile(r"Rank (\d+): (.+)")
#: a log record that carries its exception's traceback on the lines after it (`logger.exception`, exc_info):
#: a request that failed (SGLang's serving code, uvicorn, asyncio), the server goes on serving
LOGGED_EXC_RE = lazy_re.compile(r"(?:ERROR: +)?(?:Error in request|Exception in (?:ASGI application|callback)"
                           r"|(?:Task|Future) exception was never retrieved)")
#: a time and a level before the message, another formatter's than SGLang's: SGLANG_LOGGING_CONFIG_PATH's as
#: SGLang's docs show it (`2025-04-13 15:34:02 INFO 228 [file.py:301] msg`), Python's (`… - INFO - msg`, `… - name -
#: INFO - msg`), loguru's (`… | INFO     | module:fn:12 - msg`), a bare `<time> INFO msg`; the first with the
#: scheduler's ranks before the file (`2026-03-18 11:22:05.874 INFO 120984 [ TP0 scheduler.py:3190] msg`, group 2)
CUSTOM_PREFIX_RE = lazy_re.compile(
    r"^(\d{4}-\d\d-\d\d[ T]\d\d:\d\d:\d\d)(?:[.,]\d+)?Z? *(?:[|-] *)?(?:[\w.]+ +- +)?"
    r"\[?(?:DEBUG|INFO|WARNING|WARN|ERROR|CRITICAL|FATAL)\]?"
    r"(?: +\d+ \[ ?((?:[A-Z][A-Z_]*\d+ )*)[\w.]+:\d+\]| *[|:-] *(?:[\w.]+(?::[\w<>.]+)*(?::\d+)? +[|:-] +)?| +) *(.*)$")
#: NCCL's own account of what failed (`node5:240:240 [6] misc/socket.cc:533 NCCL WARN socketPollConnect: …`)
NCCL_WARN_RE = lazy_re.compile(r"^\S+:\d+:\d+ \[\d+\] \S+ NCCL WARN (.+)$")
#: heads of those keys that any program's line may start with (`Error response from daemon`, `FutureWarning`):
#: without SGLang's prefix such a line is SGLang's only when it says what the handler looks for
COMMON_HEADS = frozenset(("Error ", "Except", "Task e", "Future", "Prefil", "WARNIN"))
#: sglang.utils.wait_for_server's note, printed once the server answered (docs notebooks)
NOTEBOOK_READY = "NOTE: Typically, the server runs in a separate terminal"
NOTHING: list[Event] = []  # shared and never appended to: the hot path allocates nothing
#: sglang_router's Python logging (`[Router (Python)] 2025-03-07 10:00:01 - INFO - msg - launch_server.py:177`);
#: its Rust side (≤ 0.1.x) wrote `[Router (Rust)] …` the same way
ROUTER_LINE_RE = lazy_re.compile(
    r"^\[Router \((?:Python|Rust)\)\] (\d{4}-\d\d-\d\d \d\d:\d\d:\d\d) - ([A-Z]+) - (.*?)(?: - [\w.]+:\d+)?$")
UVICORN_URL_RE = lazy_re.compile(r"running on (\S+)")
#: sglang-router ≥ 0.2 (Rust `tracing`): `2025-11-04 10:05:37  ERROR sglang_router_rs::core::worker_manager: src/…rs:N: msg`
ROUTER_RS_RE = lazy_re.compile(r"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d)(?:\.\d+)?Z? +(TRACE|DEBUG|INFO|WARN|ERROR) "
                          r"(?:sglang_router_rs|sgl_model_gateway|smg)\b[\w:]*: (?:[\w/.-]+\.rs:\d+: )?(.*)$")
#: any tqdm bar in its default format (`Fetching 4 files:  50%|█████     | 2/4 [00:01<00:01,  1.52it/s]`): what
#: follows it on the same line is another line, printed while the bar was drawn
#: torch_npu's own C++ logger (Ascend): `[2026-05-29 16:30:21:955] torch_npu.memory: [ERROR] [1537] msg`, a colon
#: before the milliseconds, `[rank:N]:` before it when the rank is known, the `[pid]` only in later releases
TORCH_NPU_RE = lazy_re.compile(r"^(?:\[rank:\d+\]:)?\[(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d):\d{3}\] [\w.]+: "
                          r"\[(DEBUG|INFO|WARNING|ERROR|CRITICAL)\] (?:\[\d+\] )?(.*)$")
#: SGLang's dated prefix glued after another process's unfinished line (two writers on one stream: faulthandler's
#: `Extension modules: …` while another rank logs `[2026-02-23 23:52:47 TP5] Scheduler hit an exception: …`, audit R13)
GLUED_PREFIX_RE = lazy_re.compile(r"\[20\d\d-\d\d-\d\d \d\d:\d\d:\d\d(?:\.\d+)?(?: [^\]]*)?\] ")
#: Ray's actor prefix inside a line, not at its head: a paste whose newlines were lost (text outside a code block,
#: rendered as Markdown: `… (SGLangWorker pid=38138) File "…", line 314, in initialize (SGLangWorker pid=38138)
#: self.init_cuda_graphs() …`); each prefix began a line
FLATTENED_ACTOR_RE = lazy_re.compile(r" \([\w.:-]+ pid=\d+(?:, ip=[\d.]+)?\) ")
#: SGLang's dated prefix that lost its head when pasted (a CI page's or a terminal's selection began a few characters
#: in: `026-05-28 00:11:09.816 DP0 TP0 EP0] Scheduler hit an exception: …`, or at its ranks: `DP2 TP2] Scheduler hit
#: …`): what is left of its date and time, then the ranks (only rank words: `TP0`, `DP1 TP1 EP1`, `PP0`) and the
#: bracket that closes it; the rest of a time (a colon) or a rank word must be there
CUT_PREFIX_RE = lazy_re.compile(r"([\d:. -]*?) ?((?:[A-Z]{2,4}-?\d+ )*[A-Z]{2,4}-?\d+)?\] ")
#: the prefix with its time taken out and its ranks kept (`[TP0 EP0] Scheduler hit an exception: …`, a reporter's
#: paste that dropped the clock): rank words only, between the brackets
RANKS_ONLY_PREFIX_RE = lazy_re.compile(r"\[((?:[A-Z]{2,4}-?\d+ )*[A-Z]{2,4}-?\d+)\] ")
ANY_BAR_RE = lazy_re.compile(r"[^\r]*?\d+%\|[^|]*\|[^\[\r]*\[[^\]\r]*\]")
PROGRESS_HEADS = ("Loading ", "Capturing ", "Multi-thread loading", "[")


def parse_ts(text: str) -> float:
    """SGLang's `%Y-%m-%d %H:%M:%S[.mmm]` (local time) as epoch seconds."""
    return datetime.fromisoformat(text).timestamp()


def prefix_stamp(text: str) -> str | None:
    """The time of a line's SGLang prefix, cut as `feed_line` cuts it (which inlines this test on
    its hot path); None when the line has no prefix. Whether it parses is `parse_ts`'s to say."""
    if text.startswith("[2") and len(text) > 21:
        c = text[20]
        if c in "]. " and text.find("] ", 20) > 0:
            return text[1:24 if c == "." else 20]
    return None


@dataclass(frozen=True, slots=True)
class Dialect:
    """A prefix before SGLang's message other than its dated one (logparser's log_format rows): how a line
    of it starts, its pattern, the LineParser method that reads a match, whether it may come mid-traceback."""

    name: str
    releases: str
    heads: tuple[str, ...]
    pattern: re.Pattern[str]
    read: str
    in_traceback: bool = True


DIALECTS = (
    Dialect("SGLang's undated prefixes", "0.1.17-0.3.2", ("[g", "[r", "[0", "[1", "[2"), OLD_PREFIX_RE, "_old_prefixed"),
    Dialect("sglang_router's Python launcher", "sglang-router <= 0.1", ("[Router (",), ROUTER_LINE_RE, "_router",
            in_traceback=False),
    Dialect("sglang-router's Rust tracing", "sglang-router >= 0.2", ("20",), ROUTER_RS_RE, "_router_rs",
            in_traceback=False),
    Dialect("a time and a level (SGLANG_LOGGING_CONFIG_PATH, Python, loguru)", "", ("20",), CUSTOM_PREFIX_RE,
            "_logger_prefixed"),
    Dialect("SGLang's diffusion runtime (multimodal_gen)", "0.5.6+", ("[0", "[1"), DIFFUSION_PREFIX_RE,
            "_diffusion_prefixed"),
    Dialect("torch_npu's own logger (Ascend)", "torch_npu", ("[2", "[rank:"), TORCH_NPU_RE, "_npu_logger"),
)


#: a message's reader: (message, ranks, time) → its event(s), or None when the message is not its line
Reader = Callable[[str, str, float | None], Event | list[Event] | None]

#: a message's first six characters → what reads it: a milestone reader, or the name of the LineParser method
#: (replay's fast path derives the quiet lines from these keys: LineParser.quiet_message)
DISPATCH: dict[str, str | Reader] = {
    "server": "_server_args",
    "Init t": milestone_lines.dist,
    "Init n": milestone_lines.dist,
    "Load w": milestone_lines.weights,
    "Loaded": "_fatal_line",
    "KV Cac": "_kv",
    "Full K": "_kv",
    "SWA KV": "_kv",
    "Post-c": "_post_capture",
    "KV poo": "_kv_below_context",
    "Engine": "_startup_timings",
    "[unifi": milestone_lines.unified_memory,
    "retry(": endings.recovered,
    "Retryi": endings.recovered,
    "DataPa": "_handler_exception",
    "TpMode": "_handler_exception",
    "Detoke": "_handler_exception",
    "Child ": endings.died,
    "Mamba ": milestone_lines.mamba,
    "Memory": milestone_lines.pool_end,
    "max_ru": milestone_lines.max_running,
    "max_to": milestone_lines.scheduler,
    "Captur": milestone_lines.capture,
    "Initia": "_initialized",
    "DFLASH": milestone_lines.draft_ready,
    "The se": "_ready",
    "INFO: ": "_uvicorn",
    "ERROR:": "_uvicorn_error",
    "Schedu": "_handler_exception",
    "Server": "_own_message",  # the PD bootstrap server's failed bind
    "Receiv": endings.sigquit,
    "SIGQUI": endings.sigquit,
    "SIGTER": endings.sigterm,
    "Watchd": "_own_message",  # ≤ 0.4.x: `Watchdog timeout (self.watchdog_timeout=300)`
    "Tokeni": "_own_message",  # `TokenizerManager watchdog timeout (…)`
    "Exit c": endings.died,
    "Subpro": endings.died,
    "Not en": "_fatal_line",
    "Error ": "_logs_exception",
    "Except": "_logs_exception",
    "Task e": "_logs_exception",
    "Future": "_logs_exception",
    "Prefil": "_own_message",  # a PD server's failed warmup, its failed registration
    "Hybrid": "_fatal_line",
    "Enteri": milestone_lines.precompile,
    "Alloca": milestone_lines.host_pool,
    "Creati": milestone_lines.hicache_storage,  # HiCache's storage backend, after the host pool
    "Moonca": milestone_lines.hicache_storage,
    "Connec": milestone_lines.hicache_storage,
    "[Rank ": milestone_lines.hicache_storage,
    "Use sl": milestone_lines.sliding_window,
    "[aiter": milestone_lines.precompile,
    "WARNIN": milestone_lines.port_moved,
    **{f"Rank {d}": "_died" for d in range(10)},  # ≤ 0.1.16's `Rank 0: …`, and `Rank 0 scheduler is dead`
}


#: a line of its own's reader: (line, time, the journal's time) → its events, or None when the line is not its
AloneReader = Callable[[str, float | None, float | None], list[Event] | None]
#: what a line of its own may be (no prefix, no traceback open), as the LineParser methods that read each, asked in
#: this order: the first that answers takes the line (the causes are the registry's rows' at Place.OUTSIDE, LONE,
#: MESSAGE)
ALONE = ("_opens", "_headless", "_ctrl_c", "_cut_prefix", "_flattened", "_glued_prefix", "_outside", "_ignored",
         "_fatal", "_glued_bar", "_unprefixed_message", "_lone_reader")


class LineParser:
    """Lines in, events out. One instance per start (it holds the open traceback)."""

    def __init__(self) -> None:
        self._tb: Traceback | None = None
        #: lines that are SGLang's own (its prefix, or a message it prints): a file with none holds no start. Read
        #: only against 0 and one line apart (`_logged_at`, `_lone`): `skip` may be told 2 for any run of more
        self.sglang_lines = 0
        #: the release range the line shapes point to (docs/sglang.md): "0.3.6", "<= 0.5.9", ">= 0.5.23"
        self.version_hint: str | None = None
        self._logged_at = -1  # sglang_lines at a record whose traceback follows it (LOGGED_EXC_RE)
        self._last_ts_text = ""
        self._last_ts: float | None = None
        self.last_ts: float | None = None  # the latest timestamp read off a line prefix
        #: `python -m sglang_router.launch_server --dp-size N`: N servers, one per worker, in one log
        self.router_workers = 0  # its `Launching DP server process i on port P` lines
        self.server_args_lines = 0  # the workers' (each prints its own server_args)
        self._router_ready = 0  # the workers' ready lines so far
        #: an undated log whose uvicorn runs: its warmup request's 200 is the ready line (none before 0.1.18)
        self._ready_by_warmup = False
        #: the year of SGLang's dated lines, which the diffusion runtime's year-less stamps (`[06-17 13:46:56] `) take;
        #: when one of those comes first, every stamp is put on OLD_PREFIX_DATE's year instead (`_yearless`), so that a
        #: log mixing both (uvicorn's dated lines) keeps its durations
        self._year: str | None = None
        self._yearless = False
        #: NCCL's last `NCCL WARN` (what failed); an nccl_error says it
        self.nccl_warn: str | None = None
        #: a line said before a traceback that speaks for it if it names no cause (Place.NOTED: a PD decode server's
        #: `Error fetching prefill parallel info from bootstrap: …`, audit R12): the line and what it says
        self._noted: tuple[str, Said] | None = None
        #: the last lone exception line (no traceback around it: a pasted tail, a library's own report) and the count
        #: of SGLang's lines then; a scheduler's traceback cut off right after it failed of it (audit R13)
        self._lone: tuple[str, int] | None = None
        self._lone_before_tb: str | None = None  # that line, when the open traceback followed it at once
        #: C++'s `terminate called after throwing …` (its line, the exception's type), until its what() line
        self._terminate: tuple[str, str] | None = None
        self._dispatch: dict[str, Reader] = {
            key: getattr(self, read) if isinstance(read, str) else read for key, read in DISPATCH.items()}
        self._alone_readers: tuple[AloneReader, ...] = tuple(getattr(self, name) for name in ALONE)

    # ------------------------------------------------------------ chunk-level helpers (replay's fast path)

    def interesting_re(self, ascii_only: bool = False) -> re.Pattern[bytes]:
        """The newlines before every line this parser might act on (quiet.interesting_re)."""
        return quiet.interesting_re(self._dispatch, ascii_only)

    def interesting_message_re(self, fmt: str, ascii_only: bool = False) -> re.Pattern[bytes]:
        """The journal formats' `interesting_re` (quiet.interesting_message_re)."""
        return quiet.interesting_message_re(self._dispatch, fmt, ascii_only)

    def quiet_message(self, ascii_only: bool, escaped: bool = False) -> bytes:
        """The source of the pattern of a quiet line (quiet.quiet_message)."""
        return quiet.quiet_message(self._dispatch, ascii_only, escaped)

    def quiet_ok(self) -> bool:
        """Whether quiet lines may be skipped now: they would end or extend an open traceback, or (≤ 0.1.17)
        an access line is the ready line."""
        return self._tb is None and not self._ready_by_warmup

    def skip(self, n: int, ts_text: str | None) -> None:
        """`n` quiet lines went by, the last prefixed one stamped `ts_text` (None: none was); the
        caller has checked that `ts_text` parses (`parse_ts`). `n` may be capped at 2 (`sglang_lines` is
        compared one line apart at most): replay does not count a run's lines, only whether it holds several."""
        self.sglang_lines += n
        if ts_text is not None and ts_text != self._last_ts_text:
            self._clock(ts_text)

    # ------------------------------------------------------------ entry

    def feed(self, text: str, ts: float | None = None) -> list[Event]:
        """One journal message (it may hold several lines). `ts` is the journal's time."""
        if "\n" in text:
            out: list[Event] = []
            for part in text.split("\n"):
                out += self.feed_line(part, ts)
            return out
        return self.feed_line(text, ts)

    def feed_line(self, text: str, ts: float | None = None) -> list[Event]:
        """One line as printed, prefix included; with no `ts` the prefix is the clock."""
        if "\x1b" in text:  # colours: uvicorn's levels on a TTY (`docker run -t`), a captured terminal
            text = ANSI_RE.sub("", text)
        if text.startswith("[2") and len(text) > 21:
            c = text[20]
            if c == "]" or c == "." or c == " ":  # noqa: PLR1714 -- the hot path: three compares beat a set lookup
                end = text.find("] ", 20)
                if end > 0:
                    cut = 24 if c == "." else 20
                    ts_text = text[1:cut]
                    if ts_text != self._last_ts_text:
                        self._clock(ts_text)
                    self.sglang_lines += 1
                    return self._message(text[end + 2:], text[cut + 1:end], self._last_ts if ts is None else ts)
        return self._unprefixed(text, ts)

    def _message(self, msg: str, ranks: str, ts: float | None) -> list[Event]:
        """What follows a prefix SGLang printed (its ranks, its time): a traceback a line closes, then
        the message's handler."""
        # (a traceback cut at its top ends at SGLang's next line even before its final one: frames alone say nothing)
        done = self._end_traceback() if self._tb is not None and (self._tb.final or self._tb.headless) else NOTHING
        if done and endings.RETRY_SAID_RE.search(msg) is not None:  # the traceback it closes was retried, or given up on
            return [*done, Recovered(ts=ts, ranks=ranks, line=msg)]
        out = self._said(msg, ranks, ts)
        return done + out if done and out else done or out

    def _said(self, msg: str, ranks: str, ts: float | None) -> list[Event]:
        """A message's handler; one under a level prefix (`INFO:     `, `[WARNING] `: another logging setup's
        formatter, uvicorn's under --tokenizer-worker-num > 1) is read as the message it wraps."""
        handler = self._dispatch.get(msg[:6])
        result = handler(msg, ranks, ts) if handler is not None else None
        if result is not None:
            return result if isinstance(result, list) else [result]
        if msg[:1] in LEVEL_HEADS and (lv := LEVEL_RE.match(msg)) is not None and _wraps(msg, lv.end()):
            return self._said(msg[lv.end():], ranks, ts)
        if handler is None:
            if msg == TRACEBACK_OPEN and ranks:  # 0.3.3-0.3.6: a scheduler's dying words, then it kills the launcher
                self._open_traceback(Traceback("", ranks, ts, role=SUSPECT))
            elif msg.endswith(TRACEBACK_OPEN):  # a traceback logged by a handler that goes on
                self._open_traceback(Traceback(msg, ranks, ts, role=None))
        return NOTHING

    def _clock(self, ts_text: str) -> None:
        self._last_ts_text = ts_text
        if self._yearless:  # the diffusion runtime's year-less stamps came first: one fixed year for every line
            ts_text = OLD_PREFIX_DATE[:4] + ts_text[4:]
        else:
            self._year = ts_text[:4]
        try:
            self._last_ts = parse_ts(ts_text)
        except ValueError:
            return
        self.last_ts = self._last_ts

    def close(self) -> list[Event]:
        """End of input: an open traceback still says what it says, even cut off before its final line."""
        return self._end_traceback() if self._tb is not None else []

    def flush(self) -> list[Event]:
        """No line for a while: a traceback that reached its final line is complete."""
        return self._end_traceback() if self._tb is not None and self._tb.final else []

    # ------------------------------------------------------------ tracebacks and unprefixed lines

    def _unprefixed(self, text: str, ts: float | None) -> list[Event]:
        """A line without SGLang's dated prefix: another dialect's prefix, NCCL's WARN, a tqdm bar, a line of an
        open traceback, or a line of its own."""
        dialect = self._dialect(text, ts)
        if dialect is not None:
            return dialect
        if " NCCL WARN " in text and (w := NCCL_WARN_RE.match(text)) is not None:
            self.nccl_warn = w.group(1)  # the failure NCCL's error code will only call "unhandled system error"
            return NOTHING
        given = ts
        if ts is None:
            ts = self._last_ts  # a line with no time of its own was printed after the last one that had one
        if text.startswith(PROGRESS_HEADS) or "\r" in text:
            bar = self._progress(text, ts)
            if bar is not None:
                return bar
        if self._terminate is not None and text.lstrip().startswith("what():"):
            (head, kind), self._terminate = self._terminate, None
            return endings.terminate_what(head, kind, text.strip(), ts)
        if self._tb is not None:
            return self._traceback_line(text, ts)
        return self._alone(text, ts, given)

    def _dialect(self, text: str, ts: float | None) -> list[Event] | None:
        """A prefix of another dialect than SGLang's dated one (DIALECTS' rows, the first that matches); None
        when the line has none of them."""
        for d in DIALECTS:
            if text.startswith(d.heads) and (d.in_traceback or self._tb is None) and (m := d.pattern.match(text)):
                return getattr(self, d.read)(m, text, ts)  # type: ignore[no-any-return]
        return None

    def _logger_prefixed(self, c: re.Match[str], text: str, ts: float | None) -> list[Event]:
        """A time and a level of another formatter's (SGLANG_LOGGING_CONFIG_PATH's, Python's, loguru's) before
        the message, which may be any line of SGLang's: a traceback's line, one with SGLang's own prefix."""
        self.sglang_lines += 1
        if ts is None:
            self._clock(c.group(1))
        msg = c.group(3)
        at = self._last_ts if ts is None else ts
        if msg.startswith(TRACEBACK_OPEN) or (self._tb is not None and (
                not msg.strip() or msg[0] in " \t" or msg.startswith(CHAIN_LINES) or FINAL_EXC_RE.match(msg))):
            return self._unprefixed(msg, at)  # a collector that prefixes each line of a record: its traceback
        if prefix_stamp(msg) is not None:  # a launcher that logs SGLang's own lines through its logger
            self.sglang_lines -= 1
            return self.feed_line(msg, ts)
        return self._message(msg, (c.group(2) or "").strip(), at)

    def _npu_logger(self, m: re.Match[str], text: str, ts: float | None) -> list[Event]:
        """A line of torch_npu's logger: a library's line, not SGLang's, and a line of its own (it ends a traceback
        past its final line). At ERROR or CRITICAL its message is read as a lone line (`NPU out of memory. …`);
        below that it is chatter."""
        if ts is None:
            self._clock(m.group(1))
        at = self._last_ts if ts is None else ts
        done = self._end_traceback() if self._tb is not None and self._tb.final else NOTHING
        if m.group(2) not in ("ERROR", "CRITICAL") or self._tb is not None or not m.group(3):
            return done  # (a traceback still in its frames: another thread's line between them)
        out = self._alone(m.group(3), at, ts)
        return done + out if done and out else done or out

    def _router_rs(self, r: re.Match[str], text: str, ts: float | None) -> list[Event]:
        return self._router_said(text, r.group(3), parse_ts(r.group(1)) if ts is None else ts)

    def _traceback_line(self, text: str, ts: float | None) -> list[Event]:
        """A line while a traceback is open: the traceback's (traceback.take), or the first line after it; a retry
        notice after its final line (`WARNING:huggingface_hub.utils._http:Retrying in 1s [Retry 1/5].`, at any level,
        in any format) closes it as recovered, the resource tracker's notice cuts it (the processes ended)."""
        tb = self._tb
        assert tb is not None
        if tb.final and endings.RETRY_SAID_RE.search(text) is not None and FINAL_EXC_RE.match(text) is None:
            return [*self._end_traceback(), Recovered(ts=ts, line=text)]
        if not tb.final and endings.TRACKER_MARK in text:
            return self._end_traceback() + self._unprefixed(text, ts)
        took = take(tb, text, self._is_own_line)
        if took is Took.TAKEN:
            return NOTHING
        done = self._end_traceback()
        return done + self._unprefixed(text, ts) if took is Took.NOT_MINE else done

    def _alone(self, text: str, ts: float | None, given: float | None = None) -> list[Event]:
        """A line of its own, no traceback open: ALONE's readers in order, the first that answers takes it (a line
        that opens a traceback, a fatal line, an unprefixed message, torch's C++ error lines)."""
        if not text:
            return NOTHING
        for read in self._alone_readers:
            if (out := read(text, ts, given)) is not None:
                return out
        return NOTHING

    def _opens(self, text: str, ts: float | None, given: float | None) -> list[Event] | None:
        """`Traceback …` alone: the record just before logged it and went on, or a bare one (a suspect)."""
        if not text.startswith(TRACEBACK_OPEN):
            return None
        logged = self._logged_at == self.sglang_lines
        self._logged_at = -1  # one record, one traceback: a second one after it is a process's own
        self._open_traceback(Traceback("", "", ts, role=None if logged else SUSPECT))
        return NOTHING

    def _headless(self, text: str, ts: float | None, given: float | None) -> list[Event] | None:
        """A frame first: a traceback cut at its top, a suspect (its frame at the margin too: a paste that lost the
        indentation, `File "sglang/srt/layers/vocab_parallel_embedding.py", line 468, in weight_loader`)."""
        if (text[0] not in " \t" or FRAME_RE.match(text) is None) and not (
                text.startswith('File "') and FRAME_RE.match(" " + text) is not None):
            return None
        self._tb = Traceback("", "", ts, role=SUSPECT, lines=[text], headless=True)
        return NOTHING

    def _ctrl_c(self, text: str, ts: float | None, given: float | None) -> list[Event] | None:
        """The terminal echoed the operator's Ctrl-C (once or more); what follows is a line of its own."""
        if not text.startswith("^C"):
            return None
        rest = text
        while rest.startswith("^C"):
            rest = rest[2:]
        return [StopRequested(ts=ts, line=text, by="Ctrl-C"), *(self.feed_line(rest, ts) if rest else NOTHING)]

    def _cut_prefix(self, text: str, ts: float | None, given: float | None) -> list[Event] | None:
        """SGLang's prefix without its head (a paste cut a few characters in): its message and ranks read as the
        whole prefix's would be; its time is lost with the year (the line's own clock is the last one). Its time
        alone taken out (`[TP0 EP0] …`): read the same way."""
        if text[0] == "[" and (r := RANKS_ONLY_PREFIX_RE.match(text)) is not None:
            self.sglang_lines += 1
            return self._message(text[r.end():], r.group(1), ts)
        if (not text[0].isdigit() and text[0] not in "-ABCDEFGHIJKLMNOPQRSTUVWXYZ") \
                or (c := CUT_PREFIX_RE.match(text)) is None or (":" not in c.group(1) and c.group(2) is None):
            return None
        self.sglang_lines += 1
        return self._message(text[c.end():], c.group(2) or "", ts)

    def _flattened(self, text: str, ts: float | None, given: float | None) -> list[Event] | None:
        """A paste whose newlines were lost, its lines joined at Ray's actor prefix (two of them at least): each line
        read on its own, a traceback's indentation given back (a frame's two spaces, its code line's four)."""
        if " pid=" not in text or len(parts := FLATTENED_ACTOR_RE.split(text)) < 3:
            return None
        out: list[Event] = []
        frame = False
        for part in parts:
            line = part.rstrip()
            if line.startswith('File "'):
                line, frame = "  " + line, True
            elif frame and line and not FINAL_EXC_RE.match(line):
                line = "    " + line
            else:
                frame = False
            out += self.feed_line(line, given)
        return out

    def _glued_prefix(self, text: str, ts: float | None, given: float | None) -> list[Event] | None:
        """A line of SGLang's glued after another writer's unfinished one: each read on its own."""
        if (at := text.find("[20", 1)) > 0 and (g := GLUED_PREFIX_RE.search(text, at)) is not None \
                and text[:g.start()].strip():
            return self._alone(text[:g.start()].rstrip(), ts, given) + self.feed_line(text[g.start():], given)
        return None

    def _outside(self, text: str, ts: float | None, given: float | None) -> list[Event] | None:
        return endings.from_outside(text, ts)  # compose, the tracker, a launcher, Slurm (Place.OUTSIDE rows)

    def _ignored(self, text: str, ts: float | None, given: float | None) -> list[Event] | None:
        """Python's own word that the traceback after it changed nothing."""
        if not text.startswith(IGNORED):
            return None
        self._open_traceback(Traceback(text, "", ts, role=None))
        return NOTHING

    def _fatal(self, text: str, ts: float | None, given: float | None) -> list[Event] | None:
        return self._fatal_alone(text, ts)

    def _glued_bar(self, text: str, ts: float | None, given: float | None) -> list[Event] | None:
        return self._glued(text, given) if "%|" in text else None

    def _unprefixed_message(self, text: str, ts: float | None, given: float | None) -> list[Event] | None:
        """A message of SGLang's without its prefix (a custom format, a journal entry timed by the journal, a paste):
        its dispatch key's reader, where a head any program's line may start with says what the reader looks for;
        then another formatter's level before a line of SGLang's."""
        handler = self._dispatch.get(text[:6])
        if handler is not None and (text[:6] not in COMMON_HEADS or LOGGED_EXC_RE.match(text) is not None
                                    or own(text, Place.MESSAGE) is not None or text.startswith("WARNING: Port ")):
            self.sglang_lines += 1
            result = handler(text, "", ts)
            if result is not None:
                return result if isinstance(result, list) else [result]
        if text[:1] in LEVEL_HEADS and (lv := LEVEL_RE.match(text)) is not None and _wraps(text, lv.end()):
            return self.feed_line(text[lv.end():], given)
        if handler is not None and text[:6] not in COMMON_HEADS:  # (`Exception: …` alone: a lone line, R14)
            return NOTHING
        return None

    def _lone_reader(self, text: str, ts: float | None, given: float | None) -> list[Event] | None:
        return self._lone_line(text, ts)

    def _lone_line(self, text: str, ts: float | None) -> list[Event]:
        """A line no handler took: torch's C++ error lines, a lone exception line, the notebook's ready note."""
        if text[0] == "[" and text.startswith("[rank") and ("]:[E" in text[:16] or "]:[W" in text[:16]):
            cause = classify(text, Place.LONE)  # torch's C++ error lines: "[rank9]:[E917 ...] ... Watchdog caught ..."
            if cause is None:
                return NOTHING
            self._lone = (text, self.sglang_lines)  # it speaks for a cut traceback right after it, too
            if "]:[W" in text[:16]:  # a warning (c10d's store wait timed out): only for that traceback
                return NOTHING
            return [Failure(ts=ts, line=text, cause=cause, message=text, evidence=(text,), role=SUSPECT)]
        if text[0] not in " \t[" and CHATTER_RE.search(text) is None:
            if classify(text, Place.LONE) is not None:
                # a lone exception line (a pasted tail) or a library's fatal words (the hub's, the driver's) with no
                # exception around them: a suspect, cleared if the start goes on; its wrapped lines may follow
                return self._lone_suspect(text, ts, lone=False)
            if FINAL_EXC_RE.match(text) is not None:
                # no cause of its own: its continuation lines may name one (a kernel library's message over several
                # lines, audit R14); else it speaks for a cut traceback only
                return self._lone_suspect(text, ts, lone=True)
        if text.lstrip().startswith(NOTEBOOK_READY) or (text[0] == "<" and NOTEBOOK_READY in text):  # (its HTML)
            return [Ready(ts=ts, line=text.strip())]
        return NOTHING

    def _lone_suspect(self, text: str, ts: float | None, *, lone: bool) -> list[Event]:
        tb = Traceback("", "", ts, role=SUSPECT, lone=lone)
        tb.final = text
        tb.finals.append(text)
        self._tb = tb
        self._lone = (text.strip(), self.sglang_lines)
        return NOTHING

    def _fatal_alone(self, text: str, ts: float | None) -> list[Event] | None:
        """A line that is fatal on its own: a process's last words (endings.last_words), a row's line of its own
        (Place.LONE: argparse's last word, NVSHMEM's error lines); C++'s terminate, whose what() on the next line says
        why."""
        if (term := endings.TERMINATE_RE.match(text)) is not None:
            self._terminate = (text, term.group(1))
            return NOTHING
        if (ended := endings.last_words(text, ts)) is not None:
            return ended
        if (said := own(text, Place.LONE)) is None:
            return None
        if ARGPARSE_PROGRAM_RE.match(text) is not None:  # argparse's program name tells the release
            self.version_hint = ">= 0.5.10" if text.startswith("sglang serve") else "<= 0.5.9"
        return [Failure(ts=ts, line=text, cause=said.cause, message=said.message, evidence=(text,), role=said.event,
                        signal=said.signal)]

    def _old_prefixed(self, m: re.Match[str], text: str, ts: float | None) -> list[Event]:
        """A line of a release before the dated prefix: `[gpu_id=0] …` (0.2), `[00:19:29 TP0] …` (0.3.0):
        the same messages, read as the prefixed ones are; a time of day is put on a fixed date."""
        self.sglang_lines += 1
        gpu, clock, ranks = m.group(1, 2, 3)
        if clock is not None and ts is None:
            ts = datetime.fromisoformat(f"{OLD_PREFIX_DATE} {clock}").timestamp()
            if self._last_ts is not None and ts < self._last_ts - 43200:  # past midnight
                ts += 86400.0 * (1 + int((self._last_ts - ts) // 86400))
            self._last_ts = self.last_ts = ts
        ranks = f"TP{gpu}" if gpu is not None else ranks or ""
        return self._message(text[m.end():], ranks, ts if ts is not None else self._last_ts)

    def _diffusion_prefixed(self, m: re.Match[str], text: str, ts: float | None) -> list[Event]:
        """A line of the diffusion runtime's (`[12-16 14:27:08] …`): its messages are read as the LLM server's
        are (`Exit code: -9`); its month and day are put on a fixed year."""
        self.sglang_lines += 1
        if ts is None:
            if self._year is None:  # no dated line yet: a fixed year, and the dated lines after it are put on it too
                self._yearless = True
            try:
                ts = datetime.fromisoformat(f"{self._year or OLD_PREFIX_DATE[:4]}-{m.group(1)} {m.group(2)}").timestamp()
            except ValueError:
                ts = self._last_ts
            else:
                self._last_ts = self.last_ts = ts
        return self._message(text[m.end():], "", ts if ts is not None else self._last_ts)

    def _progress(self, text: str, ts: float | None) -> list[Event] | None:
        """A tqdm bar: of the updates `\\r` joins in one message, the last complete one (a cut-off
        last update is skipped); a line glued after it (another process's, a fatal one printed while the bar
        was drawn) is read as a line, and so is what follows the last `\\r` when it is no bar."""
        segs = text.split("\r") if "\r" in text else [text]
        for i in range(len(segs) - 1, -1, -1):
            m = milestone_lines.PROGRESS_RE.match(segs[i])
            if m is not None:
                glued = [segs[i][m.end():].lstrip()]
                if i < len(segs) - 1 and not segs[-1].startswith(PROGRESS_HEADS):
                    glued.append(segs[-1].strip())
                out: list[Event] = [milestone_lines.bar(m, segs[i], ts)]
                for line in glued:
                    if line:
                        out += self.feed_line(line, ts)
                return out
        last = segs[-1].strip()
        return self.feed_line(last, ts) if len(segs) > 1 and last else None

    def _glued(self, text: str, given: float | None) -> list[Event] | None:
        """A line glued after a bar of another tool's (tqdm's default format): the line on its own."""
        b = ANY_BAR_RE.match(text)
        rest = text[b.end():].lstrip() if b is not None else ""
        return self.feed_line(rest, given) if rest else None

    @staticmethod
    def _is_own_line(text: str) -> bool:
        """An unprefixed line that is SGLang's or uvicorn's own, or a fatal line of its own (a signal's, a C++
        abort's, a kernel check's), not part of a message's tail."""
        return text.startswith(("INFO:", "ERROR:", "WARNING:", "Fatal Python error", "[rank", "Initialization failed",
                                "terminate called")) \
            or text.endswith(INIT_OK) or endings.is_last_words(text) or VLLM_RECORD_RE.match(text) is not None

    def _end_traceback(self) -> list[Event]:
        tb, self._tb = self._tb, None
        assert tb is not None
        failures = close(tb, self.nccl_warn)
        if tb.lone and tb.tail and self._lone is not None:  # the message with its continuation lines
            self._lone = (" ".join(x.strip() for x in (tb.final, *tb.tail) if x.strip()), self._lone[1])
        if self._noted and failures and failures[0].cause == UNNAMED:
            line, said = self._noted
            failures = [replace(failures[0], cause=said.cause, message=said.message,
                                evidence=(line, *failures[0].evidence)), *failures[1:]]
        lone, self._lone_before_tb = self._lone_before_tb, None
        if lone and failures and failures[0].cause == UNNAMED and CUT_OFF in failures[0].evidence:
            # the lone exception line just above says what the cut traceback would have ended in (audit R13)
            failures = [replace(failures[0], cause=classify(lone, Place.BEFORE_CUT) or UNNAMED, message=lone,
                                evidence=(lone, *failures[0].evidence)), *failures[1:]]
        return failures or NOTHING  # type: ignore[return-value]

    def _open_traceback(self, tb: Traceback) -> None:
        if self._tb is None:  # other ranks' tracebacks interleave: the first one speaks
            self._tb = tb
            lone, self._lone = self._lone, None
            self._lone_before_tb = lone[0] if lone is not None and self.sglang_lines - lone[1] <= 1 else None

    def _handler_exception(self, msg: str, ranks: str, ts: float | None) -> Event | None:
        """`Scheduler hit an exception: Traceback …` and its kin: SGLang's handler then kills the server."""
        if " hit an exception" not in msg[:40]:  # the watchdog's dump, its timeout (0.5.x), a process's end
            return self._own_message(msg, ranks, ts) or (endings.died(msg, ranks, ts) if "terminated with" in msg else None)
        head = f"[{ranks}] {msg}" if ranks else msg
        if msg.endswith(TRACEBACK_OPEN):
            self._open_traceback(Traceback(head, ranks, ts, role=ROOT))
            return None
        # a bare head (its traceback cut off, another rank's): it says only that a handler caught something, so
        # the traceback before it, if any, says what
        bare = msg.rstrip().endswith(" hit an exception:")
        return Failure(ts=ts, ranks=ranks, line=msg, cause=classify(msg, Place.MESSAGE) or UNNAMED, message=msg,
                       evidence=(msg,), role=DEATH if bare else ROOT)

    # ------------------------------------------------------------ milestones

    def awaits_worker_args(self) -> bool:
        """Under sglang_router's launcher, whether a worker's server_args is still to come: it is
        another worker of this start, not the server started again."""
        return self.server_args_lines < self.router_workers

    def _router(self, m: re.Match[str], text: str, ts: float | None) -> list[Event]:
        """sglang_router.launch_server's own lines (`[Router (Python)] <time> - INFO - … - file:N`):
        how many workers it launched, and its failure to start (it then kills every worker)."""
        msg = m.group(3)
        if msg.startswith("Launching DP server process "):
            self.router_workers += 1
            self.sglang_lines += 1
            return NOTHING
        return self._router_said(text, msg, parse_ts(m.group(1)) if ts is None else ts)

    def _router_said(self, text: str, msg: str, ts: float | None) -> list[Event]:
        """The router's own failure to start (it then kills every worker): the Python launcher's words, or
        the Rust router's own (`Timeout 1800s waiting for workers [...] to become healthy`)."""
        said = own(msg, Place.ROUTER)
        if said is None:
            return NOTHING
        return [Failure(ts=ts, line=text, cause=said.cause, message=said.message, evidence=(text,), role=said.event)]

    def _server_args(self, msg: str, ranks: str, ts: float | None) -> Event | None:
        args = milestone_lines.server_args(msg, ranks, ts)
        if args is not None:
            self.server_args_lines += 1
            if msg.startswith("server_args={"):
                self.version_hint = ">= 0.5.15"
        return args

    def _kv(self, msg: str, ranks: str, ts: float | None) -> Event | None:
        kv = milestone_lines.kv(msg, ranks, ts)
        if kv is not None and not (self.version_hint or "").startswith(">= 0.5.2"):
            self.version_hint = milestone_lines.kv_releases(kv) or self.version_hint
        return kv

    def _initialized(self, msg: str, ranks: str, ts: float | None) -> Event | None:
        if msg.endswith(INIT_OK):  # 0.1.17-0.2.13: the process that did start says so after the one that failed
            return None
        if msg.startswith("Initialization failed"):
            said = own(msg, Place.HANDLER)  # `Initialization failed. warmup error: …`: whatever its traceback says
            if msg.endswith(TRACEBACK_OPEN):
                self._open_traceback(Traceback(msg, ranks, ts, role=ROOT, cause=said.cause if said else None))
                return None
            cause = said.cause if said else classify(msg, Place.MESSAGE) or UNNAMED
            return Failure(ts=ts, ranks=ranks, line=msg, cause=cause, message=msg, evidence=(msg,))
        return milestone_lines.draft_initialized(msg, ranks, ts)

    def _ready(self, msg: str, ranks: str, ts: float | None) -> Event | None:
        if msg.startswith("The server is fired up and ready to roll"):
            self._ready_by_warmup = False  # a release that says it: its access lines are quiet again
            if self.router_workers > 1:  # one ready line per worker, none says whose: ready when all have
                self._router_ready += 1
                if self._router_ready < self.router_workers:
                    return None
            return Ready(ts=ts, ranks=ranks, line=msg)
        return None

    def _uvicorn(self, msg: str, ranks: str, ts: float | None) -> Event | None:
        body = msg[5:].lstrip()
        if self._ready_by_warmup and WARMUP_OK_RE.search(body):  # ≤ 0.1.17 prints no ready line: its warmup passed
            self._ready_by_warmup = False
            return Ready(ts=ts, ranks=ranks, line=msg)
        if body.startswith("Started server process"):
            return Uvicorn(ts=ts, line=msg, stage="started")
        if body.startswith("Shutting down"):  # uvicorn was told to stop (SIGINT, SIGTERM)
            return StopRequested(ts=ts, line=msg, by="uvicorn")
        if body.startswith("Application startup complete"):
            return Uvicorn(ts=ts, line=msg, stage="startup_complete")
        if body.startswith("Uvicorn running on"):
            self._ready_by_warmup = not self._last_ts_text and not self.router_workers  # an undated log: maybe ≤ 0.1.17
            m = UVICORN_URL_RE.search(body)
            return Uvicorn(ts=ts, line=msg, stage="running", url=m.group(1) if m else None)
        return None

    def _uvicorn_error(self, msg: str, ranks: str, ts: float | None) -> Event | None:
        body = msg[6:].strip()
        if body.startswith("Exception in ASGI application"):  # a request's error, its traceback on the next lines
            return self._logs_exception(body, ranks, ts)
        if body.startswith(TRACEBACK_OPEN):  # the lifespan's exception, before "Application startup failed"
            self._open_traceback(Traceback("", ranks, ts, role=SUSPECT))
            return None
        if body.startswith("Application startup failed"):
            return Failure(ts=ts, line=msg, cause=UNNAMED, message=body, evidence=(msg,), role=DEATH)
        said = own(body, Place.UVICORN)  # fatal here: the port taken, or an address not ours to bind
        if said is None:
            return None
        return Failure(ts=ts, line=msg, cause=said.cause, message=said.message, evidence=(msg,), role=said.event)

    def _own_message(self, msg: str, ranks: str, ts: float | None) -> Event | None:
        """An SGLang message of its own that names its cause there (Place.MESSAGE rows: the watchdog's dump and
        timeout, a PD server's failed warmup or registration, its bootstrap server's failed bind)."""
        said = own(msg, Place.MESSAGE)
        if said is None:
            return None
        return Failure(ts=ts, ranks=ranks, line=msg, cause=said.cause, message=said.message, evidence=(msg,),
                       role=said.event, signal=said.signal, raised_in=phase_said(msg))

    def _died(self, msg: str, ranks: str, ts: float | None) -> Event | list[Event] | None:
        """`Rank 0 …`: ≤ 0.1.16's prefix before any message, or a rank's end as SGLang reports it (endings.died)."""
        if (r := RANK_COLON_RE.match(msg)) is not None:  # ≤ 0.1.16: `Rank 0: load weight begin.`, not a death
            rest = r.group(2)
            return self._message("L" + rest[1:] if rest.startswith("load weight") else rest, f"TP{r.group(1)}", ts) \
                or None
        return endings.died(msg, ranks, ts)

    def _logs_exception(self, msg: str, ranks: str, ts: float | None) -> Event | None:
        """`Error in request: …`, `Exception in ASGI application`: a request failed and was answered with an
        error; the traceback on the next lines is this record's, not a process dying."""
        if (said := own(msg, Place.NOTED)) is not None:
            self._noted = (msg, said)
        elif msg.endswith(TRACEBACK_OPEN):  # any handler's message that holds its traceback: logged, carried on
            self._open_traceback(Traceback(msg, ranks, ts, role=None))
        elif LOGGED_EXC_RE.match(msg) is not None:
            self._logged_at = self.sglang_lines
        return None

    def _fatal_line(self, msg: str, ranks: str, ts: float | None) -> Event | None:
        cause = classify(msg, Place.MESSAGE)
        if cause is None:
            return None
        return Failure(ts=ts, ranks=ranks, line=msg, cause=cause, message=msg, evidence=(msg,))

    def _kv_below_context(self, msg: str, ranks: str, ts: float | None) -> Event | None:
        below = milestone_lines.kv_below_context(msg, ranks, ts)
        if below is not None:
            self.version_hint = ">= 0.5.23"
        return below

    def _post_capture(self, msg: str, ranks: str, ts: float | None) -> Event | None:
        """0.5.23's post-capture sizing: the real KV pool, or a lowered request cap."""
        return milestone_lines.post_capture_limit(msg, ranks, ts) or self._kv(msg, ranks, ts)

    def _startup_timings(self, msg: str, ranks: str, ts: float | None) -> Event | None:
        timings = milestone_lines.startup_timings(msg, ranks, ts)
        if timings is not None:
            self.version_hint = ">= 0.5.23"
        return timings


def _wraps(text: str, at: int) -> bool:
    """Whether a level prefix ending at `at` wraps a line of its own (not an access line: `127.0.0.1:… "GET …"`)."""
    return at < len(text) and not text[at].isdigit()


def tp_rank(ranks: str) -> int | None:
    for part in ranks.split():
        if part.startswith("TP"):
            return int(part[2:])
    return None
