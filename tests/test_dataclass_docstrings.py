"""Every dataclass in svcdiag says what it is for: without a docstring, dataclasses writes one at import
from `inspect.signature` of the class (for Figures' 76 fields, a third of `preflight`'s import of it)."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def undocumented(source: str, name: str) -> list[str]:
    """`name:line: Class` for each class decorated as a dataclass (or events' `_event`) without a docstring."""
    return [f"{name}:{n.lineno}: {n.name}" for n in ast.walk(ast.parse(source, name))
            if isinstance(n, ast.ClassDef) and not ast.get_docstring(n)
            and any("dataclass" in ast.unparse(d) or ast.unparse(d) == "_event" for d in n.decorator_list)]


def test_every_dataclass_has_a_docstring() -> None:
    found = [hit for p in sorted((ROOT / "svcdiag").rglob("*.py")) for hit in undocumented(p.read_text(), str(p.relative_to(ROOT)))]
    assert not found, "give these dataclasses a docstring (one line: what it is for):\n" + "\n".join(found)


def test_the_check_sees_a_dataclass_without_one() -> None:
    src = "@dataclass(frozen=True)\nclass A:\n    x: int\n\n@_event\nclass B(Event):\n    y: int\n\n@dataclass\nclass C:\n    '''Why.'''\n"
    assert undocumented(src, "m.py") == ["m.py:2: A", "m.py:6: B"]
