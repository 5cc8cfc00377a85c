"""The dataclasses' methods compiled ahead (svcdiag.dataclass_compile, #40): the package is current,
and a class built with it has the methods dataclasses would have made itself."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from svcdiag import dataclass_compile

ROOT = Path(__file__).resolve().parent.parent
pytestmark = pytest.mark.skipif(sys.version_info[:2] != (3, 11), reason="the package holds Python 3.11's texts")
#: the served commands' start-up: dataclasses with the compiled methods (bytecode written, as installed)
COMPILED = "from svcdiag.cli.startup import import_dataclasses\nimport_dataclasses()\n"
#: every dataclass of the recorded modules, and what dataclasses made of it
DUMP = """
import dataclasses, importlib, json, types
from svcdiag import dataclass_compile
out, used = {}, set()
for name in dataclass_compile.MODULES:
    importlib.import_module(name)
for module in sorted(m for m in __import__('sys').modules if m.startswith('svcdiag.') and 'dataclass_compiled' not in m):
    for cls in list(vars(__import__('sys').modules[module]).values()):
        if not (isinstance(cls, type) and dataclasses.is_dataclass(cls) and cls.__module__ == module):
            continue
        methods = {}
        for m in ('__init__', '__repr__', '__eq__', '__hash__', '__setattr__', '__delattr__'):
            fn = getattr(vars(cls).get(m), '__wrapped__', vars(cls).get(m))
            if isinstance(fn, types.FunctionType) and fn.__code__.co_filename in ('<string>',) or (
                    isinstance(fn, types.FunctionType) and 'dataclass_compiled' in fn.__code__.co_filename):
                c = fn.__code__
                used.add('dataclass_compiled' in c.co_filename)
                methods[m] = [c.co_code.hex(), c.co_names, c.co_varnames, c.co_freevars, repr(c.co_consts), c.co_name,
                              fn.__qualname__, fn.__module__, repr(fn.__defaults__), repr(fn.__kwdefaults__),
                              repr(fn.__annotations__), [repr(x.cell_contents) for x in fn.__closure__ or ()]]
        out[f'{module}.{cls.__qualname__}'] = [methods, [f.name for f in dataclasses.fields(cls)],
                                               repr(cls.__dataclass_params__), sorted(vars(cls))]
print(json.dumps([out, sorted(used)]))
"""


def _run(code: str) -> str:
    env = {**{k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}, "PYTHONHASHSEED": "0"}  # reprs of sets alike
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT,
                          env=env).stdout


def test_the_compiled_dataclasses_are_current() -> None:
    made = json.loads(_run("import json\nfrom svcdiag import dataclass_compile as c\n"
                           "print(json.dumps(c.package(c.record())))"))
    have = {p.name: p.read_text(encoding="utf-8") for p in dataclass_compile.OUT.glob("*.py")}
    assert have == made, "svcdiag/dataclass_compiled is stale: run python -m svcdiag.dataclass_compile"


def test_every_class_gets_the_methods_dataclasses_makes() -> None:
    plain, plain_used = json.loads(_run(DUMP))
    compiled, compiled_used = json.loads(_run(COMPILED + DUMP))
    assert plain_used == [False] and compiled_used == [True]  # every method from the package, none compiled
    assert len(plain) > 60
    assert compiled == plain


def test_a_config_and_a_verdict_behave_alike() -> None:
    code = """
import dataclasses, pickle
from pathlib import Path
from svcdiag.config.service import UnitsDir
from svcdiag.ops.offline.replay import replay, source
cfg = UnitsDir(Path('units'), 't').load('demo-smoke')
other = dataclasses.replace(cfg, tp_size=2)
print(repr(cfg), cfg == other, cfg == dataclasses.replace(other, tp_size=cfg.tp_size), hash(cfg) == hash(dataclasses.replace(cfg)))
print(dataclasses.asdict(cfg) == {f.name: getattr(cfg, f.name) for f in dataclasses.fields(cfg)} or dataclasses.asdict(cfg))
for attempt in (lambda: setattr(cfg, 'tp_size', 3), lambda: delattr(cfg, 'name'), lambda: type(cfg)(name='x')):
    try:
        attempt()
    except (dataclasses.FrozenInstanceError, TypeError) as e:
        print(type(e).__name__, e)
"""
    plain = _run(code)
    assert "FrozenInstanceError cannot assign to field 'tp_size'" in plain
    assert _run(COMPILED + code) == plain
