from __future__ import annotations

import os
import shutil
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
from click.testing import CliRunner

ROOT = Path(__file__).resolve().parent.parent
UNITS = ROOT / "units"
EXAMPLES = ROOT / "svcdiag" / "examples"


@pytest.fixture
def units(tmp_path: Path) -> Path:
    """A private copy of the shipped units folder, free to add bad configs to."""
    d = tmp_path / "units"
    shutil.copytree(UNITS, d)
    return d


class Cli:
    def __init__(self, units: Path | None):
        self.units = units

    def __call__(self, *args: str, input: str | bytes | None = None):
        from svcdiag.cli import main

        argv = (["--units", str(self.units)] if self.units else []) + list(args)
        return CliRunner().invoke(main, argv, input=input, catch_exceptions=True)


@pytest.fixture
def cli(units: Path) -> Cli:
    return Cli(units)


def run_svcdiag(*args: str, input: bytes | None = None, cwd: Path = ROOT) -> subprocess.CompletedProcess:
    """The real console entry point in a subprocess: what an operator's shell sees."""
    return subprocess.run([sys.executable, "-m", "svcdiag", *args], input=input, capture_output=True,
                          cwd=cwd, timeout=60)


def assert_one_line_error(result, *needles: str, code: int = 2) -> None:
    out = result.stderr if isinstance(result, subprocess.CompletedProcess) else result.output
    if isinstance(out, bytes):
        out = out.decode()
    assert result.returncode == code if hasattr(result, "returncode") else result.exit_code == code, out
    lines = [ln for ln in out.splitlines() if ln.strip()]
    assert len(lines) == 1, out
    assert lines[0].startswith("svcdiag: error: "), out
    assert "Traceback" not in out
    for n in needles:
        assert n in lines[0], (n, lines[0])


@pytest.fixture(scope="session")
def rig():
    """One private systemd for the session; skipped (with why) only where the machine
    cannot boot it, and a failure instead when SVCDIAG_REQUIRE_RIG is set (CI)."""
    from svcdiag.systemd.rig import Rig, available

    why = available()
    if why:
        if os.environ.get("SVCDIAG_REQUIRE_RIG"):
            pytest.fail(f"the private systemd rig is required here but unavailable: {why}")
        pytest.skip(why)
    r = Rig(ROOT, name=f"svcdiag-test-{os.getpid()}").boot()
    yield r
    r.down()


@pytest.fixture
def rig_units(rig):
    """A units folder inside the project (the rig sees the project at the same path)."""
    d = ROOT / ".rig-tmp" / uuid.uuid4().hex[:8]
    shutil.copytree(UNITS, d)
    yield d
    shutil.rmtree(d, ignore_errors=True)
