"""`tune`'s one window onto the memory model (`sglang.memory.predict`, SGLang's own arithmetic
for the release): the costs of one GPU, from preflight's prior or from a start's logged
figures, and what a candidate's settings give under them.

Pure (no I/O), and the only module of `tune` that knows the memory model's entry point.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any

from svcdiag.config.service import ServiceConfig
from svcdiag.sglang import memory
from svcdiag.sglang.figures import Figures
from svcdiag.sglang.memory import ACTIVATION_HEADROOM_GB, GB, MAX_MEM_FRACTION, SizingInputs
from svcdiag.sglang.preflight import Inputs, sizing_inputs

__all__ = ["ACTIVATION_HEADROOM_GB", "MAX_MEM_FRACTION", "Capacity", "Costs", "blank", "capacity", "from_figures",
           "from_inputs"]

#: a start's figures that differ from the model's prediction by more than this recalibrate the KV cell
CALIBRATE_AT = 0.002


@dataclass(frozen=True, slots=True)
class Costs:
    """One GPU's start as the memory model takes it (its SizingInputs: free memory, weights, the
    KV cell, the Mamba state of a slot, the speculative settings), the settings left to each candidate."""

    sizing: SizingInputs
    source: str = "prior"  # "prior" (preflight's estimate) or "measured" (a start's log)
    graph_gb: float = 0.0  # CUDA graphs, paid from the (1 − mem_fraction_static) reserve

    @property
    def known(self) -> bool:
        """Whether the KV cell is known: without it nothing can be sized."""
        return self.sizing.kv_cell_bytes > 0 and self.sizing.free_before_gb > 0

    @property
    def free_gb(self) -> float:
        return self.sizing.free_before_gb

    @property
    def slot_gb(self) -> float | None:
        b = self.sizing.mamba_per_req_bytes
        return None if b is None else b / GB

    @property
    def slots_per_req(self) -> int:
        return memory.state_slots_per_request(self.sizing, memory.family(self.sizing.version))

    @property
    def reserve_gb(self) -> float:
        """What (1 − mem_fraction_static) of the card must hold: graphs, the draft, activations."""
        counted = memory.family(self.sizing.version).draft_weights_counted  # else loaded after the pools
        return self.graph_gb + (0.0 if counted else self.sizing.draft_weights_gb) + ACTIVATION_HEADROOM_GB

    def at(self, *, fraction: float, mamba_slots: int | None, context: int, requested: int | None,
           draft_tokens: int | None = None) -> SizingInputs:
        return replace(self.sizing, mem_fraction_static=fraction, max_mamba_cache_size=mamba_slots,
                       context_len=context, max_running_requests=requested,
                       num_draft_tokens=draft_tokens or self.sizing.num_draft_tokens)

    def to_json(self) -> dict[str, Any]:
        s = self.sizing
        return {"free_gb": round(s.free_before_gb, 3), "weights_gb": round(s.weights_gb, 3),
                "cell_bytes": s.kv_cell_bytes + (s.draft_cell_bytes or 0),
                "slot_gb": None if self.slot_gb is None else round(self.slot_gb, 4),
                "slots_per_req": self.slots_per_req, "draft_gb": round(s.draft_weights_gb, 3),
                "graph_gb": round(self.graph_gb, 3), "family": memory.family(s.version).name, "source": self.source}


@dataclass(frozen=True, slots=True)
class Capacity:
    """What a candidate's settings are predicted to hold: KV tokens, Mamba slots, requests."""

    kv_tokens: int
    mamba_slots: int | None
    max_running: int
    limits: dict[str, int]
    failure: str | None = None


def capacity(c: Costs, *, fraction: float, mamba_slots: int | None, context: int, requested: int | None,
             draft_tokens: int | None = None) -> Capacity:
    """The pools and request cap SGLang would give these settings, by the memory model."""
    p = memory.predict(c.at(fraction=fraction, mamba_slots=mamba_slots, context=context, requested=requested,
                            draft_tokens=draft_tokens))
    return Capacity(p.kv_tokens, p.mamba_slots, p.max_running_requests, dict(p.limits), p.failure)


def from_inputs(cfg: ServiceConfig, inp: Inputs) -> Costs:
    """The prior: preflight's Inputs for this config."""
    return Costs(sizing_inputs(cfg, inp))


def blank(cfg: ServiceConfig) -> Costs:
    """No prior: the config's speculative and release settings, every cost unknown until a start logs it."""
    inp = Inputs(gpu_free_gb=0.0, gpu_source="", weights_bytes=0, kv_bytes_per_token=0,
                 mamba_slot_bytes=(0, 0) if cfg.hybrid else None, context_len=cfg.context_length)
    return Costs(sizing_inputs(cfg, inp), source="none")


def from_figures(f: Figures, settings: dict[str, Any], before: Costs) -> Costs:
    """`before` with every cost the start logged replacing its estimate: free memory, the
    weights, the draft, the Mamba state of a slot, the KV cell; then the cell recalibrated so
    the model gives the KV tokens the start got (what neither knew, such as a draft's own KV)."""
    s = before.sizing
    changes: dict[str, Any] = {}
    if f.avail_before_load_gb:
        changes["free_before_gb"] = float(f.avail_before_load_gb)
    if f.weights_gb is not None:
        changes["weights_gb"] = float(f.weights_gb)
    if f.draft_weights_gb is not None:
        changes["draft_weights_gb"] = float(f.draft_weights_gb)
    if f.mamba_slots_per_request:
        changes["slots_per_request"] = int(f.mamba_slots_per_request)
    slots = f.mamba_slots
    state = (f.mamba_conv_gb or 0.0) + (f.mamba_ssm_gb or 0.0)
    if slots and state:
        pad = 1 if memory.family(s.version).mamba == "joint_padded" else 0
        changes["mamba_per_req_bytes"] = int(state * GB / (slots + pad))
    tokens = f.kv_tokens or 0
    kv_gb = f.kv_pool_gb
    if tokens and kv_gb:
        changes["kv_cell_bytes"] = round(kv_gb * GB / tokens)
    if not changes:
        return before
    c = Costs(replace(s, **changes), "measured", float(f.cuda_graph_gb or before.graph_gb))
    if not (tokens and c.known and settings.get("mem_fraction_static")):
        return c
    p = memory.predict(c.at(fraction=settings["mem_fraction_static"], mamba_slots=settings.get("max_mamba_cache_size"),
                            context=settings.get("context_length") or s.context_len,
                            requested=settings.get("max_running_requests"),
                            draft_tokens=settings.get("speculative.num_draft_tokens")))
    if p.kv_tokens > 0 and abs(p.kv_tokens - tokens) > CALIBRATE_AT * tokens:
        cell = p.cell_bytes * p.kv_tokens / tokens  # all the pool's cost per token, the draft's included
        c = replace(c, sizing=replace(c.sizing, kv_cell_bytes=math.ceil(cell), draft_cell_bytes=None,
                                      draft_layers=None))
    return c


def up_to(x: float) -> float:
    """A mem_fraction_static as SGLang is given it: two decimals, rounded up."""
    return math.ceil(round(x * 100, 6)) / 100


def down_to(x: float) -> float:
    return math.floor(round(x * 100, 6)) / 100
