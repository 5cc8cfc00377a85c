"""`tune`'s one window onto the memory model: per-GPU costs, from preflight's prior or from a
start's logged figures, and what a candidate's settings give under them.

Pure arithmetic over `sglang.memory` (no I/O), kept in this one module so that when the
memory model's entry point changes, `tune` changes here and nowhere else.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any

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

__all__ = ["ACTIVATION_HEADROOM_GB", "AUTO_MEM_FRACTION", "MAX_MEM_FRACTION", "Capacity", "Costs", "capacity",
           "from_figures", "from_inputs"]


@dataclass(frozen=True, slots=True)
class Costs:
    """What one GPU has and what each thing on it costs: the figures a candidate is sized from."""

    free_gb: float  # free before the weights load
    weights_gb: float
    cell_bytes: float  # KV bytes per token (the draft's share included where the log counts it)
    slot_gb: float | None  # Mamba state per slot; None: a dense model
    slots_per_req: int
    speculative: bool
    graph_gb: float = 0.0  # CUDA graphs, paid from the (1 − mem_fraction_static) reserve
    draft_gb: float = 0.0  # the draft model's weights, from the same reserve
    source: str = "prior"  # "prior" (preflight's estimate) or "measured" (a start's log)

    @property
    def reserve_gb(self) -> float:
        """What (1 − mem_fraction_static) of the card must hold: graphs, the draft, activations."""
        return self.graph_gb + self.draft_gb + ACTIVATION_HEADROOM_GB

    def request_gb(self, context: int) -> float:
        """One full-length request: its KV cells and its Mamba state slots."""
        return context * self.cell_bytes / GB + self.slots_per_req * (self.slot_gb or 0.0)

    def static_gb(self, fraction: float) -> float:
        """What a mem_fraction_static leaves for the caches once the weights are in."""
        return self.free_gb * fraction - self.weights_gb

    def to_json(self) -> dict[str, Any]:
        return {"free_gb": round(self.free_gb, 3), "weights_gb": round(self.weights_gb, 3),
                "cell_bytes": round(self.cell_bytes, 1), "slot_gb": None if self.slot_gb is None else round(self.slot_gb, 4),
                "slots_per_req": self.slots_per_req, "graph_gb": round(self.graph_gb, 3),
                "draft_gb": round(self.draft_gb, 3), "source": self.source}


@dataclass(frozen=True, slots=True)
class Capacity:
    kv_tokens: int
    mamba_slots: int | None
    max_running: int
    limits: dict[str, int]


def capacity(c: Costs, *, fraction: float | None, mamba_slots: int | None, context: int,
             requested: int | None) -> Capacity:
    """The pools and request cap SGLang would give these settings, by the memory model."""
    rest = c.static_gb(fraction if fraction is not None else AUTO_MEM_FRACTION)
    slots: int | None = None
    if c.slot_gb is not None:
        slots = mamba_slots if mamba_slots is not None else mamba_share_slots(rest, c.slot_gb)
    tokens = kv_tokens(rest - (slots or 0) * (c.slot_gb or 0.0), c.cell_bytes)
    limits = request_limits(tokens, context_len=context, requested=requested, mamba_slots=slots,
                            speculative=c.speculative)
    return Capacity(tokens, slots, max(0, min(limits.values())), limits)


def from_inputs(inp: Any, *, speculative: bool) -> Costs:
    """The prior: preflight's Inputs (sglang.preflight), per GPU."""
    slot = sum(inp.mamba_slot_bytes) / GB if inp.mamba_slot_bytes else None
    return Costs(inp.gpu_free_gb, inp.weights_bytes / GB, float(inp.kv_bytes_per_token), slot,
                 slots_per_request(speculative), speculative, draft_gb=inp.draft_bytes / GB)


def from_figures(f: dict[str, Any], before: Costs | None, *, speculative: bool) -> Costs | None:
    """Costs as a start logged them, each figure replacing the estimate it measures; a figure the
    log does not state keeps `before`'s. None when neither says enough."""
    tokens = f.get("kv_tokens") or 0
    kv_gb = f.get("kv_gb") if f.get("kv_gb") is not None else (f.get("kv_k_gb") or 0) + (f.get("kv_v_gb") or 0)
    kv_gb += f.get("draft_kv_gb") or 0.0
    cell = kv_gb * GB / tokens if kv_gb and tokens else (before.cell_bytes if before else None)
    slots = f.get("mamba_slots")
    mamba_gb = sum(f.get(k) or 0.0 for k in ("mamba_conv_gb", "mamba_ssm_gb", "mamba_intermediate_ssm_gb",
                                             "mamba_intermediate_conv_gb"))
    slot = mamba_gb / slots if slots and mamba_gb else (before.slot_gb if before else None)
    free = f.get("avail_before_load_gb") or (before.free_gb if before else None)
    weights = f.get("weights_gb") if f.get("weights_gb") is not None else (before.weights_gb if before else None)
    if cell is None or free is None or weights is None:
        return None
    spr = int(f.get("mamba_slots_per_request") or (before.slots_per_req if before else slots_per_request(speculative)))
    base = before or Costs(free, weights, cell, slot, spr, speculative)
    return replace(base, free_gb=float(free), weights_gb=float(weights), cell_bytes=float(cell), slot_gb=slot,
                   slots_per_req=spr, graph_gb=float(f.get("cuda_graph_gb") or base.graph_gb),
                   draft_gb=float(f.get("draft_weights_gb") or base.draft_gb), source="measured")


def up_to(x: float) -> float:
    """A mem_fraction_static as SGLang is given it: two decimals, rounded up."""
    return math.ceil(round(x * 100, 6)) / 100


def down_to(x: float) -> float:
    return math.floor(round(x * 100, 6)) / 100
