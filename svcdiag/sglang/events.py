"""Typed, frozen events: what the grammar reads off a line, and what the state machine says.

Every event knows its JSON form, so `replay --json`, `up --json` and `status --json`
print the same lines.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

from svcdiag.sglang.registry import refine

TYPE_CHECKING = False  # typing costs ~3 ms to import, and no module a replay loads needs it at run time
if TYPE_CHECKING:
    from typing import Any

#: every event's decorator. repr and eq are Event's own, written once (below) and the same as
#: dataclasses' (their tuples of fields): dataclasses would compile three more functions per class
#: (__repr__, __eq__, __hash__), ~80 of this module's ~160 at import, half its ~20 ms
_event = dataclass(frozen=True, slots=True, kw_only=True, repr=False, eq=False)
#: each event type's field names, as dataclasses.fields gives them (filled on first use)
_NAMES: dict[type, tuple[str, ...]] = {}


def _names(cls: type) -> tuple[str, ...]:
    names = _NAMES.get(cls)
    if names is None:
        names = _NAMES[cls] = tuple(f.name for f in dataclasses.fields(cls))
    return names


@_event
class Event:
    """What one line (or the state machine) says; `kind` names it in the JSON."""

    #: a class attribute, not a field: unannotated, as each event's below (dataclasses tells a
    #: `ClassVar[str]` annotation only with typing imported, which a replay does not import)
    kind = "event"
    ts: float | None = None
    ranks: str = ""
    line: str = ""

    def __repr__(self) -> str:
        return f"{type(self).__qualname__}({', '.join(f'{n}={getattr(self, n)!r}' for n in _names(type(self)))})"

    def __eq__(self, other: object) -> bool:
        if other.__class__ is not self.__class__:
            return NotImplemented
        names = _names(type(self))
        return tuple(getattr(self, n) for n in names) == tuple(getattr(other, n) for n in names)

    def __hash__(self) -> int:
        return hash(tuple(getattr(self, n) for n in _names(type(self))))

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"event": self.kind}
        for f in dataclasses.fields(self):
            v = getattr(self, f.name)
            if f.name == "ranks" and not v:
                continue
            out[f.name] = list(v) if isinstance(v, tuple) else v
        return out


# ---------------------------------------------------------------- SGLang's lines


@_event
class ServerArgs(Event):
    """The `server_args=ServerArgs(...)` line: the arguments SGLang actually runs with."""

    kind = "server_args"
    model_path: str | None = None
    tp_size: int | None = None
    dp_size: int | None = None
    context_length: int | None = None
    mem_fraction_static: float | None = None
    max_running_requests: int | None = None
    max_mamba_cache_size: int | None = None
    cuda_graph_max_bs: int | None = None
    speculative_algorithm: str | None = None
    speculative_draft_model_path: str | None = None
    speculative_num_draft_tokens: int | None = None
    host: str | None = None
    port: int | None = None
    node_rank: int | None = None
    nnodes: int | None = None
    enable_torch_compile: bool | None = None


@_event
class DistInit(Event):
    """torch.distributed's set-up began or ended (`Init torch distributed begin.` / `... ends.`)."""

    kind = "dist_init"
    stage: str  # begin | end
    elapsed_s: float | None = None
    mem_usage_gb: float | None = None


@_event
class WeightsBegin(Event):
    """`Load weight begin.`, with the GPU memory free before the weights."""

    kind = "weights_begin"
    avail_gb: float


@_event
class WeightsEnd(Event):
    """`Load weight end.`: the model's type, dtype, the weights' memory and what is left."""

    kind = "weights_end"
    model_type: str | None = None
    elapsed_s: float | None = None
    dtype: str | None = None
    quant: str | None = None
    avail_gb: float | None = None
    mem_usage_gb: float | None = None


@_event
class KVCache(Event):
    """`KV Cache is allocated.`: the pool's tokens (or only its K and V sizes) and which pool."""

    kind = "kv_cache"
    tokens: int | None  # None: a release that printed only K and V sizes
    dtype: str | None = None
    k_gb: float | None = None
    v_gb: float | None = None
    kv_gb: float | None = None
    label: str | None = None  # Full, SWA, ...
    upper_bound: bool = False  # "KV Cache VA upper bound": not the allocation
    draft: bool = False  # post-capture draft pool: not the target's tokens
    post_capture: bool = False


@_event
class MambaCache(Event):
    """`Mamba Cache is allocated.`: the state slots of a hybrid (Mamba) model."""

    kind = "mamba_cache"
    slots: int
    conv_gb: float | None = None
    ssm_gb: float | None = None
    intermediate_ssm_gb: float | None = None
    intermediate_conv_gb: float | None = None


@_event
class PoolEnd(Event):
    """`Memory pool end.`: the GPU memory free once the pools are allocated."""

    kind = "memory_pool_end"
    avail_gb: float


@_event
class MaxRunningLimited(Event):
    """SGLang lowered the request cap (a warning, not a failure, unless it reaches 0)."""

    kind = "max_running_limited"
    value: int
    by: str  # mamba | kv
    requested: int | None = None
    mamba_slots: int | None = None
    slots_per_req: int | None = None


@_event
class SchedulerInfo(Event):
    """The scheduler's summary (`max_total_num_tokens=...`): the figures the start is judged by."""

    kind = "scheduler"
    max_total_num_tokens: int
    max_running_requests: int | None  # ≤ 0.1.20 the summary has none
    chunked_prefill_size: int | None = None
    max_prefill_tokens: int | None = None
    context_len: int | None = None
    available_gpu_mem_gb: float | None = None


@_event
class CudaGraph(Event):
    """CUDA-graph capture began or ended, for the target or the draft."""

    kind = "cuda_graph"
    stage: str  # begin | end
    name: str = "target decode"  # target decode | target verify | target prefill | draft decode | draft extend
    elapsed_s: float | None = None
    mem_usage_gb: float | None = None
    avail_gb: float | None = None


@_event
class DraftRunner(Event):
    """A speculative draft's runner was initialized or is ready."""

    kind = "draft_runner"
    algorithm: str
    stage: str  # initialized | ready
    details: str = ""


@_event
class Uvicorn(Event):
    """The HTTP server started, finished its start-up or is running."""

    kind = "http"
    stage: str  # started | startup_complete | running
    url: str | None = None


@_event
class Ready(Event):
    """`The server is fired up and ready to roll!`: the start's last milestone."""

    kind = "ready"


#: How much a failure line says (docs/sglang.md#failure-lines): SGLang means it fatal
#: ("root"), it may be a root cause but SGLang could still recover ("suspect": a bare
#: traceback, a lone exception line), or it is the consequence of a cause said elsewhere
#: ("death": `Rank 0 scheduler is dead`, `Exit code: -9`, `Killed`).
ROOT, SUSPECT, DEATH = "root", "suspect", "death"


@_event
class Failure(Event):
    """A failure line (docs/sglang.md#failure-lines): its cause, how much it says (`role`) and its evidence."""

    kind = "failure"
    cause: str
    message: str
    evidence: tuple[str, ...] = ()
    signal: str | None = None
    status: int | None = None
    role: str = ROOT
    #: its sub-case in the registry (sglang/failures/) and what that row's pattern captured: read off its own
    #: words once, here, so that nothing downstream matches text again
    detail: str = ""
    captures: dict[str, str] = field(default_factory=dict)
    #: the phase its traceback's frames say it was raised in (`init_device_graphs`: cuda_graph), "" when they do not
    #: say: a log that lost the milestone lines before it (a paste cut at its top) still fails in the right phase
    raised_in: str = ""

    def __post_init__(self) -> None:
        if not self.detail:
            detail, captures = refine(self.cause, "\n".join((self.message, *self.evidence)))
            object.__setattr__(self, "detail", detail)
            object.__setattr__(self, "captures", captures)


@_event
class Recovered(Event):
    """SGLang says it retries what just failed: the traceback before it was not fatal."""

    kind = "recovered"


@_event
class KVBelowContext(Event):
    """0.5.23: the pool holds fewer tokens than one full-length request; the start goes on."""

    kind = "kv_below_context"
    tokens: int
    context_length: int


@_event
class StartupTimings(Event):
    """0.5.23's own account of where the start's time went, in seconds per phase."""

    kind = "startup_timings"
    seconds: dict[str, float] = field(default_factory=dict)


@_event
class UnifiedMemoryPool(Event):
    """`--enable-unified-memory`: one buffer split at run time, so KV tokens and Mamba slots are not fixed."""

    kind = "unified_memory_pool"
    total_gb: float | None = None


@_event
class PortMoved(Event):
    """≤ 0.3.2: `WARNING: Port 30000 is not available. Use port 30005 instead.`: SGLang serves on another port
    than asked, and a check of the asked one reaches whatever holds it."""

    kind = "port_moved"
    requested: int
    port: int


@_event
class SlidingWindowPool(Event):
    """Before 0.5.23: `Use sliding window memory pool. full_layer_tokens=375360, swa_layer_tokens=300288`: the
    two `KV Cache is allocated` lines after it are these pools, in either order, unnamed."""

    kind = "sliding_window_pool"
    full_tokens: int
    swa_tokens: int


@_event
class HostPool(Event):
    """`Allocating 120.00 GB host memory for hierarchical KV cache.` (each rank): pinning it takes about a
    minute per few hundred GB, after the scheduler's summary."""

    kind = "host_pool"
    gb: float


@_event
class HiCacheStorage(Event):
    """The hierarchical cache's storage backend set up (`Creating storage backend 'mooncake' (…)`, `Mooncake store
    setup successfully.`, `Connect to Mooncake store successfully.`): the scheduler builds it after the host pool,
    so a paste that opens at it had reached the scheduler's set-up."""

    kind = "hicache_storage"
    backend: str


@_event
class KernelPrecompile(Event):
    """SGLang says it begins compiling kernels that take long the first time on a host (DeepGEMM's
    JIT pre-compile session, "typically 10-20 mins"): the phase it happens in gets more time, once."""

    kind = "kernel_precompile"
    what: str  # DeepGEMM | AITER


@_event
class ProgressBar(Event):
    """A tqdm bar's latest update (weight shards, CUDA-graph batches): progress within a phase, never a milestone."""

    kind = "progress"
    what: str  # shards | cuda_graph
    label: str  # tqdm's description: "Loading safetensors checkpoint shards", "Capturing batches"
    done: int
    total: int
    elapsed_s: float | None = None
    rate: float | None = None  # items per second, as tqdm measured it


@_event
class StopRequested(Event):
    """The server was told to stop from outside: SGLang's `SIGTERM received …`, uvicorn's `Shutting down`, a terminal's
    echoed `^C`. Its processes' deaths after it (exit -15, `Received sigquit`) are the stop's, not a crash."""

    kind = "stop_requested"
    by: str


@_event
class ProcessesGone(Event):
    """The multiprocessing resource tracker's notice (`There appear to be N leaked semaphore objects to clean up at
    shutdown`): it prints it only once every process that used it has ended, so the server's process tree is gone."""

    kind = "processes_gone"
