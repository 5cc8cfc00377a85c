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
from dataclasses import dataclass
from datetime import datetime

from svcdiag.sglang import quiet
from svcdiag.sglang.events import (
    DEATH,
    ROOT,
    SUSPECT,
    CudaGraph,
    DistInit,
    DraftRunner,
    Event,
    Failure,
    HostPool,
    KernelPrecompile,
    KVBelowContext,
    KVCache,
    MambaCache,
    MaxRunningLimited,
    PoolEnd,
    PortMoved,
    ProcessesGone,
    ProgressBar,
    Ready,
    Recovered,
    SchedulerInfo,
    ServerArgs,
    SlidingWindowPool,
    StartupTimings,
    StopRequested,
    UnifiedMemoryPool,
    Uvicorn,
    WeightsBegin,
    WeightsEnd,
)
from svcdiag.sglang.failures import CLASSIFY, Cause, classify
from svcdiag.sglang.quiet import LEVEL_HEADS, LEVEL_RE
from svcdiag.sglang.traceback import (
    CHAIN_LINES,
    FINAL_EXC_RE,
    TRACEBACK_OPEN,
    Took,
    Traceback,
    close,
    exit_cause,
    take,
)
from svcdiag.signals import signal_name

_F = r"(-?\d+(?:\.\d+)?)"

#: (cause, pattern) in priority order, matched on an exception's final line or a fatal line (failures.py's rows)
CAUSES = CLASSIFY
#: ≤ 0.2.13: `Initialization failed. detoken_init_state: init ok`, `detoken init state: init ok` (≤ 0.1.16): a
#: process that started, said after the traceback of the one that did not
INIT_OK = ("init_state: init ok", "init state: init ok")
#: `Exception ignored in: <function X.__del__ …>`: Python printed an exception it did not raise (a finaliser's)
IGNORED = "Exception ignored in"
#: the prefixes before the dated one: `[gpu_id=0] ` (0.1.17-0.2.5), `[gpu=0] ` (0.2.7-0.2.13), `[rank=0] ` (0.1.17's
#: router), `[00:19:29] `, `[00:19:29 TP0] ` (0.2.14-0.3.2)
OLD_PREFIX_RE = re.compile(r"\[(?:(?:gpu_id|gpu|rank)=(\d+)|(\d\d:\d\d:\d\d)(?: ([^\]]*))?)\] ")
OLD_PREFIX_DATE = "2000-01-01"  # a time of day alone: the phases' durations are right, the date is not known
#: what a shell prints when its child dies of a signal: alone (`Killed`, `Segmentation fault (core dumped)`),
#: from a script (`./serve.sh: line 7: 48211 Killed    python3 -m sglang…`), or in zh_CN (`已杀死`, `段错误 (核心已转储)`);
#: not `Terminated`: a shell says it too when systemd stops the unit on purpose
SHELL_SIGNALS = {"Killed": "KILL", "已杀死": "KILL", "Segmentation fault": "SEGV", "段错误": "SEGV", "Aborted": "ABRT",
                 "已放弃": "ABRT", "Bus error": "BUS", "Illegal instruction": "ILL", "Floating point exception": "FPE"}
#: (a script's line keeps its command after one space where a console squeezed the padding: `… 28 Killed python3 …`)
SHELL_SIGNAL_RE = re.compile(r"^(?P<script>\S+: line \d+: +\d+ )?(" + "|".join(map(re.escape, SHELL_SIGNALS)) + r")"
                             r"(?: ?[(（](?:core dumped|核心已转储)[)）])?(?:(?(script) +| {2,})\S.*)?$")
#: faulthandler's report of the signal that is killing the interpreter (it prints the threads' stacks after it)
FAULTHANDLER_SIGNALS = {"Segmentation fault": "SEGV", "Bus error": "BUS", "Aborted": "ABRT",
                        "Floating point exception": "FPE", "Illegal instruction": "ILL"}
FATAL_PYTHON = "Fatal Python error: "
#: what a native runtime prints as it kills the process with a signal, other than faulthandler: absl's handler
#: (`*** SIGSEGV received at time=…`), torch's (`!!!!!!! Segfault encountered !!!!!!!`), C++'s terminate with no
#: exception, glibc's heap checks and stack protector (each then abort()s)
NATIVE_SIGNAL_RE = re.compile(
    r"\*\*\* SIG(?P<sig>[A-Z]+) received at time=|!+ Segfault encountered !+"
    r"|(?P<abrt>terminate called (?:without an active exception|recursively)|\*\*\* stack smashing detected \*\*\*"
    r"|(?:free\(\)|malloc\(\)|munmap_chunk\(\)|realloc\(\)): [\w ]+$|double free or corruption\b"
    r"|corrupted (?:size vs\. prev_size|double-linked list))")
#: a library's own line at a level that says it carries on (NCCL INFO, glog's I/W lines): never fatal alone
CHATTER_RE = re.compile(r"\b(?:INFO|DEBUG|TRACE)\b|^[IWD]\d{4} ")
#: C++'s std::terminate on an uncaught exception (`terminate called after throwing an instance of 'c10::Error'`),
#: then its `  what():  …` line: the process aborts (SIGABRT) right after
TERMINATE_RE = re.compile(r"terminate called after throwing an instance of '([^']+)'")
#: a kernel library's own check, printed then exit(1) (sgl-kernel's CUDACHECK/NCCLCHECK: `Failed: Cuda error
#: /…/custom_all_reduce.cuh:411 'an illegal memory access was encountered'`)
KERNEL_CHECK_RE = re.compile(r"Failed: (Cuda|CUDA|HIP|NCCL) error (\S+:\d+) '([^']*)'")
#: what a native runtime prints just before it aborts the process: C++'s terminate, ROCm's HSA fault
NATIVE_ABORTS = ("terminate called after throwing", "Memory access fault by GPU")
#: a traceback SGLang (or the hub) goes on after, in the words of the line that closes it, wherever that line's words
#: begin: `retry() failed once … Will delay 0.84s and retry`, the caller giving up on retry() and carrying on (`Failed to
#: check hf_quant_config.json: … retry() exceed maximum number of retries.`), huggingface_hub's `Retrying in 1s [Retry 1/5].`,
#: SGLang's own `…; retrying`, `retrying without trust_remote_code` (not `… after retrying 3 times`: that gave up)
RETRY_SAID_RE = re.compile(r"retry\(\) failed once|retry\(\) exceed maximum number of retries\.? *$|\[Retry \d+/\d+\]"
                           r"|Will delay [\d.]+ ?s and retry"
                           r"|(?<!after )[Rr]etrying\b(?!.*\b(?:after|times|exhausted|exceeded|giving up|gave up)\b)")
#: the multiprocessing resource tracker's notice at its own exit, under any Python's path and line:
#: `/usr/lib/python3.10/multiprocessing/resource_tracker.py:224: UserWarning: resource_tracker: There appear to be 8
#: leaked semaphore objects to clean up at shutdown` (semaphore, shared_memory, folder; Python ≤ 3.7: semaphore_tracker)
TRACKER_NOTICE_RE = re.compile(r"(?:resource|semaphore)_tracker: There appear to be \d+ leaked \w+")
#: a launcher's word that its child (the whole server) exited: docker compose's `sglang-1 exited with code 137`
#: (v1: `sglang_server_1 exited with code 137`), kubectl's `command terminated with exit code 137`, Slurm's
#: `srun: error: node-06: task 1: Exited with exit code 1` / `srun: error: node-06: tasks 0-3: Killed`, Open MPI's
#: `mpirun noticed that process rank 7 with PID 0 on node n1 exited on signal 9 (Killed).`
LAUNCHER_EXIT_RE = re.compile(r"^(?:[\w.-]+ exited|command terminated) with (?:exit )?code (\d+)$"
                              r"|^srun: error: \S+: tasks? [\d,-]+: (?:Exited with exit code (\d+)|(\w[\w ]*\w))$"
                              r"|^mpirun noticed that process rank \d+ with PID \d+ on node \S+ exited on signal (\d+)\b")
#: docker compose's word that it stops its services: `docker compose up`'s Ctrl-C, `--abort-on-container-exit`
COMPOSE_STOPS = ("Gracefully stopping... (press Ctrl+C again to force)", "Aborting on container exit...")
#: Slurm's own account of the kernel's OOM killer in a job step
SLURM_OOM_RE = re.compile(r"^slurmstepd: error: Detected \d+ oom[-_]kill events? in ")
#: NVSHMEM's error lines (DeepEP), unprefixed, each a source path: `/sgl-workspace/nvshmem/src/…: non-zero status: 7 …`
NVSHMEM_MARK = "nvshmem/src/"
ANSI_RE = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
#: argparse's last word: `launch_server.py: error: …` (≤ 0.5.9) or `sglang serve: error: …` (0.5.10+)
ARGPARSE_RE = re.compile(r"^(?:[\w.-]+\.py|sglang(?: [\w-]+)?|launch_server|python3? -m [\w.]+): error: (.+)$"
                         # `sglang serve` of a diffusion model (0.5.1x+) and other entry points: no program name
                         r"|^error: ((?:unrecognized arguments|the following arguments are required|argument -"
                         r"|ambiguous option|invalid choice|expected one argument).*)$")
#: the warmup request `_wait_and_warmup` sends, answered: ≤ 0.1.17's only word that the server is up
WARMUP_OK_RE = re.compile(r'"POST /generate HTTP/1\.[01]" 200')
#: ≤ 0.1.16's only prefix, `Rank 0: ` (`Rank 0: load weight begin.`, `Rank 0: max_total_num_token=38103, …`)
RANK_COLON_RE = re.compile(r"Rank (\d+): (.+)")
WAIT_STATUS_RE = re.compile(r"Child process unexpectedly failed with (?:an exit code |exitcode=)(\d+)")
#: a log record that carries its exception's traceback on the lines after it (`logger.exception`, exc_info):
#: a request that failed (SGLang's serving code, uvicorn, asyncio), the server goes on serving
LOGGED_EXC_RE = re.compile(r"(?:ERROR: +)?(?:Error in request|Exception in (?:ASGI application|callback)"
                           r"|(?:Task|Future) exception was never retrieved)")
#: a PD server's warmup (--disaggregation-mode, 0.4.6+): a failed one leaves it up but unhealthy (/health 503)
PD_WARMUP_FAILED = "Prefill disaggregation mode warm Up Failed"
PD_REGISTER_FAILED = "Prefill instance failed to register to bootstrap server"
#: a PD prefill's bootstrap server (a thread) could not bind --disaggregation-bootstrap-port; the server goes on
BOOTSTRAP_BIND_RE = re.compile(r"Server error: \[Errno 98\] error while attempting to bind on address \('([^']*)', (\d+)\)")
#: a time and a level before the message, another formatter's than SGLang's: SGLANG_LOGGING_CONFIG_PATH's as
#: SGLang's docs show it (`2025-04-13 15:34:02 INFO 228 [file.py:301] msg`), Python's (`… - INFO - msg`, `… - name -
#: INFO - msg`), loguru's (`… | INFO     | module:fn:12 - msg`), a bare `<time> INFO msg`
CUSTOM_PREFIX_RE = re.compile(
    r"^(\d{4}-\d\d-\d\d[ T]\d\d:\d\d:\d\d)(?:[.,]\d+)?Z? *(?:[|-] *)?(?:[\w.]+ +- +)?"
    r"\[?(?:DEBUG|INFO|WARNING|WARN|ERROR|CRITICAL|FATAL)\]?"
    r"(?: +\d+ \[[\w.]+:\d+\]| *[|:-] *(?:[\w.]+(?::[\w<>.]+)*(?::\d+)? +[|:-] +)?| +) *(.*)$")
#: NCCL's own account of what failed (`node5:240:240 [6] misc/socket.cc:533 NCCL WARN socketPollConnect: …`)
NCCL_WARN_RE = re.compile(r"^\S+:\d+:\d+ \[\d+\] \S+ NCCL WARN (.+)$")
#: heads of those keys that any program's line may start with (`Error response from daemon`, `FutureWarning`):
#: without SGLang's prefix such a line is SGLang's only when it says what the handler looks for
COMMON_HEADS = frozenset(("Error ", "Except", "Task e", "Future", "Prefil", "WARNIN"))
#: ≤ 0.3.2 moved to a free port when --port was taken: `WARNING: Port 30000 is not available. Use port 30005 instead.`
#: (0.1.x: `Use 10019 instead.`)
PORT_MOVED_RE = re.compile(r"WARNING: Port (\d+) is not available\. Use (?:port )?(\d+) instead")
#: sglang.utils.wait_for_server's note, printed once the server answered (docs notebooks)
NOTEBOOK_READY = "NOTE: Typically, the server runs in a separate terminal"
STARTUP_TIMINGS_RE = re.compile(r"(\w+)=(\{[^}]*\}|[\d.]+)")
DICT_ARG_RE = re.compile(r"'(\w+)': ('(?:[^'\\]|\\.)*'|\"[^\"]*\"|[^,{}]+)")
KV_BELOW_RE = re.compile(r"KV pool holds (\d+) tokens, fewer than --context-length (\d+)")
POST_CAPTURE_MR_RE = re.compile(r"max_running_requests (\d+) -> (\d+)")
UNIFIED_RE = re.compile(r"total_bytes=" + r"(-?\d+(?:\.\d+)?)" + r" GB")
NOTHING: list[Event] = []  # shared and never appended to: the hot path allocates nothing


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
K_RE = re.compile(r"(?<!\w)K size: " + _F + r" GB")
V_RE = re.compile(r"(?<![\w])V size: " + _F + r" GB")  # not MLA's `KV size:` (K and V in one)
KV_RE = re.compile(r"KV size: " + _F + r" GB")
MAMBA_RE = re.compile(
    r"max_mamba_cache_size: (\d+), conv_state size: " + _F + r" ?GB, ssm_state size: " + _F + r" ?GB"
    r"(?: intermediate_ssm_state_cache size: " + _F + r" ?GB)?(?: intermediate_conv_window_cache size: " + _F + r" ?GB)?")
SCHED_RE = re.compile(r"(\w+)=(-?[\d.]+)")
CAPPED_RE = re.compile(r"capped to (\d+) by the mamba state cache \(max_mamba_cache_size=(\d+), (\d+) state slots")
REDUCED_RE = re.compile(r"reduced from the requested (\d+) to (\d+)")
#: sglang_router's Python logging (`[Router (Python)] 2025-03-07 10:00:01 - INFO - msg - launch_server.py:177`);
#: its Rust side (≤ 0.1.x) wrote `[Router (Rust)] …` the same way
ROUTER_LINE_RE = re.compile(
    r"^\[Router \((?:Python|Rust)\)\] (\d{4}-\d\d-\d\d \d\d:\d\d:\d\d) - ([A-Z]+) - (.*?)(?: - [\w.]+:\d+)?$")
#: `Capture cuda graph begin`, 0.5.14+'s `Capture target decode CUDA graph begin`; on other devices (0.5.2+) the
#: graph is the device's: `Capture cpu graph begin`, `Capture npu graph begin` (Ascend), `Capture target decode NPU graph`
CAPTURE_NAME_RE = re.compile(r"^Capture (?:(target|draft) (?:(decode|verify|prefill|extend) )?)?"
                             r"(?:CUDA|cuda|CPU|cpu|NPU|npu|XPU|xpu|HPU|hpu|MUSA|musa) graph")
UVICORN_URL_RE = re.compile(r"running on (\S+)")
#: DeepGEMM's JIT pre-compile session, a WARNING from 0.4.6 on (what follows varies: `It may takes`/`It may take`)
PRECOMPILE_RE = re.compile(r"Entering DeepGEMM JIT Pre-?Compile session", re.I)
#: ROCm's AITER building a JIT module it has no cache of: `[aiter] start build [module_mha_fwd] under /…/build/…`
AITER_BUILD = "[aiter] start build ["
SWA_POOL_RE = re.compile(r"Use sliding window memory pool\. full_layer_tokens=(\d+), swa_layer_tokens=(\d+)")
HOST_POOL_RE = re.compile(r"Allocating " + _F + r" GB host memory for hierarchical KV cache")
ROUTER_TIMEOUT_RE = re.compile(r"Timeout \d+s waiting for workers")
#: sglang-router ≥ 0.2 (Rust `tracing`): `2025-11-04 10:05:37  ERROR sglang_router_rs::core::worker_manager: src/…rs:N: msg`
ROUTER_RS_RE = re.compile(r"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d)(?:\.\d+)?Z? +(TRACE|DEBUG|INFO|WARN|ERROR) "
                          r"(?:sglang_router_rs|sgl_model_gateway|smg)\b[\w:]*: (?:[\w/.-]+\.rs:\d+: )?(.*)$")
SERVER_ARG_RE = re.compile(r"(\w+)=('(?:[^'\\]|\\.)*'|\"[^\"]*\"|[^,()]+)")
DIED_RE = re.compile(r"exit code: (-?\d+)|Exit code: (-?\d+)|crashed with exit code (-?\d+)")
#: tqdm's bars (no time prefix; updates joined by \r in one journal message), optionally after a rank prefix:
#: `Loading safetensors checkpoint shards:  25% Completed | 1/4 [00:04<00:12,  4.12s/it]` (SGLang's bar_format),
#: `Capturing batches (bs=4 avail_mem=56.61 GB): 75%|███████▌  | 3/4 [00:01<00:00,  2.1it/s]` (tqdm's default)
#: any tqdm bar in its default format (`Fetching 4 files:  50%|█████     | 2/4 [00:01<00:01,  1.52it/s]`): what
#: follows it on the same line is another line, printed while the bar was drawn
ANY_BAR_RE = re.compile(r"[^\r]*?\d+%\|[^|]*\|[^\[\r]*\[[^\]\r]*\]")
PROGRESS_HEADS = ("Loading ", "Capturing ", "Multi-thread loading", "[")
PROGRESS_RE = re.compile(
    r"(?:\[(?:rank(?P<rank>\d+)\]:?|[^\]]*?\bTP(?P<tp>\d+)\b[^\]]*\])\s*)?"
    r"(?P<label>Loading (?:\w+ )?checkpoint shards|Multi-thread loading shards|Capturing (?:batches|num tokens))"
    r"(?: \([^)]*\))?:\s*\d+%(?: Completed \||\|[^|]*\|)\s*(?P<done>\d+)/(?P<total>\d+)"
    r"(?: \[(?P<elapsed>[\d:]+)(?:<[\d:?]+)?(?:,\s*(?:(?P<rate>[\d.]+)(?P<unit>s/it|it/s)|\?it/s))?[^\]]*\])?")



SERVER_ARG_TYPES: dict[str, Callable[[str], object]] = {
    "model_path": str, "tp_size": int, "dp_size": int, "context_length": int, "mem_fraction_static": float,
    "max_running_requests": int, "max_mamba_cache_size": int, "cuda_graph_max_bs": int,
    "speculative_algorithm": str, "speculative_draft_model_path": str, "speculative_num_draft_tokens": int,
    "port": int, "node_rank": int, "nnodes": int, "enable_torch_compile": lambda v: v.lower() == "true",
}


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
)


#: a message's first six characters → the LineParser method that reads it (replay's fast path derives the
#: quiet lines from these keys: LineParser.quiet_message)
DISPATCH: dict[str, str] = {
    "server": "_server_args",
    "Init t": "_dist",
    "Init n": "_dist",
    "Load w": "_weights",
    "Loaded": "_fatal_line",
    "KV Cac": "_kv",
    "Full K": "_kv",
    "SWA KV": "_kv",
    "Post-c": "_post_capture",
    "KV poo": "_kv_below_context",
    "Engine": "_startup_timings",
    "[unifi": "_unified_memory",
    "retry(": "_recovered",
    "Retryi": "_recovered",
    "DataPa": "_handler_exception",
    "TpMode": "_handler_exception",
    "Detoke": "_handler_exception",
    "Child ": "_died",
    "Mamba ": "_mamba",
    "Memory": "_pool_end",
    "max_ru": "_max_running",
    "max_to": "_scheduler",
    "Captur": "_capture",
    "Initia": "_initialized",
    "DFLASH": "_draft_ready",
    "The se": "_ready",
    "INFO: ": "_uvicorn",
    "ERROR:": "_uvicorn_error",
    "Schedu": "_handler_exception",
    "Server": "_bootstrap_bind",
    "Receiv": "_sigquit",
    "SIGTER": "_sigterm",
    "Watchd": "_watchdog",  # ≤ 0.4.x: `Watchdog timeout (self.watchdog_timeout=300)`
    "Tokeni": "_watchdog",  # `TokenizerManager watchdog timeout (…)`
    "Exit c": "_died",
    "Subpro": "_died",
    "Not en": "_fatal_line",
    "Error ": "_logs_exception",
    "Except": "_logs_exception",
    "Task e": "_logs_exception",
    "Future": "_logs_exception",
    "Prefil": "_pd_warmup",
    "Hybrid": "_fatal_line",
    "Enteri": "_precompile",
    "Alloca": "_host_pool",
    "Use sl": "_sliding_window",
    "[aiter": "_precompile",
    "WARNIN": "_port_moved",
    **{f"Rank {d}": "_died" for d in range(10)},  # ≤ 0.1.16's `Rank 0: …`, and `Rank 0 scheduler is dead`
}


class LineParser:
    """Lines in, events out. One instance per start (it holds the open traceback)."""

    def __init__(self) -> None:
        self._tb: Traceback | None = None
        #: lines that are SGLang's own (its prefix, or a message it prints): a file with none holds no start
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
        #: NCCL's last `NCCL WARN` (what failed); an nccl_error says it
        self.nccl_warn: str | None = None
        #: C++'s `terminate called after throwing …` (its line, the exception's type), until its what() line
        self._terminate: tuple[str, str] | None = None
        self._dispatch: dict[str, Callable[[str, str, float | None], Event | list[Event] | None]] = {
            key: getattr(self, name) for key, name in DISPATCH.items()}

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
        caller has checked that `ts_text` parses (`parse_ts`)."""
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
        done = self._end_traceback() if self._tb is not None and self._tb.final else NOTHING
        if done and RETRY_SAID_RE.search(msg) is not None:  # the traceback it closes was retried, or given up on
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
            return self._what(text.strip(), ts)
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
        msg = c.group(2)
        at = self._last_ts if ts is None else ts
        if msg.startswith(TRACEBACK_OPEN) or (self._tb is not None and (
                not msg.strip() or msg[0] in " \t" or msg.startswith(CHAIN_LINES) or FINAL_EXC_RE.match(msg))):
            return self._unprefixed(msg, at)  # a collector that prefixes each line of a record: its traceback
        if prefix_stamp(msg) is not None:  # a launcher that logs SGLang's own lines through its logger
            self.sglang_lines -= 1
            return self.feed_line(msg, ts)
        return self._message(msg, "", at)

    def _router_rs(self, r: re.Match[str], text: str, ts: float | None) -> list[Event]:
        return self._router_said(text, r.group(3), parse_ts(r.group(1)) if ts is None else ts)

    def _traceback_line(self, text: str, ts: float | None) -> list[Event]:
        """A line while a traceback is open: the traceback's (traceback.take), or the first line after it; a retry
        notice after its final line (`WARNING:huggingface_hub.utils._http:Retrying in 1s [Retry 1/5].`, at any level,
        in any format) closes it as recovered, the resource tracker's notice cuts it (the processes ended)."""
        tb = self._tb
        assert tb is not None
        if tb.final and RETRY_SAID_RE.search(text) is not None and FINAL_EXC_RE.match(text) is None:
            return [*self._end_traceback(), Recovered(ts=ts, line=text)]
        if not tb.final and "_tracker: There appear" in text:
            return self._end_traceback() + self._unprefixed(text, ts)
        took = take(tb, text, self._is_own_line)
        if took is Took.TAKEN:
            return NOTHING
        done = self._end_traceback()
        return done + self._unprefixed(text, ts) if took is Took.NOT_MINE else done

    def _alone(self, text: str, ts: float | None, given: float | None = None) -> list[Event]:
        """A line of its own, no traceback open: one that opens one, a fatal line, an unprefixed message (a
        custom format, a journal entry timed by the journal, a paste), torch's C++ error lines."""
        if text.startswith(TRACEBACK_OPEN):  # the record just before logged it and went on, or a bare one: a suspect
            logged = self._logged_at == self.sglang_lines
            self._logged_at = -1  # one record, one traceback: a second one after it is a process's own
            self._open_traceback(Traceback("", "", ts, role=None if logged else SUSPECT))
            return NOTHING
        if not text:
            return NOTHING
        if text.startswith("^C"):  # the terminal echoed the operator's Ctrl-C; what follows is a line of its own
            rest = text
            while rest.startswith("^C"):  # pressed more than once
                rest = rest[2:]
            return [StopRequested(ts=ts, line=text, by="Ctrl-C"), *(self.feed_line(rest, ts) if rest else NOTHING)]
        if text.startswith(COMPOSE_STOPS):  # docker compose stops its services (Ctrl-C, another one exited)
            return [StopRequested(ts=ts, line=text, by="docker compose")]
        if "_tracker: There appear" in text and TRACKER_NOTICE_RE.search(text) is not None:
            return [ProcessesGone(ts=ts, line=text)]
        if text.startswith(("srun: error: ", "slurmstepd: error: ", "mpirun noticed")) or text[-1].isdigit():
            if (x := LAUNCHER_EXIT_RE.match(text)) is not None:
                code = x.group(1) or x.group(2) or (str(128 + int(x.group(4))) if x.group(4) else None)
                sig = SHELL_SIGNALS.get(x.group(3) or "")  # srun's words for the signal: `Killed`, `Segmentation fault`
                if code is not None or sig is not None:
                    return self._launcher_exit(text, int(code) if code is not None else None, sig, ts)
            if SLURM_OOM_RE.match(text) is not None:
                return [Failure(ts=ts, line=text, cause="host_oom", signal="KILL", evidence=(text,), role=DEATH,
                                message=f"Slurm says the kernel's OOM killer ended a task of this step: {text}")]
        if text.startswith(IGNORED):  # Python's own word that the traceback after it changed nothing
            self._open_traceback(Traceback(text, "", ts, role=None))
            return NOTHING
        fatal = self._fatal_alone(text, ts)
        if fatal is not None:
            return fatal
        if "%|" in text and (glued := self._glued(text, given)) is not None:
            return glued
        handler = self._dispatch.get(text[:6])
        if handler is not None and (text[:6] not in COMMON_HEADS or LOGGED_EXC_RE.match(text) is not None
                                    or text.startswith((PD_WARMUP_FAILED, "WARNING: Port "))):
            self.sglang_lines += 1
            result = handler(text, "", ts)
            if result is not None:
                return result if isinstance(result, list) else [result]
        if text[:1] in LEVEL_HEADS and (lv := LEVEL_RE.match(text)) is not None and _wraps(text, lv.end()):
            return self.feed_line(text[lv.end():], given)  # another formatter's level before a line of SGLang's
        if handler is not None:
            return NOTHING
        if text[0] == "[" and text.startswith("[rank") and "]:[E" in text[:16]:
            cause = classify(text)  # torch's C++ error lines: "[rank9]:[E917 ...] ... Watchdog caught ..."
            return [Failure(ts=ts, line=text, cause=cause, message=text, evidence=(text,), role=SUSPECT)] if cause \
                else NOTHING
        if text[0] not in " \t[" and classify(text) is not None and CHATTER_RE.search(text) is None:
            # a lone exception line (a pasted tail) or a library's fatal words (the hub's, the driver's) with no
            # exception around them: a suspect, cleared if the start goes on; its wrapped lines may follow
            tb = Traceback("", "", ts, role=SUSPECT)
            tb.final = text
            tb.finals.append(text)
            self._tb = tb
            return NOTHING
        if text.lstrip().startswith(NOTEBOOK_READY):
            return [Ready(ts=ts, line=text.strip())]
        return NOTHING

    def _fatal_alone(self, text: str, ts: float | None) -> list[Event] | None:
        """A line that is fatal on its own: faulthandler's, the shell's word for a signal, argparse's, NVSHMEM's,
        a C++ abort's, a kernel library's check."""
        if text.startswith(FATAL_PYTHON):
            what = text[len(FATAL_PYTHON):]
            sig = next((s for name, s in FAULTHANDLER_SIGNALS.items() if what.startswith(name)), None)
            return [Failure(ts=ts, line=text, cause="killed_by_signal" if sig else "exception", message=text,
                            evidence=(text,), signal=sig, role=DEATH)]
        if (n := NATIVE_SIGNAL_RE.match(text)) is not None:
            sig = n.group("sig") or ("ABRT" if n.group("abrt") else "SEGV")
            return [Failure(ts=ts, line=text, cause="killed_by_signal", message=f"the process died of SIG{sig}: {text}",
                            evidence=(text,), signal=sig, role=DEATH)]
        if (sh := SHELL_SIGNAL_RE.match(text)) is not None:  # the shell's word for the signal that ended it
            sig = SHELL_SIGNALS[sh.group(2)]
            if sig == "KILL":  # the kernel's OOM killer, most often
                return [Failure(ts=ts, line=text, cause="host_oom", message="the process was killed (SIGKILL) without "
                                "a word of its own: most often the kernel's OOM killer (host RAM)", evidence=(text,),
                                signal="KILL", role=DEATH)]
            return [Failure(ts=ts, line=text, cause="killed_by_signal", message=f"the process died of SIG{sig}: {text}",
                            evidence=(text,), signal=sig, role=DEATH)]
        if ARGPARSE_RE.match(text) is not None:
            if not text.startswith("error:"):
                self.version_hint = ">= 0.5.10" if text.startswith("sglang serve") else "<= 0.5.9"
            return [Failure(ts=ts, line=text, cause="bad_arguments", message=text, evidence=(text,))]
        if text[0] == "/" and NVSHMEM_MARK in text and classify(text) == "nvshmem_failed":
            # a suspect: the first line names the step that failed; the rank's exit is the consequence
            return [Failure(ts=ts, line=text, cause="nvshmem_failed", message=text, evidence=(text,), role=SUSPECT)]
        if (k := KERNEL_CHECK_RE.match(text)) is not None:  # then exit(1): the cause, ahead of the launcher's EOF
            lib, what = k.group(1).upper(), k.group(3)
            cause = classify(f"{lib} error: {what}") or ("nccl_error" if lib == "NCCL" else "cuda_error")
            return [Failure(ts=ts, line=text, cause=cause, message=text, evidence=(text,))]
        if (term := TERMINATE_RE.match(text)) is not None:
            self._terminate = (text, term.group(1))  # its what() on the next line says why
            return NOTHING
        if text.startswith(NATIVE_ABORTS):
            cause = classify(text)  # ROCm's runtime on a bad address (then SIGABRT)
            return [Failure(ts=ts, line=text, cause=cause, message=text, evidence=(text,), role=SUSPECT)] if cause \
                else NOTHING
        return None

    def _what(self, text: str, ts: float | None) -> list[Event]:
        """C++'s terminate: what() names the root cause (a device out of memory, a CUDA error) or, when it
        names none, the process is aborted for it (SIGABRT)."""
        assert self._terminate is not None
        head, kind = self._terminate
        self._terminate = None
        what = text.removeprefix("what():").strip()
        cause = classify(what)
        if cause is not None:
            return [Failure(ts=ts, line=text, cause=cause, message=f"{what} (C++ {kind}, then abort)",
                            evidence=(head, text))]
        return [Failure(ts=ts, line=text, cause="killed_by_signal", signal="ABRT", role=DEATH, evidence=(head, text),
                        message=f"an uncaught C++ {kind} aborted the process (SIGABRT): what(): {what}")]

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

    def _progress(self, text: str, ts: float | None) -> list[Event] | None:
        """A tqdm bar: of the updates `\\r` joins in one message, the last complete one (a cut-off
        last update is skipped); a line glued after it (another process's, a fatal one printed while the bar
        was drawn) is read as a line, and so is what follows the last `\\r` when it is no bar."""
        segs = text.split("\r") if "\r" in text else [text]
        for i in range(len(segs) - 1, -1, -1):
            m = PROGRESS_RE.match(segs[i])
            if m is not None:
                glued = [segs[i][m.end():].lstrip()]
                if i < len(segs) - 1 and not segs[-1].startswith(PROGRESS_HEADS):
                    glued.append(segs[-1].strip())
                out: list[Event] = [self._bar(m, segs[i], ts)]
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
    def _bar(m: re.Match[str], seg: str, ts: float | None) -> ProgressBar:
        rate = float(m["rate"]) if m["rate"] else None
        if rate is not None and m["unit"] == "s/it":
            rate = 1.0 / rate if rate > 0 else None
        elapsed = None
        if m["elapsed"]:
            elapsed = 0.0
            for part in m["elapsed"].split(":"):
                elapsed = elapsed * 60 + int(part or 0)
        rank = m["rank"] or m["tp"]
        label = m["label"]
        return ProgressBar(ts=ts, ranks=f"TP{rank}" if rank is not None else "", line=seg[:m.end()], label=label,
                           what="cuda_graph" if label.startswith("Capturing") else "shards",
                           done=int(m["done"]), total=int(m["total"]), elapsed_s=elapsed, rate=rate)

    @staticmethod
    def _is_own_line(text: str) -> bool:
        """An unprefixed line that is SGLang's or uvicorn's own, or a fatal line of its own (a signal's, a C++
        abort's, a kernel check's), not part of a message's tail."""
        return text.startswith(("INFO:", "ERROR:", "WARNING:", "Fatal Python error", "[rank", "Initialization failed",
                                "terminate called")) \
            or SHELL_SIGNAL_RE.match(text) is not None or text.endswith(INIT_OK) or "_tracker: There appear" in text \
            or NATIVE_SIGNAL_RE.match(text) is not None or KERNEL_CHECK_RE.match(text) is not None

    def _end_traceback(self) -> list[Event]:
        tb, self._tb = self._tb, None
        assert tb is not None
        return close(tb, self.nccl_warn) or NOTHING  # type: ignore[return-value]

    def _open_traceback(self, tb: Traceback) -> None:
        if self._tb is None:  # other ranks' tracebacks interleave: the first one speaks
            self._tb = tb

    def _handler_exception(self, msg: str, ranks: str, ts: float | None) -> Event | None:
        """`Scheduler hit an exception: Traceback …` and its kin: SGLang's handler then kills the server."""
        if " hit an exception" not in msg[:40]:
            if msg.startswith("Scheduler debug info:"):  # the watchdog's dump, before its py-spy and timeout lines
                return Failure(ts=ts, ranks=ranks, line=msg, cause="watchdog_timeout", evidence=(msg,),
                               message="SGLang's watchdog saw no progress and dumped the scheduler's state "
                                       "(`Scheduler debug info:`): a hang")
            if "atchdog timeout" in msg[:40]:  # 0.5.x: `Scheduler watchdog timeout (self.watchdog_timeout=300, …)`
                return self._watchdog(msg, ranks, ts)
            return self._died(msg, ranks, ts) if "terminated with" in msg else None
        head = f"[{ranks}] {msg}" if ranks else msg
        if msg.endswith(TRACEBACK_OPEN):
            self._open_traceback(Traceback(head, ranks, ts, role=ROOT))
            return None
        return Failure(ts=ts, ranks=ranks, line=msg, cause=classify(msg) or "exception", message=msg, evidence=(msg,))

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
        if msg.startswith(("Failed to start router", "Error starting router", "Failed to create router")) \
                or ROUTER_TIMEOUT_RE.search(msg):
            cause = classify(msg) or "router_failed"
            return [Failure(ts=ts, line=text, cause=cause, message=msg, evidence=(text,))]
        return NOTHING

    def _server_args(self, msg: str, ranks: str, ts: float | None) -> Event | None:
        if msg.startswith(("server_args=ServerArgs(", "server_args={")):
            self.server_args_lines += 1
        if msg.startswith("server_args=ServerArgs("):
            pairs = SERVER_ARG_RE.findall(msg[len("server_args=ServerArgs("):])
        elif msg.startswith("server_args={"):  # 0.5.23 logs a dict
            pairs = DICT_ARG_RE.findall(msg[len("server_args={"):])
            self.version_hint = ">= 0.5.15"
        else:
            return None
        kw: dict[str, object] = {}
        for key, raw in pairs:
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
        if msg.startswith(("Init torch distributed begin", "Init nccl begin")):  # the latter ≤ 0.3.0
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
        tokens = TOKENS_RE.search(msg)  # none before 0.4.6, nor on some EAGLE pools: the summary says it then
        post = msg.startswith("Post-capture KV sizing:")
        body = msg.split(": ", 1)[1] if post else msg
        head = body.split(".", 1)[0]  # "KV Cache is allocated", "Full KV Cache is allocated", ...
        upper = "VA upper bound" in head
        if not upper and "is allocated" not in head and "allocated" not in head:
            return None
        label = head.split(" KV Cache")[0] if not head.startswith(("KV Cache", "draft", "KV cache")) else None
        draft = head.startswith("draft")
        dtype = DTYPE_RE.search(msg)
        if not (upper or draft or (self.version_hint and self.version_hint.startswith(">= 0.5.2"))):
            self.version_hint = ">= 0.5.14" if "dtype: " in msg else "0.4.6 – 0.5.11" if tokens else "0.4.3 – 0.4.5"
        return KVCache(ts=ts, ranks=ranks, line=msg, tokens=int(tokens.group(1)) if tokens else None,
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
        total = kv.get("max_total_num_tokens") or kv.get("max_total_num_token")  # ≤ 0.1.16: singular
        if total is None or ("max_running_requests" not in kv and "context_len" not in kv):
            return None
        try:  # ≤ 0.1.20 the summary has no max_running_requests
            return SchedulerInfo(
                ts=ts, ranks=ranks, line=msg, max_total_num_tokens=int(total),
                max_running_requests=int(kv["max_running_requests"]) if "max_running_requests" in kv else None,
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
        name = f"{m.group(1)} {m.group(2) or 'decode'}" if m.group(1) else "target decode"  # ≤ 0.5.x: `Capture draft cuda graph`
        rest = msg[m.end():]
        if rest.startswith(" begin"):
            return CudaGraph(ts=ts, ranks=ranks, line=msg, stage="begin", name=name, avail_gb=_f(AVAIL_RE.search(msg)))
        if rest.startswith(" end"):
            elapsed = ELAPSED_RE.search(msg) or re.search(r"Time elapsed: " + _F + " s", msg)
            return CudaGraph(ts=ts, ranks=ranks, line=msg, stage="end", name=name, elapsed_s=_f(elapsed),
                             mem_usage_gb=_f(USAGE_RE.search(msg)), avail_gb=_f(AVAIL_RE.search(msg)))
        return None

    def _initialized(self, msg: str, ranks: str, ts: float | None) -> Event | None:
        if msg.endswith(INIT_OK):  # 0.1.17-0.2.13: the process that did start says so after the one that failed
            return None
        if msg.startswith("Initialization failed"):
            warmup = "warmup error" in msg[:40]
            if msg.endswith(TRACEBACK_OPEN):
                self._open_traceback(Traceback(msg, ranks, ts, role=ROOT, cause="warmup_failed" if warmup else None))
                return None
            cause = "warmup_failed" if warmup else classify(msg) or "exception"
            return Failure(ts=ts, ranks=ranks, line=msg, cause=cause, message=msg, evidence=(msg,))
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
            return Failure(ts=ts, line=msg, cause="exception", message=body, evidence=(msg,), role=DEATH)
        cause = classify(msg)  # fatal here: the port taken, or not ours to bind (`[Errno 13] error while attempting to bind`)
        if "error while attempting to bind" in body:
            # any other errno is the address's: `[Errno 99] … cannot assign requested address` (--host is no address
            # of this host), `[Errno 97] … address family not supported` (`::` with IPv6 off)
            cause = cause if cause in ("port_in_use", "access_denied") else "bad_arguments"
        if cause == "port_in_use" or (cause in ("access_denied", "bad_arguments") and "attempting to bind" in body):
            return Failure(ts=ts, line=msg, cause=cause, message=body, evidence=(msg,))
        return None

    def _watchdog(self, msg: str, ranks: str, ts: float | None) -> Event | None:
        """SGLang's watchdog saw no progress for watchdog_timeout s, dumps the stacks (py-spy) and SIGQUITs
        the server: the hang is the root cause, the sigquit that follows its consequence."""
        if classify(msg) != Cause.WATCHDOG_TIMEOUT:  # its row's words
            return None
        return Failure(ts=ts, ranks=ranks, line=msg, cause="watchdog_timeout", message=msg, evidence=(msg,))

    def _sigquit(self, msg: str, ranks: str, ts: float | None) -> Event | None:
        if msg.startswith("Received sigquit from a child proces"):  # 0.4.3 spells it "proces"
            return Failure(ts=ts, ranks=ranks, line=msg, cause="exception", message=msg, evidence=(msg,), role=DEATH)
        return None

    @staticmethod
    def _sigterm(msg: str, ranks: str, ts: float | None) -> Event | None:
        """0.5.x's tokenizer manager: `SIGTERM received. signum=None frame=None. Draining requests and shutting down...`"""
        return StopRequested(ts=ts, ranks=ranks, line=msg, by="SIGTERM") if msg.startswith("SIGTERM received") else None

    @staticmethod
    def _launcher_exit(text: str, code: int | None, sig: str | None, ts: float | None) -> list[Event]:
        """A launcher's word for how the server's process ended (an exit code, 128 + N for signal N, or the signal's
        name), the server having said nothing: a consequence, as the shell's `Killed` is."""
        if code is not None and code > 128:
            sig = signal_name(code - 128)
        if sig is not None:
            if sig == "KILL":
                return [Failure(ts=ts, line=text, cause="host_oom", signal=sig, evidence=(text,), role=DEATH,
                                message=f"the server's process was killed (SIGKILL, {text!r}) without a word of its own: "
                                        "most often the kernel's OOM killer (host RAM, or the container's memory limit)")]
            return [Failure(ts=ts, line=text, cause="killed_by_signal", message=f"the process died of SIG{sig}: {text}",
                            evidence=(text,), signal=sig, role=DEATH)]
        return [Failure(ts=ts, line=text, cause="exited", message=text, evidence=(text,), status=code, role=DEATH)] \
            if code else NOTHING

    def _died(self, msg: str, ranks: str, ts: float | None) -> Event | list[Event] | None:
        """A process's end as SGLang reports it: always the consequence of something said elsewhere."""
        if (r := RANK_COLON_RE.match(msg)) is not None:  # ≤ 0.1.16: `Rank 0: load weight begin.`, not a death
            rest = r.group(2)
            return self._message("L" + rest[1:] if rest.startswith("load weight") else rest, f"TP{r.group(1)}", ts) \
                or None
        if (w := WAIT_STATUS_RE.match(msg)) is not None:
            return self._child_status(msg, ranks, ts, int(w.group(1)))
        m = DIED_RE.search(msg)
        if m is None:
            return Failure(ts=ts, ranks=ranks, line=msg, cause="exception", message=msg, evidence=(msg,),
                           role=DEATH) if msg.startswith(("Rank ", "Scheduler or")) and " dead" in msg else None
        code = int(next(g for g in m.groups() if g is not None))
        cause, sig = exit_cause(code)
        return Failure(ts=ts, ranks=ranks, line=msg, cause=cause, message=msg, evidence=(msg,), signal=sig,
                       status=None if sig else code, role=DEATH)

    @staticmethod
    def _child_status(msg: str, ranks: str, ts: float | None, status: int) -> Event | None:
        """SGLang's SIGCHLD handler prints os.waitpid's raw status (≥ 0.4): `exit code 256` is exit 1, `9` is
        SIGKILL, `139` SIGSEGV with a core. An exit code says little (a JIT compiler child fails and the start
        goes on), a signal names what killed a rank: a suspect, cleared if the start goes on."""
        sig = status & 0x7F
        if sig in (0, 0x7F):  # exited, or stopped: no signal killed it
            return None
        name = signal_name(sig)
        return Failure(ts=ts, ranks=ranks, line=msg, cause="killed_by_signal", message=f"{msg} (SIG{name})",
                       evidence=(msg,), signal=name, role=SUSPECT)

    def _logs_exception(self, msg: str, ranks: str, ts: float | None) -> Event | None:
        """`Error in request: …`, `Exception in ASGI application`: a request failed and was answered with an
        error; the traceback on the next lines is this record's, not a process dying."""
        if msg.endswith(TRACEBACK_OPEN):  # any handler's message that holds its traceback: logged, carried on
            self._open_traceback(Traceback(msg, ranks, ts, role=None))
        elif LOGGED_EXC_RE.match(msg) is not None:
            self._logged_at = self.sglang_lines
        return None

    def _bootstrap_bind(self, msg: str, ranks: str, ts: float | None) -> Event | None:
        m = BOOTSTRAP_BIND_RE.match(msg)
        if m is None:
            return None
        said = (f"the PD bootstrap server could not bind {m.group(1)}:{m.group(2)} (--disaggregation-bootstrap-port): "
                "address already in use")
        return Failure(ts=ts, ranks=ranks, line=msg, cause="port_in_use", message=said, evidence=(msg,))

    def _sliding_window(self, msg: str, ranks: str, ts: float | None) -> Event | None:
        m = SWA_POOL_RE.match(msg)
        return SlidingWindowPool(ts=ts, ranks=ranks, line=msg, full_tokens=int(m.group(1)),
                                 swa_tokens=int(m.group(2))) if m else None

    def _host_pool(self, msg: str, ranks: str, ts: float | None) -> Event | None:
        m = HOST_POOL_RE.match(msg)
        return HostPool(ts=ts, ranks=ranks, line=msg, gb=float(m.group(1))) if m else None

    def _port_moved(self, msg: str, ranks: str, ts: float | None) -> Event | None:
        m = PORT_MOVED_RE.match(msg)
        return PortMoved(ts=ts, line=msg, requested=int(m.group(1)), port=int(m.group(2))) if m else None

    def _precompile(self, msg: str, ranks: str, ts: float | None) -> Event | None:
        """`Entering DeepGEMM JIT Pre-Compile session. It may take a long time (typically 10-20 mins) if you
        have not run `sglang.compile_deep_gemm`…`: printed for each new kernel shape, on a first start."""
        if msg.startswith(AITER_BUILD):  # ROCm's AITER JIT-builds a module on a fresh container (minutes each)
            return KernelPrecompile(ts=ts, ranks=ranks, line=msg, what="AITER")
        if PRECOMPILE_RE.match(msg) is None:
            return None
        return KernelPrecompile(ts=ts, ranks=ranks, line=msg, what="DeepGEMM")

    def _pd_warmup(self, msg: str, ranks: str, ts: float | None) -> Event | None:
        """`Prefill disaggregation mode warm Up Failed, status code: 400`: SGLang still says it is ready, but
        marks itself unhealthy (/health answers 503, a router never registers it). `Prefill instance failed to
        register to bootstrap server: …` (after its retries, where a release has them): the decode side never
        finds this prefill, though it too says it is ready."""
        if msg.startswith(PD_REGISTER_FAILED):
            return Failure(ts=ts, ranks=ranks, line=msg, cause="pd_bootstrap_failed", message=msg, evidence=(msg,))
        if not msg.startswith(PD_WARMUP_FAILED):
            return None
        return Failure(ts=ts, ranks=ranks, line=msg, cause="warmup_failed", message=msg, evidence=(msg,))

    def _fatal_line(self, msg: str, ranks: str, ts: float | None) -> Event | None:
        cause = classify(msg)
        if cause is None:
            return None
        return Failure(ts=ts, ranks=ranks, line=msg, cause=cause, message=msg, evidence=(msg,))

    def _recovered(self, msg: str, ranks: str, ts: float | None) -> Event | None:
        """`retry() failed once … Will delay … and retry`, `Retrying in 1s [Retry 1/5].`"""
        if msg.startswith("retry() exceed"):
            return None
        return Recovered(ts=ts, ranks=ranks, line=msg)

    def _kv_below_context(self, msg: str, ranks: str, ts: float | None) -> Event | None:
        m = KV_BELOW_RE.match(msg)
        if m is None:
            return None
        self.version_hint = ">= 0.5.23"
        return KVBelowContext(ts=ts, ranks=ranks, line=msg, tokens=int(m.group(1)), context_length=int(m.group(2)))

    def _post_capture(self, msg: str, ranks: str, ts: float | None) -> Event | None:
        """0.5.23's post-capture sizing: the real KV pool, or a lowered request cap."""
        if (m := POST_CAPTURE_MR_RE.search(msg)) is not None:
            return MaxRunningLimited(ts=ts, ranks=ranks, line=msg, value=int(m.group(2)), by="post_capture",
                                     requested=int(m.group(1)))
        return self._kv(msg, ranks, ts)

    def _startup_timings(self, msg: str, ranks: str, ts: float | None) -> Event | None:
        if not msg.startswith("Engine startup timings"):
            return None
        self.version_hint = ">= 0.5.23"
        seconds: dict[str, float] = {}
        for key, raw in STARTUP_TIMINGS_RE.findall(msg.split(":", 1)[-1]):
            if raw.startswith("{"):
                inner = dict(STARTUP_TIMINGS_RE.findall(raw[1:-1]))
                seconds[key] = round(sum(float(v) for v in inner.values() if not v.startswith("{")), 3)
            else:
                seconds[key] = float(raw)
        return StartupTimings(ts=ts, ranks=ranks, line=msg, seconds=seconds)

    def _unified_memory(self, msg: str, ranks: str, ts: float | None) -> Event | None:
        if not msg.startswith("[unified-memory-pool] UnifiedKVPool"):
            return None
        return UnifiedMemoryPool(ts=ts, ranks=ranks, line=msg, total_gb=_f(UNIFIED_RE.search(msg)))


def _wraps(text: str, at: int) -> bool:
    """Whether a level prefix ending at `at` wraps a line of its own (not an access line: `127.0.0.1:… "GET …"`)."""
    return at < len(text) and not text[at].isdigit()


def tp_rank(ranks: str) -> int | None:
    for part in ranks.split():
        if part.startswith("TP"):
            return int(part[2:])
    return None
