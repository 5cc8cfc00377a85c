"""The stable cause ids and their families, the places a line stands and the causes the grammar gives a process's end,
outside the failure registry's package: a reader that only names a cause (preflight's sizing, its report) or a place
(the grammar, until a line asks the registry: sglang.registry) does not import the registry's ~170 rows and their prose."""

from __future__ import annotations

from collections.abc import Mapping
from enum import StrEnum


class Cause(StrEnum):
    """The stable cause ids (docs/replay.md#failure-causes-stable-ids): a StrEnum, so `cause == "cuda_oom"` holds."""

    MAX_RUNNING_ZERO = "max_running_zero"
    WATCHDOG_TIMEOUT = "watchdog_timeout"
    MAMBA_CACHE_TOO_SMALL = "mamba_cache_too_small"
    NOT_ENOUGH_MEMORY = "not_enough_memory"
    CUDA_OOM = "cuda_oom"
    HOST_OOM = "host_oom"
    PORT_IN_USE = "port_in_use"
    UNSUPPORTED_MODEL = "unsupported_model"
    MODEL_NOT_FOUND = "model_not_found"
    HUB_UNREACHABLE = "hub_unreachable"
    UNSUPPORTED_HARDWARE = "unsupported_hardware"
    GPU_UNAVAILABLE = "gpu_unavailable"
    CUDA_ERROR = "cuda_error"
    KV_TRANSFER_FAILED = "kv_transfer_failed"
    EP_DISPATCH_TIMEOUT = "ep_dispatch_timeout"
    NVSHMEM_FAILED = "nvshmem_failed"
    RENDEZVOUS_FAILED = "rendezvous_failed"
    NCCL_ERROR = "nccl_error"
    DISK_FULL = "disk_full"
    ACCESS_DENIED = "access_denied"
    BAD_CHECKPOINT = "bad_checkpoint"
    BROKEN_INSTALL = "broken_install"
    TORCH_COMPILE_FAILED = "torch_compile_failed"
    BAD_ARGUMENTS = "bad_arguments"
    WARMUP_FAILED = "warmup_failed"
    ROUTER_FAILED = "router_failed"
    PD_BOOTSTRAP_FAILED = "pd_bootstrap_failed"
    KILLED_BY_SIGNAL = "killed_by_signal"
    EXITED = "exited"
    STOPPED = "stopped"
    DIED_SILENTLY = "died_silently"
    EXCEPTION = "exception"
    TIMED_OUT = "timed_out"
    INCOMPLETE = "incomplete"
    HTTP_UNREACHABLE = "http_unreachable"
    HTTP_MISMATCH = "http_mismatch"
    DIED_AFTER_READY = "died_after_ready"
    CONNECTION_LOST = "connection_lost"


class Family(StrEnum):
    """What a cause is about: the module that files its rows (svcdiag/sglang/failures/<module>.py) and what readers
    ask instead of listing causes (`in_family`)."""

    NOT_ENOUGH_MEMORY = "not_enough_memory"  # SGLang's own sizing left too little: more memory for it, or less asked
    OUT_OF_MEMORY = "out_of_memory"  # an allocation failed: the device's or the host's memory ran out
    GPU = "gpu"
    DISTRIBUTED = "distributed"
    MODEL = "model"
    INSTALL = "install"
    NETWORK = "network"
    HOST = "host"
    PROCESS = "process"
    SERVING = "serving"


#: each cause's family, named here once
FAMILY: Mapping[Cause, Family] = {
    Cause.MAX_RUNNING_ZERO: Family.NOT_ENOUGH_MEMORY,
    Cause.WATCHDOG_TIMEOUT: Family.PROCESS,
    Cause.MAMBA_CACHE_TOO_SMALL: Family.NOT_ENOUGH_MEMORY,
    Cause.NOT_ENOUGH_MEMORY: Family.NOT_ENOUGH_MEMORY,
    Cause.CUDA_OOM: Family.OUT_OF_MEMORY,
    Cause.HOST_OOM: Family.OUT_OF_MEMORY,
    Cause.PORT_IN_USE: Family.NETWORK,
    Cause.UNSUPPORTED_MODEL: Family.MODEL,
    Cause.MODEL_NOT_FOUND: Family.MODEL,
    Cause.HUB_UNREACHABLE: Family.NETWORK,
    Cause.UNSUPPORTED_HARDWARE: Family.GPU,
    Cause.GPU_UNAVAILABLE: Family.GPU,
    Cause.CUDA_ERROR: Family.GPU,
    Cause.KV_TRANSFER_FAILED: Family.DISTRIBUTED,
    Cause.EP_DISPATCH_TIMEOUT: Family.DISTRIBUTED,
    Cause.NVSHMEM_FAILED: Family.DISTRIBUTED,
    Cause.RENDEZVOUS_FAILED: Family.DISTRIBUTED,
    Cause.NCCL_ERROR: Family.DISTRIBUTED,
    Cause.DISK_FULL: Family.HOST,
    Cause.ACCESS_DENIED: Family.HOST,
    Cause.BAD_CHECKPOINT: Family.MODEL,
    Cause.BROKEN_INSTALL: Family.INSTALL,
    Cause.TORCH_COMPILE_FAILED: Family.GPU,
    Cause.BAD_ARGUMENTS: Family.INSTALL,
    Cause.WARMUP_FAILED: Family.SERVING,
    Cause.ROUTER_FAILED: Family.SERVING,
    Cause.PD_BOOTSTRAP_FAILED: Family.DISTRIBUTED,
    Cause.KILLED_BY_SIGNAL: Family.PROCESS,
    Cause.EXITED: Family.PROCESS,
    Cause.STOPPED: Family.PROCESS,
    Cause.DIED_SILENTLY: Family.PROCESS,
    Cause.EXCEPTION: Family.PROCESS,
    Cause.TIMED_OUT: Family.PROCESS,
    Cause.INCOMPLETE: Family.PROCESS,
    Cause.HTTP_UNREACHABLE: Family.SERVING,
    Cause.HTTP_MISMATCH: Family.SERVING,
    Cause.DIED_AFTER_READY: Family.SERVING,
    Cause.CONNECTION_LOST: Family.PROCESS,
}


def in_family(*families: Family) -> frozenset[Cause]:
    """The causes of these families (`cause in in_family(Family.NOT_ENOUGH_MEMORY)`: a StrEnum, so a cause's
    string is in it too)."""
    return frozenset(c for c, f in FAMILY.items() if f in families)


class Place(StrEnum):
    """Where in a log a line stands (Fluent Bit's multiline states): a row's pattern names its cause only at the
    places it is tagged with, and the grammar asks the registry for a place's rows, never for a cause."""

    # inside a traceback, in the order traceback.close asks them (traceback.CLOSE_ORDER)
    FINAL = "final"  # an exception's final line, each of a chain's, innermost first
    TAIL = "tail"  # the final line with the lines after it (a wrapped message, `Possible solutions:`)
    LATE = "late"  # a line of a runtime's report past the four the message keeps (Ascend's CANN)
    HEAD = "head"  # the line that logged the traceback (`Scheduler hit an exception: …`), when the traceback names none
    CODE = "code"  # the source line under the raising frame, after a bare final line (`AssertionError`)
    FRAME = "frame"  # the frames the exception was raised under (a flag check's, load_weights'): a row's `raised`
    # outside one
    HANDLER = "handler"  # the line that logs a traceback, naming its cause whatever the traceback says (warmup's)
    NOTED = "noted"  # a line said before a traceback: it speaks for the traceback if that names no cause (PD's fetch)
    BEFORE_CUT = "before_cut"  # a lone exception line just before a traceback cut off: what it would have ended in
    LONE = "lone"  # a line said alone, no traceback open: a pasted exception line, a library's fatal words
    MESSAGE = "message"  # an SGLang message of its own (a PD server's, the watchdog's), prefixed or not
    ROUTER = "router"  # the router's own message (sglang_router's Python launcher, the Rust router)
    UVICORN = "uvicorn"  # uvicorn's `ERROR:` line
    OUTSIDE = "outside"  # what the process's surroundings say of its end (Slurm, a launcher)


#: the causes the grammar gives a process's end by how it ended, where no line's words name one (the rows name every
#: other cause): a failure whose words name none, a signal, an exit status, SIGKILL with no word (most often the
#: kernel's OOM killer), and a kernel library's own check (`Failed: NCCL error …`) by its library
UNNAMED = Cause.EXCEPTION
SIGNALLED = Cause.KILLED_BY_SIGNAL
EXIT_STATUS = Cause.EXITED
SIGKILLED = Cause.HOST_OOM
KERNEL_CHECK: Mapping[str, Cause] = {"NCCL": Cause.NCCL_ERROR, "CUDA": Cause.CUDA_ERROR, "HIP": Cause.CUDA_ERROR}
