"""The command itself: start-up imports, help, and the one-line error contract."""

from __future__ import annotations

import subprocess
import sys

from .conftest import ROOT, run_svcdiag


def test_cli_never_imports_gpu_packages_at_start_up() -> None:
    code = ("import sys, svcdiag.cli; from click.testing import CliRunner; "
            "CliRunner().invoke(svcdiag.cli.main, ['--units', 'units', 'list']); "
            "print(sorted({m.split('.')[0] for m in sys.modules} & {'torch', 'sglang', 'pystemd', 'cysystemd', 'rich'}))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT).stdout
    assert out.strip() == "[]"


def test_help_lists_every_command() -> None:
    out = run_svcdiag("--help").stdout.decode()
    for cmd in ("list", "render", "install", "diff", "replay", "up", "wait", "down", "status", "logs", "baseline-check", "events",
                "preflight", "top"):
        assert f"  {cmd}" in out, cmd


def test_missing_units_folder_is_one_line(tmp_path) -> None:
    r = run_svcdiag("--units", str(tmp_path / "nope"), "list")
    assert r.returncode == 2 and r.stderr.decode().count("\n") == 1 and "is not a directory" in r.stderr.decode()


def test_a_bad_textfile_is_refused_before_anything_starts(tmp_path) -> None:
    from .conftest import assert_one_line_error

    r = run_svcdiag("--units", "units", "up", "demo-smoke", "--wait-ready", "--textfile", str(tmp_path / "no" / "x.prom"))
    assert_one_line_error(r, "--textfile", "no such directory")
    r = run_svcdiag("--units", "units", "wait", "demo-smoke", "--textfile", str(tmp_path / "state.txt"))
    assert_one_line_error(r, "--textfile", ".prom")
