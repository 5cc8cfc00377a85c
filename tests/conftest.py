from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, settings

ROOT = Path(__file__).resolve().parent.parent
UNITS = ROOT / "units"
EXAMPLES = ROOT / "svcdiag" / "examples"

# A shell starts a background job (`make test &`) with SIGINT and SIGQUIT ignored, and an ignored
# signal stays ignored across exec: every svcdiag and stand-in the tests start would then shrug
# off the Ctrl-C and SIGQUIT that tests send them. Taken back to the defaults here, for the children.
for _sig, _handler in ((signal.SIGINT, signal.default_int_handler), (signal.SIGQUIT, signal.SIG_DFL)):
    if signal.getsignal(_sig) == signal.SIG_IGN:
        signal.signal(_sig, _handler)
# pytest-xdist's workers run with COLUMNS=80 and LINES=24 set, which every terminal-size lookup
# takes before the terminal's own: the screens the tests draw are sized by the tests themselves.
for _var in ("COLUMNS", "LINES"):
    os.environ.pop(_var, None)
# Hypothesis fails an example slower than 200 ms (its deadline) and a strategy slow to draw (too_slow): a loaded
# machine (CI: 2 cores at load 15) stalls any test that long, and neither is what a test asserts. A test's own
# @settings are laid over these (its suppress_health_check replaces this list: name too_slow there too).
settings.register_profile("svcdiag", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("svcdiag")


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config, log):
    """--dist loadgroup with the groups of tests/xdist_groups.py (xdist's own marks are lost under pytest 9)."""
    if config.getvalue("dist") != "loadgroup":
        return None
    from .xdist_groups import make_scheduler

    return make_scheduler(config, log)


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


def build_dist(out: Path, *flags: str) -> subprocess.CompletedProcess:
    """`python -m build FLAGS --outdir OUT` of a private copy of the checkout: setuptools stages an
    sdist (svcdiag-VERSION/) and writes build/ and *.egg-info in the tree it builds, so two
    workers building the checkout itself at once break each other's build."""
    src = Path(tempfile.mkdtemp(prefix="svcdiag-src-", dir=out.parent))
    junk = shutil.ignore_patterns(".git", ".venv", ".rig-tmp", "build", "dist", "*.egg-info", "__pycache__",
                                  ".hypothesis", ".pytest_cache", ".ruff_cache", "svcdiag-*")
    try:
        shutil.copytree(ROOT, src / "svcdiag", ignore=junk, symlinks=True)
        return subprocess.run([sys.executable, "-m", "build", *flags, "--outdir", str(out), str(src / "svcdiag")],
                              capture_output=True, text=True, timeout=600, check=False)
    finally:
        shutil.rmtree(src, ignore_errors=True)


def run_svcdiag(*args: str, input: bytes | None = None, cwd: Path = ROOT) -> subprocess.CompletedProcess:
    """The real console entry point in a subprocess: what an operator's shell sees."""
    return subprocess.run([sys.executable, "-m", "svcdiag", *args], input=input, capture_output=True,
                          cwd=cwd, timeout=60, check=False)


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


def sglang_here(units: Path, tmp_path: Path) -> Path:
    """The copied units' dflash-smoke (and what extends it) run an interpreter that has sglang 0.5.23
    (a stub): `install` and `up` refuse a unit whose interpreter is missing here and whose release
    is not pinned (issue 39), as `check` does."""
    from .test_check import fake_sglang

    py = fake_sglang(tmp_path / "sglang-here", srt=False)  # its parser not run: the flag table judges
    cfg = units / "dflash-smoke.toml"
    cfg.write_text(cfg.read_text().replace('python = "/opt/sglang/.venv/bin/python"', f'python = "{py}"'))
    return py
