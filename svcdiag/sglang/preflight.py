"""Memory preflight: the KV pool SGLang will allocate, predicted before a 2-minute start.

Pure arithmetic (no I/O). The figures are SGLang's own, for the release the config names
(`sglang_version`; the newest when unset), computed by svcdiag.sglang.memory.predict; this
module turns a config and the model's shape into its inputs, and its prediction into a
verdict, reasons and fixes. A config whose own settings already serve nobody (the seed's
`max_mamba_cache_size = 2` at 3 or more slots per request) says so without config.json.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from svcdiag.config.service import ServiceConfig
from svcdiag.sglang import memory, rope
from svcdiag.sglang.causes import Cause
from svcdiag.sglang.memory import ACTIVATION_HEADROOM_GB, GB, MAX_MEM_FRACTION, SizingInputs
from svcdiag.sglang.modelinfo import DTYPE_BYTES, ModelShape

if TYPE_CHECKING:  # an annotation only: `preflight` reads no log's figures (their dataclass is ~90 fields)
    from svcdiag.sglang.figures import Figures

EAGLE_LIKE = memory.EAGLE_FAMILY


@dataclass(frozen=True, slots=True)
class SizingFlags:
    """The SGLang flags of a config's extra_args that change its sizing."""

    disable_radix_cache: bool = False
    mamba_scheduler_strategy: str = "auto"
    disable_overlap_schedule: bool = False
    mamba_full_memory_ratio: float = memory.MAMBA_FULL_MEMORY_RATIO
    mamba_ssm_dtype: str | None = None
    max_total_tokens: int | None = None
    page_size: int = 1
    enable_dp_attention: bool = False
    dflash_block_size: int | None = None
    attn_dp_size: int | None = None  # 0.5.23's --attn-dp-size
    disable_cuda_graph: bool = False
    swa_full_tokens_ratio: float = 0.8
    disable_hybrid_swa_memory: bool = False
    enable_multimodal: bool = False  # a VLM on ModelConfig's mm_disabled_models served as one
    #: --attention-backend, --prefill-attention-backend, --decode-attention-backend (memory.attention_page)
    attention_backends: tuple[str | None, str | None, str | None] = (None, None, None)


def sizing_flags(extra_args: tuple[str, ...]) -> SizingFlags:
    """Read the sizing flags from extra_args (`--flag value` or `--flag=value`); others are ignored."""
    args: dict[str, str | None] = {}
    items = list(extra_args)
    i = 0
    while i < len(items):
        a = items[i]
        if a.startswith("--"):
            if "=" in a:
                k, v = a[2:].split("=", 1)
                args[k] = v
            elif i + 1 < len(items) and not items[i + 1].startswith("--"):
                args[a[2:]] = items[i + 1]
                i += 1
            else:
                args[a[2:]] = None
        i += 1

    def num(key: str, kind: type) -> Any:
        try:
            return kind(args[key]) if args.get(key) is not None else None
        except ValueError:
            return None

    strategy = args.get("mamba-scheduler-strategy") or args.get("mamba-radix-cache-strategy") or "auto"
    return SizingFlags(
        disable_radix_cache="disable-radix-cache" in args,
        mamba_scheduler_strategy=strategy,
        disable_overlap_schedule="disable-overlap-schedule" in args,
        mamba_full_memory_ratio=num("mamba-full-memory-ratio", float) or memory.MAMBA_FULL_MEMORY_RATIO,
        mamba_ssm_dtype=args.get("mamba-ssm-dtype"),
        max_total_tokens=num("max-total-tokens", int),
        page_size=num("page-size", int) or 1,
        enable_dp_attention="enable-dp-attention" in args,
        dflash_block_size=num("speculative-dflash-block-size", int),
        attn_dp_size=num("attn-dp-size", int),
        disable_cuda_graph="disable-cuda-graph" in args,
        swa_full_tokens_ratio=num("swa-full-tokens-ratio", float) or 0.8,
        disable_hybrid_swa_memory="disable-hybrid-swa-memory" in args,
        enable_multimodal="enable-multimodal" in args,
        attention_backends=(args.get("attention-backend"), args.get("prefill-attention-backend"),
                            args.get("decode-attention-backend")),
    )


def attn_dp_size(cfg: ServiceConfig, flags: SizingFlags | None = None) -> int:
    """The attention data-parallel width: 0.5.23's --attn-dp-size, else dp_size with
    --enable-dp-attention (arg_groups/parallel_hook.py handle_deprecated_dp_attention), else 1;
    1 up to 0.4.0, whose ModelRunner keeps the whole tp (memory.Family.dp_attention_splits)."""
    flags = flags or sizing_flags(cfg.extra_args)
    if flags.attn_dp_size and flags.attn_dp_size > 1:
        return flags.attn_dp_size
    if flags.enable_dp_attention and not memory.family(cfg.sglang_version).dp_attention_splits:
        return 1
    return cfg.dp_size if flags.enable_dp_attention else 1


def attn_tp_size(cfg: ServiceConfig) -> int:
    """The ranks one attention group splits the KV heads over: tp / attention DP (SGLang's
    get_attention_tp_size, which _compute_cell_size and the Mamba state shapes divide by)."""
    return max(1, cfg.tp_size // max(1, attn_dp_size(cfg)))


@dataclass(frozen=True, slots=True)
class Inputs:
    """What the budget is computed from, each with where it came from."""

    gpu_free_gb: float
    gpu_source: str
    weights_bytes: int  # on one GPU
    kv_bytes_per_token: int  # the target's, on one GPU
    mamba_slot_bytes: tuple[int, int] | None = None  # (conv, ssm) of one slot on one GPU; None: dense
    draft_bytes: int = 0  # on one GPU
    context_len: int | None = None
    sources: dict[str, str] = field(default_factory=dict)
    attention_layers: int = 0
    draft_layers: int | None = None
    draft_kv_bytes_per_token: int | None = None  # a DFlash draft's own KV, on one GPU
    gpu_total_gb: float | None = None  # for SGLang's automatic mem_fraction_static
    model_kind: str | None = None  # dense | hybrid | mla; None: config.json unread (--kv-bytes-per-token)
    multimodal: bool = False  # SGLang's ModelConfig.is_multimodal (modelinfo.ModelShape.multimodal, --enable-multimodal)
    architecture: str | None = None
    vit: tuple[int, int] | None = None  # the vision tower SGLang's automatic fraction scales by
    sliding_window: int | None = None
    swa_kv_bytes_per_token: int = 0  # a hybrid-SWA model's sliding-window layers, on one GPU
    #: the free memory SGLang may see, (low, high) around gpu_free_gb; None: the figure is SGLang's own
    gpu_free_range_gb: tuple[float, float] | None = None
    upper_bound: bool = False  # a model file unread (the Mamba state, the draft): the prediction is at most this
    uncertainty: tuple[str, ...] = ()  # why the figures may be off, in words
    #: the RoPE caches SGLang grows after loading (svcdiag.sglang.rope): its nominal end is taken off the
    #: budget, the other end is part of the uncertainty
    rope_growth: rope.RopeGrowth = rope.NONE
    gpu_name: str | None = None  # NVML's / nvidia-smi's product name: an SM100 card's default attention backend


@dataclass(frozen=True, slots=True)
class Prediction:
    """What SGLang will size for a config on a GPU: KV tokens, requests, context, and the budget."""

    verdict: str  # ok | tight | cannot_serve
    kv_tokens: int
    max_running_requests: int
    context_len: int
    mamba_slots: int | None
    budget: dict[str, float]  # GB per GPU
    limits: dict[str, int]
    reasons: tuple[str, ...]
    fixes: tuple[dict[str, Any], ...] = ()
    binding: str | None = None  # the limit that sets max_running_requests
    failure: str | None = None  # what SGLang would fail with
    family: str = memory.NEWEST.name  # the release family whose arithmetic this is
    slots_per_request: int | None = None
    #: the prediction at the ends of the inputs' uncertainty: kv_tokens, max_running_requests and
    #: gpu_free_gb as [low, high] (low None: a model file unread, no lower bound), kv_pct, why
    interval: dict[str, Any] | None = None

    def to_json(self) -> dict[str, Any]:
        return {"verdict": self.verdict, "interval": self.interval,
                "kv_tokens": self.kv_tokens, "max_running_requests": self.max_running_requests,
                "context_len": self.context_len, "mamba_slots": self.mamba_slots,
                "slots_per_request": self.slots_per_request,
                "budget_gb": {k: round(v, 3) for k, v in self.budget.items()}, "limits": self.limits,
                "binding": self.binding, "failure": self.failure, "sizing_family": self.family,
                "reasons": list(self.reasons), "fixes": list(self.fixes)}


def inputs_from_shape(cfg: ServiceConfig, shape: ModelShape | None, *, gpu_free_gb: float, gpu_source: str,
                      weights_bytes: int, draft_bytes: int = 0, draft_layers: int | None = None,
                      kv_bytes_per_token: int | None = None, sources: dict[str, str] | None = None,
                      draft_shape: ModelShape | None = None, gpu_total_gb: float | None = None,
                      gpu_name: str | None = None) -> Inputs:
    tp = attn_tp_size(cfg)  # the KV heads and the Mamba state split over the attention group
    swa = 0
    if kv_bytes_per_token is None:
        assert shape is not None
        kv_bytes_per_token = shape.kv_bytes_per_token(tp)
        swa = shape.swa_kv_bytes_per_token(tp) if shape.swa_layers else 0
        if swa and sizing_flags(cfg.extra_args).disable_hybrid_swa_memory:  # one pool, every layer full
            kv_bytes_per_token, swa = kv_bytes_per_token + swa, 0
    slot = None
    if shape is not None and shape.kind == "hybrid":
        conv, ssm = shape.mamba_bytes_per_slot(tp)
        dtype = sizing_flags(cfg.extra_args).mamba_ssm_dtype
        if dtype:  # --mamba-ssm-dtype: the SSM state in that dtype instead of float32
            ssm = ssm * DTYPE_BYTES.get(dtype, 4) // 4
        slot = (conv, ssm)
    ctx = cfg.context_length or (shape.max_position_embeddings if shape else None)
    draft_kv = draft_shape.kv_bytes_per_token(tp) if draft_shape is not None and draft_shape.kind != "hybrid" else None
    if draft_shape is not None and draft_layers is None:
        draft_layers = draft_shape.layers
    algo = cfg.speculative.algorithm.upper() if cfg.speculative else None
    if draft_layers is None and shape is not None and shape.nextn_layers and algo in EAGLE_LIKE:
        # an MTP start with no draft path: the target's own num_nextn_predict_layers are the draft
        draft_layers = shape.nextn_layers
    whole = cfg.tp_size
    per_gpu = weights_bytes // whole
    if shape is not None and shape.attn_tp_weight_bytes and tp < whole:
        # DP attention: the attention layers and the embedding split over tp / DP ranks only
        per_gpu += shape.attn_tp_weight_bytes // tp - shape.attn_tp_weight_bytes // whole
    grown = rope_growth(cfg, shape, ctx)
    multimodal = bool(shape and (shape.multimodal or (shape.multimodal_opt_in and (
        sizing_flags(cfg.extra_args).enable_multimodal or not multimodal_opt_in_release(cfg.sglang_version)))))
    return Inputs(gpu_free_gb, gpu_source, per_gpu, kv_bytes_per_token, slot, draft_bytes // whole,
                  ctx, dict(sources or {}), attention_layers=shape.attention_layers if shape else 0,
                  draft_layers=draft_layers, draft_kv_bytes_per_token=draft_kv, gpu_total_gb=gpu_total_gb,
                  model_kind=shape.kind if shape else None, multimodal=multimodal,
                  swa_kv_bytes_per_token=swa, architecture=shape.architecture if shape else None,
                  vit=shape.vit if shape and multimodal else None, sliding_window=shape.sliding_window if swa else None,
                  rope_growth=grown, uncertainty=(rope_words(grown),) if grown.released_bytes else (),
                  gpu_name=gpu_name)


def multimodal_opt_in_release(version: str | None) -> bool:
    """Whether the release serves ModelConfig's mm_disabled_models text-only unless --enable-multimodal
    (0.4.6+ configs/model_config.py; before it Gemma 3 was a VLM like any other). Unknown: the newest."""
    from svcdiag.sglang.flag_tables import version_key

    try:
        return not version or version_key(version) >= version_key("0.4.6")
    except ValueError:
        return True


def rope_growth(cfg: ServiceConfig, shape: ModelShape | None, ctx: int | None) -> rope.RopeGrowth:
    """The RoPE caches `cfg`'s release grows between 'Load weight end' and the pool sizing (one GPU)."""
    if shape is None or not shape.rope or not ctx:
        return rope.NONE
    spec = cfg.speculative
    d = (spec.num_draft_tokens or 0) if spec else 0
    return rope.rope_growth(shape.rope, int(ctx), version=cfg.sglang_version, rocm="rocm" in cfg.devices,
                            speculative_num_steps=(spec.num_steps or 0) if spec else 0, num_draft_tokens=d)


def rope_words(g: rope.RopeGrowth) -> str:
    """The RoPE growth's uncertainty, in words."""
    return (f"the RoPE caches SGLang grows after loading ({', '.join(f'{w} {a:,} → {b:,} rows' for w, a, b in g.grown)}): "
            f"{g.least_bytes / GB:.3f}–{g.kept_bytes / GB:.3f} GB, as the allocator keeps the old blocks or not")


def speculative_steps(cfg: ServiceConfig | None, flags: SizingFlags, logged: str | None = None) -> tuple[str | None, int | None]:
    """The speculative algorithm and its draft tokens per step: DFlash's block size when unset.
    With no config (a replay without --config), the algorithm server_args logged."""
    spec = cfg.speculative if cfg else None
    algo = spec.algorithm.upper() if spec else (str(logged).upper() if logged and cfg is None else None)
    d = spec.num_draft_tokens if spec else None
    if algo in memory.DFLASH_FAMILY and d is None:
        d = flags.dflash_block_size
    return algo, d


def sizing_inputs(cfg: ServiceConfig, inp: Inputs) -> SizingInputs:
    """The memory model's inputs for `cfg` on the GPU and model `inp` describes."""
    flags = sizing_flags(cfg.extra_args)
    algo, d = speculative_steps(cfg, flags)
    return SizingInputs(
        free_before_gb=inp.gpu_free_gb, weights_gb=inp.weights_bytes / GB, kv_cell_bytes=inp.kv_bytes_per_token,
        context_len=inp.context_len or 0, attention_layers=inp.attention_layers,
        draft_weights_gb=inp.draft_bytes / GB, mem_fraction_static=cfg.mem_fraction_static,
        gpu_total_gb=inp.gpu_total_gb,
        mamba_per_req_bytes=sum(inp.mamba_slot_bytes) if inp.mamba_slot_bytes else None,
        max_mamba_cache_size=cfg.max_mamba_cache_size, max_running_requests=cfg.max_running_requests,
        max_total_tokens=flags.max_total_tokens, speculative_algorithm=algo, num_draft_tokens=d,
        draft_layers=inp.draft_layers, draft_cell_bytes=inp.draft_kv_bytes_per_token,
        disable_radix_cache=flags.disable_radix_cache, mamba_scheduler_strategy=flags.mamba_scheduler_strategy,
        disable_overlap_schedule=flags.disable_overlap_schedule, mamba_full_memory_ratio=flags.mamba_full_memory_ratio,
        dp_size=attn_dp_size(cfg, flags), page_size=flags.page_size, tp_size=cfg.tp_size,
        chunked_prefill_size=cfg.chunked_prefill_size, cuda_graph_max_bs=cfg.cuda_graph_max_bs,
        version=cfg.sglang_version, speculative_num_steps=cfg.speculative.num_steps if cfg.speculative else None,
        speculative_eagle_topk=cfg.speculative.eagle_topk if cfg.speculative else None,
        disable_cuda_graph=flags.disable_cuda_graph, mla=inp.model_kind == "mla", multimodal=inp.multimodal,
        swa_cell_bytes=inp.swa_kv_bytes_per_token, swa_full_tokens_ratio=flags.swa_full_tokens_ratio,
        architecture=inp.architecture, vit=inp.vit, sliding_window=inp.sliding_window, rocm="rocm" in cfg.devices,
        rope_growth_gb=inp.rope_growth.nominal_bytes / GB, gpu_sm=memory.gpu_sm(inp.gpu_name),
        attention_backends=flags.attention_backends)


def fewest_slots_per_request(cfg: ServiceConfig, architecture: str | None = None) -> int:
    """The fewest Mamba slots a request of `cfg` can take on its release (flags as given): one
    where the release turns a speculative hybrid's radix cache off (memory.SPEC_RADIX_RULES "off")
    for `architecture`, or, unknown (config.json unread), for any it names."""
    flags = sizing_flags(cfg.extra_args)
    archs = [architecture] if architecture else [a for _, _, names, _ in memory.SPEC_RADIX_RULES for a in names]
    if cfg.speculative is not None and any(
            memory.spec_radix_rule(SizingInputs(
                free_before_gb=0, weights_gb=0, kv_cell_bytes=1, context_len=1, mamba_per_req_bytes=1,
                speculative_algorithm=cfg.speculative.algorithm, version=cfg.sglang_version, architecture=arch,
                disable_radix_cache=flags.disable_radix_cache, mamba_scheduler_strategy=flags.mamba_scheduler_strategy))
            == "off" for arch in archs):
        return 1
    fake = SizingInputs(free_before_gb=0, weights_gb=0, kv_cell_bytes=1, context_len=1,
                        disable_radix_cache=flags.disable_radix_cache,
                        mamba_scheduler_strategy=flags.mamba_scheduler_strategy,
                        disable_overlap_schedule=flags.disable_overlap_schedule, page_size=flags.page_size,
                        speculative_algorithm=cfg.speculative.algorithm if cfg.speculative else None,
                        version=cfg.sglang_version)
    return memory.state_slots_per_request(fake, memory.family(cfg.sglang_version))


def _no_slot_failure(cfg: ServiceConfig) -> str:
    """What SGLang says when its Mamba slots serve no request: from 0.5.13 it raises `Hybrid …
    state cache is too small`; before, the scheduler's `max_running_request is zero` assert."""
    return Cause.MAMBA_CACHE_TOO_SMALL if memory.family(cfg.sglang_version).hybrid_zero_raises else Cause.MAX_RUNNING_ZERO


def from_config_alone(cfg: ServiceConfig) -> Prediction | None:
    """CANNOT SERVE from the config's own settings, whatever the GPU and model: its
    max_mamba_cache_size below one request's slots, or a max_running_requests of 0 per DP
    worker. None when the config alone does not decide."""
    reasons: list[str] = []
    limits: dict[str, int] = {}
    spr = fewest_slots_per_request(cfg)
    dp = attn_dp_size(cfg)
    if memory.family(cfg.sglang_version).mamba == "draft_divided" and not sizing_flags(cfg.extra_args).disable_radix_cache:
        return None  # 0.5.4-0.5.6 size the slots from memory whatever --max-mamba-cache-size says
    if cfg.max_mamba_cache_size is not None and cfg.max_mamba_cache_size // dp // spr == 0:
        limits["mamba"] = 0
        reasons.append(f"{cfg.max_mamba_cache_size} Mamba slot(s) at {spr} per request serve no request "
                       f"(max_mamba_cache_size // state slots per request = 0), whatever the GPU")
    if not reasons:
        return None
    want = max(1, cfg.max_running_requests or 1)
    fixes = ({"set": {"max_mamba_cache_size": want * spr * dp},
              "reason": f"{spr} state slot(s) per request for {want} request(s); needed, not proved to fit: "
                        "the GPU's free memory (--gpu-memory, or on the GPU host) checks it"},)
    return Prediction("cannot_serve", 0, 0, cfg.context_length or 0, cfg.max_mamba_cache_size, {}, limits,
                      tuple(reasons), fixes, binding="mamba", failure=_no_slot_failure(cfg),
                      family=memory.family(cfg.sglang_version).name, slots_per_request=spr)


def predict(cfg: ServiceConfig, inp: Inputs, *, with_fixes: bool = True) -> Prediction:
    """The prediction for `cfg` on `inp`, judged over the inputs' uncertainty: CANNOT SERVE only
    when no reading within it would serve (the model is monotone in free memory, so its high end
    decides); a nominal failure that the high end serves, or a nominal OK that the low end does
    not keep, is TIGHT: the start decides. Fixes are the nominal reading's."""
    g = inp.rope_growth
    if inp.gpu_free_range_gb is None and not inp.upper_bound and not g.released_bytes:
        return predict_at(cfg, inp, with_fixes=with_fixes)
    nominal = predict_at(cfg, inp, with_fixes=False)
    low_gb, high_gb = inp.gpu_free_range_gb or (inp.gpu_free_gb, inp.gpu_free_gb)
    # the RoPE growth's ends: the old blocks released at the high end, kept at the low end
    most = replace(inp, gpu_free_gb=high_gb, rope_growth=replace(g, rocm=False))
    least = replace(inp, gpu_free_gb=low_gb, rope_growth=replace(g, rocm=True))
    high = predict_at(cfg, most, with_fixes=False) if most != inp else nominal
    low = None if inp.upper_bound else predict_at(cfg, least, with_fixes=False) if least != inp else nominal
    why = "; ".join(inp.uncertainty) or "the free-memory reading"
    spread = max(high.kv_tokens - nominal.kv_tokens, nominal.kv_tokens - (low.kv_tokens if low else nominal.kv_tokens))
    interval = {"kv_tokens": [low.kv_tokens if low else None, high.kv_tokens],
                "max_running_requests": [low.max_running_requests if low else None, high.max_running_requests],
                "gpu_free_gb": [None if inp.upper_bound else low_gb, high_gb],
                "kv_pct": round(100 * spread / nominal.kv_tokens, 1) if nominal.kv_tokens else None,
                "why": list(inp.uncertainty)}
    verdict, reasons = nominal.verdict, list(nominal.reasons)
    if nominal.verdict == "cannot_serve" and high.verdict != "cannot_serve":
        verdict = "tight"
        reasons = [f"at {inp.gpu_free_gb:.2f} GB free: {r}" for r in nominal.reasons] + [
            f"but within the reading's uncertainty ({why}) it serves: up to {high.kv_tokens:,} KV tokens, "
            f"max_running_requests {high.max_running_requests} at {high_gb:.2f} GB free; not certain, the start decides"]
    elif nominal.verdict == "ok" and low is not None and low.verdict != "ok":
        verdict = "tight"
        said = "it cannot serve" if low.verdict == "cannot_serve" else "it is tight"
        reasons.append(f"at the low end of the reading ({low_gb:.2f} GB free, {why}) {said}: " + "; ".join(low.reasons))
    fixes = tuple(find_fixes(cfg, inp, nominal.kv_tokens)) if with_fixes and verdict == "cannot_serve" else ()
    return replace(nominal, verdict=verdict, reasons=tuple(reasons), fixes=fixes, interval=interval)


def predict_at(cfg: ServiceConfig, inp: Inputs, *, with_fixes: bool = True) -> Prediction:
    """The prediction at `inp`'s nominal free memory, its uncertainty left out."""
    m = memory.predict(sizing_inputs(cfg, inp))
    if m.refusal is not None:
        return _refused(cfg, inp, m, with_fixes=with_fixes)
    mfs = m.mem_fraction_static
    pre = inp.gpu_free_gb
    weights = inp.weights_bytes / GB
    reserve = pre * (1 - mfs)
    tokens, cap, ctx, limits = m.kv_tokens, m.max_running_requests, inp.context_len or 0, dict(m.limits)
    spr = m.slots_per_request
    binding, failure = m.binding, m.failure
    kept = memory.family(cfg.sglang_version).mamba != "draft_divided" or sizing_flags(cfg.extra_args).disable_radix_cache
    if inp.model_kind is None and cfg.max_mamba_cache_size is not None and kept:
        # no Mamba shape (config.json unread): the config's own slots still bound the requests
        spr = fewest_slots_per_request(cfg)
        dp = attn_dp_size(cfg)
        limits["mamba"] = cfg.max_mamba_cache_size // dp // spr
        binding = min(limits, key=lambda k: limits[k])
        cap = max(0, limits[binding])
        if cap == 0 and failure is None:
            failure = _no_slot_failure(cfg)
    kv_gb = max(m.rest_gb - m.mamba_gb - m.intermediate_gb, 0.0)
    budget = {"free_before_load": pre, "mem_fraction_static": mfs, "weights": weights, "mamba_cache": m.mamba_gb,
              "mamba_intermediate": m.intermediate_gb, "kv_cache": kv_gb, "reserve": reserve,
              "draft": inp.draft_bytes / GB}
    reasons: list[str] = []
    if m.rest_gb <= 0 or (m.failure == Cause.NOT_ENOUGH_MEMORY and tokens <= 0):
        parts = [f"the weights ({weights:.2f} GB)"]
        if memory.family(cfg.sglang_version).draft_weights_counted and inp.draft_bytes:
            parts.append(f"the draft model ({inp.draft_bytes / GB:.2f} GB)")
        if m.mamba_gb or m.intermediate_gb:
            parts.append(f"the Mamba state ({m.mamba_gb + m.intermediate_gb:.2f} GB)")
        said = ", ".join(parts[:-1]) + " and " + parts[-1] if len(parts) > 1 else parts[0]
        reasons.append(f"{said} take all of mem_fraction_static {mfs} × {pre:.2f} GB = {pre * mfs:.2f} GB: "
                       f"nothing is left for the KV cache (SGLang: Not enough memory)")
    elif ctx and tokens < ctx:
        reasons.append(f"the KV pool would hold {tokens:,} tokens, less than one {ctx:,}-token request")
    slots = m.mamba_slots if m.mamba_slots is not None else cfg.max_mamba_cache_size
    if slots is not None and spr and slots // spr <= 0:
        reasons.append(f"{slots} Mamba slot(s) at {spr} per request serve no request")
    if cap == 0 and not reasons:
        reasons.append(f"max_running_requests would come out zero (by {binding})")
    verdict = "cannot_serve" if reasons or cap == 0 else "ok"
    if verdict == "ok":
        requested = cfg.max_running_requests
        if requested is not None and cap < requested:
            reasons.append(f"max_running_requests would be capped to {cap} of the {requested} asked for "
                           f"(by {binding})")
        if ctx and tokens < 2 * ctx:
            reasons.append(f"the KV pool ({tokens:,} tokens) holds fewer than two full {ctx:,}-token requests")
        if reserve < budget["draft"] + ACTIVATION_HEADROOM_GB:
            reasons.append(f"the {1 - mfs:.2f} reserve ({reserve:.2f} GB) barely holds the draft model "
                           f"({budget['draft']:.2f} GB) plus CUDA graphs and activations (~{ACTIVATION_HEADROOM_GB} GB)")
        verdict = "tight" if reasons else "ok"
    fixes = tuple(find_fixes(cfg, inp, tokens)) if with_fixes and verdict == "cannot_serve" else ()
    return Prediction(verdict, tokens, cap, ctx, m.mamba_slots, budget, limits, tuple(reasons), fixes,
                      binding=binding, failure=failure, family=m.family, slots_per_request=spr)


def _refused(cfg: ServiceConfig, inp: Inputs, m: memory.Prediction, *, with_fixes: bool) -> Prediction:
    """CANNOT SERVE, certain whatever the GPU reads: the release's server args refuse these
    arguments (memory.args_refusal) before a byte is sized; SGLang's words and the flags that fix it."""
    release = cfg.sglang_version or m.family
    reasons = (f"SGLang {release} refuses these arguments before loading anything (server_args.py "
               f"ServerArgs._handle_mamba_radix_cache): {m.refusal}",)
    budget = {"free_before_load": inp.gpu_free_gb, "mem_fraction_static": m.mem_fraction_static,
              "weights": inp.weights_bytes / GB, "mamba_cache": 0.0, "mamba_intermediate": 0.0, "kv_cache": 0.0,
              "reserve": inp.gpu_free_gb * (1 - m.mem_fraction_static), "draft": inp.draft_bytes / GB}
    fixes = tuple(refusal_fixes(cfg, inp)) if with_fixes else ()
    return Prediction("cannot_serve", 0, 0, inp.context_len or 0, None, budget, dict(m.limits), reasons, fixes,
                      binding=m.binding, failure=m.failure, family=m.family)


def _with_args(cfg: ServiceConfig, drop: str, add: tuple[str, ...]) -> tuple[str, ...]:
    """cfg's extra_args without `--drop` (and its value) and with `add` appended."""
    out: list[str] = []
    skip = False
    for a in cfg.extra_args:
        if skip:
            skip = False
            continue
        if a == f"--{drop}":
            skip = True
            continue
        if not a.startswith(f"--{drop}="):
            out.append(a)
    return (*out, *add)


def refusal_fixes(cfg: ServiceConfig, inp: Inputs) -> list[dict[str, Any]]:
    """The flags that get a refused start past SGLang's check, each predicted through the
    release's arithmetic: --disable-radix-cache (one state slot a request), and SGLang's own
    advice, --mamba-scheduler-strategy extra_buffer with SGLANG_ENABLE_SPEC_V2=1."""
    options = (({"extra_args": list(_with_args(cfg, "disable-radix-cache", ("--disable-radix-cache",)))},
                "the radix cache off (no prefix reuse)"),
               ({"extra_args": list(_with_args(cfg, "mamba-scheduler-strategy",
                                               ("--mamba-scheduler-strategy", "extra_buffer"))),
                 "env.SGLANG_ENABLE_SPEC_V2": "1"}, "SGLang's own advice: the radix cache kept"))
    fixes: list[dict[str, Any]] = []
    for change, what in options:
        fixed = replace(cfg, extra_args=tuple(change["extra_args"]))
        p = predict_at(fixed, inp, with_fixes=False)
        if p.failure == Cause.BAD_ARGUMENTS:
            continue
        said = (f"predicted {p.kv_tokens:,} KV tokens, max_running_requests {p.max_running_requests}"
                if p.verdict != "cannot_serve" else f"past the check, but still CANNOT SERVE: {'; '.join(p.reasons)}")
        fixes.append({"set": change, "reason": f"{what}: {said}"})
    return fixes


def _serving(cfg: ServiceConfig, inp: Inputs, want: int) -> Prediction | None:
    """The prediction when `cfg` serves `want` requests and leaves the reserve its due, else None
    (at the nominal reading: a fix is offered only where it serves there)."""
    p = predict_at(cfg, inp, with_fixes=False)
    if p.verdict != "cannot_serve" and p.max_running_requests >= want and \
            p.budget["reserve"] >= p.budget["draft"] + ACTIVATION_HEADROOM_GB:
        return p
    return None


def _smallest_fraction(cfg: ServiceConfig, inp: Inputs, r: int) -> dict[str, Any] | None:
    """The smallest mem_fraction_static (≤ 0.95) that serves r requests, keeping the
    config's Mamba slots when they suffice, else with the r × slots-per-request it needs."""
    spr = fewest_slots_per_request(cfg, inp.architecture)
    slot_options: list[dict[str, Any]] = [{}]
    if inp.mamba_slot_bytes is not None and cfg.max_mamba_cache_size is not None:
        if cfg.max_mamba_cache_size < r * spr:
            slot_options = [{"max_mamba_cache_size": r * spr}]
        elif cfg.max_mamba_cache_size > r * spr:
            slot_options.append({"max_mamba_cache_size": r * spr})
    base = cfg.mem_fraction_static if cfg.mem_fraction_static is not None else \
        memory.predict(sizing_inputs(cfg, inp)).mem_fraction_static
    base = math.floor(base * 100) / 100
    for extra in slot_options:
        changes = dict(extra)
        if cfg.max_running_requests is not None and r < cfg.max_running_requests:
            changes["max_running_requests"] = r
        for step in range(96):
            mfs = round(base + step / 100, 2)
            if mfs > MAX_MEM_FRACTION:
                break
            p = _serving(replace(cfg, mem_fraction_static=mfs, **changes), inp, r)
            if p is not None:
                return {"set": {"mem_fraction_static": mfs, **changes},
                        "reason": f"predicted {p.kv_tokens:,} KV tokens, max_running_requests "
                                  f"{p.max_running_requests}, reserve {p.budget['reserve']:.2f} GB"}
    return None


def find_fixes(cfg: ServiceConfig, inp: Inputs, tokens: int) -> list[dict[str, Any]]:
    """The smallest mem_fraction_static that serves one request; the one that serves the
    most of those asked for; and the largest context_length that fits as the config is."""
    if memory.predict(sizing_inputs(cfg, inp)).refusal is not None:
        return refusal_fixes(cfg, inp)
    fixes: list[dict[str, Any]] = []
    first = _smallest_fraction(cfg, inp, 1)
    if first is not None:
        fixes.append(first)
        for r in range(cfg.max_running_requests or 1, 1, -1):
            most = _smallest_fraction(cfg, inp, r)
            if most is not None:
                fixes.append(most)
                break
    ctx = inp.context_len
    fits = (tokens // 1024) * 1024  # `tokens`: the pool as configured
    if ctx and 0 < fits < ctx and _serving(cfg, replace(inp, context_len=fits), 1) is not None:
        fixes.append({"set": {"context_length": fits},
                      "reason": f"the largest context (in 1,024s) that {tokens:,} KV tokens hold"})
    return fixes


# ---------------------------------------------------------------- fixes re-checked through the model

#: the config fields a memory fix sets, as the memory model's inputs
FIX_FIELDS = {"mem_fraction_static": "mem_fraction_static", "max_mamba_cache_size": "max_mamba_cache_size",
              "max_running_requests": "max_running_requests", "context_length": "context_len"}
_PLAIN_VERSION = re.compile(r"^\d+\.\d+(?:\.\d+)?$")


def logged_sizing(figures: Figures, cfg: ServiceConfig | None) -> SizingInputs | None:
    """A logged start as the memory model's inputs, so that a change to its settings can be
    predicted for its release: free memory before and after loading as logged, the KV cell and
    the state per slot from its own pools, the flags from the config. None when the log has no
    KV pool, free memory or mem_fraction_static."""
    f = figures
    tokens = int(f.kv_tokens or 0)
    kv_gb = f.kv_gb or ((f.kv_k_gb or 0) + (f.kv_v_gb or 0))
    before, after = f.avail_before_load_gb, f.avail_after_load_gb
    mfs = f.mem_fraction_static or (cfg.mem_fraction_static if cfg else None)
    if not (tokens and kv_gb and before and mfs):
        return None
    logged = str(f.sglang_version or "")
    version = (cfg.sglang_version if cfg and cfg.sglang_version else None) or \
        (logged if _PLAIN_VERSION.match(logged) else None)
    fam = memory.family(version)
    slots = f.mamba_slots
    state_gb = (f.mamba_conv_gb or 0) + (f.mamba_ssm_gb or 0)
    pad = 1 if fam.mamba == "joint_padded" else 0
    per_req = int(state_gb * GB / (slots + pad)) if slots and state_gb else None
    draft_tokens, draft_gb = f.draft_kv_tokens, f.draft_kv_gb or 0
    if after is None:  # what its pools add up to, with the reserve
        after = float(kv_gb) + state_gb + draft_gb + float(before) * (1 - float(mfs)) + sum(
            x or 0 for x in (f.mamba_intermediate_ssm_gb, f.mamba_intermediate_conv_gb))
    flags = sizing_flags(cfg.extra_args if cfg else ())
    algo, d = speculative_steps(cfg, flags, f.speculative_algorithm)
    return SizingInputs(
        free_before_gb=float(before), weights_gb=float(f.weights_gb or 0), free_after_load_gb=float(after),
        kv_cell_bytes=round(float(kv_gb) * GB / tokens),
        context_len=int(f.context_len or (cfg.context_length if cfg else 0) or 0),
        mem_fraction_static=float(mfs), mamba_per_req_bytes=per_req,
        max_mamba_cache_size=f.requested_max_mamba_cache_size or (cfg.max_mamba_cache_size if cfg else None),
        max_running_requests=f.requested_max_running_requests or (cfg.max_running_requests if cfg else None),
        max_total_tokens=flags.max_total_tokens, speculative_algorithm=algo, num_draft_tokens=d,
        draft_cell_bytes=round(draft_gb * GB / draft_tokens) if draft_tokens and draft_gb else None,
        disable_radix_cache=flags.disable_radix_cache, mamba_scheduler_strategy=flags.mamba_scheduler_strategy,
        disable_overlap_schedule=flags.disable_overlap_schedule, mamba_full_memory_ratio=flags.mamba_full_memory_ratio,
        dp_size=attn_dp_size(cfg, flags) if cfg else 1, page_size=flags.page_size,
        tp_size=cfg.tp_size if cfg else int(f.tp_size or 1),
        slots_per_request=f.mamba_slots_per_request, version=version, logged=True)


def _serves(inp: SizingInputs, want: int, reserve_gb: float) -> memory.Prediction | None:
    """The prediction when `inp` serves `want` requests of its full context and leaves
    `reserve_gb` outside the caches, else None."""
    p = memory.predict(inp)
    ok = p.failure is None and p.max_running_requests >= want and p.kv_tokens >= inp.context_len
    return p if ok and inp.free_before_gb * (1 - p.mem_fraction_static) >= reserve_gb else None


def recheck_fixes(fixes: list[dict[str, Any]], figures: Figures,
                  cfg: ServiceConfig | None) -> list[dict[str, Any]]:
    """Every memory fix ({"set": changes, "reason": why}) predicted through SGLang's own
    arithmetic for the start's release before it is printed. One that serves what it is for
    (its max_running_requests, else the config's, each with a full context) says so with the
    prediction; one whose mem_fraction_static is short is raised to the smallest that serves
    (≤ 0.95, the logged CUDA graphs + 2 GB left outside the caches); one that still cannot says
    what it serves instead, and one that serves no request is dropped. Fixes that set no
    memory field, and every fix of a log the model cannot read, pass as given."""
    base = logged_sizing(figures, cfg)
    if base is None:
        return list(fixes)
    reserve = float(figures.cuda_graph_gb or 0) + ACTIVATION_HEADROOM_GB
    out: list[dict[str, Any]] = []
    for fix in fixes:
        change = {FIX_FIELDS[k]: v for k, v in fix["set"].items() if k in FIX_FIELDS}
        if not change:
            out.append(fix)
            continue
        inp = replace(base, **change)
        want = inp.max_running_requests or 1
        fam = memory.family(inp.version).name
        if (p := _serves(inp, want, reserve)) is not None:
            out.append({**fix, "reason": f"{fix['reason']} (SGLang {fam}'s arithmetic: {p.kv_tokens:,} KV tokens, "
                                         f"max_running_requests {p.max_running_requests})"})
            continue
        if "mem_fraction_static" in change:
            raised = next((q for q in (round(change["mem_fraction_static"] + s / 100, 2) for s in range(1, 96))
                           if q <= MAX_MEM_FRACTION and _serves(replace(inp, mem_fraction_static=q), want, reserve)),
                          None)
            if raised is not None:
                p = memory.predict(replace(inp, mem_fraction_static=raised))
                out.append({"set": {**fix["set"], "mem_fraction_static": raised},
                            "reason": f"{fix['reason']}: mem_fraction_static {raised}, not "
                                      f"{change['mem_fraction_static']}, by SGLang {fam}'s arithmetic "
                                      f"({p.kv_tokens:,} KV tokens, max_running_requests {p.max_running_requests})"})
                continue
        p = memory.predict(inp)
        if p.failure is None and p.max_running_requests > 0 and p.kv_tokens >= inp.context_len:
            out.append({**fix, "reason": f"serves {p.max_running_requests} of the {want} request(s) it was for, "
                                         f"bound by {p.binding} (SGLang {fam}'s arithmetic: {p.kv_tokens:,} KV tokens)"})
    return out


def estimate_candidate(figures: Figures, base: ServiceConfig, cand: ServiceConfig) -> dict[str, Any] | None:
    """A candidate config on the baseline's GPU and model: the baseline's logged start with the
    candidate's memory settings and flags, through SGLang's arithmetic for the candidate's
    release (baseline-check's estimate when the candidate never ran). None when the baseline's
    log lacks the figures (logged_sizing)."""
    logged = logged_sizing(figures, base)
    if logged is None:
        return None
    own = sizing_flags(cand.extra_args)
    algo, d = speculative_steps(cand, own)
    inp = replace(logged, mem_fraction_static=cand.mem_fraction_static or logged.mem_fraction_static,
                  max_mamba_cache_size=cand.max_mamba_cache_size, max_running_requests=cand.max_running_requests,
                  context_len=cand.context_length or logged.context_len, version=cand.sglang_version or logged.version,
                  speculative_algorithm=algo, num_draft_tokens=d, max_total_tokens=own.max_total_tokens,
                  disable_radix_cache=own.disable_radix_cache, mamba_scheduler_strategy=own.mamba_scheduler_strategy,
                  disable_overlap_schedule=own.disable_overlap_schedule,
                  mamba_full_memory_ratio=own.mamba_full_memory_ratio, page_size=own.page_size,
                  slots_per_request=None, logged=False, rocm="rocm" in cand.devices)
    p = memory.predict(inp)
    return {"kv_tokens": p.kv_tokens, "mamba_slots": p.mamba_slots, "slots_per_req": p.slots_per_request,
            "context_len": inp.context_len, "limits": dict(p.limits), "max_running_requests": p.max_running_requests,
            "cause": p.failure, "sizing_family": p.family}
