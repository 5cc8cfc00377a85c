"""Progress within a phase: the latest tqdm update per rank, summed up as one view of the phase.

Pure. Progress is never a milestone: it changes no phase, no verdict and no deadline (a
weight load that crawls still times out when its phase's deadline says so). It only says
how far the phase has come, how fast, and which rank is the slowest.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from svcdiag.sglang.events import Event, ProgressBar
from svcdiag.sglang.grammar import tp_rank

TYPE_CHECKING = False  # typing costs ~3 ms to import, and no module a replay loads needs it at run time
if TYPE_CHECKING:
    from typing import Any


@dataclass(frozen=True, slots=True, kw_only=True)
class PhaseProgress(Event):
    """Where the current phase is: its slowest rank's bar, with a rate and an ETA."""

    kind = "phase_progress"
    phase: str
    what: str  # shards | cuda_graph
    label: str
    done: int
    total: int
    rate: float | None = None  # items per second
    eta_s: float | None = None  # seconds left at that rate
    slowest_rank: int | None = None  # set only when ranks differ
    ranks_done: dict[str, int] = field(default_factory=dict)  # "TP1" -> done, when several ranks report

    @property
    def fraction(self) -> float:
        return min(1.0, self.done / self.total) if self.total > 0 else 0.0

    @property
    def percent(self) -> int:
        return int(self.fraction * 100)

    def figures(self) -> dict[str, Any]:
        out: dict[str, Any] = {"what": self.what, "label": self.label, "done": self.done, "total": self.total,
                               "percent": self.percent, "rate": None if self.rate is None else round(self.rate, 4),
                               "eta_s": None if self.eta_s is None else round(self.eta_s, 1)}
        if self.slowest_rank is not None:
            out["slowest_rank"] = self.slowest_rank
        if self.ranks_done:
            out["ranks_done"] = dict(self.ranks_done)
        return out

    @classmethod
    def from_figures(cls, phase: str, fig: dict[str, Any], ts: float | None = None) -> PhaseProgress:
        return cls(ts=ts, phase=phase, what=fig.get("what", ""), label=fig.get("label", ""), done=int(fig["done"]),
                   total=int(fig["total"]), rate=fig.get("rate"), eta_s=fig.get("eta_s"),
                   slowest_rank=fig.get("slowest_rank"), ranks_done=dict(fig.get("ranks_done") or {}))


class ProgressTracker:
    """The latest bar of each rank in each phase (a new bar label starts that rank's bar afresh)."""

    def __init__(self) -> None:
        self.bars: dict[str, dict[int | None, ProgressBar]] = {}
        self._first: dict[tuple[str, int | None, str], ProgressBar] = {}  # for a rate when tqdm gives none
        self.latest: dict[str, PhaseProgress] = {}

    def feed(self, phase: str, bar: ProgressBar) -> PhaseProgress:
        rank = tp_rank(bar.ranks)
        by_rank = self.bars.setdefault(phase, {})
        prev = by_rank.get(rank)
        key = (phase, rank, bar.label)
        if prev is None or prev.label != bar.label or bar.done < prev.done:
            self._first[key] = bar  # a new bar (the draft's shards after the target's)
        by_rank[rank] = bar
        current = [b for b in by_rank.values() if b.label == bar.label]
        slow = min(current, key=lambda b: (b.done / b.total if b.total else 0.0, -(tp_rank(b.ranks) or 0)))
        # the rate seen on the clock (the journal's): truer than tqdm's own when lines are timed; else tqdm's
        rate = slow.rate
        first = self._first.get((phase, tp_rank(slow.ranks), slow.label))
        if first is not None and first.ts is not None and slow.ts is not None \
                and slow.ts > first.ts and slow.done > first.done:
            rate = (slow.done - first.done) / (slow.ts - first.ts)
        eta = (slow.total - slow.done) / rate if rate else None
        if slow.done >= slow.total:
            eta = 0.0
        ranks = {b.ranks: b.done for b in current if b.ranks}
        differ = len({b.done for b in current}) > 1
        p = PhaseProgress(ts=bar.ts, phase=phase, what=slow.what, label=slow.label, done=slow.done, total=slow.total,
                          rate=rate, eta_s=eta, slowest_rank=tp_rank(slow.ranks) if differ else None,
                          ranks_done=ranks if len(ranks) > 1 else {})
        self.latest[phase] = p
        return p
