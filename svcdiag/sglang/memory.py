"""SGLang's memory model, once: how a start's GPU memory becomes a KV pool, a Mamba state
cache and a request cap (docs/sglang.md#memory).

    rest = free_before_load × mem_fraction_static − weights
    Mamba state first (max_mamba_cache_size slots, or its share of `rest`), the KV pool
    gets the remainder, one cell per token;
    max_running_requests = min(requested (48 for a speculative start) or auto, tokens // 2,
    mamba slots // slots per request), each bound as the release has it.

Pure arithmetic. `predict(SizingInputs)` is SGLang's own, per release family: preflight
predicts with it from a model's shape, and every memory fix the diagnosis prints and
baseline-check's estimate of a candidate go through it (svcdiag.sglang.preflight
recheck_fixes, estimate_candidate), and so do the diagnosis's explanation and its plans of a
fix (svcdiag.sglang.memory_plan). The stand-in (svcdiag.sim) sizes a 0.5.20+ start with it too.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from functools import lru_cache
from typing import Any

from svcdiag.sglang.causes import Cause

GB = 1024**3  # SGLang's "GB" are GiB
MAX_MEM_FRACTION = 0.95
AUTO_MEM_FRACTION = 0.88  # what SGLang picks on a large GPU when mem_fraction_static is unset
MAMBA_FULL_MEMORY_RATIO = 0.9  # --mamba-full-memory-ratio's default
#: beside CUDA graphs, the (1 − mem_fraction_static) reserve holds activations, NCCL buffers, the allocator's slack
ACTIVATION_HEADROOM_GB = 2.0
#: how far a fix after an out-of-memory lowers mem_fraction_static: the KV cache is that fraction of the
#: memory measured before loading, so 5 % of the GPU moves from the caches to the (1 − fraction) reserve
#: where CUDA graphs, activations and a speculative draft are set up; one step, rechecked by the model
RESERVE_STEP = 0.05


def more_reserve(mem_fraction_static: float) -> float:
    """The fraction that hands RESERVE_STEP of the GPU back to the reserve (rounded as a config writes it)."""
    return round(mem_fraction_static - RESERVE_STEP, 2)


# ------------------------------------------------------------ SGLang's sizing, per release
#
# Read from the wheels (pip download --no-deps sglang==V): 0.4.6, 0.5.2, 0.5.3 and 0.5.6
# model_runner.py (profile_max_num_token, init_memory_pool, handle_max_mamba_cache), tp_worker.py
# and server_args.py (__post_init__, _handle_gpu_memory_settings); 0.5.9, 0.5.11, 0.5.12 and 0.5.15
# model_runner_kv_cache_mixin.py handle_max_mamba_cache / _calculate_mamba_ratio /
# _resolve_max_num_reqs, server_args.py; 0.5.18 and 0.5.23 mem_cache/kv_cache_configurator.py
# (_profile_available_bytes, _handle_max_mamba_cache, _calculate_mamba_ratio, resolve_max_num_reqs),
# model_executor/pool_configurator.py, mem_cache/draft_kv_budget.py, 0.5.23 arg_groups/memory_hook.py
# and speculative_hook.py. A family's first release follows the read wheel before it: a release
# between two read ones belongs to the newer family (docs/preflight.md#the-formula-sglangs-own-per-release-family).


@dataclass(frozen=True, slots=True)
class Family:
    """What changed in SGLang's sizing code between releases."""

    name: str
    first: str  # the first release that sizes this way
    req_pool_plus_one: bool  # max_running ≤ the request pool's max_num_reqs + 1 (≤ 0.4.6)
    #: how the Mamba state cache is sized: "radix_off" (0.5.2: radix cache off, max_mamba_cache_size or
    #: max_running or 512 slots), "draft_divided" (0.5.6: the ratio's budget // (1 + D) slots, each
    #: (1 + D) states, an explicit size overridden), "upfront" (intermediate state for every asked
    #: request first), "joint", "joint_padded"
    mamba: str
    draft_weights_counted: bool  # the draft is loaded before the target's pool is sized
    dflash_draft_cell: bool  # DFlash draft KV: its own bytes per token (else the target's, scaled by layers)
    auto_extra_buffer: bool  # --mamba-scheduler-strategy auto → extra_buffer with the overlap scheduler
    hybrid_zero_raises: bool  # a hybrid whose state cache serves no request raises RuntimeError
    #: SGLang's automatic mem_fraction_static (auto_mem_fraction): "0.3.6", "0.4.0", "0.4", "0.4.7", "0.5.2", "0.5.6",
    #: "0.5.10", "0.5.11", "0.5.15", "0.5.18", "0.5.19", "0.5.20", "0.5.23":
    #: the release whose server_args / arg_groups/memory_hook.py rule it is
    mfs_rule: str = "0.5.23"
    #: an EAGLE / MTP / STANDALONE draft's KV: "extra_tokens" (init_memory_pool adds max_num_reqs ×
    #: (steps × topk + D) + 100 tokens to the shared pool), "target" (the target's pool alone),
    #: "scaled" (cell × (1 + draft / layers), 0.5.15-0.5.18), "added" (cell + int(cell × draft / layers), 0.5.23)
    eagle_pool: str = "added"
    #: an explicit max_running_requests, per DP worker, is capped by: "pool" (the request pool alone,
    #: ≤ 0.5.9 tp_worker.py / model_runner.py: min(asked // dp, req_to_token_pool.size)), "estimate"
    #: (0.5.11 _resolve_max_num_reqs: min(asked // dp, the 2048-4096 estimate)), "kv_half"
    #: (0.5.18+ resolve_max_num_reqs: min(asked // dp, tokens // 2))
    asked_rule: str = "kv_half"
    #: GiB a multimodal model's KV budget leaves for its embedding cache (0.5.18+ kv_cache_configurator.py
    #: mm_runtime_reservation_gb: SGLANG_VLM_CACHE_SIZE_MB, 100 MB)
    mm_reserve_gb: float = 0.0
    #: whether --enable-dp-attention splits the KV heads and the asked cap over the attention DP ranks;
    #: 0.3.6-0.4.0 (not 0.4.3.post2) keep the whole tp in every ModelRunner (profile_max_num_token's
    #: get_num_kv_heads(self.tp_size)) and give each scheduler the whole max_running_requests (tp_worker.py)
    dp_attention_splits: bool = True
    #: what a multimodal model's fraction, given or automatic, is multiplied by in ModelRunner
    #: (`if self.is_multimodal: self.mem_fraction_static *= F`, __init__ / model_specific_adjustment,
    #: read from every wheel 0.3.6-0.4.10: 0.95 up to 0.4.4.post3, 0.90 from 0.4.4.post4 to 0.4.8.post1, gone in 0.4.9)
    vlm_runner_factor: float = 1.0
    #: what server_args does to a multimodal model's automatic fraction: "none" (up to 0.4.8.post1),
    #: "0.90" (0.4.9-0.4.9.post2 __post_init__: `if model_config.is_multimodal: self.mem_fraction_static *= 0.90`),
    #: "vit" (0.4.9.post3+ adjust_mem_fraction_for_vlm: vlm_factor by the vision tower)
    vlm_auto: str = "vit"
    #: max_running_requests an EAGLE-family start gets when none is set (server_args.py __post_init__):
    #: 48 from 0.4.4.post4, 32 in 0.4.3.post3-0.4.4.post3, None up to 0.4.3.post2 (the 2048-4096 estimate)
    spec_running: int | None = 48


FAMILIES = (
    # 0.3.6's wheel: 0.4.0's, but tp 8 takes 0.82 (0.81 from 0.4.0) in server_args.py __post_init__ (no EAGLE yet)
    Family("0.3.6", "0.0", True, "upfront", False, False, False, False, "0.3.6", "target", "pool",
           dp_attention_splits=False, vlm_runner_factor=0.95, vlm_auto="none", spec_running=None),
    # 0.3.6.post1-0.4.0 (0.4.0's wheel): 0.4.6's sizing, but the automatic fraction by tp alone on every
    # card, dp-attention without its own attention group and a VLM's fraction × 0.95 (ModelRunner.__init__)
    Family("0.4.0", "0.3.6.post1", True, "upfront", False, False, False, False, "0.4.0", "target", "pool",
           dp_attention_splits=False, vlm_runner_factor=0.95, vlm_auto="none", spec_running=None),
    # 0.4.0.post1-0.4.3.post2 (0.4.3.post2's wheel; EAGLE read in 0.4.1.post7-0.4.3.post2): 0.4.0's, but
    # dp-attention splits the KV heads over get_attention_tp_size() and the asked cap over dp_size
    # (tp_worker.py), as 0.4.6; an EAGLE start gets no max_running_requests default and the target's pool is
    # sized alone: its draft gets its own pool afterwards, from what is left (init_memory_pool: draft_runner_cache_size)
    Family("0.4.3", "0.4.0.post1", True, "upfront", False, False, False, False, "0.4.0", "target", "pool",
           vlm_runner_factor=0.95, vlm_auto="none", spec_running=None),
    # 0.4.3.post3-0.4.4.post3 (read): 0.4.3's, but the EAGLE draft shares the target's pool, with its extra
    # tokens, and 32 requests by default
    Family("0.4.3.post3", "0.4.3.post3", True, "upfront", False, False, False, False, "0.4.0", "extra_tokens", "pool",
           vlm_runner_factor=0.95, vlm_auto="none", spec_running=32),
    # 0.4.4.post4-0.4.5.post2 (their wheels): 0.4.3.post3's, a VLM's fraction × 0.90 (ModelRunner.__init__) and
    # 48 EAGLE requests (0.4.6's sizing, but the automatic fraction by tp alone on every card)
    Family("0.4.4", "0.4.4.post4", True, "upfront", False, False, False, False, "0.4.0", "extra_tokens", "pool",
           vlm_runner_factor=0.90, vlm_auto="none"),
    # 0.4.5.post3-0.4.6.post5 (0.4.6's, 0.4.6.post1's wheels; × 0.90 in ModelRunner.model_specific_adjustment)
    Family("0.4", "0.4.5.post3", True, "upfront", False, False, False, False, "0.4", "extra_tokens", "pool",
           vlm_runner_factor=0.90, vlm_auto="none"),
    # 0.4.7 (its wheel): 0.5.2's pools, but its own automatic fraction (tp's table up to 80 GB, 0.88 above,
    # 0.79 over 180,000 MB, a >96 GB card's 48 GB rule; speculative × 0.95) and the VLM's × 0.90 in ModelRunner
    Family("0.4.7", "0.4.7", False, "radix_off", False, False, False, False, "0.4.7", "extra_tokens", "pool",
           vlm_runner_factor=0.90, vlm_auto="none"),
    # 0.4.7.post1-0.4.8.post1 (0.4.7.post1's, 0.4.8's, 0.4.8.post1's wheels): 0.5.2's reserve table, the × 0.90 in ModelRunner
    Family("0.4.8", "0.4.7.post1", False, "radix_off", False, False, False, False, "0.5.2", "extra_tokens", "pool",
           vlm_runner_factor=0.90, vlm_auto="none"),
    # 0.4.9-0.4.9.post2 (their wheels): the × 0.90 moved into server_args, for the automatic fraction only
    Family("0.4.9", "0.4.9", False, "radix_off", False, False, False, False, "0.5.2", "extra_tokens", "pool",
           vlm_auto="0.90"),
    Family("0.5.2", "0.4.9.post3", False, "radix_off", False, False, False, False, "0.5.2", "extra_tokens", "pool"),  # 0.5.2's
    # 0.5.3's wheel: 0.5.2's state cache, 0.5.6's automatic fraction
    Family("0.5.3", "0.5.3", False, "radix_off", False, False, False, False, "0.5.6", "extra_tokens", "pool"),
    Family("0.5.6", "0.5.4", False, "draft_divided", False, False, False, False, "0.5.6", "extra_tokens", "pool"),  # 0.5.6's
    Family("0.5.9", "0.5.7", False, "upfront", False, False, False, False, "0.5.6", "target", "pool"),  # 0.5.9's
    # 0.5.10's wheel: 0.5.12's, but speculative decoding turns the piecewise prefill graph off
    Family("0.5.10", "0.5.10", False, "upfront", False, False, False, False, "0.5.10", "target", "estimate"),
    Family("0.5.12", "0.5.11", False, "upfront", False, False, False, False, "0.5.11", "target", "estimate"),  # 0.5.11's, 0.5.12's
    # 0.5.13's wheel: 0.5.15's Mamba solve (handle_max_mamba_cache, the zero-slot RuntimeError), but
    # 0.5.12's server args ("auto" is no_buffer, the piecewise prefill graph and a draft's 4 GB in the
    # automatic fraction), the draft loaded after the target's pool (no Scheduler.init_memory_pools),
    # an EAGLE draft outside the target's cell and _resolve_max_num_reqs capping an asked cap by the estimate
    Family("0.5.13", "0.5.13", False, "joint", False, False, False, True, "0.5.11", "target", "estimate"),
    Family("0.5.15", "0.5.14", False, "joint", True, False, True, True, "0.5.15", "scaled"),  # 0.5.14's, 0.5.15's
    # a real 0.5.18 log (tests/fixtures/memory-backtest, OTel H100) allocates max_mamba_cache_size + 1
    # slots' state and solves for the slots with that padding slot taken out first; 0.5.16-0.5.17 unseen
    Family("0.5.18", "0.5.18", False, "joint_padded", True, True, True, True, "0.5.18", "scaled", "kv_half", 100 / 1024),
    # 0.5.19's wheel: 0.5.23's sizing, but 0.5.18's 20-35 GB card defaults (2048, 24 / 80) and a default
    # decode graph max_bs not capped by max_running_requests (arg_groups/memory_hook.py handle_gpu_memory_settings)
    Family("0.5.19", "0.5.19", False, "joint_padded", True, True, True, True, "0.5.19", "added", "kv_half", 100 / 1024),
    # 0.5.20's and 0.5.21's: 0.5.23's card defaults, the decode graph still uncapped
    Family("0.5.20", "0.5.20", False, "joint_padded", True, True, True, True, "0.5.20", "added", "kv_half", 100 / 1024),
    # 0.5.22's wheel: 0.5.23's, but an asked max_running_requests below the DP width is 0 requests a worker
    # (kv_cache_configurator.py resolve_max_num_reqs: 0.5.23 takes max(1, asked // attn_dp_size))
    Family("0.5.22", "0.5.22", False, "joint_padded", True, True, True, True, "0.5.23", "added", "kv_half", 100 / 1024),
    Family("0.5.23", "0.5.23", False, "joint_padded", True, True, True, True, "0.5.23", "added", "kv_half", 100 / 1024),
)
#: the families of 0.5.19+ (arg_groups/ resolution hooks, kv_cache_configurator.py, pool_configurator.py's 0.5.19 rules)
SINCE_0519 = frozenset({"0.5.19", "0.5.20", "0.5.22", "0.5.23"})
#: the families up to 0.5.10 (FAMILIES is in release order): a new older family joins without an edit here
UP_TO_0510 = frozenset(f.name for f in FAMILIES[:[f.name for f in FAMILIES].index("0.5.10") + 1])
NEWEST = FAMILIES[-1]


@lru_cache(maxsize=256)
def family(version: str | None) -> Family:
    """The sizing family of an SGLang release; the newest when the release is unknown (cached:
    preflight asks it several times a start, the oracle's comparison 30,000 times)."""
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


#: SGLang's words (0.5.10-0.5.13 server_args.py ServerArgs._handle_mamba_radix_cache, the missing
#: space after "no_buffer." its own); `arch` is config.json's architectures[0]
RADIX_SPEC_REFUSAL = ("ValueError: Speculative decoding for {arch} is not compatible with radix cache when using "
                      "--mamba-scheduler-strategy no_buffer.To use radix cache with speculative decoding, please use "
                      "--mamba-scheduler-strategy extra_buffer and set SGLANG_ENABLE_SPEC_V2=1.")
#: the hybrids server_args.py hands to _handle_mamba_radix_cache with support_mamba_cache=True (0.5.9-0.5.11
#: _handle_model_specific_adjustments; 0.5.12 adds InternS2Preview and MiniCPM-V 4.6, NemotronH through
#: arg_groups/nemotron_h_hook.py; 0.5.13 NemotronHPuzzle and BailingMoeV2_5, which 0.5.9-0.5.12 give no radix cache)
_MAMBA_RADIX_ARCHS = frozenset({
    "NemotronHForCausalLM", "Qwen3NextForCausalLM", "Qwen3_5MoeForConditionalGeneration",
    "Qwen3_5ForConditionalGeneration", "FalconH1ForCausalLM", "JetNemotronForCausalLM",
    "JetVLMForConditionalGeneration", "GraniteMoeHybridForCausalLM", "Lfm2ForCausalLM"})
_MAMBA_RADIX_ARCHS_0512 = _MAMBA_RADIX_ARCHS | {"InternS2PreviewForConditionalGeneration",
                                                "MiniCPMV4_6ForConditionalGeneration"}
#: what a release's server args do with a speculative start of a hybrid that keeps the radix cache
#: under no_buffer ("auto" there): (first, last, the architectures it applies to, "off": the radix
#: cache is turned off with a warning, or "refuse": RADIX_SPEC_REFUSAL). 0.5.8's NemotronH branch of
#: _handle_model_specific_adjustments, 0.5.9's _handle_mamba_radix_cache ("Disabling radix cache since
#: speculative decoding for … is not supported with radix cache yet"), 0.5.10-0.5.13's ValueError; 0.5.14
#: resolves "auto" to extra_buffer and the check is gone. Read from each wheel (docs/preflight.md).
SPEC_RADIX_RULES: tuple[tuple[str, str, frozenset[str], str], ...] = (
    ("0.5.8", "0.5.8", frozenset({"NemotronHForCausalLM"}), "off"),
    ("0.5.9", "0.5.9", _MAMBA_RADIX_ARCHS, "off"),
    ("0.5.10", "0.5.11", _MAMBA_RADIX_ARCHS, "refuse"),
    ("0.5.12", "0.5.12", _MAMBA_RADIX_ARCHS_0512, "refuse"),
    ("0.5.13", "0.5.13", _MAMBA_RADIX_ARCHS_0512 | {"NemotronHPuzzleForCausalLM", "BailingMoeV2_5ForCausalLM"},
     "refuse"),
)


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
    speculative_num_steps: int | None = None  # EAGLE's steps (3 when unset, as auto_choose_speculative_params)
    speculative_eagle_topk: int | None = None  # EAGLE's top-k (1 when unset)
    disable_cuda_graph: bool = False  # --disable-cuda-graph: no graph reserve in the automatic fraction
    mla: bool = False  # the MLA backend (DeepSeek): its prefill-graph reserve is 1.5 GB
    multimodal: bool = False  # a VLM: no prefill CUDA graph (0.5.11+), so no reserve for one
    architecture: str | None = None  # config.json's architectures[0]: which prefill graphs it gets
    vit: tuple[int, int] | None = None  # a VLM's vision_config (num_hidden_layers, hidden_size), 24 / 1024 unset
    swa_cell_bytes: int = 0  # a hybrid-SWA model's sliding-window layers' KV bytes per token (gpt-oss)
    swa_full_tokens_ratio: float = 0.8  # --swa-full-tokens-ratio: SWA tokens per full-attention token
    sliding_window: int | None = None  # the model's sliding_window_size as SGLang reads it (the SWA request cap's window)
    logged: bool = False  # a start SGLang ran (read from its log): its arguments passed, args_refusal does not apply
    rocm: bool = False  # an AMD GPU (is_hip): 0.5.10-0.5.13 turn a speculative hybrid's radix cache off instead of refusing
    #: GiB SGLang allocates after its 'Load weight end' reading and before the one the pools are sized on:
    #: the RoPE caches it grows for the context (svcdiag.sglang.rope), 0 where none grows
    rope_growth_gb: float = 0.0
    #: the card's compute capability, major × 10 + minor (100: B200/GB200/B300), None unknown: on SM100
    #: SGLang's default attention backend forces a page size (attention_page)
    gpu_sm: int | None = None
    #: --attention-backend, --prefill-attention-backend, --decode-attention-backend as given (None: unset)
    attention_backends: tuple[str | None, str | None, str | None] = (None, None, None)


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
    #: the cause SGLang would fail with: not_enough_memory, mamba_cache_too_small, max_running_zero, bad_arguments
    failure: str | None = None
    refusal: str | None = None  # SGLang's own words when it refuses the arguments before sizing anything (bad_arguments)

    def to_json(self) -> dict[str, Any]:
        return {"family": self.family, "mem_fraction_static": self.mem_fraction_static,
                "rest_gb": round(self.rest_gb, 3), "cell_bytes": self.cell_bytes, "kv_tokens": self.kv_tokens,
                "mamba_slots": self.mamba_slots, "slots_per_request": self.slots_per_request,
                "mamba_gb": round(self.mamba_gb, 3), "intermediate_gb": round(self.intermediate_gb, 3),
                "limits": dict(self.limits), "max_running_requests": self.max_running_requests,
                "binding": self.binding, "failure": self.failure, "refusal": self.refusal}


def _card_defaults(mb: float, tp_size: int, rule: str) -> tuple[int, int]:
    """(chunked_prefill_size, cuda graph max_bs) SGLang picks by the card's MiB (0.5.6-0.5.18
    server_args.py _handle_gpu_memory_settings; 0.5.23 arg_groups/memory_hook.py
    handle_gpu_memory_settings, which gives 20-35 GB cards 4096 and 48/160)."""
    small = tp_size < 4
    if mb < 20 * 1024:
        return 2048, 8
    if mb < 35 * 1024:
        return (4096, 48 if small else 160) if rule in ("0.5.20", "0.5.23") else (2048, 24 if small else 80)
    if mb < 60 * 1024:
        return 4096, 32 if small else 160
    if mb < 160 * 1024:
        return 8192, 256 if small else 512
    return 16384, 512


def prefill_graph_sizes(max_bs: int) -> list[int]:
    """The token counts a prefill (piecewise / breakable) CUDA graph captures (0.5.11
    _generate_piecewise_cuda_graph_tokens, 0.5.23 cuda_graph_hook.generate_prefill_cuda_graph_batch_sizes)."""
    sizes = [*range(4, 33, 4), *range(48, 257, 16), *range(288, 513, 32), *range(576, 1025, 64),
             *range(1280, 4097, 256), *range(4608, max_bs + 1, 512)]
    return [x for x in sizes if x <= max_bs]


#: 0.5.11 configs/model_config.py piecewise_cuda_graph_disabled_model_archs: no piecewise prefill graph
PIECEWISE_DISABLED_ARCHS = frozenset({"DeepseekV32ForCausalLM", "Qwen3NextForCausalLM", "GlmMoeDsaForCausalLM",
                                      "BailingMoeV2_5ForCausalLM", "LLaDAModelLM"})
#: 0.5.23 configs/model_config.py multimodal_breakable_cuda_graph_supported_model_archs: VLMs that keep it
MULTIMODAL_BREAKABLE_ARCHS = frozenset({
    "MiniMaxM3SparseForConditionalGeneration", "Cohere2VisionForConditionalGeneration",
    "Glm5NextForConditionalGeneration", "InternS2MobiusForConditionalGeneration", "PaddleOCRVLForConditionalGeneration",
    "Qwen3_5ForConditionalGeneration", "Qwen3_5MoeForConditionalGeneration", "Qwen4ExpForConditionalGeneration",
    "MuseGlimmerForConditionalGeneration", "MuseSparkForConditionalGeneration", "KimiK3ForConditionalGeneration",
    "KimiK25ForConditionalGeneration"})


def vlm_factor(vit: tuple[int, int]) -> float:
    """adjust_mem_fraction_for_vlm (0.5.2-0.5.18 server_args.py, 0.5.23 memory_hook.py): 0.95, less
    10 % for each doubling of the vision tower's layers × hidden² over ViT-L/14's 24 × 1024², in 0.8-1.05."""
    layers, hidden = vit
    ratio = layers * hidden**2 / (24 * 1024**2)
    return 0.95 * max(0.8, min(1.05, 1.0 - 0.1 * (ratio - 1.0)))


def auto_mem_fraction(gpu_total_gb: float, *, tp_size: int = 1, chunked_prefill_size: int | None = None,
                      cuda_graph_max_bs: int | None = None, fam: Family = NEWEST,
                      speculative_algorithm: str | None = None, attn_dp_size: int = 1, mla: bool = False,
                      multimodal: bool = False, disable_cuda_graph: bool = False,
                      max_total_tokens: int | None = None, max_running_requests: int | None = None,
                      architecture: str | None = None, vit: tuple[int, int] | None = None) -> float:
    """SGLang's mem_fraction_static when none is given, by the card's capacity, per release:
    (capacity − reserved) / capacity, reserved for activations (1.5 MB per chunked-prefill
    token), CUDA graphs and parallel slack; a VLM's then scaled by vlm_factor. `max_running_requests`
    is the one asked for (the speculative default 48 is set after this rule runs). Not modeled:
    DeepEP, PD disaggregation, pipeline parallelism, post-capture sizing (an env switch)."""
    fraction = _auto_fraction(gpu_total_gb, tp_size, chunked_prefill_size, cuda_graph_max_bs, fam,
                              (speculative_algorithm or "").upper() or None, attn_dp_size, mla, multimodal,
                              disable_cuda_graph, max_total_tokens, max_running_requests, architecture)
    if multimodal and fam.vlm_auto == "0.90":
        return fraction * 0.90
    if vit is not None and fam.vlm_auto == "vit":
        return fraction * vlm_factor(vit)
    return fraction


def _auto_fraction(gpu_total_gb: float, tp_size: int, chunked_prefill_size: int | None, cuda_graph_max_bs: int | None,
                   fam: Family, algo: str | None, attn_dp_size: int, mla: bool, multimodal: bool,
                   disable_cuda_graph: bool, max_total_tokens: int | None, max_running_requests: int | None,
                   architecture: str | None) -> float:
    mb = gpu_total_gb * 1024
    rule = fam.mfs_rule
    dp = attn_dp_size if attn_dp_size > 1 else 0
    if rule == "0.4.7":  # 0.4.7 server_args.py __post_init__: tp's table up to 80 GB, then by the card
        fraction = 0.88
        if mb <= 81920:
            fraction = 0.79 if tp_size >= 16 else 0.81 if tp_size >= 8 else 0.85 if tp_size >= 4 else \
                0.87 if tp_size >= 2 else 0.88
        if mb > 180 * 1000:
            return 0.79
        if mb > 96 * 1024:
            return min(fraction + 48 * 1024 * (1 - fraction) / mb, (mb - 1024 * (20 if algo else 18)) / mb)
        return fraction * 0.95 if algo is not None else fraction
    if rule in ("0.3.6", "0.4.0", "0.4"):  # 0.3.6 / 0.4.0 / 0.4.6 server_args.py __post_init__ (cards over 80 GB
        # from 0.4.5.post3; tp 8: 0.82 in 0.3.6, 0.81 from 0.4.0)
        if mb <= 81920 or rule in ("0.3.6", "0.4.0"):
            return 0.79 if tp_size >= 16 else (0.82 if rule == "0.3.6" else 0.81) if tp_size >= 8 else \
                0.85 if tp_size >= 4 else 0.87 if tp_size >= 2 else 0.88
        return (mb - 1024 * 13) / mb
    if rule == "0.5.2":  # 0.5.2 server_args.py __post_init__: a reserve by card, tp the parallel size
        reserved = 32 * 1024
        if mb < 35 * 1024:
            reserved = (2.8 + tp_size / 10) * 1024
        elif mb < 90 * 1024:
            reserved = (9.5 + tp_size / 2) * 1024
        elif mb < 160 * 1024:
            reserved = (12 + tp_size / 2) * 1024
        if algo is not None:
            reserved += (6 if algo == "STANDALONE" else 2) * 1024
        if dp:
            reserved += 4 * 1024
        return round((mb - reserved) / mb, 3)
    chunk, max_bs = _card_defaults(mb, tp_size, rule)
    chunk = chunked_prefill_size or chunk
    max_bs = cuda_graph_max_bs or max_bs
    if rule == "0.5.23" and cuda_graph_max_bs is None and max_running_requests is not None:
        max_bs = min(max_bs, max_running_requests)  # 0.5.22+ memory_hook: a default max_bs ≤ max_running_requests
    reserved = 512 + max(chunk, 2048) * 1.5 + tp_size / 8 * 1024
    graphs = 0.0 if disable_cuda_graph and rule in ("0.5.15", "0.5.18", "0.5.19", "0.5.20", "0.5.23") else max_bs * 2.0
    if dp:  # DP attention's padding, and more for a large graph batch
        graphs += max_bs * dp * 3 + (max_bs * dp * 1.5 if max_bs > 300 else 0)
    # 0.5.18+ the breakable prefill graph (cuda_graph_hook.py disable_breakable_cudagraph_if_incompatible:
    # off for a VLM not on the allowlist); 0.5.11 the piecewise one (_handle_piecewise_cuda_graph: off
    # with DP attention, for a VLM and for the listed architectures)
    prefill_graph = rule in ("0.5.18", "0.5.19", "0.5.20", "0.5.23") and not disable_cuda_graph and \
        (not multimodal or architecture in MULTIMODAL_BREAKABLE_ARCHS)
    if rule in ("0.5.10", "0.5.11"):  # 0.5.10's _handle_piecewise_cuda_graph also turns it off for speculative decoding
        prefill_graph = not dp and not multimodal and architecture not in PIECEWISE_DISABLED_ARCHS \
            and not (rule == "0.5.10" and algo is not None)
    if rule == "0.5.15":  # _disable_breakable_cudagraph_if_incompatible: off for MLA, DP attention, any VLM
        prefill_graph = not disable_cuda_graph and not mla and not dp and not multimodal
    if prefill_graph:
        if mla:
            graphs += 1.5 * 1024
        else:
            top = chunk if not mla else min(8192, chunk)
            if max_total_tokens is not None:
                top = min(top, max_total_tokens)
            graphs += len(prefill_graph_sizes(top)) * 8
    reserved += graphs
    if mb > 60 * 1024:
        reserved = max(reserved, 10 * 1024)
    if rule in ("0.5.6", "0.5.10", "0.5.11") and algo is not None and algo != "NGRAM":
        # the draft model and its graphs: 2 GB (0.5.6-0.5.9), 4 GB (0.5.10-0.5.13), STANDALONE 6 GB;
        # 0.5.14+ reserve nothing for the draft
        reserved += (6 if algo == "STANDALONE" else 2 if rule == "0.5.6" else 4) * 1024
    return round((mb - reserved) / mb, 3)


def mem_fraction(inp: SizingInputs, fam: Family) -> float:
    """The fraction the start runs with: the given one, else SGLang's automatic one for the card;
    up to 0.4.8.post1 a VLM's either one × 0.95 or 0.90 (ModelRunner, Family.vlm_runner_factor)."""
    factor = fam.vlm_runner_factor if inp.multimodal else 1.0
    if inp.mem_fraction_static is not None:
        return inp.mem_fraction_static * factor  # × 1.0 is exact: the fraction as given
    if not inp.gpu_total_gb:
        return AUTO_MEM_FRACTION * factor
    return factor * auto_mem_fraction(inp.gpu_total_gb, tp_size=inp.tp_size, chunked_prefill_size=inp.chunked_prefill_size,
                             cuda_graph_max_bs=inp.cuda_graph_max_bs, fam=fam,
                             speculative_algorithm=inp.speculative_algorithm, attn_dp_size=inp.dp_size, mla=inp.mla,
                             multimodal=inp.multimodal, disable_cuda_graph=inp.disable_cuda_graph,
                             max_total_tokens=inp.max_total_tokens, max_running_requests=inp.max_running_requests,
                             architecture=inp.architecture, vit=inp.vit)


def asked_running(inp: SizingInputs, fam: Family) -> int | None:
    """max_running_requests as SGLang's server args leave it: a speculative start with none set
    gets 48 (0.5.23 arg_groups/speculative_hook.py _handle_eagle_family, _handle_dflash,
    _handle_ngram; 0.4.5-0.5.12 server_args.py: EAGLE/EAGLE3/NEXTN/STANDALONE, NGRAM from 0.5.6,
    DFLASH from 0.5.11), 32 in 0.4.3.post3-0.4.4.post3 and none before (fam.spec_running)."""
    if inp.max_running_requests is None and inp.speculative_algorithm and fam.spec_running is not None:
        return fam.spec_running
    return inp.max_running_requests


def state_slots_per_request(inp: SizingInputs, fam: Family) -> int:
    """Mamba state slots one running request takes (_calculate_mamba_ratio): 1 without the
    radix cache, 3 by default, + 2 with extra_buffer under the overlap scheduler (+ 1 without
    it, or lazily); up to 0.5.9 a speculative extra_buffer start got + 1 only, others + 2."""
    if inp.slots_per_request:
        return inp.slots_per_request
    if inp.disable_radix_cache or fam.mamba == "radix_off":  # 0.5.2 turns the radix cache off itself
        return 1
    if fam.mamba == "draft_divided":  # 0.5.6: MAMBA_CACHE_SIZE_MAX_RUNNING_REQUESTS_RATIO, no extra buffer
        return 3
    strategy = inp.mamba_scheduler_strategy
    if strategy == "auto":
        # 0.5.18+ arg_groups/overrides.py _mamba_radix_cache_resolution: overlap or paging wants the extra buffer
        paging = inp.page_size > 1 and fam.mamba == "joint_padded"
        strategy = "extra_buffer" if fam.auto_extra_buffer and (not inp.disable_overlap_schedule or paging) \
            else "no_buffer"
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
    """KV bytes per token the target's pool is sized with. An EAGLE/MTP draft's layers share the
    pool from 0.5.14 (pool_configurator.py DefaultPoolConfigurator.__init__: 0.5.15 and 0.5.18
    int(cell × (1 + draft / layers)), 0.5.23 cell + int(cell × draft / layers)); before, the
    target's cell alone (its extra tokens, if any, are eagle_extra_tokens). A DFlash draft's
    own pool is paid from the same budget (0.5.23: + its bytes per token; before: the target's
    scaled by (layers + draft) / layers)."""
    cell = inp.kv_cell_bytes
    algo = (inp.speculative_algorithm or "").upper()
    layers, draft = inp.attention_layers, inp.draft_layers or 0
    if algo in EAGLE_FAMILY and draft > 0 and layers > 0:
        if fam.eagle_pool == "added":
            return cell + int(cell * draft / layers)
        if fam.eagle_pool == "scaled":
            return int(cell * (1 + draft / layers))
        return cell
    if algo in DFLASH_FAMILY:
        if inp.swa_cell_bytes:  # HybridSWAPoolConfigurator: 0.5.19+ adds the draft's resolved cell
            # (_dflash_draft_cell_size, none when unresolved); up to 0.5.18 the target's layers alone
            return cell + int(inp.draft_cell_bytes or 0) if fam.name in SINCE_0519 else cell
        if fam.dflash_draft_cell and inp.draft_cell_bytes:
            return cell + int(inp.draft_cell_bytes)
        if draft > 0 and layers > 0:
            return (cell * (layers + draft) + layers - 1) // layers
    return cell


def eagle_extra_tokens(inp: SizingInputs, fam: Family, max_num_reqs: int) -> int:
    """Tokens 0.4.3.post3-0.5.6 add to the pool the target and its EAGLE draft share (model_runner.py
    init_memory_pool: draft_runner_cache_size = tokens + max_num_reqs × (steps × topk + D) + 100;
    0.4.6 and 0.5.2 for any speculative algorithm, 0.5.6 EAGLE and STANDALONE). Up to 0.4.3.post2 the
    draft's pool is its own, tokens + max_num_reqs × steps + 100, allocated after the target's."""
    algo = (inp.speculative_algorithm or "").upper()
    if fam.eagle_pool != "extra_tokens" or not algo or algo == "NGRAM" or algo in DFLASH_FAMILY:
        return 0
    steps, topk = inp.speculative_num_steps or 3, inp.speculative_eagle_topk or 1
    return max_num_reqs * (steps * topk + draft_tokens(inp)) + 100


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


def swa_full_tokens(kv_bytes: float, full_cell: int, swa_cell: int, ratio: float, fam: Family, page: int = 1,
                    max_total_tokens: int | None = None) -> int:
    """The full-attention pool of a hybrid sliding-window model (gpt-oss), SWA tokens = ratio ×
    full: from 0.5.11 int(bytes // (full + ratio × swa)) (pool_configurator.py
    HybridSWAPoolConfigurator.calculate_pool_sizes); up to 0.5.10 the pool is first profiled with
    every layer's cell, capped by --max-total-tokens and page-aligned, then split (0.5.10
    model_runner_kv_cache_mixin.py _resolve_token_capacity, _resolve_hybrid_swa_tokens; 0.5.9
    init_memory_pool, set_num_tokens_hybrid_swa; 0.5.2 / 0.5.6 model_runner.py
    set_num_token_hybrid, the same with equal full and SWA heads)."""
    if fam.name in UP_TO_0510:
        profiled = int(kv_bytes // (full_cell + swa_cell))
        if max_total_tokens is not None:
            profiled = min(profiled, max_total_tokens)
        profiled = profiled // page * page
        return int(profiled * (full_cell + swa_cell) / (full_cell + ratio * swa_cell))
    return int(kv_bytes // (full_cell + ratio * swa_cell))


#: the last release that gives gpt-oss no sliding-window pool: 0.5.2-0.5.6 server_args.py
#: ServerArgs._handle_model_specific_adjustments sets disable_hybrid_swa_memory for it; 0.5.7's
#: configs/model_config.py is_hybrid_model gives one only to MiMoV2Flash/MiMoV2MTP (and Llama 4 with
#: --hybrid-kvcache-ratio); 0.5.8's is_hybrid_swa_model lists GptOssForCausalLM. Gemma 2/3 get none in
#: any release (disable_hybrid_swa_memory up to 0.5.6, not on the list after): svcdiag's SWA_ARCHS
LAST_WITHOUT_SWA_POOL = "0.5.7"
_SWA_POOL_0507 = frozenset({"MiMoV2FlashForCausalLM", "MiMoV2MTP"})


def swa_pool_off(inp: SizingInputs) -> bool:
    """Whether the release sizes a hybrid-SWA model's sliding layers in its one full pool."""
    if not inp.swa_cell_bytes or not inp.version:
        return False
    from svcdiag.sglang.flag_tables import version_key

    try:
        key = version_key(inp.version)
    except ValueError:
        return False
    return key <= version_key(LAST_WITHOUT_SWA_POOL) and not (
        key == version_key("0.5.7") and inp.architecture in _SWA_POOL_0507)


#: the families that size a radix-less SWA pool from the requests (swa_request_cap)
SWA_CAP_FAMILIES = frozenset({"0.5.15", "0.5.18"}) | SINCE_0519
SWA_EVICTION_INTERVAL = 128  # SGLANG_SWA_EVICTION_INTERVAL's default


def swa_request_cap(inp: SizingInputs, fam: Family) -> int | None:
    """The SWA pool of a radix-less hybrid-SWA start with max_running_requests set, from 0.5.14
    (pool_configurator.py: 0.5.14-0.5.18 SWAChunkCapPoolConfigurator, 0.5.19+
    SWARequestCapPoolConfigurator / compute_swa_request_cap): the worst case of its requests'
    windows, page-aligned; the full pool gets the rest. None when the ratio split applies
    instead (and for a speculative start, whose decode allocation is not modeled)."""
    asked = inp.max_running_requests
    if fam.name not in SWA_CAP_FAMILIES or asked is None or not inp.disable_radix_cache or not inp.sliding_window \
            or inp.speculative_algorithm:
        return None
    page = max(1, inp.page_size)
    chunk = inp.chunked_prefill_size
    if chunk is None:
        chunk = _card_defaults(inp.gpu_total_gb * 1024, inp.tp_size, fam.mfs_rule)[0] if inp.gpu_total_gb else 4096
    if chunk <= 0:
        return None
    per_request = inp.sliding_window + SWA_EVICTION_INTERVAL + page + page
    reqs = asked // max(1, inp.dp_size)  # 0.5.19+ at least one
    cap = per_request * (max(1, reqs) if fam.name in SINCE_0519 else reqs) + (1 if inp.disable_overlap_schedule else 2) * chunk + page
    return -(-cap // page) * page


def _mamba_legacy(inp: SizingInputs, fam: Family, rest_gb: float) -> tuple[int, float, float]:
    """0.5.2 and 0.5.6's state cache: (slots, state GiB, the speculative share of it GiB)."""
    per_req = int(inp.mamba_per_req_bytes or 0)
    dp = max(1, inp.dp_size)
    asked = inp.max_running_requests
    if fam.mamba == "radix_off":
        # 0.5.2 model_runner.py __init__: a hybrid GDN model turns the radix cache off and keeps
        # max_mamba_cache_size, else max_running_requests, else 512 slots (per DP worker)
        slots = (inp.max_mamba_cache_size or asked or 512) // dp
        return slots, slots * per_req / GB, 0.0
    # 0.5.6 model_runner.py handle_max_mamba_cache: with the radix cache the ratio's budget is
    # split into slots of (1 + D) states each, whatever --max-mamba-cache-size says
    d = draft_tokens(inp) if inp.speculative_algorithm else 0
    if inp.disable_radix_cache or not per_req:
        slots = inp.max_mamba_cache_size or asked or 512
    else:
        budget = rest_gb * inp.mamba_full_memory_ratio / (1 + inp.mamba_full_memory_ratio) * GB
        slots = int(budget // per_req // (1 + d))
    slots //= dp
    return slots, slots * per_req / GB, slots * per_req * d / GB


def spec_radix_rule(inp: SizingInputs) -> str | None:
    """SPEC_RADIX_RULES' "off" or "refuse" for this start, else None (the release has no such
    rule, the start is not a speculative hybrid keeping the radix cache under no_buffer, or its
    architecture is not one the rule names)."""
    if not inp.version or inp.mamba_per_req_bytes is None or not inp.speculative_algorithm \
            or inp.disable_radix_cache or inp.mamba_scheduler_strategy not in ("auto", "no_buffer"):
        return None
    from svcdiag.sglang.flag_tables import version_key

    try:
        key = version_key(inp.version)
    except ValueError:
        return None
    for first, last, archs, what in SPEC_RADIX_RULES:
        if version_key(first) <= key <= version_key(last) and inp.architecture in archs:
            return what
    return None


def args_refusal(inp: SizingInputs) -> str | None:
    """SGLang's ValueError when its server args refuse the start before anything is sized, else
    None: 0.5.10-0.5.13 ServerArgs._handle_mamba_radix_cache (SPEC_RADIX_RULES), except on ROCm
    (is_hip(): the radix cache goes off instead) and for a start SGLang ran (`logged`)."""
    if inp.logged or inp.rocm or spec_radix_rule(inp) != "refuse":
        return None
    return RADIX_SPEC_REFUSAL.format(arch=inp.architecture)


#: GPU product names (NVML / nvidia-smi) of compute capability 10.x, SGLang's is_sm100_supported
#: (get_platform().is_sm100): Blackwell datacenter cards; SM120 (RTX 50xx, RTX PRO Blackwell) is not
SM100_NAMES = ("B100", "B200", "B300")


def gpu_sm(name: str | None) -> int | None:
    """100 for a GPU whose name says SM100 (NVIDIA B200, GB200, B300...); None where the name does
    not tell (the other cards' defaults force no page size, so only SM100 matters)."""
    upper = (name or "").upper()
    return 100 if any(n in upper for n in SM100_NAMES) and "RTX" not in upper else None


#: the MLA models whose override picks trtllm_mla on SM100 (0.5.6-0.5.18 server_args.py
#: _handle_model_specific_adjustments "DeepSeek V3/R1/V3.1", 0.5.19+ model_overrides/deepseek_v2.py
#: _deepseek_family_overrides); DeepSeek-V2 (DeepseekV2ForCausalLM) is not on the list: flashinfer
TRTLLM_MLA_ARCHS = frozenset({"DeepseekV3ForCausalLM", "KimiK25ForConditionalGeneration", "MistralLarge3ForCausalLM"})


#: the hybrid GDN models whose own SM100 choice sets the attention backend (and, 0.5.14+, the page size):
#: 0.5.6-0.5.8 Qwen3-Next's branch of server_args.py _handle_model_specific_adjustments (triton); 0.5.9-0.5.13
#: the Qwen3-Next / Qwen3.5 branch's sm100_default_attention_backend, handed to _handle_mamba_radix_cache;
#: 0.5.14 the branch itself, 0.5.15-0.5.18 arg_groups/overrides.py and 0.5.19+
#: arg_groups/model_overrides/qwen3_5.py _qwen3_5_hybrid_overrides (registered for these five)
SM100_HYBRID_ARCHS = frozenset({"Qwen3NextForCausalLM", "Qwen3_5MoeForConditionalGeneration",
                                "Qwen3_5ForConditionalGeneration", "InternS2PreviewForConditionalGeneration",
                                "InternS2MobiusForConditionalGeneration"})

#: the text-only entries of the same hybrid stack (0.5.19+ arg_groups/overrides.py lists them with the Mamba
#: radix-cache archs; models/qwen3_5_text.py): no SM100 override, so SGLang's default backend for an MHA model
TEXT_HYBRID_ARCHS = frozenset({"Qwen3_5ForCausalLM", "Qwen3_5MoeForCausalLM"})


def sm100_page_modeled(inp: SizingInputs) -> bool:
    """Whether attention_page knows this model's SM100 choice: every model but a hybrid it does not name
    (and Qwen3.5's text-only entries before 0.5.19, which no Mamba radix-cache list names yet)."""
    from svcdiag.sglang.flag_tables import version_key

    if inp.mamba_per_req_bytes is None or inp.architecture in SM100_HYBRID_ARCHS:
        return True
    try:
        key = version_key(inp.version) if inp.version else version_key(NEWEST.first)
    except ValueError:
        key = version_key(NEWEST.first)
    return inp.architecture in TEXT_HYBRID_ARCHS and key >= version_key("0.5.19")


def _sm100_default(inp: SizingInputs, key: tuple[int, ...], page: int) -> str | None:
    """The backend SGLang's default picks for an MHA model on SM100 (get_default_attn_backend /
    _get_default_attn_backend): trtllm_mha from 0.5.7 without speculative decoding, or with an EAGLE
    top-k of 1 at page size 1 (0.5.23: DFlash too, _forces_eagle_topk_one); else flashinfer (None here)."""
    from svcdiag.sglang.flag_tables import version_key

    algo = (inp.speculative_algorithm or "").upper() or None
    topk = inp.speculative_eagle_topk
    topk_one = topk is None or (topk == 1 and page == 1)  # is_no_spec_infer_or_topk_one
    if key >= version_key("0.5.7") and topk_one and (
            algo is None or topk is not None or (algo in DFLASH_FAMILY and key >= version_key("0.5.23"))):
        return "trtllm_mha"
    return None


def _sm100_hybrid(inp: SizingInputs, key: tuple[int, ...], page: int) -> tuple[str | None, int]:
    """(backend, page) a hybrid GDN model's own SM100 choice gives, the radix cache and speculative
    decoding deciding: triton (0.5.6-0.5.9: always; the page as given), else trtllm_mha where the
    default would be trtllm_mha, unless the radix cache runs without extra_buffer and without
    speculative decoding (0.5.10+). From 0.5.14 it also sets the page: 64 under trtllm_mha, else 1.
    The override runs before the Mamba radix-cache resolution, so `--mamba-scheduler-strategy auto`
    is not extra_buffer here (0.5.10-0.5.13 resolve auto to no_buffer before it, 0.5.14+ after it)."""
    from svcdiag.sglang.flag_tables import version_key

    if key < version_key("0.5.10"):
        return "triton", page
    extra = inp.mamba_scheduler_strategy in ("extra_buffer", "extra_buffer_lazy") and (
        key < version_key("0.5.14") or not inp.disable_radix_cache)  # 0.5.14+ mamba_extra_buffer_of: radix on too
    radix_plain = not extra and not inp.disable_radix_cache and not inp.speculative_algorithm
    backend = "trtllm_mha" if _sm100_default(inp, key, page) == "trtllm_mha" and not radix_plain else "triton"
    if key >= version_key("0.5.14"):
        page = 64 if backend == "trtllm_mha" else 1
    return backend, page


def no_buffer_radix(inp: SizingInputs) -> bool:
    """Whether 0.5.9-0.5.13's ServerArgs._handle_mamba_radix_cache keeps this hybrid's radix cache
    under no_buffer: an architecture it is called for (SPEC_RADIX_RULES' list of the release), the
    strategy unset ("auto" is no_buffer there) or no_buffer, the radix cache on."""
    if not inp.version or inp.mamba_per_req_bytes is None or inp.disable_radix_cache \
            or inp.mamba_scheduler_strategy not in ("auto", "no_buffer"):
        return False
    from svcdiag.sglang.flag_tables import version_key

    try:
        key = version_key(inp.version)
    except ValueError:
        return False
    return any(version_key(first) <= key <= version_key(last) and inp.architecture in archs
               for first, last, archs, _ in SPEC_RADIX_RULES if version_key(first) >= version_key("0.5.9"))


def trtllm_radix_off(inp: SizingInputs) -> bool:
    """An asked `--attention-backend trtllm_mha` turns a no_buffer radix cache off ("Disabling radix
    cache since trtllm_mha does not support page_size = 1, which is required by MambaRadixCache"):
    0.5.9-0.5.13 _handle_mamba_radix_cache without speculative decoding (with it, SPEC_RADIX_RULES);
    0.5.7-0.5.8 Qwen3-Next's SM100 branch of _handle_model_specific_adjustments, whatever the strategy.
    From 0.5.14 the check is gone."""
    if inp.attention_backends[0] != "trtllm_mha" or inp.disable_radix_cache or inp.mamba_per_req_bytes is None \
            or not inp.version:
        return False
    from svcdiag.sglang.flag_tables import version_key

    try:
        key = version_key(inp.version)
    except ValueError:
        return False
    if version_key("0.5.7") <= key <= version_key("0.5.8"):
        return inp.architecture == "Qwen3NextForCausalLM" and inp.gpu_sm is not None and 100 <= inp.gpu_sm < 110
    return not inp.speculative_algorithm and no_buffer_radix(inp)


def attention_page(inp: SizingInputs) -> tuple[int, bool]:
    """(the page size SGLang sizes with, whether it turns the hybrid sliding-window pool off) once its
    attention backend is chosen: the default backend on an SM100 card (gpt-oss's override: trtllm_mha
    from 0.5.3; another MHA model's default: trtllm_mha from 0.5.7, without speculative decoding or
    with an EAGLE top-k of 1 at page size 1 (0.5.23: DFlash too); DeepSeek V3's override: trtllm_mla
    from 0.5.6), then the backend's page-size snap (server_args.py
    _handle_attention_backend_compatibility; 0.5.15+ arg_groups/overrides.py
    _mla_backend_page_constraints): trtllm_mha 16/32/64 (and 128 from 0.5.18) else 64, trtllm_mla 32/64
    else 64, FlashMLA 64, cutlass_mla 128; 0.5.8-0.5.9 _handle_model_specific_adjustments turn
    gpt-oss's sliding-window pool off under trtllm_mha. A hybrid GDN model (SM100_HYBRID_ARCHS) makes its
    own choice with its radix cache (_sm100_hybrid): from 0.5.14 page 64 under trtllm_mha, else page 1,
    whatever page was asked (0.5.6's Qwen3-Next branch sets triton even over an asked backend);
    Qwen3.5's text-only entries (TEXT_HYBRID_ARCHS) get the default from 0.5.19; other hybrids keep
    their page (sm100_page_modeled). On any card 0.5.12-0.5.13 _handle_mamba_radix_cache sets page 1
    for a hybrid keeping a no_buffer radix cache (no_buffer_radix), before the backend's snap.
    Checked against each release's own code by the oracle (tests/test_sizing_oracle.py: gpt-oss,
    DeepSeek-V3, Qwen3-Next, Qwen3.8, Qwen3.6 as the text-only class on a B200, asked backends among them)."""
    from svcdiag.sglang.flag_tables import version_key

    backend, prefill, decode = inp.attention_backends
    page = max(1, inp.page_size)
    try:
        key = version_key(inp.version) if inp.version else version_key(NEWEST.first)
    except ValueError:
        key = version_key(NEWEST.first)
    on_sm100 = inp.gpu_sm is not None and 100 <= inp.gpu_sm < 110
    if on_sm100 and inp.architecture == "Qwen3NextForCausalLM" and family(inp.version).name == "0.5.6":
        # 0.5.6's branch sets it whatever was asked (0.5.7+: only when none was; 0.5.3's has no SM100 statement,
        # 0.5.4-0.5.5, unread, are taken as their family's 0.5.6)
        backend = "triton"
    sm100 = backend is None and prefill is None and decode is None and on_sm100
    if sm100 and inp.mamba_per_req_bytes is not None:
        if inp.architecture in SM100_HYBRID_ARCHS and key >= version_key("0.5.6"):
            backend, page = _sm100_hybrid(inp, key, page)
        elif inp.architecture in TEXT_HYBRID_ARCHS and key >= version_key("0.5.19"):
            backend = _sm100_default(inp, key, page)
    elif sm100:
        if inp.architecture == "GptOssForCausalLM":
            backend = "trtllm_mha" if key >= version_key("0.5.3") else None
        elif inp.mla:
            backend = "trtllm_mla" if inp.architecture in TRTLLM_MLA_ARCHS and key >= version_key("0.5.6") else None
        else:
            backend = _sm100_default(inp, key, page)
    if prefill is not None and prefill == decode:
        backend = prefill
    if version_key("0.5.12") <= key <= version_key("0.5.13") and no_buffer_radix(inp):
        page = 1  # _handle_mamba_radix_cache: "with radix cache requires page_size=1 ... (no_buffer)"
    decoding = {backend, decode}
    if "flashmla" in decoding:
        page = 64
    if "cutlass_mla" in decoding:
        page = 128
    if "trtllm_mla" in decoding and page not in (32, 64):
        page = 64
    trtllm_mha = "trtllm_mha" in decoding | {prefill}
    if trtllm_mha and page not in ((16, 32, 64, 128) if key >= version_key("0.5.18") else (16, 32, 64)):
        page = 64
    swa_off = (trtllm_mha and inp.architecture == "GptOssForCausalLM"
               and version_key("0.5.8") <= key <= version_key("0.5.9"))
    return page, swa_off


#: the context above which the aiter backend (ROCm) keeps 15 % of the fraction for its workspace
AITER_CONTEXT = 8192


def aiter_fraction(inp: SizingInputs, mfs: float) -> float:
    """ROCm's attention backend takes 15 % of the fraction back for a context over 8,192
    (server_args.py _handle_attention_backend_compatibility, 0.5.23 arg_groups/attention_hook.py
    handle_attention_backend_compatibility: `mem_fraction_static *= 0.85` under aiter): aiter is asked
    for, or the default from 0.5.4 (0.5.6's wheel) for an MHA model (an MLA model's depends on its
    head count, not modeled) and gpt-oss's override from 0.5.10 (0.5.6-0.5.9: triton). Not for a start
    read from its log: the logged fraction is already scaled. SGLANG_AITER_HONOR_EXPLICIT_MEM_FRACTION
    (0.5.23, an asked fraction kept) is not read."""
    from svcdiag.sglang.flag_tables import version_key

    if not inp.rocm or inp.logged or inp.context_len <= AITER_CONTEXT:
        return mfs
    backend, prefill, decode = inp.attention_backends
    if prefill is not None and prefill == decode:
        backend = prefill
    if backend is None and prefill is None and decode is None and not inp.mla and inp.version:
        try:
            key = version_key(inp.version)
        except ValueError:
            return mfs
        first = "0.5.10" if inp.architecture == "GptOssForCausalLM" else "0.5.4"
        backend = "aiter" if key >= version_key(first) else None
    elif backend is None and prefill is None and decode is None and not inp.mla:
        backend = "aiter"  # the newest release's default
    return mfs * 0.85 if backend == "aiter" else mfs


def predict(inp: SizingInputs) -> Prediction:
    """SGLang's own arithmetic for the release `inp.version` runs (the newest when unknown):
    KV tokens, Mamba state slots and max_running_requests, each bound named; a start its
    server args refuse (args_refusal) is a bad_arguments failure with SGLang's words, nothing sized."""
    fam = family(inp.version)
    page, swa_off = attention_page(inp)
    if page != inp.page_size:
        inp = replace(inp, page_size=page)
    if swa_pool_off(inp) or (swa_off and inp.swa_cell_bytes):
        inp = replace(inp, kv_cell_bytes=inp.kv_cell_bytes + inp.swa_cell_bytes, swa_cell_bytes=0, sliding_window=None)
    rule = spec_radix_rule(inp)
    if rule == "off" or (rule == "refuse" and inp.rocm) or trtllm_radix_off(inp):  # 0.5.8-0.5.9, is_hip() 0.5.10-0.5.13
        inp = replace(inp, disable_radix_cache=True)
    mfs = aiter_fraction(inp, mem_fraction(inp, fam))
    refused = args_refusal(inp)
    if refused is not None:
        return Prediction(fam.name, mfs, 0.0, inp.kv_cell_bytes, 0, None, None, 0.0, 0.0, {"arguments": 0}, 0,
                          "arguments", Cause.BAD_ARGUMENTS, refused)
    inp = replace(inp, max_running_requests=asked_running(inp, fam))
    after = inp.free_after_load_gb
    if after is None:
        after = inp.free_before_gb - inp.weights_gb - (inp.draft_weights_gb if fam.draft_weights_counted else 0.0)
    after -= inp.rope_growth_gb  # the RoPE caches grown between the two readings (svcdiag.sglang.rope)
    rest = after - inp.free_before_gb * (1 - mfs) - (fam.mm_reserve_gb if inp.multimodal else 0.0)
    hybrid = inp.mamba_per_req_bytes is not None
    ratio = state_slots_per_request(inp, fam) if hybrid else None
    slots: int | None = None
    mamba_gb = intermediate = 0.0
    failure: str | None = None
    # up to 0.5.6 init_memory_pool adds the EAGLE headroom to profile_max_num_token's figure whatever
    # its sign and raises only when the sum is ≤ 0: a budget a little below zero still starts (0.4.7's
    # table: 320 tokens from a −116-token profile)
    rescued = rest <= 0 and not hybrid and not inp.swa_cell_bytes and fam.eagle_pool == "extra_tokens" \
        and eagle_extra_tokens(inp, fam, 1) > 0
    if rest <= 0 and not rescued:
        failure = Cause.NOT_ENOUGH_MEMORY
    elif hybrid:
        assert ratio is not None
        if fam.mamba in ("radix_off", "draft_divided"):
            slots, mamba_gb, intermediate = _mamba_legacy(inp, fam, rest)
        else:
            slots, mamba_gb, intermediate = _mamba(inp, fam, rest, ratio)
        if slots <= 0 and fam.hybrid_zero_raises:
            failure = Cause.MAMBA_CACHE_TOO_SMALL
    kv_rest = rest - mamba_gb - intermediate
    cell = cell_with_draft(inp, fam)
    tokens = int(kv_rest * GB // cell) if (kv_rest > 0 or rescued) and cell > 0 else 0
    # up to 0.5.9 init_memory_pool estimates max_num_reqs from profile_max_num_token's figure (every
    # layer's cell), before the EAGLE headroom, --max-total-tokens, the page alignment and the SWA split
    profiled = int(kv_rest * GB // (cell + inp.swa_cell_bytes)) if tokens > 0 or rescued else 0
    if inp.swa_cell_bytes and tokens > 0:
        capped = swa_request_cap(inp, fam)
        if capped is not None:
            tokens = max(0, int((kv_rest * GB - capped * inp.swa_cell_bytes) // cell))
        else:
            tokens = swa_full_tokens(kv_rest * GB, cell, inp.swa_cell_bytes, inp.swa_full_tokens_ratio, fam,
                                     max(1, inp.page_size), inp.max_total_tokens)
    extra = 0
    if (tokens > 0 or rescued) and fam.eagle_pool == "extra_tokens":
        reqs = inp.max_running_requests
        if reqs is None:
            reqs = min(max(int(profiled / max(1, inp.context_len) * 512), 2048), 4096)
        if slots is not None and ratio:
            reqs = min(reqs, slots // ratio)
        extra = eagle_extra_tokens(inp, fam, reqs)
    tokens = max(0, tokens + extra)  # ≤ 0: SGLang raises (not_enough_memory below)
    if inp.max_total_tokens is not None:
        tokens = min(tokens, inp.max_total_tokens)
    page = max(1, inp.page_size)
    tokens = tokens // page * page
    if tokens <= 0 and failure is None:
        failure = Cause.NOT_ENOUGH_MEMORY
    limits = _limits(inp, fam, tokens, slots, ratio, profiled if fam.asked_rule == "pool" else None)
    binding = min(limits, key=lambda k: limits[k])
    cap = max(0, limits[binding])
    if failure is None and cap <= 0:
        failure = Cause.MAMBA_CACHE_TOO_SMALL if binding == "mamba" and fam.hybrid_zero_raises else Cause.MAX_RUNNING_ZERO
    return Prediction(fam.name, mfs, rest, cell, tokens, slots, ratio, mamba_gb, intermediate, limits, cap, binding,
                      failure)


def max_running(inp: SizingInputs, tokens: int, slots: int | None = None) -> tuple[int, str, dict[str, int]]:
    """resolve_max_num_reqs alone, for a pool already sized (`tokens`, Mamba `slots`): the cap,
    the binding limit and every limit (the back-test checks it on the logged pools)."""
    fam = family(inp.version)
    inp = replace(inp, max_running_requests=asked_running(inp, fam))
    ratio = state_slots_per_request(inp, fam) if slots is not None else None
    limits = _limits(inp, fam, tokens, slots, ratio)
    binding = min(limits, key=lambda k: limits[k])
    return max(0, limits[binding]), binding, limits


def _limits(inp: SizingInputs, fam: Family, tokens: int, slots: int | None, ratio: int | None,
            estimate_from: int | None = None) -> dict[str, int]:
    """Every bound on max_running_requests (per DP worker), by name; the 2048-4096 estimate from
    `estimate_from` tokens where the release takes it before the pool's final size (≤ 0.5.9)."""
    dp = max(1, inp.dp_size)
    ctx = max(1, inp.context_len)
    estimated = min(max(int((tokens if estimate_from is None else estimate_from) / ctx * 512), 2048), 4096)
    limits: dict[str, int] = {}
    if inp.max_running_requests is None or fam.asked_rule == "kv_half":
        limits["kv_half"] = tokens // 2
    if inp.max_running_requests is not None:
        asked = inp.max_running_requests // dp
        limits["requested"] = max(1, asked) if fam is NEWEST else asked
        if fam.asked_rule == "estimate":
            limits["auto"] = estimated
    elif not fam.req_pool_plus_one:
        limits["auto"] = estimated
    if fam.req_pool_plus_one:  # ReqToTokenPool(size=max_num_reqs + 1): the asked cap, whole, else the estimate
        limits["req_pool"] = (estimated if inp.max_running_requests is None else inp.max_running_requests) + 1
    if slots is not None and ratio:
        limits["mamba"] = slots // ratio
    return limits
