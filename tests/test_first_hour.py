"""An operator's first hour (issue #32 §3): the small defects each of which costs a few minutes of
doubt, each as the operator meets it on the command line."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import pytest

from .conftest import ROOT, Cli, assert_one_line_error, sglang_here


def test_replay_start_and_invocation_are_two_options(cli: Cli) -> None:
    """two-starts' first invocation id begins with "2": `--invocation 2` is that id, `--start 2`
    the second start, and the note says which start of how many was judged."""
    by_id = cli("replay", "--example", "two-starts", "--invocation", "2", "--json")
    by_no = cli("replay", "--example", "two-starts", "--start", "2", "--json")
    notes = [json.loads(ln)["message"] for r in (by_id, by_no) for ln in r.output.splitlines()
             if '"note"' in ln and "replay " in ln]
    assert "start 1 of 2, invocation 2" in notes[0] and by_id.exit_code == 1, notes
    assert "start 2 of 2" in notes[1] and by_no.exit_code == 0, notes
    assert_one_line_error(cli("replay", "--example", "two-starts", "--start", "1", "--invocation", "2"),
                          "--start N or --invocation ID")
    assert_one_line_error(cli("replay", "--example", "two-starts", "--start", "3"), "no start matches --start 3",
                          "starts in the input: 1 (2")


def test_one_time_parser_and_one_error_for_since(cli: Cli, tmp_path) -> None:
    """history and events read --since with one parser: a bad time is the same one line, exit 2."""
    for cmd in ("history", "events"):
        assert_one_line_error(cli(cmd, "--since", "garbage"), "--since 'garbage': not a time", "-10min")
    r = cli("history", "--since", "-10min", "--state-dir", str(tmp_path))
    assert r.exit_code == 0 and "no recorded starts" in r.output, r.output


def test_a_state_dir_that_is_a_file_is_refused(cli: Cli, monkeypatch) -> None:
    assert_one_line_error(cli("history", "--state-dir", "/etc/passwd"), "--state-dir /etc/passwd: not a directory")
    monkeypatch.setenv("SVCDIAG_STATE_DIR", "/etc/passwd")
    assert_one_line_error(cli("history"), "$SVCDIAG_STATE_DIR /etc/passwd: not a directory")


def _hold_lock(path, seconds: float) -> subprocess.Popen:
    """Another process holding an fcntl lock on `path`, as apt and dpkg do: for `seconds`, or until its stdin closes."""
    code = ("import fcntl, select, sys; f = open(sys.argv[1], 'a'); fcntl.lockf(f, fcntl.LOCK_EX); "
            "print('held', flush=True); select.select([sys.stdin], [], [], float(sys.argv[2]))")
    holder = subprocess.Popen([sys.executable, "-c", code, str(path), str(seconds)], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True)
    assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
    return holder


def test_setup_waits_for_another_apt_then_goes_on(tmp_path) -> None:
    """scripts/setup right after boot: unattended-upgrades holds dpkg's lock; setup waits, saying so."""
    lock = tmp_path / "lock-frontend"
    holder = _hold_lock(lock, 60)
    env = {**os.environ, "SVCDIAG_APT_LOCKS": f"{lock} {tmp_path / 'absent'}", "SVCDIAG_APT_WAIT": "60"}
    waiter = subprocess.Popen([str(ROOT / "scripts" / "apt-lock-wait")], env=env, stderr=subprocess.PIPE, text=True)
    assert waiter.stderr is not None
    said = waiter.stderr.readline()  # the lock is let go only once setup says it waits (not after a fixed time)
    holder.communicate(timeout=60)  # its stdin closed: it ends, and the lock is free
    _, rest = waiter.communicate(timeout=60)
    assert waiter.returncode == 0, said + rest
    assert "another apt or dpkg holds its lock" in said and "free after" in rest, said + rest


def test_setup_gives_up_on_a_held_lock_after_its_bound(tmp_path) -> None:
    lock = tmp_path / "lock"
    holder = _hold_lock(lock, 60)
    env = {**os.environ, "SVCDIAG_APT_LOCKS": str(lock), "SVCDIAG_APT_WAIT": "1"}
    r = subprocess.run([str(ROOT / "scripts" / "apt-lock-wait")], env=env, capture_output=True, text=True, timeout=60)
    holder.kill()
    holder.wait()
    assert r.returncode == 1 and "still held after 1 s" in r.stderr and "scripts/setup again" in r.stderr, r.stderr


@pytest.mark.skipif(os.path.isdir("/run/systemd/system"), reason="systemd runs here")
def test_a_campaign_with_no_systemd_writes_nothing_beside_its_plan(cli: Cli, tmp_path) -> None:
    plan = tmp_path / "plan.toml"
    shutil.copy(ROOT / "docs" / "examples" / "seed-campaign.toml", plan)
    assert_one_line_error(cli("campaign", str(plan), "--state-dir", str(tmp_path / "state")), "no system bus")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["plan.toml", "units"]  # units: the cli fixture's


def test_install_with_no_name_leaves_the_stand_in_demos_out(cli: Cli, tmp_path) -> None:
    sglang_here(cli.units, tmp_path)
    r = cli("install", "--unit-dir", str(tmp_path / "u"))
    assert r.exit_code == 0, r.output
    written = sorted(p.name for p in (tmp_path / "u").iterdir())
    assert "dflash-smoke.service" in written and not [w for w in written if w.startswith("demo-")], written
    demos = sorted(p.stem for p in (ROOT / "units").glob("demo-*.toml"))
    assert f"not installed: {len(demos)} stand-in demo(s) (simulate =: {demos[0]}," in r.output
    r = cli("install", "demo-smoke", "--unit-dir", str(tmp_path / "u"))
    assert r.exit_code == 0 and (tmp_path / "u" / "demo-smoke.service").exists(), r.output


def test_a_new_unit_is_installed_a_drifted_one_updated() -> None:
    from svcdiag.ops.serve.start import install_note

    assert install_note("/etc/systemd/system/x.service", "not installed") == "installed /etc/systemd/system/x.service"
    assert install_note("/etc/systemd/system/x.service", "installed from config hash a, config is now b") == (
        "updated /etc/systemd/system/x.service (installed from config hash a, config is now b)")


def test_logs_takes_journalctls_dash_f(cli: Cli) -> None:
    from svcdiag.cli.app import main

    (follow,) = [p for p in main.commands["logs"].params if p.name == "follow_"]
    assert "-f" in follow.opts and "--follow" in follow.opts


def test_render_json_names_the_units_execstart_and_sglangs_command(cli: Cli) -> None:
    from tests.systemd_quoting import split_exec

    (row,) = [json.loads(ln) for ln in cli("render", "demo-smoke", "--json").output.splitlines()]
    exec_line = next(ln for ln in row["text"].splitlines() if ln.startswith("ExecStart="))
    assert split_exec(exec_line[len("ExecStart="):]) == row["exec_start"]
    i = row["exec_start"].index("supervise")
    assert row["exec_start"][i + 3] == "--" and row["exec_start"][i + 4:] == row["sglang_argv"]
    assert "--model-path" in row["sglang_argv"] and "supervise" not in row["sglang_argv"]


def test_every_json_record_carries_its_schema(cli: Cli, tmp_path) -> None:
    """list, diff, check, preflight, render and install --json: `schema` and `event` first, as
    docs/events.md promises every record."""
    runs = {"configs": ("list",), "diff": ("diff", "demo-smoke", "demo-slow"), "check": ("check", "demo-smoke"),
            "preflight": ("preflight", "demo-smoke", "--kv-bytes-per-token", "100000", "--weights-gb", "50",
                          "--gpu-memory", "80"),
            "render": ("render", "demo-smoke"), "install": ("install", "demo-smoke", "--unit-dir", str(tmp_path))}
    for event, args in runs.items():
        r = cli(*args, "--json")
        assert r.exit_code == 0, (args, r.output)
        rec = json.loads(next(ln for ln in r.output.splitlines() if ln.startswith("{")))
        assert list(rec)[:2] == ["schema", "event"] and rec["schema"] == 1 and rec["event"] == event, rec
        assert f"`{event}`" in (ROOT / "docs" / "events.md").read_text()


def _complete(words: str, units, state: str = "/nonexistent") -> list[str]:
    """What bash's completion gets from `svcdiag` for the last word of `words`."""
    env = {**os.environ, "COMP_WORDS": words, "COMP_CWORD": str(len(words.split()) - (not words.endswith(" "))),
           "_SVCDIAG_COMPLETE": "bash_complete", "SVCDIAG_UNITS": str(units), "SVCDIAG_STATE_DIR": state}
    code = "import sys; from svcdiag.cli import main; sys.argv[0] = 'svcdiag'; main(prog_name='svcdiag')"
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60).stdout
    return [ln.split(",", 1)[1] for ln in out.splitlines()]


def test_shell_completion_completes_config_names_and_hosts(units) -> None:
    (units / "far.toml").write_text('extends = "demo-smoke"\nremote_host = "root@gpu-b:2222"\n')
    assert _complete("svcdiag up demo-s", units) == ["demo-segfault", "demo-slow", "demo-smoke"]
    assert _complete("svcdiag diff demo-smoke dflash-tp", units) == ["dflash-tp1-mr8", "dflash-tp4", "dflash-tp8"]
    assert "demo-hang" in _complete("svcdiag replay --config demo-h", units)
    assert _complete("svcdiag status --host root@", units) == ["root@gpu-b:2222"]
    assert "wait" in _complete("svcdiag wa", units)  # click's own: the subcommands


def test_host_completion_offers_the_hosts_starts_were_recorded_on(units, tmp_path) -> None:
    import socket

    from svcdiag.ops.host.history import History, db_path

    with History(db_path(str(tmp_path))) as h:
        for host in ("gpu-7", socket.gethostname()):
            h.db.execute("INSERT INTO starts (ts, host, config, verdict) VALUES (1, ?, 'demo-smoke', 'healthy')", (host,))
    assert _complete("svcdiag up demo-smoke --host gpu", units, str(tmp_path)) == ["gpu-7"]
    assert socket.gethostname() not in _complete("svcdiag up demo-smoke --host ", units, str(tmp_path))
