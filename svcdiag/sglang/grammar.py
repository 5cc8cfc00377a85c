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
from datetime import datetime

from svcdiag.sglang.events import (
    CudaGraph,
    DistInit,
    DraftRunner,
    Event,
    Failure,
    KVCache,
    MambaCache,
    MaxRunningLimited,
    PoolEnd,
    Ready,
    SchedulerInfo,
    ServerArgs,
    Uvicorn,
    WeightsBegin,
    WeightsEnd,
)
from svcdiag.signals import signal_name

PREFIX_RE = re.compile(
    r"^\[(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d(?:\.\d{3})?)((?: (?:DP|PP|ATTN_CP|MOE_DP|TP|EP)\d+)*)\] (.*)$", re.S)
_F = r"(-?\d+(?:\.\d+)?)"

#: (cause id, pattern) in priority order; matched on an exception's final line or a fatal line.
CAUSES: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("max_running_zero", re.compile(r"max_running_requests? is zero")),
    ("mamba_cache_too_small", re.compile(
        r"state cache is too small to serve any requests|Not enough GPU memory for hybrid \(mamba")),
    ("not_enough_memory", re.compile(
        r"Not enough memory\. Please try to increase --mem-fraction-static"
        r"|leave no GPU memory for the KV cache|Memory pool size is too small")),
    ("cuda_oom", re.compile(r"CUDA out of memory|OutOfMemoryError|CUDA error: out of memory")),
    ("port_in_use", re.compile(
        r"\[Errno 98\]|[Aa]ddress already in use|is not available in [\d.]+ seconds")),
    ("model_not_found", re.compile(
        r"Incorrect path_or_model_id|HFValidationError|RepositoryNotFoundError"
        r"|is not a local folder and is not a valid model identifier"
        r"|does not appear to have a file named config\.json|No such file or directory: .*config\.json")),
    ("nccl_error", re.compile(r"NCCL error|DistBackendError|ncclInternalError|ncclUnhandledCudaError|ncclSystemError")),
)
FINAL_EXC_RE = re.compile(
    r"^(?:[A-Za-z_][\w.]*\.)?\w*(?:Error|Exception|Exit|Interrupt|Fault|Failure|Iteration)(?::.*)?$")
CHAIN_LINES = ("During handling of the above exception", "The above exception was the direct cause")
MAX_TRACEBACK_LINES = 400
NOTHING: list[Event] = []  # shared and never appended to: the hot path allocates nothing


def classify(text: str) -> str | None:
    for cause, pat in CAUSES:
        if pat.search(text):
            return cause
    return None


def _num(pattern: str) -> re.Pattern[str]:
    return re.compile(pattern)


def _f(m: re.Match[str] | None, group: int | str = 1) -> float | None:
    if m is None:
        return None
    v = m.group(group)
    return float(v) if v is not None else None


def _i(m: re.Match[str] | None, group: int | str = 1) -> int | None:
    if m is None:
        return None
    v = m.group(group)
    return int(v) if v is not None else None


ELAPSED_RE = re.compile(r"elapsed=" + _F + r" s")
AVAIL_RE = re.compile(r"avail mem=" + _F + r" ?GB")
USAGE_RE = re.compile(r"mem usage=" + _F + r" ?GB")
TYPE_RE = re.compile(r"type=([\w.]+)")
DTYPE_RE = re.compile(r"dtype[=:] ?([\w.]+)")
QUANT_RE = re.compile(r"quant=([\w.\-]+)")
TOKENS_RE = re.compile(r"#tokens: (\d+)")
K_RE = re.compile(r"K size: " + _F + r" GB")
V_RE = re.compile(r"V size: " + _F + r" GB")
KV_RE = re.compile(r"KV size: " + _F + r" GB")
MAMBA_RE = re.compile(
    r"max_mamba_cache_size: (\d+), conv_state size: " + _F + r" ?GB, ssm_state size: " + _F + r" ?GB"
    r"(?: intermediate_ssm_state_cache size: " + _F + r" ?GB)?(?: intermediate_conv_window_cache size: " + _F + r" ?GB)?")
SCHED_RE = re.compile(r"(\w+)=(-?[\d.]+)")
CAPPED_RE = re.compile(r"capped to (\d+) by the mamba state cache \(max_mamba_cache_size=(\d+), (\d+) state slots")
REDUCED_RE = re.compile(r"reduced from the requested (\d+) to (\d+)")
CAPTURE_NAME_RE = re.compile(r"^Capture (?:(target|draft) (decode|verify|prefill|extend) )?(?:CUDA|cuda) graph")
UVICORN_URL_RE = re.compile(r"running on (\S+)")
SERVER_ARG_RE = re.compile(r"(\w+)=('(?:[^'\\]|\\.)*'|\"[^\"]*\"|[^,()]+)")
DIED_RE = re.compile(r"exit code: (-?\d+)|Exit code: (-?\d+)|crashed with exit code (-?\d+)")



SERVER_ARG_TYPES: dict[str, Callable[[str], object]] = {
    "model_path": str, "tp_size": int, "dp_size": int, "context_length": int, "mem_fraction_static": float,
    "max_running_requests": int, "max_mamba_cache_size": int, "cuda_graph_max_bs": int,
    "speculative_algorithm": str, "speculative_draft_model_path": str, "speculative_num_draft_tokens": int,
    "port": int,
}


def parse_ts(text: str) -> float:
    """SGLang's `%Y-%m-%d %H:%M:%S[.mmm]` (local time) as epoch seconds."""
    return datetime.fromisoformat(text).timestamp()


def exit_cause(code: int) -> tuple[str, str | None]:
    """A child's exit code as SGLang's engine prints it: negative means a signal."""
    if code < 0:
        return "killed_by_signal", signal_name(-code)
    return "exited", None


class LineParser:
    """Lines in, events out. One instance per start (it holds the open traceback)."""

    def __init__(self) -> None:
        self._tb: list[str] | None = None  # the open traceback's lines
        self._tb_head: str = ""  # the prefixed line that opened it
        self._tb_ts: float | None = None
        self._last_ts_text = ""
        self._last_ts: float | None = None
        self.last_ts: float | None = None  # the latest timestamp read off a line prefix
        self._dispatch: dict[str, Callable[[str, str, float | None], Event | list[Event] | None]] = {
            "server": self._server_args,
            "Init t": self._dist,
            "Load w": self._weights,
            "Loaded": self._fatal_line,
            "KV Cac": self._kv,
            "Full K": self._kv,
            "SWA KV": self._kv,
            "Post-c": self._kv,
            "Mamba ": self._mamba,
            "Memory": self._pool_end,
            "max_ru": self._max_running,
            "max_to": self._scheduler,
            "Captur": self._capture,
            "Initia": self._initialized,
            "DFLASH": self._draft_ready,
            "The se": self._ready,
            "INFO: ": self._uvicorn,
            "ERROR:": self._uvicorn_error,
            "Schedu": self._scheduler_exception,
            "Receiv": self._sigquit,
            "Exit c": self._died,
            "Subpro": self._died,
            "Not en": self._fatal_line,
            "Hybrid": self._fatal_line,
        }
        for d in range(10):
            self._dispatch[f"Rank {d}"] = self._died

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
        if text.startswith("[2") and len(text) > 21:
            c = text[20]
            if c == "]" or c == "." or c == " ":  # noqa: PLR1714 -- the hot path: three compares beat a set lookup
                end = text.find("] ", 20)
                if end > 0:
                    cut = 24 if c == "." else 20
                    ts_text = text[1:cut]
                    if ts_text != self._last_ts_text:
                        self._clock(ts_text)
                    handler = self._dispatch.get(text[end + 2:end + 8])
                    if handler is None:
                        return NOTHING
                    result = handler(text[end + 2:], text[cut + 1:end], self._last_ts if ts is None else ts)
                    if result is None:
                        return NOTHING
                    return result if isinstance(result, list) else [result]
        return self._unprefixed(text, ts)

    def _clock(self, ts_text: str) -> None:
        self._last_ts_text = ts_text
        try:
            self._last_ts = parse_ts(ts_text)
        except ValueError:
            return
        self.last_ts = self._last_ts

    def close(self) -> list[Event]:
        """End of input: a traceback cut off before its final line still counts."""
        if self._tb is None:
            return []
        return [self._finish_traceback(self._tb[-1] if self._tb else "traceback (cut off)")]

    # ------------------------------------------------------------ tracebacks and unprefixed lines

    def _unprefixed(self, text: str, ts: float | None) -> list[Event]:
        if self._tb is not None:
            if not text or text[0] in " \t" or text.startswith(CHAIN_LINES) or text.startswith("Traceback"):
                if len(self._tb) < MAX_TRACEBACK_LINES:
                    self._tb.append(text)
                return []
            if FINAL_EXC_RE.match(text):
                return [self._finish_traceback(text)]
            if len(self._tb) < MAX_TRACEBACK_LINES:
                self._tb.append(text)
            return []
        if text.startswith("Traceback (most recent call last)"):
            self._open_traceback(text, "", ts)
            return []
        if text.startswith("Fatal Python error: "):
            sig = "SEGV" if "Segmentation" in text else "ABRT" if "Aborted" in text else None
            return [Failure(ts=ts, line=text, cause="killed_by_signal" if sig else "exception", message=text,
                            evidence=(text,), signal=sig)]
        # No prefix at all: a custom SGLANG_LOGGING_CONFIG_PATH format, or a journal entry
        # whose time comes from the journal. The message grammar is the same.
        handler = self._dispatch.get(text[:6])
        if handler is not None:
            result = handler(text, "", ts)
            if result is not None:
                return result if isinstance(result, list) else [result]
        return NOTHING

    def _open_traceback(self, head: str, ranks: str, ts: float | None) -> None:
        self._tb = []
        self._tb_head = head
        self._tb_ts = ts

    def _finish_traceback(self, final: str) -> Failure:
        lines = self._tb or []
        head = self._tb_head
        self._tb = None
        cause = classify(final) or classify(head) or "exception"
        where = next((ln.strip() for ln in reversed(lines) if ln.strip().startswith("File ")), None)
        evidence = tuple(x for x in (head, where, final) if x)
        return Failure(ts=self._tb_ts, line=final, cause=cause, message=final, evidence=evidence)

    def _scheduler_exception(self, msg: str, ranks: str, ts: float | None) -> Event | None:
        if not msg.startswith("Scheduler hit an exception"):
            return None
        if "Traceback (most recent call last)" in msg:
            if self._tb is None:  # other ranks' tracebacks interleave: the first one speaks
                self._open_traceback(f"[{ranks}] {msg}" if ranks else msg, ranks, ts)
            return None
        cause = classify(msg) or "exception"
        return Failure(ts=ts, ranks=ranks, line=msg, cause=cause, message=msg, evidence=(msg,))

    # ------------------------------------------------------------ milestones

    def _server_args(self, msg: str, ranks: str, ts: float | None) -> Event | None:
        if not msg.startswith("server_args=ServerArgs("):
            return None
        kw: dict[str, object] = {}
        for key, raw in SERVER_ARG_RE.findall(msg[len("server_args=ServerArgs("):]):
            conv = SERVER_ARG_TYPES.get(key)
            if conv is None or key in kw:
                continue
            value = raw.strip()
            if value == "None":
                continue
            try:
                kw[key] = conv(value.strip("'\"")) if conv is not str else value.strip("'\"")
            except ValueError:
                continue
        return ServerArgs(ts=ts, ranks=ranks, line=msg, **kw)  # type: ignore[arg-type]

    def _dist(self, msg: str, ranks: str, ts: float | None) -> Event | None:
        if msg.startswith("Init torch distributed begin"):
            return DistInit(ts=ts, ranks=ranks, line=msg, stage="begin")
        if msg.startswith("Init torch distributed ends"):
            return DistInit(ts=ts, ranks=ranks, line=msg, stage="end", elapsed_s=_f(ELAPSED_RE.search(msg)),
                            mem_usage_gb=_f(USAGE_RE.search(msg)))
        return None

    def _weights(self, msg: str, ranks: str, ts: float | None) -> Event | None:
        if msg.startswith("Load weight begin"):
            avail = _f(AVAIL_RE.search(msg))
            return WeightsBegin(ts=ts, ranks=ranks, line=msg, avail_gb=avail if avail is not None else -1.0)
        if msg.startswith("Load weight end"):
            t = TYPE_RE.search(msg)
            committed = "Committed real weights" in msg
            return WeightsEnd(
                ts=ts, ranks=ranks, line=msg, model_type=t.group(1) if t else None,
                elapsed_s=_f(ELAPSED_RE.search(msg)) or _f(re.search(r"capture in " + _F + " s", msg)) if committed
                else _f(ELAPSED_RE.search(msg)),
                dtype=(m.group(1) if (m := DTYPE_RE.search(msg)) else None),
                quant=(m.group(1) if (m := QUANT_RE.search(msg)) else None),
                avail_gb=_f(AVAIL_RE.search(msg)), mem_usage_gb=_f(USAGE_RE.search(msg)))
        return None

    def _kv(self, msg: str, ranks: str, ts: float | None) -> Event | None:
        tokens = TOKENS_RE.search(msg)
        if tokens is None:
            return None
        post = msg.startswith("Post-capture KV sizing:")
        body = msg.split(": ", 1)[1] if post else msg
        head = body.split(".", 1)[0]  # "KV Cache is allocated", "Full KV Cache is allocated", ...
        upper = "VA upper bound" in head
        if not upper and "is allocated" not in head and "allocated" not in head:
            return None
        label = head.split(" KV Cache")[0] if not head.startswith(("KV Cache", "draft", "KV cache")) else None
        draft = head.startswith("draft")
        dtype = DTYPE_RE.search(msg)
        return KVCache(ts=ts, ranks=ranks, line=msg, tokens=int(tokens.group(1)),
                       dtype=dtype.group(1) if dtype else None, k_gb=_f(K_RE.search(msg)),
                       v_gb=_f(V_RE.search(msg)), kv_gb=_f(KV_RE.search(msg)), label=label,
                       upper_bound=upper, draft=draft, post_capture=post)

    def _mamba(self, msg: str, ranks: str, ts: float | None) -> Event | None:
        m = MAMBA_RE.search(msg)
        if not msg.startswith("Mamba Cache is allocated") or m is None:
            return None
        return MambaCache(ts=ts, ranks=ranks, line=msg, slots=int(m.group(1)), conv_gb=_f(m, 2),
                          ssm_gb=_f(m, 3), intermediate_ssm_gb=_f(m, 4), intermediate_conv_gb=_f(m, 5))

    def _pool_end(self, msg: str, ranks: str, ts: float | None) -> Event | None:
        if msg.startswith("Memory pool end"):
            avail = _f(AVAIL_RE.search(msg))
            return PoolEnd(ts=ts, ranks=ranks, line=msg, avail_gb=avail if avail is not None else -1.0)
        return None

    def _max_running(self, msg: str, ranks: str, ts: float | None) -> Event | None:
        if (m := CAPPED_RE.search(msg)) is not None:
            return MaxRunningLimited(ts=ts, ranks=ranks, line=msg, value=int(m.group(1)), by="mamba",
                                     mamba_slots=int(m.group(2)), slots_per_req=int(m.group(3)))
        if (m := REDUCED_RE.search(msg)) is not None:
            return MaxRunningLimited(ts=ts, ranks=ranks, line=msg, value=int(m.group(2)), by="kv",
                                     requested=int(m.group(1)))
        return None

    def _scheduler(self, msg: str, ranks: str, ts: float | None) -> Event | None:
        kv = dict(SCHED_RE.findall(msg))
        if "max_total_num_tokens" not in kv or "max_running_requests" not in kv:
            return None
        try:
            return SchedulerInfo(
                ts=ts, ranks=ranks, line=msg, max_total_num_tokens=int(kv["max_total_num_tokens"]),
                max_running_requests=int(kv["max_running_requests"]),
                chunked_prefill_size=int(kv["chunked_prefill_size"]) if "chunked_prefill_size" in kv else None,
                max_prefill_tokens=int(kv["max_prefill_tokens"]) if "max_prefill_tokens" in kv else None,
                context_len=int(kv["context_len"]) if "context_len" in kv else None,
                available_gpu_mem_gb=float(kv["available_gpu_mem"]) if "available_gpu_mem" in kv
                else float(kv["available_cpu_mem"]) if "available_cpu_mem" in kv else None)
        except ValueError:
            return None

    def _capture(self, msg: str, ranks: str, ts: float | None) -> Event | None:
        if msg.startswith("Capture cuda graph failed"):
            cause = classify(msg) or "exception"
            return Failure(ts=ts, ranks=ranks, line=msg, cause=cause, message=msg, evidence=(msg,))
        m = CAPTURE_NAME_RE.match(msg)
        if m is None:
            return None
        name = f"{m.group(1)} {m.group(2)}" if m.group(1) else "target decode"
        rest = msg[m.end():]
        if rest.startswith(" begin"):
            return CudaGraph(ts=ts, ranks=ranks, line=msg, stage="begin", name=name, avail_gb=_f(AVAIL_RE.search(msg)))
        if rest.startswith(" end"):
            elapsed = ELAPSED_RE.search(msg) or re.search(r"Time elapsed: " + _F + " s", msg)
            return CudaGraph(ts=ts, ranks=ranks, line=msg, stage="end", name=name, elapsed_s=_f(elapsed),
                             mem_usage_gb=_f(USAGE_RE.search(msg)), avail_gb=_f(AVAIL_RE.search(msg)))
        return None

    def _initialized(self, msg: str, ranks: str, ts: float | None) -> Event | None:
        if msg.startswith("Initialization failed"):
            if "Traceback" in msg and self._tb is None:
                self._open_traceback(msg, ranks, ts)
                return None
            return Failure(ts=ts, ranks=ranks, line=msg, cause=classify(msg) or "exception", message=msg,
                           evidence=(msg,))
        m = re.match(r"Initialized (\w+) draft runner\. ?(.*)", msg)
        if m:
            return DraftRunner(ts=ts, ranks=ranks, line=msg, algorithm=m.group(1), stage="initialized",
                               details=m.group(2))
        return None

    def _draft_ready(self, msg: str, ranks: str, ts: float | None) -> Event | None:
        m = re.match(r"(\w+) draft runner ready\. ?(.*)", msg)
        if m:
            return DraftRunner(ts=ts, ranks=ranks, line=msg, algorithm=m.group(1), stage="ready", details=m.group(2))
        return None

    def _ready(self, msg: str, ranks: str, ts: float | None) -> Event | None:
        if msg.startswith("The server is fired up and ready to roll"):
            return Ready(ts=ts, ranks=ranks, line=msg)
        return None

    def _uvicorn(self, msg: str, ranks: str, ts: float | None) -> Event | None:
        body = msg[5:].lstrip()
        if body.startswith("Started server process"):
            return Uvicorn(ts=ts, line=msg, stage="started")
        if body.startswith("Application startup complete"):
            return Uvicorn(ts=ts, line=msg, stage="startup_complete")
        if body.startswith("Uvicorn running on"):
            m = UVICORN_URL_RE.search(body)
            return Uvicorn(ts=ts, line=msg, stage="running", url=m.group(1) if m else None)
        return None

    def _uvicorn_error(self, msg: str, ranks: str, ts: float | None) -> Event | None:
        cause = classify(msg)
        if cause == "port_in_use":
            return Failure(ts=ts, line=msg, cause=cause, message=msg[6:].strip(), evidence=(msg,))
        return None

    def _sigquit(self, msg: str, ranks: str, ts: float | None) -> Event | None:
        if msg.startswith("Received sigquit from a child process"):
            return Failure(ts=ts, ranks=ranks, line=msg, cause="exception", message=msg, evidence=(msg,))
        return None

    def _died(self, msg: str, ranks: str, ts: float | None) -> Event | None:
        m = DIED_RE.search(msg)
        if m is None or not ("scheduler" in msg or "Exit code" in msg or "crashed" in msg):
            return None
        code = int(next(g for g in m.groups() if g is not None))
        cause, sig = exit_cause(code)
        return Failure(ts=ts, ranks=ranks, line=msg, cause=cause, message=msg, evidence=(msg,), signal=sig,
                       status=None if sig else code)

    def _fatal_line(self, msg: str, ranks: str, ts: float | None) -> Event | None:
        cause = classify(msg)
        if cause is None:
            return None
        return Failure(ts=ts, ranks=ranks, line=msg, cause=cause, message=msg, evidence=(msg,))


def tp_rank(ranks: str) -> int | None:
    for part in ranks.split():
        if part.startswith("TP"):
            return int(part[2:])
    return None
