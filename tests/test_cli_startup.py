"""dataclasses loaded without inspect or copy (svcdiag.cli.startup): the commands served without click
import no inspect, and dataclasses behaves as it does loaded the usual way."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _run(code: str) -> str:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}  # the compiled methods in use
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT, env=env).stdout


def test_dataclasses_without_inspect_behave_the_same() -> None:
    body = (
        "import sys, dataclasses, pickle\n"
        "@dataclasses.dataclass(frozen=True, slots=True)\n"
        "class P:\n"
        "    a: int\n"
        "    b: tuple[str, ...] = ()\n"
        "@dataclasses.dataclass\n"
        "class Undocumented:\n"
        "    x: int = 1\n"
        "p = P(1, ('x',))\n"
        "print(Undocumented.__doc__, repr(p), dataclasses.replace(p, a=2), dataclasses.asdict(p),\n"
        "      [f.name for f in dataclasses.fields(P)], hash(p) == hash(P(1, ('x',))), pickle.loads(pickle.dumps(p)) == p)\n"
        "try:\n"
        "    p.a = 3\n"
        "except dataclasses.FrozenInstanceError as e:\n"
        "    print('frozen', e)\n"
        "import inspect\n"
        "print(type(inspect).__name__, inspect.signature(P), dataclasses.inspect.signature(P))\n"
    )
    plain = _run(body)
    stood_in = _run("from svcdiag.cli.startup import import_dataclasses\nimport_dataclasses()\n"
                    "import sys\nprint('inspect' in sys.modules, 'copy' in sys.modules)\n" + body)
    assert stood_in == "False False\n" + plain  # asdict's deepcopy imports copy on first use
    assert "Undocumented(x: int = 1)" in plain  # the docstring made with the real inspect, on first use


def test_served_commands_import_no_inspect() -> None:
    code = ("import sys, io, contextlib\n"
            "from svcdiag.cli import fast\n"
            "argv = ['--units', 'units', 'render', 'demo-smoke']\n"
            "assert fast.parse(argv) is not None, 'the help manifest is stale: python -m svcdiag.cli.help'\n"
            "try:\n"
            "    with contextlib.redirect_stdout(io.StringIO()):\n"
            "        fast.serve(argv)\n"
            "except SystemExit as e:\n"
            "    print(e.code, 'inspect' in sys.modules, 'copy' in sys.modules, 'dataclasses' in sys.modules)\n")
    assert _run(code) == "0 False False True\n"
