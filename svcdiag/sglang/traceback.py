"""A Python traceback in a log, assembled line by line (Fluent Bit's python multiline rules as a small state
table) and read, once complete, as the failure it says: its final exception lines (a chain, innermost
first), the frame that raised, the lines after it (a wrapped message, a tool's output), and the
head that logged it (`Scheduler hit an exception: Traceback …`)."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import Enum

from svcdiag.sglang import lazy_re
from svcdiag.sglang.causes import EXIT_STATUS, SIGNALLED, UNNAMED, Place
from svcdiag.sglang.events import DEATH, ROOT, SUSPECT, Failure
from svcdiag.sglang.registry import classify, raised_in, reads_on, row
from svcdiag.signals import signal_name

FINAL_EXC_RE = lazy_re.compile(
    r"^(?:[A-Za-z_][\w.]*\.)?\w*(?:Error|Exception|Exit|Interrupt|Fault|Failure|Iteration)(?::.*)?$"
    r"|^(?:[a-z_]\w*\.)+[A-Z]\w*: ")  # a qualified class named otherwise: `triton.runtime.errors.OutOfResources: …`
CHAIN_LINES = ("During handling of the above exception", "The above exception was the direct cause")
TRACEBACK_OPEN = "Traceback (most recent call last):"
#: what a traceback cut off before its final line says in its stead
CUT_OFF = "traceback (cut off)"
#: a frame as Python's traceback prints it (faulthandler's and py-spy's lack the comma before `in`)
FRAME_RE = lazy_re.compile(r'^[ \t]+File "[^"]+", line \d+, in \S')
#: the phase a frame of SGLang's places the traceback in: graph capture (`init_device_graphs`, ≤ 0.4.x's
#: `init_cuda_graphs`, a graph runner built or capturing: cuda_graph_runner.py, npu_graph_runner.py, a draft's)
#: frames of the process that launched the schedulers and waits on them (the `sglang` CLI, launch_server, the
#: engine's launcher, the diffusion runtime's entrypoints): a traceback cut off in these alone says nothing of
#: its own, the child's death the launcher reported above it is the cause (audit R14)
LAUNCHER_FRAME_RE = lazy_re.compile(r'^File "(?:[^"]*/sglang/(?:cli/|launch_server\.py|srt/entrypoints/(?:http_server|engine)'
                               r'\.py|multimodal_gen/runtime/(?:entrypoints|launch))|[^"]*/(?:runpy|multiprocessing/[\w/]+)'
                               r'\.py|[^"]*/bin/sglang)[^"]*"')
#: how a physical line ends when its message goes on on the next (a kernel library's message wrapped at `… at`,
#: `…cu:276:`, an open parenthesis or a comma)
UNFINISHED = (":", " at", ",", "(", "-", "=")
PHASE_FRAMES = (
    ("cuda_graph", lazy_re.compile(r'_graph_runner\.py", line \d+, in (?:__init__|capture\w*)$'
                              r'| in init_(?:device|cuda|piecewise_cuda)_graphs$'
                              r'|^self\.init_(?:device|cuda|piecewise_cuda)_graphs\(\)$'
                              # 0.5.1x's breakable CUDA graph (BCG, the prefill's) closing a segment it captured
                              r'|breakable_cuda_graph\.py", line \d+, in (?:capture\w*|_(?:begin|end)_current_segment)$')),
    # the scheduler's own set-up after its graphs are captured (and after its summary line, in most releases): PD's
    # transfer engine (Mooncake, NIXL, Ascend, Mori) started by init_disaggregation; its tree cache over the pools
    # (init_cache_with_memory_pool: a hybrid model's MambaRadixCache refusing the pools' shape or page size)
    ("scheduler", lazy_re.compile(r' in init_(?:disaggregation|cache_with_memory_pool)$')),
    # the pools, then the weights: the start's own steps, by the methods only a start calls (a paste that begins at
    # the traceback says how far the start had got by its frames alone)
    ("kv_cache", lazy_re.compile(r' in init_memory_pools?$|^self\.init_memory_pools?\(')),
    ("loading_weights", lazy_re.compile(r'model_runner\.py", line \d+, in load_model$|^self\.load_model\(\)$'
                                        r'| in (?:weight_loader|load_weights)$')),
    # the scheduler's event loop, which runs once the set-up is done: the warmup's request, then the clients'; the
    # HTTP server's own warmup, once it listens
    ("http", lazy_re.compile(r'scheduler\.py", line \d+, in (?:run_event_loop|event_loop_\w+)$'
                             r'|^(?:scheduler|self)\.(?:run_event_loop|event_loop_\w+)\(\)$'
                             r'| in (?:_execute_server_warmup|_wait_and_warmup|_run_server_warmup_after_http_ready)$'
                             # what only the event loop calls: a batch built and its requests admitted, its result
                             # processed, the radix tree's upkeep (a paste that kept the inner frames alone)
                             r'|scheduler\.py", line \d+, in (?:get_next_batch_to_run|run_batch|process_batch_result)$'
                             r'|schedule_batch\.py", line \d+, in prepare_for_(?:extend|decode)$'
                             r'|_cache\.py", line \d+, in (?:sanity_check|cache_(?:un)?finished_req)$'
                             # (≤ 0.4.x: the overlap scheduler's forward thread, which runs the event loop's batches)
                             r'|tp_worker_overlap_thread\.py", line \d+, in forward_thread_func_?$'
                             # (≤ 0.2.x: the router's step of ModelTpServer / ModelRpcServer, `Exception in
                             # ModelTpServer:`; later releases have no such methods)
                             r'|(?:tp_worker|model_rpc)\.py", line \d+, in (?:exposed_step|forward_step)$')),
)
#: a serving server asked to load new weights (RL's update_weights_from_disk, …_from_tensor, …_from_distributed): its
#: weight loaders' frames are no start's step
UPDATE_WEIGHTS_RE = lazy_re.compile(r" in update_weights\w*$")
#: an exception's own words that name the step it was raised in, when no frame or call does (the line pasted alone,
#: `Exception: Capture cuda graph failed: CUDA out of memory.` above its `Possible solutions:`)
PHASE_WORDS = (("cuda_graph", lazy_re.compile(r"\bCapture (?:cuda|npu|piecewise cuda) graph failed\b", re.I)),
               # the watchdogs time a batch, which the event loop runs once the set-up is done; a PD server's warmup
               # runs once it listens; a hybrid model's Mamba slots are taken when a request is admitted (its state,
               # MambaRadixCache's ping-pong buffers, a prefix's forked state), by the event loop alone
               ("http", lazy_re.compile(r"Watchdog timeout \(self\.watchdog_timeout=|watchdog timeout \("
                                        r"|disaggregation mode warm Up Failed|Server warmup failed; aborting startup"
                                        r"|Not enough space for mamba ping pong|Can not alloc mamba cache")))
def phase_said(words: str) -> str:
    """The step a failure's own words name (PHASE_WORDS), or ''."""
    return next((phase for phase, said in PHASE_WORDS if said.search(words)), "")


#: the phases PHASE_FRAMES may name that are the start's own set-up: a failure raised in one after a ready line
#: (another worker's) is a failed start; one raised in the event loop is the server's life after its start
SET_UP_PHASES = frozenset(("loading_weights", "kv_cache", "cuda_graph", "scheduler"))
BARE_FINAL_RE = lazy_re.compile(r"^(?:[\w.]+\.)?\w+(?:Error|Exception)$")  # `AssertionError` alone: the code line says why
MAX_TRACEBACK_LINES = 400
MAX_TAIL_LINES = 12
ERRORISH_RE = lazy_re.compile(r"error|FAILED|not found|fatal|No such file", re.I)
#: the advice torch._dynamo prints after every compile error (`… suppress_errors = True`): no cause in it
DYNAMO_ADVICE_RE = lazy_re.compile(r"suppress_errors|suppress this exception|TORCH_LOGS=|import torch\._dynamo$")
#: 0.5.10+: the engine's exception when a scheduler process dies: a consequence, with the exit code
SCHEDULER_DIED_RE = lazy_re.compile(r"scheduler died during initialization \(exit code: (-?\d+)\)")
#: a client's failure to reach a server on this host (a script polling /health, a benchmark, in the same
#: terminal): SGLang reaches its own port only in its warmup, whose errors it logs under a head of its own
LOCAL_CLIENT_RE = lazy_re.compile(
    r"^(?:requests\.exceptions\.ConnectionError|urllib3\.exceptions\.\w+|aiohttp\.client_exceptions\.\w+"
    r"|httpx\.ConnectError|openai\.APIConnectionError|ConnectionRefusedError)\b"
    r".*(?:host='(?:localhost|127\.0\.0\.1|0\.0\.0\.0)'|to host (?:localhost|127\.0\.0\.1|0\.0\.0\.0):)")
#: the outermost frame of a request's traceback: uvicorn's ASGI runner (audit R12b: pasted without the
#: `Exception in ASGI application` head that says so, it is still a request's error, which the server survives)
REQUEST_FRAME_RE = lazy_re.compile(r'File "[^"]*/uvicorn/protocols/http/\w+\.py", line \d+, in run_asgi$')
#: torchrun's summary after a rank died (`ChildFailedError:` then its `Root Cause` block): which rank, and how
ELASTIC_ROOT_RE = lazy_re.compile(r"^\s*(rank|exitcode)\s*: (-?\d+)")


class Took(Enum):
    """What a line did to an open traceback."""

    TAKEN = 1  # it is the traceback's (a frame, code, a final line, a wrapped message)
    DONE = 2  # the final line of a traceback whose cause is plain and whose handler dies after it: close it now
    NOT_MINE = 3  # the traceback ended before this line: close it, then read the line on its own


@dataclass(slots=True)
class Traceback:
    """An open traceback: who logged it, what kind of failure it would be, what it said so far."""

    head: str
    ranks: str
    ts: float | None
    role: str | None  # ROOT (SGLang's handler dies after it), SUSPECT (bare), None (logged and carried on)
    cause: str | None = None  # set when the logging line already says what failed (warmup)
    lines: list[str] = field(default_factory=list)
    finals: list[str] = field(default_factory=list)  # each exception of a chain, innermost first
    final: str = ""  # the latest final line, while the traceback may still be chained
    tail: list[str] = field(default_factory=list)  # lines after the final one: "Possible solutions:", a wrapped message
    headless: bool = False  # cut at its top (a paste, a collector's window): it opened at a frame
    lone: bool = False  # a lone exception line with no cause of its own, open for its continuation lines (R14)


def _code_line(lines: list[str]) -> str | None:
    """The source line after the last `File …` line: what a bare `AssertionError` asserted."""
    for i in range(len(lines) - 1, -1, -1):
        if lines[i].strip().startswith("File ") and i + 1 < len(lines):
            return lines[i + 1].strip() or None
    return None




#: what a line does to an open traceback: its state is whether the final line was read (AFTER) or not (BEFORE); the
#: first row of that state whose test holds acts (Fluent Bit's python multiline rules: state, test, next state)
Test = Callable[["Traceback", str, Callable[[str], bool]], bool]
BEFORE, AFTER = "frames", "tail"


def _blank(tb: Traceback, text: str, own_line: Callable[[str], bool]) -> bool:
    return not text.strip()


def _chained(tb: Traceback, text: str, own_line: Callable[[str], bool]) -> bool:
    return text.startswith(CHAIN_LINES)


def _lone_ends(tb: Traceback, text: str, own_line: Callable[[str], bool]) -> bool:
    """A lone line's message goes on only indented or after a line left unfinished."""
    return tb.lone and text[0] not in " \t" and not (tb.tail[-1] if tb.tail else tb.final).rstrip().endswith(UNFINISHED)


def _tail_line(tb: Traceback, text: str, own_line: Callable[[str], bool]) -> bool:
    """`Possible solutions:`, a wrapped message: no new traceback, no line of its own, the tail not yet full."""
    return not text.startswith(TRACEBACK_OPEN) and not own_line(text) and len(tb.tail) < MAX_TAIL_LINES


def _anything(tb: Traceback, text: str, own_line: Callable[[str], bool]) -> bool:
    return True


def _stack_ends(tb: Traceback, text: str, own_line: Callable[[str], bool]) -> bool:
    """Frames cut at their top, then a line of its own: a stack printed, no exception."""
    return tb.headless and bool(text) and text[0] not in " \t" and own_line(text)


def _body(tb: Traceback, text: str, own_line: Callable[[str], bool]) -> bool:
    """A frame, code, a chain line, a nested `Traceback …`, or any line before the final one (cut at its top: its
    first line after the frames is the final one)."""
    # (a frame at the margin, its indentation lost in a paste, is a frame too: never the final line)
    return not text or text[0] in " \t" or text.startswith(CHAIN_LINES) or text.startswith((TRACEBACK_OPEN, 'File "')) \
        or not (FINAL_EXC_RE.match(text) or tb.headless)


def _keep(tb: Traceback, text: str) -> Took:
    return Took.TAKEN


def _rechain(tb: Traceback, text: str) -> Took:
    tb.final = ""  # back to frames: the chained exception's
    tb.lines.append(text)
    return Took.TAKEN


def _to_tail(tb: Traceback, text: str) -> Took:
    tb.tail.append(text)
    return Took.TAKEN


def _not_mine(tb: Traceback, text: str) -> Took:
    return Took.NOT_MINE


def _to_lines(tb: Traceback, text: str) -> Took:
    if len(tb.lines) < MAX_TRACEBACK_LINES:
        tb.lines.append(text)
    return Took.TAKEN


def _final(tb: Traceback, text: str) -> Took:
    """The final line: done at once when SGLang's handler dies after it and its row says all there (a final line
    ending in a colon announces its output: `Ninja build failed. Ninja output:` then the compiler's)."""
    tb.final = text
    tb.finals.append(text)
    plain = tb.role == ROOT and not tb.cause and not text.endswith(":") and reads_on(text) is False
    return Took.DONE if plain else Took.TAKEN


RULES: tuple[tuple[str, Test, Callable[[Traceback, str], Took]], ...] = (
    (AFTER, _blank, _keep),
    (AFTER, _chained, _rechain),
    (AFTER, _lone_ends, _not_mine),
    (AFTER, _tail_line, _to_tail),
    (AFTER, _anything, _not_mine),
    (BEFORE, _stack_ends, _not_mine),
    (BEFORE, _body, _to_lines),
    (BEFORE, _anything, _final),
)


def take(tb: Traceback, text: str, own_line: Callable[[str], bool]) -> Took:
    """The line's effect on the traceback, by RULES: before the final line, frames and code (indented), chain lines
    and the final line; after it, a chained exception (back to frames), blank lines and the message's tail, until
    a line of its own."""
    state = AFTER if tb.final else BEFORE
    for at, test, act in RULES:
        if at == state and test(tb, text, own_line):
            return act(tb, text)
    raise AssertionError("RULES end each state with a row that takes any line")


def exit_cause(code: int) -> tuple[str, str | None]:
    """A child's exit code as SGLang's engine prints it: negative means a signal."""
    if code < 0:
        return SIGNALLED, signal_name(-code)
    return EXIT_STATUS, None


#: where close looks for what a traceback failed of, in order: the first place whose rows name a cause does
CLOSE_ORDER = (Place.FINAL, Place.TAIL, Place.LATE, Place.HEAD, Place.CODE, Place.FRAME)


def _named(place: Place, asked: dict[Place, tuple[str, ...]], final: str, frames: list[str]) -> str | None:
    """The cause the rows of a place name in what close asks there (the frames: the rows' `raised`)."""
    if place is Place.FRAME:
        return raised_in(final, frames, cut=final == CUT_OFF)
    return next((c for text in asked[place] if (c := classify(text, place)) is not None), None)


def close(tb: Traceback, nccl_warn: str | None) -> list[Failure]:
    """A complete (or cut off) traceback as the failure it says, or nothing: logged by a handler that goes on,
    another process's client refused."""
    # cut off before its final line: the last line only if it is no frame, code or `^^^^` marker under it
    # (nor a frame whose indentation a paste lost: `File "…", line N, in f` at its margin, audit R14)
    finals = tb.finals or [ln for ln in tb.lines[-1:] if ln.strip() and ln[0] not in " \t"
                           and not ln.startswith('File "')] or [CUT_OFF]
    final = finals[-1]
    if _no_failure(tb, final):
        return []
    said = [x for x in tb.tail if not DYNAMO_ADVICE_RE.search(x)]  # torch.compile's advice, not what failed
    if len(said) > 4:  # a tool's output (ninja, a compiler): the lines that say what failed, not its commands
        said = [x for x in said if ERRORISH_RE.search(x)] or said
    tail = " ".join(x.strip() for x in said[:4])
    frames = [ln.strip() for ln in tb.lines if ln.strip().startswith("File ")]
    where = frames[-1] if frames else None
    code = _code_line(tb.lines)
    # a runtime's own report under the exception (Ascend's CANN prints a dozen lines): the one that names the
    # cause may come after the four the message keeps, and is then kept as evidence
    late = next((x.strip() for x in said[4:] if classify(x, Place.LATE) is not None), None)
    asked = {Place.FINAL: finals[::-1], Place.TAIL: (f"{final} {tail}",), Place.LATE: (late,) if late else (),
             Place.HEAD: (tb.head,), Place.CODE: (code,) if code and BARE_FINAL_RE.match(final) else ()}
    cause = tb.cause or next((c for place in CLOSE_ORDER if (c := _named(place, asked, final, frames)) is not None),
                             UNNAMED)
    if tb.lone and cause == UNNAMED:
        return []  # its continuation lines named no cause either: it speaks for a cut traceback only
    if tb.cause is None and (death := _launcher_saw(tb, final)) is not None:
        return death
    message = f"{final} {tail}".strip() if tail else final
    if not tb.finals and tb.head and final == CUT_OFF:  # say whose: `Scheduler hit an exception`
        message = f"{tb.head.removesuffix(TRACEBACK_OPEN).rstrip(': ')}: its traceback cut off"
    own = row(cause)
    if nccl_warn and nccl_warn not in message and own is not None and own.reads_on:  # NCCL's own words, said before
        message = f"{message} (NCCL WARN {nccl_warn})"
        said = [f"NCCL WARN {nccl_warn}", *said]
    role = _role(tb, final, frames, own.consequence if own is not None else None, message)
    chain = next((i for i, ln in enumerate(tb.lines) if ln.startswith(CHAIN_LINES)), None)
    # chained exceptions (a wrapper's `Capture cuda graph failed`): SGLang's own frame the first was raised under
    inner = next((ln.strip() for ln in reversed(tb.lines[:chain]) if "/sglang/" in ln and ln.strip().startswith(
        "File ")), None) if chain else None
    # its frames, and the calls under them (a traceback cut off under `scheduler.run_event_loop()` was in that call)
    steps = frames + [ln.strip() for ln in tb.lines if ln.startswith("    ") and not ln.lstrip().startswith("File ")]
    raised_in = "" if any(UPDATE_WEIGHTS_RE.search(f) for f in frames) else \
        next((phase for phase, frame in PHASE_FRAMES if any(frame.search(f) for f in steps)), "") \
        or phase_said(final)
    evidence = tuple(x for x in (tb.head, where, code if final.endswith(("AssertionError", "Error")) else None,
                                 *finals[:-1][-1:], final, late, *said[:4], inner if inner != where else None) if x)
    return [Failure(ts=tb.ts, ranks=tb.ranks, line=final, cause=cause, message=message, evidence=evidence,
                    role=role, raised_in=raised_in)]


def _no_failure(tb: Traceback, final: str) -> bool:
    """A traceback that says no failure of this server: logged by a handler that carries on (a warning), frames
    alone (a stack printed, not raised), another process's client refused, a request's error."""
    if tb.role is None or (tb.headless and not tb.finals):
        return True
    if tb.role != SUSPECT or tb.head:
        return False
    # another process's: a client refused by this server, not yet listening; a request's error, logged by uvicorn
    # above the paste's first line: the server went on
    return LOCAL_CLIENT_RE.match(final) is not None or bool(tb.lines and REQUEST_FRAME_RE.search(tb.lines[0].strip()))


def _launcher_saw(tb: Traceback, final: str) -> list[Failure] | None:
    """The launcher's own word that a child died (its cause is elsewhere): 0.5.10+'s engine exception with the exit
    code, torchrun's ChildFailedError, 0.3.4-0.4.1's EOFError on the pipe from a scheduler; None: none of them."""
    if (m := SCHEDULER_DIED_RE.search(final)) is not None:
        status = int(m.group(1))
        cause, sig = exit_cause(status)
        return [Failure(ts=tb.ts, line=final, cause=cause, message=final, evidence=(final,), signal=sig,
                        status=None if sig else status, role=DEATH)]
    if final.rstrip().endswith("ChildFailedError:"):
        return _elastic_summary(tb, final)
    if final == "EOFError":
        return [Failure(ts=tb.ts, line=final, cause=SIGNALLED, evidence=(final,), role=DEATH,
                        message="a scheduler process died without a word of its own (the launcher read EOF from "
                                "its pipe): a signal killed it")]
    return None


def _role(tb: Traceback, final: str, frames: list[str], consequence: re.Pattern[str] | None, message: str) -> str | None:
    """The failure's role: its traceback's, or DEATH where it is a consequence of a death said elsewhere."""
    if tb.role in (ROOT, SUSPECT) and final == CUT_OFF and not tb.head and frames \
            and all(LAUNCHER_FRAME_RE.match(f) for f in frames):
        return DEATH  # the launcher's wait on a child, cut: a consequence of the death it reported (audit R14)
    if tb.role == ROOT and consequence is not None and consequence.search(message):
        return DEATH  # a consequence: it waits for the dead rank's own cause, and stands without one
    return tb.role


def _elastic_summary(tb: Traceback, final: str) -> list[Failure]:
    """torchrun's ChildFailedError: a consequence, its `Root Cause` block says which rank ended and how (a
    negative exitcode is a signal); the rank's own traceback or NCCL's lines before it are the cause."""
    found = dict(m.group(1, 2) for ln in tb.tail if (m := ELASTIC_ROOT_RE.match(ln)) is not None)
    status = int(found["exitcode"]) if "exitcode" in found else None
    cause, sig = exit_cause(status) if status is not None else (UNNAMED, None)
    rank = f"rank {found['rank']}" if "rank" in found else "a rank"
    how = f"died of SIG{sig}" if sig else f"exited with status {status}" if status is not None else "failed"
    evidence = tuple(x.strip() for x in tb.tail if ELASTIC_ROOT_RE.match(x) or "Signal " in x)
    return [Failure(ts=tb.ts, line=final, cause=cause, message=f"{rank} {how} (torchrun's ChildFailedError)",
                    evidence=(final, *evidence), signal=sig, status=None if sig else status, role=DEATH)]

