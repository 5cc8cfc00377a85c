"""SGLang's memory model, once: how a start's GPU memory becomes a KV pool, a Mamba state
cache and a request cap (docs/sglang.md#memory).

    rest = free_before_load × mem_fraction_static − weights
    Mamba state first (max_mamba_cache_size slots, or its share of `rest`), the KV pool
    gets the remainder, one cell per token;
    max_running_requests = min(requested or auto, tokens // 2, mamba slots // slots per
    request, and, for this SGLang's speculative worker, tokens // context_len).

Pure arithmetic. Preflight predicts with it from a model's shape, the diagnosis explains a
logged start with it, baseline-check estimates a candidate from the baseline's figures.
The stand-in (svcdiag.sim) keeps its own copy on purpose, as the cross-check.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

GB = 1024**3  # SGLang's "GB" are GiB
MAX_MEM_FRACTION = 0.95
AUTO_MEM_FRACTION = 0.88  # what SGLang picks on a large GPU when mem_fraction_static is unset
MAMBA_FULL_MEMORY_RATIO = 0.9  # --mamba-full-memory-ratio's default
#: beside CUDA graphs, the (1 − mem_fraction_static) reserve holds activations, NCCL buffers, the allocator's slack
ACTIVATION_HEADROOM_GB = 2.0


def slots_per_request(speculative: bool) -> int:
    """Mamba state slots one running request takes: speculative decoding keeps two more."""
    return 5 if speculative else 3


def auto_max_running(tokens: int, context_len: int | None) -> int:
    """SGLang's request cap when none is asked for: 512 per context's worth of tokens, 2048–4096."""
    return min(max(2048, min(4096, int(tokens / context_len * 512))), 4096) if context_len else 4096


def request_limits(tokens: int, *, context_len: int | None, requested: int | None, mamba_slots: int | None,
                   speculative: bool) -> dict[str, int]:
    """Every bound on max_running_requests, by name; the cap is their minimum."""
    limits = {"kv_half": tokens // 2}
    if requested is None:
        limits["auto"] = auto_max_running(tokens, context_len)
    else:
        limits["requested"] = requested
    if mamba_slots is not None:
        limits["mamba"] = mamba_slots // slots_per_request(speculative)
    if speculative and context_len:
        limits["kv_context"] = tokens // context_len  # this SGLang's speculative worker reserves a context per request
    return limits


def mamba_share_slots(rest_gb: float, slot_gb: float) -> int:
    """Slots SGLang gives the Mamba cache when max_mamba_cache_size is unset."""
    share = max(rest_gb, 0) * MAMBA_FULL_MEMORY_RATIO / (1 + MAMBA_FULL_MEMORY_RATIO)
    return max(0, int(share / slot_gb) - 1) if slot_gb else 0


def kv_tokens(kv_gb: float, cell_bytes: float) -> int:
    """Tokens a KV pool of `kv_gb` holds at `cell_bytes` per token."""
    return max(0, int(kv_gb * GB // cell_bytes)) if kv_gb > 0 else 0


@dataclass(frozen=True)
class Memory:
    """A logged start's figures as the formula sees them: the pools SGLang allocated, and
    what the same GPU would give under other settings."""

    kv_tokens: int
    cell_bytes: float | None  # KV bytes per token
    context_len: int | None
    mamba_slots: int | None
    slot_gb: float | None  # Mamba state per slot (conv + ssm + intermediate)
    slots_per_req: int
    free_before_gb: float | None
    mem_fraction: float | None
    cuda_graph_gb: float | None
    requested: int | None
    speculative: bool = False

    @classmethod
    def from_figures(cls, f: dict[str, Any], *, speculative: bool, context_length: int | None = None,
                     mem_fraction_static: float | None = None, max_running_requests: int | None = None) -> Memory:
        """From a verdict's figures; the keyword arguments are the config's, used where the log is silent."""
        tokens = int(f.get("kv_tokens", 0) or 0)
        kv_gb = f.get("kv_gb") if f.get("kv_gb") is not None else (
            (f.get("kv_k_gb") or 0) + (f.get("kv_v_gb") or 0) or None)
        slots = f.get("mamba_slots")
        mamba_gb = sum(f.get(k) or 0 for k in ("mamba_conv_gb", "mamba_ssm_gb", "mamba_intermediate_ssm_gb",
                                               "mamba_intermediate_conv_gb"))
        spec = speculative or "draft_model_type" in f
        return cls(
            kv_tokens=tokens, cell_bytes=kv_gb * GB / tokens if kv_gb and tokens else None,
            context_len=f.get("context_len") or context_length,
            mamba_slots=slots, slot_gb=mamba_gb / slots if slots else None,
            slots_per_req=int(f.get("mamba_slots_per_request") or slots_per_request(spec)),
            free_before_gb=f.get("avail_before_load_gb"),
            mem_fraction=f.get("mem_fraction_static") or mem_fraction_static,
            cuda_graph_gb=f.get("cuda_graph_gb"),
            requested=f.get("requested_max_running_requests") or max_running_requests,
            speculative=spec,
        )

    def kv_gb(self) -> float:
        return self.kv_tokens * (self.cell_bytes or 0) / GB

    def plan(self, requests: int, context_len: int | None = None) -> dict[str, Any] | None:
        """What it takes for `requests` full-length requests: extra GB, and the mem_fraction_static."""
        ctx = context_len or self.context_len
        if not (self.cell_bytes and ctx and self.free_before_gb and self.mem_fraction):
            return None
        need_kv_gb = requests * ctx * self.cell_bytes / GB
        extra_kv = max(0.0, need_kv_gb - self.kv_gb())
        slots = self.mamba_slots
        need_slots = requests * self.slots_per_req if slots is not None else None
        extra_mamba = max(0, (need_slots or 0) - (slots or 0)) * (self.slot_gb or 0)
        fraction = self.mem_fraction + (extra_kv + extra_mamba) / self.free_before_gb
        fraction = math.ceil(fraction * 100) / 100
        left = self.free_before_gb * (1 - fraction)
        graphs = self.cuda_graph_gb or 0.0
        fits = fraction <= MAX_MEM_FRACTION and left >= graphs + ACTIVATION_HEADROOM_GB
        return {"requests": requests, "need_kv_gb": need_kv_gb, "extra_kv_gb": extra_kv, "extra_mamba_gb": extra_mamba,
                "slots": max(slots or 0, need_slots or 0) if slots is not None else None,
                "fraction": fraction, "left_gb": left, "fits": fits}

    def estimate(self, *, mem_fraction: float | None, mamba_slots: int | None, context_len: int | None,
                 requested: int | None) -> dict[str, Any] | None:
        """The same GPU and model under other settings: KV tokens and the request cap."""
        if not (self.cell_bytes and self.free_before_gb and self.mem_fraction):
            return None
        slots = mamba_slots if mamba_slots is not None else self.mamba_slots
        rest = self.kv_gb() + (self.mamba_slots or 0) * (self.slot_gb or 0)
        rest += self.free_before_gb * ((mem_fraction or self.mem_fraction) - self.mem_fraction)
        tokens = kv_tokens(rest - (slots or 0) * (self.slot_gb or 0), self.cell_bytes)
        ctx = context_len or self.context_len or 0
        limits = request_limits(tokens, context_len=ctx, requested=requested,
                                mamba_slots=slots if self.mamba_slots is not None else None,
                                speculative=self.speculative)
        cap = min(limits.values())
        return {"kv_tokens": tokens, "mamba_slots": slots, "slots_per_req": self.slots_per_req, "context_len": ctx,
                "limits": limits, "max_running_requests": cap,
                "cause": "max_running_zero" if cap <= 0 else ("not_enough_memory" if tokens <= 0 else None)}
