"""Memory preflight: the KV pool SGLang will allocate, predicted before a 2-minute start.

Pure arithmetic (no I/O), SGLang's own (kv_cache_configurator / pool_configurator;
docs/sglang.md#memory): of the memory free before loading, `mem_fraction_static` is for weights
and caches; the weights come off first, the Mamba state cache next, the KV pool gets what
is left, one cell per token. The rest (1 − mem_fraction_static) holds the draft model,
CUDA graphs and activations.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from svcdiag.config.service import ServiceConfig
from svcdiag.sglang.memory import (
    ACTIVATION_HEADROOM_GB,
    AUTO_MEM_FRACTION,
    GB,
    MAX_MEM_FRACTION,
    kv_tokens,
    mamba_share_slots,
    request_limits,
    slots_per_request,
)
from svcdiag.sglang.modelinfo import ModelShape

#: The intermediate SSM cache speculative decoding keeps per slot, relative to the SSM
#: state: measured (11.25 GB / 3.52 GB on the seed's DFlash start); SGLang's docs do not
#: give its shape, so calibration (`preflight --calibration`) keeps this honest.
INTERMEDIATE_PER_SSM = 11.25 / 3.52
EAGLE_LIKE = {"EAGLE", "EAGLE3", "NEXTN"}


@dataclass(frozen=True, slots=True)
class Inputs:
    """What the budget is computed from, each with where it came from."""

    gpu_free_gb: float
    gpu_source: str
    weights_bytes: int
    kv_bytes_per_token: int  # on one GPU
    mamba_slot_bytes: tuple[int, int, int] | None = None  # (conv, ssm, intermediate) on one GPU; None: dense
    draft_bytes: int = 0
    context_len: int | None = None
    sources: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Prediction:
    verdict: str  # ok | tight | cannot_serve
    kv_tokens: int
    max_running_requests: int
    context_len: int
    mamba_slots: int | None
    budget: dict[str, float]  # GB per GPU
    limits: dict[str, int]
    reasons: tuple[str, ...]
    fixes: tuple[dict[str, Any], ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {"verdict": self.verdict, "kv_tokens": self.kv_tokens, "max_running_requests": self.max_running_requests,
                "context_len": self.context_len, "mamba_slots": self.mamba_slots,
                "budget_gb": {k: round(v, 3) for k, v in self.budget.items()}, "limits": self.limits,
                "reasons": list(self.reasons), "fixes": list(self.fixes)}


def inputs_from_shape(cfg: ServiceConfig, shape: ModelShape | None, *, gpu_free_gb: float, gpu_source: str,
                      weights_bytes: int, draft_bytes: int = 0, draft_layers: int | None = None,
                      kv_bytes_per_token: int | None = None, sources: dict[str, str] | None = None) -> Inputs:
    tp = cfg.tp_size
    spec = cfg.speculative.algorithm if cfg.speculative else None
    if kv_bytes_per_token is None:
        assert shape is not None
        kv_bytes_per_token = shape.kv_bytes_per_token(tp)
        if spec in EAGLE_LIKE and draft_layers and shape.attention_layers:
            # EAGLE/MTP drafts keep their KV in the target's pool: a bigger cell
            kv_bytes_per_token = int(kv_bytes_per_token * (1 + draft_layers / shape.layers))
    slot = None
    if shape is not None and shape.kind == "hybrid":
        conv, ssm = shape.mamba_bytes_per_slot(tp)
        slot = (conv, ssm, int(ssm * INTERMEDIATE_PER_SSM) if spec else 0)
    ctx = cfg.context_length or (shape.max_position_embeddings if shape else None)
    return Inputs(gpu_free_gb, gpu_source, weights_bytes // tp, kv_bytes_per_token, slot, draft_bytes // tp,
                  ctx, dict(sources or {}))


def predict(cfg: ServiceConfig, inp: Inputs, *, with_fixes: bool = True) -> Prediction:
    mfs = cfg.mem_fraction_static if cfg.mem_fraction_static is not None else AUTO_MEM_FRACTION
    pre = inp.gpu_free_gb
    weights = inp.weights_bytes / GB
    reserve = pre * (1 - mfs)
    rest = pre * mfs - weights
    slots: int | None = None
    mamba = 0.0
    per_slot = sum(inp.mamba_slot_bytes) / GB if inp.mamba_slot_bytes else 0.0
    if inp.mamba_slot_bytes is not None:
        slots = cfg.max_mamba_cache_size if cfg.max_mamba_cache_size is not None else mamba_share_slots(rest, per_slot)
        mamba = slots * per_slot
    kv = rest - mamba
    tokens = kv_tokens(kv, inp.kv_bytes_per_token)
    ctx = inp.context_len or 0
    spec = cfg.speculative is not None
    spr = slots_per_request(spec)
    requested = cfg.max_running_requests
    limits = request_limits(tokens, context_len=ctx, requested=requested, mamba_slots=slots, speculative=spec)
    cap = max(0, min(limits.values()))
    budget = {"free_before_load": pre, "mem_fraction_static": mfs, "weights": weights, "mamba_cache": mamba,
              "kv_cache": max(kv, 0.0), "reserve": reserve, "draft": inp.draft_bytes / GB}
    reasons: list[str] = []
    if rest <= 0:
        reasons.append(f"the weights ({weights:.2f} GB) take all of mem_fraction_static {mfs} × {pre:.2f} GB "
                       f"= {pre * mfs:.2f} GB: nothing is left for the caches (SGLang: Not enough memory)")
    elif ctx and tokens < ctx:
        reasons.append(f"the KV pool would hold {tokens:,} tokens, less than one {ctx:,}-token request")
    if slots is not None and slots // spr == 0:
        reasons.append(f"{slots} Mamba slot(s) at {spr} per request serve no request")
    if cap == 0 and not reasons:
        reasons.append("max_running_requests would come out zero")
    verdict = "cannot_serve" if reasons or cap == 0 else "ok"
    if verdict == "ok":
        if requested is not None and cap < requested:
            reasons.append(f"max_running_requests would be capped to {cap} of the {requested} asked for "
                           f"(by {min(limits, key=lambda k: limits[k])})")
        if ctx and tokens < 2 * ctx:
            reasons.append(f"the KV pool ({tokens:,} tokens) holds fewer than two full {ctx:,}-token requests")
        if reserve < budget["draft"] + ACTIVATION_HEADROOM_GB:
            reasons.append(f"the {1 - mfs:.2f} reserve ({reserve:.2f} GB) barely holds the draft model "
                           f"({budget['draft']:.2f} GB) plus CUDA graphs and activations (~{ACTIVATION_HEADROOM_GB} GB)")
        verdict = "tight" if reasons else "ok"
    fixes = tuple(find_fixes(cfg, inp, tokens)) if with_fixes and verdict == "cannot_serve" else ()
    return Prediction(verdict, tokens, cap, ctx, slots, budget, limits, tuple(reasons), fixes)


def _serving(cfg: ServiceConfig, inp: Inputs, want: int) -> Prediction | None:
    """The prediction when `cfg` serves `want` requests and leaves the reserve its due, else None."""
    p = predict(cfg, inp, with_fixes=False)
    if p.verdict != "cannot_serve" and p.max_running_requests >= want and \
            p.budget["reserve"] >= p.budget["draft"] + ACTIVATION_HEADROOM_GB:
        return p
    return None


def _smallest_fraction(cfg: ServiceConfig, inp: Inputs, r: int) -> dict[str, Any] | None:
    """The smallest mem_fraction_static (≤ 0.95) that serves r requests, keeping the
    config's Mamba slots when they suffice, else with the r × slots-per-request it needs."""
    spr = slots_per_request(cfg.speculative is not None)
    slot_options: list[dict[str, Any]] = [{}]
    if inp.mamba_slot_bytes is not None and cfg.max_mamba_cache_size is not None:
        if cfg.max_mamba_cache_size < r * spr:
            slot_options = [{"max_mamba_cache_size": r * spr}]
        elif cfg.max_mamba_cache_size > r * spr:
            slot_options.append({"max_mamba_cache_size": r * spr})
    base = cfg.mem_fraction_static if cfg.mem_fraction_static is not None else AUTO_MEM_FRACTION
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
