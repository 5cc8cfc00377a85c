"""The stand-in's GPU: SGLang's memory arithmetic (kv_cache_configurator; docs/sglang.md#memory),
its own copy applied to the flags a unit passes, on a simulated 96 GB RTX PRO 6000 (the seed's GPU).

Figures are derived from the flags, not canned, so a variant that changes
mem_fraction_static or max_mamba_cache_size sees the consequences SGLang would print.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from .scenarios import Scenario

GB = 1024**3
#: an idle 96 GB RTX PRO 6000 (Blackwell; torch reports 95.59 GiB in all) before loading: the
#: CUDA context and the driver take the rest. The seed's host had 69.67 GiB of it free.
IDLE_GPU_FREE_GB = 94.5
#: what torch calls "total capacity" (GiB) of the GPUs the stand-in can stand for, smallest first
GPU_TOTALS_GIB = (("RTX PRO 6000", 95.59), ("H200", 139.81))
CUDA_GRAPH_GB = 1.21
AUTO_MEM_FRACTION = 0.88
MAMBA_FULL_MEMORY_RATIO = 0.9


@dataclass(frozen=True)
class ModelProfile:
    arch: str
    weights_gb: float  # whole model, bf16
    full_attn_layers: int
    kv_heads: int
    head_dim: int
    hybrid: bool
    # Mamba/GDN state per request slot on one GPU at TP1 (GB); the seed's 24-slot
    # figures are 0.07 GB conv, 3.52 GB ssm, 11.25 GB intermediate (speculative only).
    conv_per_slot_gb: float = 0.07 / 24
    ssm_per_slot_gb: float = 3.52 / 24
    intermediate_per_slot_gb: float = 11.25 / 24
    draft_arch: str = "DFlash2DraftModel"
    draft_weights_gb: float = 1.66

    def cell_bytes(self, tp: int) -> int:
        heads = max(1, self.kv_heads // tp)
        return heads * 2 * self.head_dim * self.full_attn_layers * 2  # K+V, bf16


HYBRID_27B = ModelProfile("Qwen3_5ForCausalLM", 50.29, 16, 4, 256, hybrid=True)
DENSE_8B = ModelProfile("Qwen3ForCausalLM", 15.26, 36, 8, 128, hybrid=False)


def gpu_total_gib(free_before_load_gb: float) -> float:
    """The smallest known GPU that has `free_before_load_gb` free: its total capacity."""
    for _name, total in GPU_TOTALS_GIB:
        if free_before_load_gb < total:
            return total
    return round(free_before_load_gb + 0.09, 2)


@dataclass(frozen=True)
class Figures:
    tp: int
    pre_load_free_gb: float
    weights_gb: float
    after_weights_gb: float
    mem_fraction_static: float
    mamba_slots: int | None
    conv_gb: float
    ssm_gb: float
    intermediate_gb: float
    kv_tokens: int
    k_gb: float
    v_gb: float
    pool_end_avail_gb: float
    graph_end_avail_gb: float
    draft_weights_gb: float
    final_avail_gb: float
    requested_max_running: int | None
    max_running: int
    slots_per_req: int
    context_len: int
    not_enough_memory: bool
    rest_gb: float
    #: max_mamba_cache_size // slots_per_req (None: no Mamba cache); ≤ 0 is 0.5.23's Hybrid RuntimeError
    mamba_cap: int | None = None
    #: the request limit before the Mamba cap and the speculative context limit (the KV's T // 2)
    kv_limit: int = 0


def compute(profile: ModelProfile, scenario: Scenario, *, tp: int, mem_fraction_static: float | None,
            max_mamba_cache_size: int | None, max_running_requests: int | None,
            context_length: int | None, speculative: bool, kv_context_limit: bool = True) -> Figures:
    """`kv_context_limit`: the seed's (pre-0.5.20) build, where a speculative worker reserves a
    full context per request, so `tokens // context_len` caps the requests; 0.5.23 only warns
    when the KV pool is below context_len."""
    mfs = mem_fraction_static if mem_fraction_static is not None else AUTO_MEM_FRACTION
    weights = profile.weights_gb / tp
    cell = profile.cell_bytes(tp)
    per_slot = 0.0
    if profile.hybrid:
        per_slot = (profile.conv_per_slot_gb + profile.ssm_per_slot_gb
                    + (profile.intermediate_per_slot_gb if speculative else 0.0)) / tp
    pre = scenario.gpu_free_gb or IDLE_GPU_FREE_GB
    if scenario.kv_tokens_target is not None and profile.hybrid and max_mamba_cache_size:
        # solve pre·mfs − weights = kv + mamba for the target token count
        kv_gb = (scenario.kv_tokens_target + 0.5) * cell / GB
        pre = round((kv_gb + max_mamba_cache_size * per_slot + weights) / mfs, 2)
    after_weights = pre - weights
    rest = after_weights - pre * (1 - mfs)
    slots: int | None = None
    mamba_gb = 0.0
    if profile.hybrid:
        if max_mamba_cache_size is not None:
            slots = max_mamba_cache_size
        else:
            budget = rest * MAMBA_FULL_MEMORY_RATIO / (1 + MAMBA_FULL_MEMORY_RATIO)
            slots = max(0, int(budget / per_slot) - 1) if per_slot else 0
        mamba_gb = slots * per_slot
    kv_bytes = (rest - mamba_gb) * GB
    tokens = max(0, int(kv_bytes // cell)) if kv_bytes > 0 else 0
    if scenario.kv_tokens_target is not None:
        tokens = scenario.kv_tokens_target  # `pre` was solved for it; skip the rounding
    context_len = context_length or 40960
    spr = 5 if speculative else 3
    if max_running_requests is None:
        limit = min(max(2048, min(4096, int(tokens / context_len * 512))), tokens // 2)
    else:
        limit = min(max_running_requests, tokens // 2)
    kv_limit = limit
    cap = slots // spr if slots is not None else None
    if cap is not None:
        limit = min(limit, cap)
    if speculative and kv_context_limit:
        # the seed's build: a speculative worker reserves a full context per request
        limit = min(limit, tokens // context_len)
    kv_gb = tokens * cell / GB
    pool_end = after_weights - mamba_gb - kv_gb
    graph_end = pool_end - CUDA_GRAPH_GB
    draft = (profile.draft_weights_gb / tp) if speculative else 0.0
    return Figures(
        tp=tp, pre_load_free_gb=pre, weights_gb=weights, after_weights_gb=after_weights,
        mem_fraction_static=mfs, mamba_slots=slots,
        conv_gb=(slots or 0) * profile.conv_per_slot_gb / tp,
        ssm_gb=(slots or 0) * profile.ssm_per_slot_gb / tp,
        intermediate_gb=(slots or 0) * profile.intermediate_per_slot_gb / tp if speculative else 0.0,
        kv_tokens=tokens, k_gb=kv_gb / 2, v_gb=kv_gb / 2, pool_end_avail_gb=pool_end,
        graph_end_avail_gb=graph_end, draft_weights_gb=draft, final_avail_gb=graph_end - draft,
        requested_max_running=max_running_requests, max_running=max(0, limit), slots_per_req=spr,
        context_len=context_len, not_enough_memory=rest <= 0 or tokens <= 0 or math.isnan(rest),
        rest_gb=rest, mamba_cap=cap, kv_limit=kv_limit,
    )
