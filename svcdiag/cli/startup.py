"""`dataclasses` imported without `inspect`, for the commands served without click.

Python 3.11's dataclasses imports inspect (with it ast, dis, tokenize, linecache: ~12 ms, a third
of `python -c pass`) for one use: `inspect.signature(cls)`, the docstring it makes for a dataclass
that has none. Every svcdiag dataclass has one (tests/test_dataclass_docstrings.py), so the CLI
loads dataclasses with `inspect` stood in for while it loads: the stand-in imports the real module
the first time dataclasses asks it for anything, and any later `import inspect` gets the real one.
"""

from __future__ import annotations

import sys
import types

TYPE_CHECKING = False  # typing costs ~5 ms (tomllib imports it anyway, replay does not)
if TYPE_CHECKING:
    from typing import Any


class _Inspect(types.ModuleType):
    """dataclasses' `inspect`: the real module, imported on first use."""

    def __getattr__(self, name: str) -> Any:
        if sys.modules.get("inspect") is self:  # asked while dataclasses loads: the real one takes its place
            del sys.modules["inspect"]
        import inspect

        return getattr(inspect, name)


def import_dataclasses() -> None:
    """Import dataclasses with the stand-in as its `inspect` (where neither is imported yet)."""
    if "dataclasses" in sys.modules or "inspect" in sys.modules:
        return
    stand_in = sys.modules["inspect"] = _Inspect("inspect")
    try:
        import dataclasses  # noqa: F401  (binds the stand-in as dataclasses.inspect)
    finally:
        if sys.modules.get("inspect") is stand_in:
            del sys.modules["inspect"]
