"""The failure classes: one row per (cause, sub-case), the one place a failure's words live, filed by family.

Each module of this package files the rows of its causes' families (memory, gpu, distributed, model, install,
network, host, process, serving; `_model.FAMILY` names each cause's family once), and each row carries its
`priority`: the order below is the rows' priorities, whatever module or place in it a row stands in.

A row holds the patterns that recognise it, each named by where it matches (`line`: an
exception's final line or a lone fatal line, which names the cause at the `Place`s of its `where`;
`said`: the failure's record, its message first and then its evidence, one per line, which picks the
sub-case: `\\A.*` anchors on the message, `^File ` on a traceback's frame; `read`: what else a picked
row captures; `alone`: lines of their own that name the cause at one place only, as argparse's last
word, with the failure they are; `raised`: frames that name it when no line does), its role, the
releases it applies to, its fixes and one line of text (`doc`). Its long text, a cause's evidence and a
row's explanation (templates over the captures; a row's `words` function computes what a sentence needs beyond
them) and the named sentences a function of judge/diagnosis.py chooses among, is the family's .toml beside its
module (memory.toml for memory.py), read when first asked (`prose`).
The grammar asks `classify` for a line's cause at a place (rows by ascending priority: the first tagged with the
place whose `line` matches), `own` for a line of its own at a place and `raised_in` for a traceback's frames,
and names no cause itself (docs/architecture.md, "Where a line stands"); a Failure `refine`s itself into its
sub-case once; diagnosis looks the row up and matches no text. docs/replay.md's cause table is `cause_table()`,
and docs/causes.md every row with its prose (scripts/cause-table; tests/test_failures.py fails when they differ).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from svcdiag.sglang.failures import _prose, distributed, gpu, host, install, memory, model, network, process, serving
from svcdiag.sglang.failures._model import (
    EVERYWHERE,
    FAMILY,
    Cause,
    FailureClass,
    Family,
    Own,
    Place,
    Raised,
    Role,
    Words,
    in_family,
)
from svcdiag.sglang.failures._prose import Prose
from svcdiag.sglang.failures.process import EXIT_STATUS, KERNEL_CHECK, SIGKILLED, SIGNALLED, UNNAMED

__all__ = ["BY_KEY", "CLASSIFY", "EVERYWHERE", "EXIT_STATUS", "FAILURES", "FAMILY", "KERNEL_CHECK", "PLACES",
           "SIGKILLED", "SIGNALLED", "SUBCASES", "UNNAMED", "Cause", "FailureClass", "Family", "Own", "Place", "Places",
           "Prose", "Raised", "Role", "Said", "Words", "by_place", "cause_table", "classify", "filed", "in_family", "own",
           "prose", "raised_in", "reads_on", "refine", "row"]

_MODULES = (memory, gpu, distributed, model, install, network, host, process, serving)


def filed(modules: tuple[Any, ...]) -> tuple[FailureClass, ...]:
    """Every module's rows in priority order; a row filed outside its cause's family, or two rows of one priority,
    is a registry that cannot say which comes first, refused at import (and an own line that is the row's `line`
    on a row without one)."""
    rows = []
    for mod in modules:
        for r in mod.ROWS:
            if FAMILY[r.cause] not in mod.FAMILIES:
                raise ValueError(f"{mod.__name__}: the row {r.cause}/{r.detail} belongs to family {FAMILY[r.cause]}")
            if r.line is None and any(o.pattern is None for o in r.alone):
                raise ValueError(f"{mod.__name__}: the row {r.cause}/{r.detail} has an own line of its `line`, and no line")
            rows.append(r)
    by_priority: dict[int, FailureClass] = {}
    for r in rows:
        if (other := by_priority.setdefault(r.priority, r)) is not r:
            raise ValueError(f"rows {other.cause}/{other.detail} and {r.cause}/{r.detail} share priority {r.priority}")
    return tuple(sorted(rows, key=lambda r: r.priority))


#: every row, in priority order
FAILURES: tuple[FailureClass, ...] = filed(_MODULES)

#: the causes a line names, in priority order
CLASSIFY: tuple[tuple[Cause, re.Pattern[str]], ...] = tuple((r.cause, r.line) for r in FAILURES if r.line is not None)


@dataclass(frozen=True, slots=True)
class Places:
    """The rows by the place they speak at, in priority order: what the grammar asks at each place."""

    at: dict[Place | None, tuple[tuple[Cause, re.Pattern[str]], ...]]  # `line`s tagged with the place (None: any)
    own: dict[Place, tuple[tuple[FailureClass, Own], ...]]  # lines of their own at the place
    raised: tuple[tuple[Cause, Raised], ...]  # frames that name a cause (Place.FRAME)
    reads_on: tuple[tuple[re.Pattern[str], bool], ...]  # final lines (Place.FINAL) and whether their words go on


def by_place(rows: tuple[FailureClass, ...]) -> Places:
    """The rows (in priority order) by place: the registry's own at import; a test's, with a row more."""
    lines = tuple((r, r.line) for r in rows if r.line is not None)
    return Places(at={None: tuple((r.cause, pat) for r, pat in lines),
                      **{p: tuple((r.cause, pat) for r, pat in lines if p in r.where) for p in Place}},
                  own={p: tuple((r, o) for r in rows for o in r.alone if o.place is p) for p in Place},
                  raised=tuple((r.cause, x) for r in rows for x in r.raised),
                  reads_on=tuple((pat, r.reads_on) for r, pat in lines if Place.FINAL in r.where))


PLACES = by_place(FAILURES)
#: each cause's sub-cases, in the order they are tried
SUBCASES: dict[Cause, tuple[FailureClass, ...]] = {
    c: tuple(r for r in FAILURES if r.cause == c and r.detail) for c in Cause}
BY_KEY: dict[tuple[str, str], FailureClass] = {(r.cause, r.detail): r for r in FAILURES}


def classify(text: str, place: Place | None = None) -> Cause | None:
    """The cause a line names at a place (None: wherever it stands), or None."""
    for cause, pat in PLACES.at[place]:
        if pat.search(text):
            return cause
    return None


def reads_on(final: str) -> bool | None:
    """Whether the row a traceback's final line names reads on past it (NCCL's `Last error:`); None: it names none."""
    for pat, goes_on in PLACES.reads_on:
        if pat.search(final):
            return goes_on
    return None


@dataclass(frozen=True, slots=True)
class Said:
    """A line of its own, read: the failure it is, built from its row's data."""

    cause: Cause
    message: str
    event: str
    signal: str | None


def own(text: str, place: Place) -> Said | None:
    """The failure a line of its own says at a place (the first row's, by priority), or None."""
    for r, o in PLACES.own[place]:
        if o.pattern is None:
            if r.line is None or (m := r.line.search(text)) is None:
                continue
        elif (m := o.pattern.match(text)) is None:
            continue
        cause = (classify(text, place) or r.cause) if o.deferred else r.cause
        message = o.says.format(*m.groups(), line=text) if o.says else text
        return Said(cause, message, o.event, o.signal)
    return None


def raised_in(final: str, frames: list[str], cut: bool) -> Cause | None:
    """The cause the frames an exception was raised under tell (stripped `File …` lines, outermost first) when no
    line names one; `cut`: the traceback has no final line, so its last frame is not the raising one."""
    for cause, x in PLACES.raised:
        if x.final is not None and x.final.search(final) is None:
            continue
        seen = (frames[-1:] if not cut else []) if x.raising else frames[-x.window:] if x.window else frames
        if x.frame is None or any(x.frame.search(f) for f in seen):
            return cause
    return None


def refine(cause: str, said: str) -> tuple[str, dict[str, str]]:
    """The sub-case a failure's record (its message and evidence) is, and what its pattern captured."""
    for row in SUBCASES.get(cause, ()):  # type: ignore[call-overload]  # a str is its Cause's key
        if row.said is not None and (m := row.said.search(said)) is not None:
            captures = {k: v for k, v in m.groupdict().items() if v is not None}
            captures |= _read(row, said, captures)
            return row.detail, captures | _read(BY_KEY[(row.cause, "")], said, captures)
    own = BY_KEY.get((cause, ""))
    return "", _read(own, said, {}) if own is not None else {}


def _read(row: FailureClass, said: str, have: dict[str, str]) -> dict[str, str]:
    """What a row's read patterns capture (each pattern's first match), beyond what is already had."""
    out: dict[str, str] = {}
    for pat in row.read:
        if (r := pat.search(said)) is not None:
            out.update((k, v) for k, v in r.groupdict().items() if v is not None and k not in have and k not in out)
    return out


def row(cause: str, detail: str = "") -> FailureClass | None:
    """The row of a cause's sub-case, or of the cause itself."""
    return BY_KEY.get((cause, detail)) or BY_KEY.get((cause, ""))


#: the module that files each family's rows
_FILED_BY = {f: mod for mod in _MODULES for f in mod.FAMILIES}


@cache
def _module_prose(mod: Any) -> dict[tuple[str, str], Prose]:
    return _prose.read(Path(mod.__file__).with_suffix(".toml"), mod.ROWS)


def prose(cause: str, detail: str = "") -> Prose:
    """A row's long text (its family's .toml, read when first asked): a cause's evidence, a row's explanation;
    empty where it has none."""
    return _module_prose(_FILED_BY[FAMILY[cause]]).get((cause, detail), Prose())  # type: ignore[index]  # a str is its Cause's key


def cause_table() -> str:
    """docs/replay.md's table of causes, from the rows and their evidence."""
    out = ["| cause | evidence line (example) |", "|---|---|"]
    out += [f"| `{r.cause}` | {prose(r.cause).evidence} |" for r in FAILURES if not r.detail]
    return "\n".join(out) + "\n"
