"""The failure classes: one row per (cause, sub-case), the one place a failure's words live, filed by family.

Each module of this package files the rows of its causes' families (memory, gpu, distributed, model, install,
network, host, process, serving; `_model.FAMILY` names each cause's family once), and each row carries its
`priority`: the order below is the rows' priorities, whatever module or place in it a row stands in.

A row holds the patterns that recognise it, each named by where it matches (`line`: an
exception's final line or a lone fatal line, which names the cause; `said`: the failure's record,
its message first and then its evidence, one per line, which picks the sub-case: `\\A.*` anchors
on the message, `^File ` on a traceback's frame; `read`: what else a picked row captures; `alone`: a
line of its own that names the cause only where the grammar finds it, as argparse's last word), its
role, the releases it applies to, its fixes and one line of text (`doc`). Its long text, a cause's evidence and a
row's explanation (templates over the captures; a row's `words` function computes what a sentence needs beyond
them) and the named sentences a function of judge/diagnosis.py chooses among, is the family's .toml beside its
module (memory.toml for memory.py), read when first asked (`prose`).
The grammar asks `classify` for a line's cause (rows by ascending priority: the first whose `line` matches) and a
Failure `refine`s itself into its sub-case once; diagnosis looks the row up and matches no text. docs/replay.md's
cause table is `cause_table()`, and docs/causes.md every row with its prose (scripts/cause-table;
tests/test_failures.py fails when they differ).
"""

from __future__ import annotations

import re
from functools import cache
from pathlib import Path
from typing import Any

from svcdiag.sglang.failures import _prose, distributed, gpu, host, install, memory, model, network, process, serving
from svcdiag.sglang.failures._model import FAMILY, Cause, FailureClass, Family, Role, Words, in_family
from svcdiag.sglang.failures._prose import Prose
from svcdiag.sglang.failures.gpu import CUSTOM_ALL_REDUCE_FRAME_RE
from svcdiag.sglang.failures.install import FLAG_CHECK_FRAME_RE, FLAG_NAMED_RE

__all__ = ["BY_KEY", "CLASSIFY", "CUSTOM_ALL_REDUCE_FRAME_RE", "FAILURES", "FAMILY", "FLAG_CHECK_FRAME_RE", "FLAG_NAMED_RE",
           "SUBCASES", "Cause", "FailureClass", "Family", "Prose", "Role", "Words", "cause_table", "classify", "filed",
           "in_family", "own_line", "prose", "refine", "row", "row_said"]

_MODULES = (memory, gpu, distributed, model, install, network, host, process, serving)


def filed(modules: tuple[Any, ...]) -> tuple[FailureClass, ...]:
    """Every module's rows in priority order; a row filed outside its cause's family, or two rows of one priority,
    is a registry that cannot say which comes first, refused at import."""
    rows = []
    for mod in modules:
        for r in mod.ROWS:
            if FAMILY[r.cause] not in mod.FAMILIES:
                raise ValueError(f"{mod.__name__}: the row {r.cause}/{r.detail} belongs to family {FAMILY[r.cause]}")
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
#: each cause's sub-cases, in the order they are tried
SUBCASES: dict[Cause, tuple[FailureClass, ...]] = {
    c: tuple(r for r in FAILURES if r.cause == c and r.detail) for c in Cause}
BY_KEY: dict[tuple[str, str], FailureClass] = {(r.cause, r.detail): r for r in FAILURES}


def classify(text: str) -> Cause | None:
    """The cause a final exception line or a fatal line names, or None."""
    for cause, pat in CLASSIFY:
        if pat.search(text):
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


def own_line(cause: Cause, detail: str = "") -> re.Pattern[str]:
    """A row's `alone` pattern, for the grammar to match where such a line stands."""
    pattern = BY_KEY[(cause, detail)].alone
    if pattern is None:
        raise KeyError(f"the row {cause}/{detail} has no line of its own")
    return pattern


def row_said(cause: Cause, detail: str) -> re.Pattern[str]:
    """A sub-case's `said` pattern, for the grammar where the words that pick the sub-case also name the cause."""
    pattern = BY_KEY[(cause, detail)].said
    if pattern is None:
        raise KeyError(f"the row {cause}/{detail} has no words of its own")
    return pattern


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
