"""Issue 39, the first hour (items 12 and 8 without the rig): what a newcomer meets, from the README and
docs, told in one line with the way out (docs/reliability.md, "Hardening (issue 39, inputs and first hour)")."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest

from svcdiag.config.campaign import load_plan
from svcdiag.config.service import find_units_dir

from .conftest import ROOT


def test_history_of_a_mistyped_name_suggests_the_name(cli, tmp_path) -> None:
    r = cli("history", "dflash-smok", "--state-dir", str(tmp_path))
    assert r.exit_code == 2 and r.output.count("\n") == 1, r.output
    assert "no config and no recorded start named 'dflash-smok' (did you mean 'dflash-smoke'?)" in r.output
    # a config with no start yet is still told so, exit 0
    ok = cli("history", "dflash-smoke", "--state-dir", str(tmp_path))
    assert (ok.exit_code, ok.output) == (0, "no recorded starts\n")


def test_events_with_no_journal_on_the_host_says_so(cli, tmp_path, monkeypatch) -> None:
    from svcdiag.systemd import journal

    empty = (tmp_path / "run-log-journal", tmp_path / "var-log-journal")
    empty[1].mkdir()
    monkeypatch.setattr(journal, "JOURNAL_DIRS", empty)
    r = cli("events")
    assert r.exit_code == 2 and r.output.count("\n") == 1, r.output
    assert "events: no journal on this host: no journal file in" in r.output and str(empty[1]) in r.output
    # a machine's folder is a journal, even one this user may not list (no_access then says how to get in)
    (empty[1] / "04ea31f94b2e43a7a0eeee430753ba64").mkdir(mode=0o700)
    assert journal.no_journal() is None


def test_a_top_level_benchmark_false_is_taken_as_a_phase_takes_it(tmp_path, units) -> None:
    plan = tmp_path / "p.toml"
    plan.write_text('benchmark = false\n[[phase]]\nname = "a"\nconfigs = ["nospec-tp1"]\n'
                    '[[phase]]\nname = "b"\nconfigs = ["dflash-tp4"]\nbenchmark = "bench --port {port}"\n')
    p = load_plan(plan, find_units_dir(str(units)))
    assert [ph.benchmark for ph in p.phases] == [None, "bench --port {port}"]


#: runs a command in-process on a host with no systemd, then says which of the command's heavy modules
#: were imported before it said "no system bus" (none: it says so first)
_NO_BUS = textwrap.dedent("""
    import json, sys
    import svcdiag.systemd.dbus as d
    d.SYSTEMD_RUN_DIR = "/nonexistent/run/systemd/system"  # this host: not booted with systemd
    d.os.path.isdir = lambda p, _isdir=d.os.path.isdir: False if p == "/run/systemd/system" else _isdir(p)
    from svcdiag.cli import main
    import contextlib, io
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        try:
            main(sys.argv[1:], standalone_mode=False)
        except BaseException as e:  # svcdiag's one-line error: SystemExit(2) after printing it
            err.write(str(e))
    said = err.getvalue()
    heavy = sorted(m for m in ("svcdiag.ops.serve.start", "svcdiag.ops.fleet.tune", "svcdiag.ops.fleet.baseline", "svcdiag.ops.offline.bundle",
                               "tenacity")
                   if m in sys.modules)
    print(json.dumps({"said": said, "heavy": heavy}))
""")


@pytest.mark.parametrize("argv", [["up", "demo-smoke"], ["wait", "demo-smoke"], ["baseline-check", "demo-smoke"],
                                  ["tune", "demo-smoke", "--target", "max_running=4"], ["bundle", "demo-smoke"]])
def test_no_system_bus_is_said_before_the_commands_work(argv, units) -> None:
    p = subprocess.run([sys.executable, "-c", _NO_BUS, "--units", str(units), *argv], capture_output=True,
                       text=True, cwd=ROOT, check=True)
    out = json.loads(p.stdout.splitlines()[-1])
    assert out["said"].startswith("svcdiag: error: no system bus"), out
    assert out["heavy"] == [], out  # said before importing the start's machinery or retrying (4-7 s under load)


def test_no_local_bus_reads_the_bus_socket_before_any_retry(tmp_path, monkeypatch) -> None:
    from svcdiag.systemd import dbus

    run = tmp_path / "run-systemd-system"
    run.mkdir()
    monkeypatch.setattr(dbus, "SYSTEMD_RUN_DIR", str(run))
    monkeypatch.setenv("DBUS_SYSTEM_BUS_ADDRESS", f"unix:path={tmp_path / 'no-socket'}")
    monkeypatch.setattr(dbus, "PRIVATE_BUS", f"unix:path={tmp_path / 'no-private'}".encode())
    assert dbus.no_local_bus()
    (tmp_path / "no-socket").touch()
    assert not dbus.no_local_bus()
