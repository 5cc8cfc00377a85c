"""The stand-in's GPU: SGLang's memory arithmetic (kv_cache_configurator; docs/sglang.md#memory)
applied to the flags a unit passes, on a simulated 96 GB RTX PRO 6000 (the seed's GPU). A
0.5.20+ release sizes with svcdiag.sglang.memory, the module preflight predicts with; an older
one replays the seed's recorded build (its speculative worker reserves a full context per
request, which no sampled wheel's code does).

Figures are derived from the flags, not canned, so a variant that changes
mem_fraction_static or max_mamba_cache_size sees the consequences SGLang would print.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from svcdiag.sglang import memory

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
    """A simulated model's shape and weights."""

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
    #: the DFlash draft's own attention: 5 layers of 8 KV heads × 128 (its KV pool is paid from the target's budget)
    draft_layers: int = 5
    draft_kv_heads: int = 8
    draft_head_dim: int = 128

    def cell_bytes(self, tp: int) -> int:
        heads = max(1, self.kv_heads // tp)
        return heads * 2 * self.head_dim * self.full_attn_layers * 2  # K+V, bf16

    def draft_cell_bytes(self, tp: int) -> int:
        return max(1, self.draft_kv_heads // tp) * 2 * self.draft_head_dim * self.draft_layers * 2


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
    """The memory figures a simulated start logs."""

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
            context_length: int | None, speculative: bool, kv_context_limit: bool = True,
            new: bool = False, draft_tokens: int = 16) -> Figures:
    """`kv_context_limit`: the seed's (pre-0.5.20) build, where a speculative worker reserves a
    full context per request, so `tokens // context_len` caps the requests; 0.5.23 only warns
    when the KV pool is below context_len. `new`: SGLang 0.5.19 and later's own sizing
    (kv_cache_configurator.py), see compute_new; otherwise the seed's release as recorded."""
    if new:
        return compute_new(profile, scenario, tp=tp, mem_fraction_static=mem_fraction_static,
                           max_mamba_cache_size=max_mamba_cache_size, max_running_requests=max_running_requests,
                           context_length=context_length, speculative=speculative, draft_tokens=draft_tokens)
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


def compute_new(profile: ModelProfile, scenario: Scenario, *, tp: int, mem_fraction_static: float | None,
                max_mamba_cache_size: int | None, max_running_requests: int | None,
                context_length: int | None, speculative: bool, draft_tokens: int = 16) -> Figures:
    """SGLang 0.5.19+'s arithmetic, from the module preflight predicts with
    (svcdiag.sglang.memory.predict for 0.5.23): the draft's weights are resident when the pool
    is sized; each Mamba pool has a padding slot; speculative decoding reserves (capped requests
    + 1) × D intermediate states, and with no max_mamba_cache_size the slots come from the joint
    solve; a DFlash draft's KV bytes per token are added to the target's cell; 5 state slots per
    request (auto → extra_buffer under the overlap scheduler); a speculative start with no
    max_running_requests runs 48. Only the figures the stand-in prints are derived here."""
    mfs = mem_fraction_static if mem_fraction_static is not None else AUTO_MEM_FRACTION
    weights = profile.weights_gb / tp
    draft = profile.draft_weights_gb / tp if speculative else 0.0
    per_slot = (profile.conv_per_slot_gb + profile.ssm_per_slot_gb) / tp if profile.hybrid else 0.0
    context_len = context_length or 40960

    def sizing(pre: float) -> memory.SizingInputs:
        return memory.SizingInputs(
            free_before_gb=pre, weights_gb=weights, kv_cell_bytes=profile.cell_bytes(tp), context_len=context_len,
            attention_layers=profile.full_attn_layers, draft_weights_gb=draft,
            mem_fraction_static=mfs, mamba_per_req_bytes=round(per_slot * GB) if profile.hybrid else None,
            max_mamba_cache_size=max_mamba_cache_size, max_running_requests=max_running_requests,
            speculative_algorithm="DFLASH" if speculative else None, num_draft_tokens=draft_tokens,
            draft_layers=profile.draft_layers, draft_cell_bytes=profile.draft_cell_bytes(tp), tp_size=tp,
            version="0.5.23")

    pre = scenario.gpu_free_gb or IDLE_GPU_FREE_GB
    if scenario.kv_tokens_target is not None and profile.hybrid and max_mamba_cache_size:
        # solve pre·mfs − weights − draft − state − intermediate = kv for the target token count
        fixed = memory.predict(sizing(pre))  # the state and its intermediate share do not depend on `pre` here
        kv_gb = (scenario.kv_tokens_target + 0.5) * fixed.cell_bytes / GB
        pre = round((kv_gb + fixed.mamba_gb + fixed.intermediate_gb + weights + draft) / mfs, 2)
    p = memory.predict(sizing(pre))
    after_weights = pre - weights
    tokens = p.kv_tokens if scenario.kv_tokens_target is None else scenario.kv_tokens_target
    cell = p.cell_bytes
    kv_gb = tokens * profile.cell_bytes(tp) / GB
    draft_kv_gb = tokens * (cell - profile.cell_bytes(tp)) / GB
    pool_end = after_weights - draft - p.mamba_gb - p.intermediate_gb - kv_gb - draft_kv_gb
    graph_end = pool_end - CUDA_GRAPH_GB
    slots = p.mamba_slots
    share = slots + 1 if slots else 0
    cap, limits = p.max_running_requests, dict(p.limits)
    if scenario.kv_tokens_target is not None:  # the pinned token count's limits (resolve_max_num_reqs)
        cap, _, limits = memory.max_running(sizing(pre), tokens, slots)
    kv_limit = min(v for k, v in limits.items() if k != "mamba")
    return Figures(
        tp=tp, pre_load_free_gb=pre, weights_gb=weights, after_weights_gb=after_weights,
        mem_fraction_static=mfs, mamba_slots=slots,
        conv_gb=share * profile.conv_per_slot_gb / tp, ssm_gb=share * profile.ssm_per_slot_gb / tp,
        intermediate_gb=p.intermediate_gb, kv_tokens=tokens, k_gb=kv_gb / 2, v_gb=kv_gb / 2,
        pool_end_avail_gb=pool_end, graph_end_avail_gb=graph_end, draft_weights_gb=draft, final_avail_gb=graph_end,
        requested_max_running=max_running_requests, max_running=cap, slots_per_req=p.slots_per_request or 5,
        context_len=context_len,
        not_enough_memory=p.rest_gb - p.mamba_gb - p.intermediate_gb <= 0 or tokens <= 0 or math.isnan(p.rest_gb),
        rest_gb=p.rest_gb, mamba_cap=slots // (p.slots_per_request or 5) if slots is not None else None,
        kv_limit=kv_limit,
    )

