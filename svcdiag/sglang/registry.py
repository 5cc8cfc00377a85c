"""The failure registry's questions, asked of `sglang.failures` when a line first asks one.

Importing the registry builds its ~170 rows (with their patterns' and prose's modules: ~10 ms, the largest
part of the judge's import after its events). A healthy start's lines never ask it (no line looks like a
failure), so the grammar, its endings and the traceback reader ask through here, and a replay, `logs
--milestones` or `status` of a healthy start never builds it. Each function is the registry's own.
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from svcdiag.sglang.causes import Cause, Place
    from svcdiag.sglang.failures import FailureClass, Said


def classify(text: str, place: Place | None = None) -> Cause | None:
    """failures.classify: the cause a line names at a place (None: wherever it stands), or None."""
    from svcdiag.sglang import failures

    return failures.classify(text, place)


def own(text: str, place: Place) -> Said | None:
    """failures.own: the failure a line of its own says at a place, or None."""
    from svcdiag.sglang import failures

    return failures.own(text, place)


def raised_in(final: str, frames: list[str], cut: bool) -> Cause | None:
    """failures.raised_in: the cause the frames an exception was raised under tell, when no line names one."""
    from svcdiag.sglang import failures

    return failures.raised_in(final, frames, cut)


def reads_on(final: str) -> bool | None:
    """failures.reads_on: whether the row a traceback's final line names reads on past it; None: it names none."""
    from svcdiag.sglang import failures

    return failures.reads_on(final)


def refine(cause: str, said: str) -> tuple[str, dict[str, str]]:
    """failures.refine: the sub-case a failure's record is, and what its pattern captured."""
    from svcdiag.sglang import failures

    return failures.refine(cause, said)


def row(cause: str, detail: str = "") -> FailureClass | None:
    """failures.row: the row of a cause's sub-case, or of the cause itself."""
    from svcdiag.sglang import failures

    return failures.row(cause, detail)
