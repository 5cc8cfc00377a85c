"""No cause id spelled as a string outside the registry (svcdiag/sglang/failures/): the code names a cause by its
`Cause` member, so that a reader's `grep Cause.CUDA_OOM` finds every place that reads it and a renamed id leaves no
stale string behind. Tests may still spell one where they assert what a user reads (JSON, a report)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from svcdiag.sglang.failures import Cause

ROOT = Path(__file__).resolve().parents[1]

#: cause ids that are also words of another vocabulary: a string there is that other word, never a cause
OTHER_VOCABULARY = {
    Cause.TIMED_OUT: "a verdict (judge/verdict.py's EXIT_CODES: healthy, failed, timed_out, incomplete)",
    Cause.INCOMPLETE: "a verdict (judge/verdict.py's EXIT_CODES)",
    Cause.EXITED: "a unit state systemd reports (judge/unit_lines.py's UnitState), a child's CLD code (systemd/dbus.py)",
    Cause.STOPPED: "a unit state (UnitState), and a unit's state on the board and in `svcdiag stop`",
    Cause.EXCEPTION: "a log level (logging's `logger.exception`: scripts/sglang-message-catalogue)",
}
#: where every cause id may be a string: the registry itself; the stand-in SGLang, which plays a server and imports
#: nothing of the judge (its `fault`s are what it does, some named after the cause they should end in)
FREE = ("svcdiag/sglang/failures/", "svcdiag/sglang/causes.py", "svcdiag/sim/")
#: what names a cause where a string is compared with it or given to it
CAUSE_NAMES = {"cause", "died_of", "cause_id"}


def _sources() -> list[Path]:
    scripts = [p for p in (ROOT / "scripts").iterdir() if p.is_file() and p.read_text(errors="ignore").startswith("#!/usr/bin/env python")]
    return [*sorted((ROOT / "svcdiag").rglob("*.py")), *sorted((ROOT / "bench").glob("*.py")), *sorted(scripts)]


def _named_cause(node: ast.AST) -> bool:
    return (isinstance(node, ast.Name) and node.id in CAUSE_NAMES) or \
        (isinstance(node, ast.Attribute) and node.attr in CAUSE_NAMES) or \
        (isinstance(node, ast.Constant) and node.value in CAUSE_NAMES)


def _as_cause(tree: ast.AST) -> set[int]:
    """The ids of string constants used as a cause: `cause=…`, compared with a cause, a dict's "cause" value."""
    out: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.keyword) and node.arg in CAUSE_NAMES:
            out.add(id(node.value))
        elif isinstance(node, ast.Compare) and any(_named_cause(n) for n in (node.left, *node.comparators)):
            for n in (node.left, *node.comparators):
                out |= {id(e) for e in ast.walk(n) if isinstance(e, ast.Constant)}
        elif isinstance(node, ast.Dict):
            out |= {id(v) for k, v in zip(node.keys, node.values, strict=True) if k is not None and _named_cause(k)}
    return out


def cause_strings(rel: str, text: str) -> list[str]:
    """`file:line: 'id'` for each string constant of a source that is a cause id where the code means a cause."""
    if rel.startswith(FREE):
        return []
    tree = ast.parse(text, rel)
    as_cause = _as_cause(tree)
    ids = {c.value for c in Cause}
    return [f"{rel}:{n.lineno}: {n.value!r}" for n in ast.walk(tree)
            if isinstance(n, ast.Constant) and isinstance(n.value, str) and n.value in ids
            and (n.value not in OTHER_VOCABULARY or id(n) in as_cause)]


def test_no_cause_id_is_spelled_as_a_string_outside_the_registry() -> None:
    found = [hit for path in _sources() for hit in cause_strings(path.relative_to(ROOT).as_posix(), path.read_text())]
    assert not found, "name these causes by their Cause member:\n" + "\n".join(found)


@pytest.mark.parametrize(("code", "hits"), [
    ('if v.cause == "cuda_oom":\n    pass\n', 1),  # a cause, compared
    ('Verdict(verdict="incomplete", cause="timed_out")\n', 1),  # a verdict is no cause; given as a cause, it is
    ('STATES = ("exited", "stopped")\nEXIT = {"timed_out": 3}\n', 0),  # a unit state, a verdict
    ('x = {"cause": "stopped"}\n', 1),
    ('if cause == Cause.CUDA_OOM:\n    pass\n', 0),
])
def test_the_scan_tells_a_cause_from_another_vocabularys_word(code: str, hits: int) -> None:
    assert len(cause_strings("svcdiag/judge/probe.py", code)) == hits, cause_strings("svcdiag/judge/probe.py", code)
    assert cause_strings("svcdiag/sglang/failures/probe.py", code) == []
