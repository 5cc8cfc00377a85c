"""`dataclasses` loaded for the commands served without click: without `inspect` or `copy`, and with the
methods it writes compiled ahead.

Python 3.11's dataclasses imports inspect (with it ast, dis, tokenize, linecache: ~12 ms, a third
of `python -c pass`) for one use: `inspect.signature(cls)`, the docstring it makes for a dataclass
that has none. Every svcdiag dataclass has one (tests/test_dataclass_docstrings.py), so the CLI
loads dataclasses with `inspect` stood in for while it loads: the stand-in imports the real module
the first time dataclasses asks it for anything, and any later `import inspect` gets the real one.
`copy` likewise (with weakref ~1 ms): dataclasses calls its deepcopy only in asdict and astuple.

Then dataclasses finds the code of each method it writes in `svcdiag.dataclass_compiled` before it
compiles the text itself (`svcdiag.dataclass_compile` says why and how).
"""

from __future__ import annotations

import os
import sys
import types
from importlib import import_module

TYPE_CHECKING = False  # typing costs ~5 ms (tomllib imports it anyway, replay does not)
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any


class _Deferred(types.ModuleType):
    """A module dataclasses imports for a rare use (`inspect`; `copy`, whose deepcopy only asdict and astuple
    call: with weakref ~1 ms): the real module, imported on first use, then dataclasses' own."""

    def __getattr__(self, name: str) -> Any:
        if sys.modules.get(self.__name__) is self:  # asked while dataclasses loads: the real one takes its place
            del sys.modules[self.__name__]
        real = import_module(self.__name__)
        dataclasses = sys.modules.get("dataclasses")
        if dataclasses is not None and vars(dataclasses).get(self.__name__) is self:
            setattr(dataclasses, self.__name__, real)
        return getattr(real, name)


#: the modules dataclasses imports that its stand-ins defer
_DEFERRED = ("inspect", "copy")


def import_dataclasses() -> None:
    """Import dataclasses with stand-ins as its `inspect` and `copy`, and the compiled methods as its `exec`
    (where none of them is imported yet)."""
    if any(name in sys.modules for name in ("dataclasses", *_DEFERRED)):
        return
    stand_ins = {name: _Deferred(name) for name in _DEFERRED}
    sys.modules.update(stand_ins)
    try:
        import dataclasses
    finally:
        for name, stand_in in stand_ins.items():
            if sys.modules.get(name) is stand_in:
                del sys.modules[name]
    compiled = compiled_exec()
    if compiled is not None:
        dataclasses.exec = compiled  # type: ignore[attr-defined]  (a global of dataclasses: the builtin's stand-in)


def compiled_exec() -> Callable[[str, dict[str, Any], dict[str, Any]], None] | None:
    """An `exec` for dataclasses' `_create_fn`: the code of a text compiled ahead (in the module of
    the class's module, imported when its first class is built), else the text compiled as the
    builtin does. None where the modules would cost more than they save: their bytecode not cached
    and not to be written (their source compiled at every start), or another Python (whose
    dataclasses writes other texts)."""
    here = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "dataclass_compiled")
    if sys.dont_write_bytecode and not os.path.exists(
            os.path.join(here, "__pycache__", f"__init__.{sys.implementation.cache_tag}.pyc")):
        return None
    from svcdiag import dataclass_compiled

    if sys.version_info[:2] != dataclass_compiled.PYTHON:
        return None
    codes: dict[str, dict[str, types.CodeType]] = {}

    def exec_(text: str, globals: dict[str, Any], ns: dict[str, Any]) -> None:
        module = globals.get("__name__", "")
        code = codes.get(module)
        if code is None:
            name = dataclass_compiled.MODULES.get(module)
            code = codes[module] = import_module(f"svcdiag.dataclass_compiled.{name}").CODE if name else {}
        found = code.get(text)
        if found is None:  # compiled as dataclasses' own exec would: without this module's __future__ flags
            exec(compile(text, "<string>", "exec", dont_inherit=True), globals, ns)
        else:  # what exec(text) defines: `__create_fn__`, with the class's module's globals
            ns["__create_fn__"] = types.FunctionType(found, globals, "__create_fn__")

    return exec_
