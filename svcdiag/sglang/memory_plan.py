"""What a logged start would need, in the arithmetic its fixes are re-checked with.

Pure. The diagnosis explains a memory failure with these figures: the logged start read back
into the memory model (svcdiag.sglang.preflight.logged_sizing), and each what-if (N
full-length requests, a shorter context) predicted by svcdiag.sglang.memory.predict for the
start's release family, so the explanation and the fixes under it (recheck_fixes) agree.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from svcdiag.config.service import ServiceConfig
from svcdiag.sglang import memory
from svcdiag.sglang.figures import Figures
from svcdiag.sglang.memory import ACTIVATION_HEADROOM_GB, GB, MAX_MEM_FRACTION, SizingInputs
from svcdiag.sglang.preflight import fewest_slots_per_request, logged_sizing

#: how far the search for a fraction goes past 1: far enough to say how much is missing
_SEARCH_UP_TO = 3.0


@dataclass(frozen=True, slots=True)
class Logged:
    """A logged start in the memory model: its inputs, the model's prediction at its own
    settings, and the pools SGLang logged (GiB)."""

    inputs: SizingInputs
    now: memory.Prediction
    kv_gb: float  # the KV pools logged, a DFlash draft's included
    mamba_gb: float  # conv + ssm + speculative intermediate, as logged
    slots: int | None  # Mamba slots logged
    cuda_graph_gb: float | None

    @property
    def reserve_gb(self) -> float:
        """What must stay outside the caches: the logged CUDA graphs + activations."""
        return (self.cuda_graph_gb or 0.0) + ACTIVATION_HEADROOM_GB

    @property
    def slot_gb(self) -> float:
        """One Mamba slot's state (conv + ssm)."""
        return (self.inputs.mamba_per_req_bytes or 0) / GB

    @property
    def draft_tokens(self) -> int:
        """D: the draft tokens a speculative request keeps intermediate state for (0 without)."""
        return memory.draft_tokens(self.inputs) if self.inputs.speculative_algorithm else 0


def read(figures: Figures, cfg: ServiceConfig | None) -> Logged | None:
    """The logged start, or None when its log lacks the KV pool, free memory or mem_fraction_static."""
    inp = logged_sizing(figures, cfg)
    if inp is None:
        return None
    f = figures
    mamba = sum(x or 0 for x in (f.mamba_conv_gb, f.mamba_ssm_gb, f.mamba_intermediate_ssm_gb,
                                 f.mamba_intermediate_conv_gb))
    return Logged(inp, memory.predict(inp), f.kv_pool_gb + float(f.draft_kv_gb or 0), float(mamba),
                  f.mamba_slots, f.cuda_graph_gb)


def slots_per_request(figures: Figures, cfg: ServiceConfig | None) -> int:
    """Mamba state slots one request takes: as logged, else the model's for the start's flags and release."""
    if figures.mamba_slots_per_request:
        return int(figures.mamba_slots_per_request)
    logged = read(figures, cfg)
    if logged is not None and logged.now.slots_per_request:
        return logged.now.slots_per_request
    if cfg is not None:
        return fewest_slots_per_request(cfg)
    return memory.state_slots_per_request(SizingInputs(0, 0, 1, 1), memory.NEWEST)


@dataclass(frozen=True, slots=True)
class Plan:
    """The smallest mem_fraction_static (in 0.01s) at which `requests` full-length requests fit."""

    requests: int
    fraction: float
    slots: int | None  # max_mamba_cache_size it takes (None: SGLang sizes the slots itself)
    predicted: memory.Prediction
    extra_kv_gb: float  # beyond the logged pools
    mamba_delta_gb: float  # Mamba state beyond the logged (below 0: less, fewer requests' draft-token state)
    left_gb: float  # outside the caches: CUDA graphs, activations, the draft model
    fits: bool  # ≤ 0.95 and the logged CUDA graphs + 2 GB still outside the caches


def plan(logged: Logged, requests: int, context_len: int | None = None, *, running: int | None = None) -> Plan | None:
    """What `requests` requests of `context_len` (the start's) tokens each take: Mamba slots for
    each, KV for all of them at once, and the mem_fraction_static that gives it, with
    max_running_requests `running` (default `requests`). None when even a fraction of 3 would
    not (or the context is unknown)."""
    base = logged.inputs
    ctx = context_len or base.context_len
    if not ctx:
        return None
    spr = logged.now.slots_per_request or 0
    slots = base.max_mamba_cache_size
    if slots is not None and spr:
        slots = max(slots, requests * spr)
    running = running or requests
    inp = replace(base, context_len=ctx, max_running_requests=running, max_mamba_cache_size=slots)
    start = math.ceil(round(base.mem_fraction_static or memory.AUTO_MEM_FRACTION, 6) * 100)
    for step in range(start, int(_SEARCH_UP_TO * 100) + 1):
        p = memory.predict(replace(inp, mem_fraction_static=step / 100))
        if p.failure is None and p.max_running_requests >= min(requests, running) and p.kv_tokens >= requests * ctx:
            left = base.free_before_gb * (1 - step / 100)
            return Plan(requests, step / 100, slots, p,
                        max(0.0, requests * ctx * p.cell_bytes / GB - logged.kv_gb),
                        p.mamba_gb + p.intermediate_gb - logged.mamba_gb, left,
                        step / 100 <= MAX_MEM_FRACTION and left >= logged.reserve_gb)
    return None


def shorter_context(logged: Logged, requests: int) -> tuple[int, int | None] | None:
    """The longest context (in 1,024s) at which `requests` requests fit in the start's own
    memory, with the Mamba slots they take; None when not even 1,024 tokens each do."""
    base = logged.inputs
    spr = logged.now.slots_per_request or 0
    slots = base.max_mamba_cache_size
    if slots is not None and spr and slots < requests * spr:
        slots = requests * spr
    p = memory.predict(replace(base, max_running_requests=requests, max_mamba_cache_size=slots))
    limit = p.kv_tokens // requests // 1024 * 1024
    if p.failure is not None or p.max_running_requests < requests or limit < 1024:
        return None
    return limit, slots


def cache_budget(figures: Figures, cfg: ServiceConfig | None,
                 fraction: float | None = None) -> float | None:
    """GiB the caches share after the weights (SGLang's rest: free after loading − the
    1 − mem_fraction_static reserve), at the logged fraction or `fraction`; None when the log
    lacks the free memory before loading, the weights or the fraction."""
    f = figures
    mfs = fraction or f.mem_fraction_static or (cfg.mem_fraction_static if cfg else None)
    before, weights = f.avail_before_load_gb, f.weights_gb
    if not (before and mfs) or weights is None:
        return None
    after = f.avail_after_load_gb
    inp = SizingInputs(free_before_gb=float(before), weights_gb=float(weights), kv_cell_bytes=1, context_len=1,
                       free_after_load_gb=float(after) if after is not None else None,
                       mem_fraction_static=float(mfs), version=cfg.sglang_version if cfg else None)
    return memory.predict(inp).rest_gb
