"""SGLang's memory model, once: how a start's GPU memory becomes a KV pool, a Mamba state
cache and a request cap (docs/sglang.md#memory).

    rest = free_before_load × mem_fraction_static − weights
    Mamba state first (max_mamba_cache_size slots, or its share of `rest`), the KV pool
    gets the remainder, one cell per token;
    max_running_requests = min(requested or auto, tokens // 2, mamba slots // slots per
    request, and, for this SGLang's speculative worker, tokens // context_len).

Pure arithmetic. `predict(SizingInputs)` is SGLang's own, per release family: preflight
predicts with it from a model's shape, and every memory fix the diagnosis prints and
baseline-check's estimate of a candidate go through it (svcdiag.sglang.preflight
recheck_fixes, estimate_candidate), and so do the diagnosis's explanation and its plans of a
fix (svcdiag.sglang.memory_plan). The stand-in (svcdiag.sim) keeps its own copy on purpose,
as the cross-check.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

GB = 1024**3  # SGLang's "GB" are GiB
MAX_MEM_FRACTION = 0.95
AUTO_MEM_FRACTION = 0.88  # what SGLang picks on a large GPU when mem_fraction_static is unset
MAMBA_FULL_MEMORY_RATIO = 0.9  # --mamba-full-memory-ratio's default
#: beside CUDA graphs, the (1 − mem_fraction_static) reserve holds activations, NCCL buffers, the allocator's slack
ACTIVATION_HEADROOM_GB = 2.0


# ------------------------------------------------------------ SGLang's sizing, per release
#
# Read from the wheels (pip download --no-deps sglang==V): 0.4.6 model_runner.py
# profile_max_num_token / init_memory_pool, tp_worker.py; 0.5.9 and 0.5.15
# model_runner_kv_cache_mixin.py handle_max_mamba_cache / _calculate_mamba_ratio /
# _resolve_max_num_reqs; 0.5.23 mem_cache/kv_cache_configurator.py (_profile_available_bytes,
# _handle_max_mamba_cache, _calculate_mamba_ratio, resolve_max_num_reqs),
# model_executor/pool_configurator.py, mem_cache/draft_kv_budget.py, arg_groups/memory_hook.py.
# The first release of each family is the first sampled wheel that has its code: a release
# between two sampled ones belongs to the older family (docs/preflight.md#the-formula-sglangs-own-per-release-family).


@dataclass(frozen=True, slots=True)
class Family:
    """What changed in SGLang's sizing code between releases."""

    name: str
    first: str  # the first release that sizes this way
    req_pool_plus_one: bool  # max_running ≤ the request pool's max_num_reqs + 1 (≤ 0.4.6)
    mamba: str  # "upfront" (intermediate state for every asked request first), "joint", "joint_padded"
    draft_weights_counted: bool  # the draft is loaded before the target's pool is sized
    dflash_draft_cell: bool  # DFlash draft KV: its own bytes per token (else the target's, scaled by layers)
    auto_extra_buffer: bool  # --mamba-scheduler-strategy auto → extra_buffer with the overlap scheduler
    hybrid_zero_raises: bool  # a hybrid whose state cache serves no request raises RuntimeError


FAMILIES = (
    Family("0.4", "0.0", True, "upfront", False, False, False, False),  # 0.4.6's wheel
    Family("0.5.9", "0.4.7", False, "upfront", False, False, False, False),  # 0.5.9's
    Family("0.5.12", "0.5.10", False, "upfront", False, False, False, False),  # 0.5.12's
    Family("0.5.15", "0.5.13", False, "joint", True, False, True, True),  # 0.5.15's
    # a real 0.5.18 log (tests/fixtures/memory-backtest, OTel H100) allocates max_mamba_cache_size + 1
    # slots' state and solves for the slots with that padding slot taken out first; 0.5.16-0.5.17 unseen
    Family("0.5.18", "0.5.18", False, "joint_padded", True, False, True, True),
    Family("0.5.23", "0.5.19", False, "joint_padded", True, True, True, True),  # 0.5.19's, 0.5.20's, 0.5.23's
)
NEWEST = FAMILIES[-1]


def family(version: str | None) -> Family:
    """The sizing family of an SGLang release; the newest when the release is unknown."""
    if not version:
        return NEWEST
    from svcdiag.sglang.flag_tables import version_key

    try:
        key = version_key(version)
    except ValueError:
        return NEWEST
    chosen = FAMILIES[0]
    for f in FAMILIES:
        if key >= version_key(f.first):
            chosen = f
    return chosen


EAGLE_FAMILY = frozenset({"EAGLE", "EAGLE3", "NEXTN", "STANDALONE", "MTP"})
DFLASH_FAMILY = frozenset({"DFLASH", "DSPARK"})
DFLASH_BLOCK_SIZE = 16  # a DFlash draft's default block size: its speculative_num_draft_tokens


@dataclass(frozen=True, slots=True)
class SizingInputs:
    """One GPU's start as SGLang sizes it. Bytes and GiB are per GPU (after tp)."""

    free_before_gb: float  # free before loading (SGLang's pre_model_load_memory)
    weights_gb: float  # the target's weights
    kv_cell_bytes: int  # the target's KV bytes per token (its full-attention layers)
    context_len: int
    attention_layers: int = 0  # the target's KV layers (EAGLE / DFlash layer scaling)
    free_after_load_gb: float | None = None  # logged after loading: wins over free_before − weights
    draft_weights_gb: float = 0.0
    mem_fraction_static: float | None = None  # None: SGLang's automatic choice (needs gpu_total_gb)
    gpu_total_gb: float | None = None
    mamba_per_req_bytes: int | None = None  # conv + ssm state of one slot; None: no Mamba cache
    max_mamba_cache_size: int | None = None
    max_running_requests: int | None = None
    max_total_tokens: int | None = None
    speculative_algorithm: str | None = None
    num_draft_tokens: int | None = None  # D; DFlash: its block size
    draft_layers: int | None = None
    draft_cell_bytes: int | None = None  # DFlash draft KV bytes per token
    disable_radix_cache: bool = False
    mamba_scheduler_strategy: str = "auto"  # auto | no_buffer | extra_buffer | extra_buffer_lazy
    disable_overlap_schedule: bool = False
    mamba_full_memory_ratio: float = MAMBA_FULL_MEMORY_RATIO
    dp_size: int = 1  # attention data parallel: per-DP caps
    page_size: int = 1
    tp_size: int = 1
    chunked_prefill_size: int | None = None
    cuda_graph_max_bs: int | None = None
    slots_per_request: int | None = None  # logged '%d state slots per request': wins
    version: str | None = None


@dataclass(frozen=True, slots=True)
class Prediction:
    """What SGLang computes for a start: its KV pool, its Mamba state cache and its request
    cap, with every bound on the cap by name and the one that binds."""

    family: str
    mem_fraction_static: float
    rest_gb: float  # what the caches share: free after loading − the (1 − m) reserve
    cell_bytes: int  # KV bytes per token with the draft's KV added
    kv_tokens: int
    mamba_slots: int | None
    slots_per_request: int | None
    mamba_gb: float  # the Mamba state slots
    intermediate_gb: float  # speculative decoding's per-draft-token state
    limits: dict[str, int]
    max_running_requests: int
    binding: str  # the limit that sets max_running_requests
    failure: str | None = None  # the cause SGLang would fail with: not_enough_memory, mamba_cache_too_small, max_running_zero

    def to_json(self) -> dict[str, Any]:
        return {"family": self.family, "mem_fraction_static": self.mem_fraction_static,
                "rest_gb": round(self.rest_gb, 3), "cell_bytes": self.cell_bytes, "kv_tokens": self.kv_tokens,
                "mamba_slots": self.mamba_slots, "slots_per_request": self.slots_per_request,
                "mamba_gb": round(self.mamba_gb, 3), "intermediate_gb": round(self.intermediate_gb, 3),
                "limits": dict(self.limits), "max_running_requests": self.max_running_requests,
                "binding": self.binding, "failure": self.failure}


def auto_mem_fraction(gpu_total_gb: float, *, tp_size: int = 1, chunked_prefill_size: int | None = None,
                      cuda_graph_max_bs: int | None = None, fam: Family = NEWEST) -> float:
    """SGLang's mem_fraction_static when none is given (0.5.23 arg_groups/memory_hook.py):
    (capacity − reserved) / capacity, reserved = 512 MB + 1.5 MB per activation token + tp/8 GB
    + 2 MB per decode graph batch, at least 10 GB on a GPU over 60 GB. Older releases: 0.88
    on a large GPU (the figure their logs show)."""
    if fam is not NEWEST:
        return AUTO_MEM_FRACTION
    mb = gpu_total_gb * 1024
    reserved = 512 + 1.5 * max(chunked_prefill_size or 8192, 2048) + tp_size / 8 * 1024
    reserved += 2 * (cuda_graph_max_bs or 0)
    if mb > 60 * 1024:
        reserved = max(reserved, 10 * 1024)
    return round((mb - reserved) / mb, 3)


def state_slots_per_request(inp: SizingInputs, fam: Family) -> int:
    """Mamba state slots one running request takes (_calculate_mamba_ratio): 1 without the
    radix cache, 3 by default, + 2 with extra_buffer under the overlap scheduler (+ 1 without
    it, or lazily); up to 0.5.9 a speculative extra_buffer start got + 1 only, others + 2."""
    if inp.slots_per_request:
        return inp.slots_per_request
    if inp.disable_radix_cache:
        return 1
    strategy = inp.mamba_scheduler_strategy
    if strategy == "auto":
        strategy = "extra_buffer" if fam.auto_extra_buffer and not inp.disable_overlap_schedule else "no_buffer"
    if strategy not in ("extra_buffer", "extra_buffer_lazy"):
        return 3
    if fam.name == "0.5.9":  # the ping-pong buffer by speculative decoding, not by the overlap scheduler
        return 3 + (1 if inp.speculative_algorithm else 2)
    if strategy == "extra_buffer_lazy" or inp.disable_overlap_schedule:
        return 4
    return 5


def draft_tokens(inp: SizingInputs) -> int:
    """D: speculative_num_draft_tokens (a DFlash draft's block size, 16, when unset)."""
    if inp.num_draft_tokens:
        return inp.num_draft_tokens
    algo = (inp.speculative_algorithm or "").upper()
    return DFLASH_BLOCK_SIZE if algo in DFLASH_FAMILY else 4 if algo else 0


def cell_with_draft(inp: SizingInputs, fam: Family) -> int:
    """KV bytes per token the target's pool is sized with: EAGLE/MTP drafts share the pool
    (× (1 + draft layers / layers)); a DFlash draft's own pool is paid from the same budget
    (0.5.23: + its bytes per token; before: the target's scaled by (layers + draft) / layers)."""
    cell = inp.kv_cell_bytes
    algo = (inp.speculative_algorithm or "").upper()
    layers, draft = inp.attention_layers, inp.draft_layers or 0
    if algo in EAGLE_FAMILY and draft > 0 and layers > 0:
        return cell + int(cell * draft / layers)
    if algo in DFLASH_FAMILY:
        if fam.dflash_draft_cell and inp.draft_cell_bytes:
            return cell + int(inp.draft_cell_bytes)
        if draft > 0 and layers > 0:
            return (cell * (layers + draft) + layers - 1) // layers
    return cell


def _mamba(inp: SizingInputs, fam: Family, rest_gb: float, ratio: int) -> tuple[int, float, float]:
    """(slots, state GiB, intermediate GiB) as handle_max_mamba_cache sizes them."""
    per_req = int(inp.mamba_per_req_bytes or 0)
    spec = bool(inp.speculative_algorithm)
    d = draft_tokens(inp) if spec else 0
    dp = max(1, inp.dp_size)
    asked = inp.max_running_requests
    pad = 1 if fam.mamba == "joint_padded" else 0
    intermediate = 0.0
    if fam.mamba == "upfront":
        if spec and asked is not None:
            intermediate = per_req * (asked // dp) * d / GB
            rest_gb -= intermediate
        if inp.max_mamba_cache_size is not None:
            slots = inp.max_mamba_cache_size // dp
        elif inp.disable_radix_cache and asked is not None:
            slots = asked // dp
        else:
            budget = rest_gb * inp.mamba_full_memory_ratio / (1 + inp.mamba_full_memory_ratio)
            slots = int(budget * GB // per_req) if per_req else 0
        return slots, slots * per_req / GB, intermediate
    capped_asked = max(1, (asked or 0) // dp) if pad else (asked or 0) // dp
    if inp.max_mamba_cache_size is not None:
        slots = inp.max_mamba_cache_size // dp
        if spec:
            capped = min(capped_asked, slots // ratio)
            intermediate = per_req * (capped + pad) * d / GB
    elif inp.disable_radix_cache and asked is not None:
        slots = max(1, asked // dp) if pad else asked // dp
        if spec:
            intermediate = per_req * (slots + pad) * d / GB
    else:
        budget = rest_gb * inp.mamba_full_memory_ratio / (1 + inp.mamba_full_memory_ratio) * GB
        if not per_req:
            slots = 0
        elif spec:
            if pad:
                slots = int((budget - per_req * (1 + d)) // (per_req * (1 + d / ratio)))
            else:
                slots = int(budget // (per_req * (1 + d / ratio)))
            capped = min(capped_asked, slots // ratio)
            intermediate = per_req * (capped + pad) * d / GB
        else:
            slots = int((budget - per_req * pad) // per_req)
    return slots, (slots + pad) * per_req / GB if slots > 0 else 0.0, max(intermediate, 0.0)


def predict(inp: SizingInputs) -> Prediction:
    """SGLang's own arithmetic for the release `inp.version` runs (the newest when unknown):
    KV tokens, Mamba state slots and max_running_requests, each bound named."""
    fam = family(inp.version)
    if inp.mem_fraction_static is not None:
        mfs = inp.mem_fraction_static
    elif inp.gpu_total_gb:
        mfs = auto_mem_fraction(inp.gpu_total_gb, tp_size=inp.tp_size, chunked_prefill_size=inp.chunked_prefill_size,
                                cuda_graph_max_bs=inp.cuda_graph_max_bs, fam=fam)
    else:
        mfs = AUTO_MEM_FRACTION
    after = inp.free_after_load_gb
    if after is None:
        after = inp.free_before_gb - inp.weights_gb - (inp.draft_weights_gb if fam.draft_weights_counted else 0.0)
    rest = after - inp.free_before_gb * (1 - mfs)
    hybrid = inp.mamba_per_req_bytes is not None
    ratio = state_slots_per_request(inp, fam) if hybrid else None
    slots: int | None = None
    mamba_gb = intermediate = 0.0
    failure: str | None = None
    if rest <= 0:
        failure = "not_enough_memory"
    elif hybrid:
        assert ratio is not None
        slots, mamba_gb, intermediate = _mamba(inp, fam, rest, ratio)
        if slots <= 0 and fam.hybrid_zero_raises:
            failure = "mamba_cache_too_small"
    kv_rest = rest - mamba_gb - intermediate
    cell = cell_with_draft(inp, fam)
    tokens = int(kv_rest * GB // cell) if kv_rest > 0 and cell > 0 else 0
    if inp.max_total_tokens is not None:
        tokens = min(tokens, inp.max_total_tokens)
    page = max(1, inp.page_size)
    tokens = tokens // page * page
    if tokens <= 0 and failure is None:
        failure = "not_enough_memory"
    limits = _limits(inp, fam, tokens, slots, ratio)
    binding = min(limits, key=lambda k: limits[k])
    cap = max(0, limits[binding])
    if failure is None and cap <= 0:
        failure = "mamba_cache_too_small" if binding == "mamba" and fam.hybrid_zero_raises else "max_running_zero"
    return Prediction(fam.name, mfs, rest, cell, tokens, slots, ratio, mamba_gb, intermediate, limits, cap, binding,
                      failure)


def max_running(inp: SizingInputs, tokens: int, slots: int | None = None) -> tuple[int, str, dict[str, int]]:
    """resolve_max_num_reqs alone, for a pool already sized (`tokens`, Mamba `slots`): the cap,
    the binding limit and every limit (the back-test checks it on the logged pools)."""
    fam = family(inp.version)
    ratio = state_slots_per_request(inp, fam) if slots is not None else None
    limits = _limits(inp, fam, tokens, slots, ratio)
    binding = min(limits, key=lambda k: limits[k])
    return max(0, limits[binding]), binding, limits


def _limits(inp: SizingInputs, fam: Family, tokens: int, slots: int | None, ratio: int | None) -> dict[str, int]:
    """Every bound on max_running_requests (per DP worker), by name."""
    dp = max(1, inp.dp_size)
    ctx = max(1, inp.context_len)
    estimated = min(max(int(tokens / ctx * 512), 2048), 4096)
    limits: dict[str, int] = {"kv_half": tokens // 2}
    if inp.max_running_requests is not None:
        asked = inp.max_running_requests // dp
        limits["requested"] = max(1, asked) if fam is NEWEST else asked
    elif not fam.req_pool_plus_one:
        limits["auto"] = estimated
    if fam.req_pool_plus_one:
        limits["req_pool"] = estimated + 1
    if slots is not None and ratio:
        limits["mamba"] = slots // ratio
    return limits
