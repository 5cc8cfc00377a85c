"""`--help` is printed from a manifest without importing click (svcdiag.cli.help): it must be
current, and print byte for byte what click prints, under either name the program is run by."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from svcdiag.cli import help as cli_help

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = Path(sys.executable).parent / "svcdiag"


def test_the_manifest_is_current() -> None:
    assert cli_help.MANIFEST.read_text() == cli_help.manifest_text(), \
        "svcdiag/cli/help_manifest.py is stale: run `python -m svcdiag.cli.help`"


def run(args: list[str], columns: str = "80") -> tuple[str, bool]:
    """What `python -m svcdiag ARGS` printed, and whether it imported click."""
    p = subprocess.run([sys.executable, "-X", "importtime", "-m", "svcdiag", *args], cwd=ROOT,
                       env={**os.environ, "COLUMNS": columns}, capture_output=True, text=True, check=True)
    return p.stdout, any(line.rsplit("|", 1)[-1].strip() == "click" for line in p.stderr.splitlines())


@pytest.mark.parametrize("path", [(), ("status",), ("replay",), ("up",)], ids=lambda p: " ".join(p) or "svcdiag")
def test_python_m_svcdiag_help_is_clicks_without_click(path: tuple[str, ...]) -> None:
    out, imported_click = run([*path, "--help"])
    assert out == cli_help.render(path).replace(cli_help.PROG, "python -m svcdiag")
    assert not imported_click


@pytest.mark.skipif(not SCRIPT.exists(), reason="the svcdiag console script is not installed beside this python")
def test_the_svcdiag_script_prints_the_same_help_under_its_own_name() -> None:
    out = subprocess.run([str(SCRIPT), "status", "-h"], cwd=ROOT, env={**os.environ, "COLUMNS": "120"},
                         capture_output=True, text=True, check=True).stdout
    assert out == cli_help.render(("status",)).replace(cli_help.PROG, "svcdiag")
    assert out.startswith("Usage: svcdiag status [OPTIONS]")


def test_a_narrow_terminal_gets_clicks_own_wrapping() -> None:
    """Below 80 columns click wraps narrower than the manifest: click answers then."""
    out, imported_click = run(["--help"], columns="60")
    assert imported_click
    assert max(len(line) for line in out.splitlines()) <= 58
    assert out != cli_help.render(()).replace(cli_help.PROG, "python -m svcdiag")


def test_anything_but_a_bare_help_request_is_clicks(capsys: pytest.CaptureFixture[str]) -> None:
    for argv in ([], ["status"], ["--units", "x", "--help"], ["status", "NAME", "--help"], ["no-such", "--help"]):
        assert cli_help.serve(argv) is False
    assert capsys.readouterr().out == ""


def test_version_is_clicks_without_click_or_metadata() -> None:
    """`--version` prints what click's version_option prints (the installed distribution's version),
    from svcdiag.__version__, importing neither click nor importlib.metadata."""
    from click.testing import CliRunner

    from svcdiag.cli.app import main

    p = subprocess.run([sys.executable, "-X", "importtime", "-m", "svcdiag", "--version"], cwd=ROOT,
                       capture_output=True, text=True, check=True)
    imported = {line.rsplit("|", 1)[-1].strip() for line in p.stderr.splitlines()}
    assert p.stdout == CliRunner().invoke(main, ["--version"]).output
    assert not imported & {"click", "importlib.metadata"}
