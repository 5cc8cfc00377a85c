"""Remote hosts and multi-node starts (docs/remote.md), on the private rig.

The remote host is the rig itself, reached over SSH: an sshd runs inside it on 127.0.0.1 (the
rig shares the host's network) with keys and known_hosts made for this run, and svcdiag runs
on the host, where there is no systemd at all, so everything it knows comes over SSH.
The multi-node starts run both nodes' units in the rig (host unset), judged together.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest

from ..conftest import ROOT
from .helpers import WORKER, json_lines, sv, unit_name, verdict_of, wait_for_phase
from .sshd import make_sshd

pytestmark = pytest.mark.rig
SVCDIAG = str(ROOT / ".venv" / "bin" / "svcdiag")


@pytest.fixture(scope="module")
def sshd(rig):
    if not Path("/usr/sbin/sshd").exists() or shutil.which("ssh") is None:
        why = "openssh-server and openssh-client are needed (scripts/setup rig installs them)"
        if os.environ.get("SVCDIAG_REQUIRE_RIG"):
            pytest.fail(why)
        pytest.skip(why)
    s = make_sshd(rig, ROOT)
    yield s
    s.kill()
    shutil.rmtree(s.dir, ignore_errors=True)


def host_env(sshd, units: Path) -> dict[str, str]:
    return {**os.environ, **sshd.env(), "SVCDIAG_STATE_DIR": str(units / "state"),
            "SVCDIAG_LOCK_DIR": str(units / "locks"), "NO_COLOR": "1"}


def on_host(sshd, units: Path, *args: str, timeout: float = 180) -> subprocess.CompletedProcess[bytes]:
    """svcdiag run on the host (no systemd here), against the rig over SSH."""
    return subprocess.run([SVCDIAG, "--units", str(units), *args], capture_output=True, timeout=timeout,
                          env=host_env(sshd, units), check=False)


def write(units: Path, name: str, text: str) -> str:
    (units / f"{name}.toml").write_text(text)
    return name


_ports = iter(range(33100 + 450 * WORKER, 33550 + 450 * WORKER, 2))


def variant(units: Path, prefix: str, base: str, scale: float = 0.05) -> str:
    name = unit_name(prefix)
    return write(units, name, f'extends = "{base}"\nport = {next(_ports)}\nsim_time_scale = {scale}\n')


def is_active(rig, unit: str) -> str:
    return rig.run(["systemctl", "is-active", unit], check=False).stdout.decode().strip()


# ---------------------------------------------------------------- one host over SSH


def test_up_status_down_over_ssh_match_local_verdicts(rig, units: Path, sshd) -> None:
    name = variant(units, "remote-ok", "demo-smoke")
    t0 = time.monotonic()
    p = on_host(sshd, units, "up", name, "--wait-ready", "--json", "--host", sshd.target)
    v = verdict_of(p)
    assert p.returncode == 0 and v["verdict"] == "healthy", p.stdout.decode()[-2000:] + p.stderr.decode()
    assert v["figures"]["kv_tokens"] == v["figures"]["http_max_total_num_tokens"] > 0  # HTTP through the tunnel
    notes = " ".join(e.get("message", "") for e in json_lines(p) if e["event"] == "note")
    assert f"installed {sshd.target}:/etc/systemd/system/{name}.service" in notes
    assert is_active(rig, f"{name}.service") == "active"
    print(f"up --host healthy in {time.monotonic() - t0:.1f} s")

    st = on_host(sshd, units, "status", name, "--json", "--host", sshd.target)
    row = json.loads(st.stdout.decode().splitlines()[0])
    assert st.returncode == 0 and row["verdict"]["verdict"] == "healthy" and row["host"] == sshd.target

    lg = on_host(sshd, units, "logs", name, "--host", sshd.target)
    assert b"The server is fired up and ready to roll!" in lg.stdout

    d = on_host(sshd, units, "down", name, "--host", sshd.target)
    assert d.returncode == 0 and b"active \xe2\x86\x92 inactive" in d.stdout, d.stdout + d.stderr
    assert is_active(rig, f"{name}.service") in ("inactive", "unknown")


def test_failed_start_over_ssh_has_the_local_verdict(rig, units: Path, sshd) -> None:
    name = variant(units, "remote-segv", "demo-segfault")
    remote = on_host(sshd, units, "up", name, "--wait-ready", "--json", "--host", sshd.target)
    local = sv(rig, units, "up", name, "--wait-ready", "--json", "--restart")
    rv, lv = verdict_of(remote), verdict_of(local)
    assert remote.returncode == local.returncode == 1
    assert (rv["verdict"], rv["cause"], rv["phase"]) == (lv["verdict"], lv["cause"], lv["phase"]) == ("failed", lv["cause"], lv["phase"])


def test_unknown_host_key_is_refused_in_one_line(rig, units: Path, sshd) -> None:
    known = sshd.dir / "known_hosts"
    saved = known.read_text()
    known.write_text("")
    try:
        p = on_host(sshd, units, "status", "demo-smoke", "--host", sshd.target)
    finally:
        known.write_text(saved)
    err = p.stderr.decode().strip().splitlines()
    assert p.returncode == 2 and len(err) == 1 and err[0].startswith("svcdiag: error: "), p.stderr
    assert "host key unknown" in err[0] and "never accepts" in err[0]
    assert known.read_text() == saved  # nothing was added on our behalf


def test_unreachable_and_auth_refused_are_one_line(units: Path, sshd) -> None:
    p = on_host(sshd, units, "status", "demo-smoke", "--host", "root@127.0.0.1:1")
    assert p.returncode == 2 and b"unreachable" in p.stderr and len(p.stderr.splitlines()) == 1, p.stderr
    p = on_host(sshd, units, "status", "demo-smoke", "--host", f"nobody-here@127.0.0.1:{sshd.port}")
    assert p.returncode == 2 and b"authentication refused" in p.stderr and len(p.stderr.splitlines()) == 1, p.stderr


def test_sshd_killed_mid_wait_is_incomplete_then_wait_reattaches(rig, units: Path, sshd) -> None:
    name = variant(units, "remote-cut", "demo-smoke", scale=0.25)
    proc = subprocess.Popen([SVCDIAG, "--units", str(units), "up", name, "--wait-ready", "--json", "--host", sshd.target],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=host_env(sshd, units))
    head = wait_for_phase(proc, name, "loading_weights", timeout=120)
    t_cut = time.monotonic()
    sshd.kill()
    out, err = proc.communicate(timeout=60)
    lost_s = time.monotonic() - t_cut
    v = verdict_of(subprocess.CompletedProcess([], proc.returncode, head + out, err))
    assert proc.returncode == 4 and v["verdict"] == "incomplete" and "connection lost" in v["message"], v
    print(f"connection loss noticed in {lost_s:.2f} s")
    assert is_active(rig, f"{name}.service") in ("active", "activating")  # the start goes on there

    sshd.start()
    w = on_host(sshd, units, "wait", name, "--json", "--host", sshd.target)
    wv = verdict_of(w)
    assert w.returncode == 0 and wv["verdict"] == "healthy", w.stdout.decode()[-1500:] + w.stderr.decode()
    on_host(sshd, units, "down", name, "--host", sshd.target)


# ---------------------------------------------------------------- multi-node


def multinode(units: Path, prefix: str, node1: str = "", *, timeouts: str = "") -> str:
    name = unit_name(prefix)
    port = next(_ports)
    return write(units, name, f'extends = "demo-smoke"\ntp_size = 2\ngpus = [0]\nport = {port}\nnnodes = 2\n'
                              f'dist_init_addr = "127.0.0.1:{port + 1}"\n{timeouts}\n'
                              f'[[nodes]]\nnode_rank = 0\n\n[[nodes]]\nnode_rank = 1\n{node1}')


def nodes_of(v: dict) -> dict[int, dict]:
    return {n["node_rank"]: n for n in v["figures"]["nodes"]}


def test_two_node_start_is_healthy_when_both_nodes_are(rig, units: Path) -> None:
    name = multinode(units, "mn-ok")
    p = sv(rig, units, "up", name, "--wait-ready", "--json")
    v = verdict_of(p)
    assert p.returncode == 0 and v["verdict"] == "healthy", p.stdout.decode()[-2500:] + p.stderr.decode()
    n = nodes_of(v)
    assert n[0]["verdict"] == n[1]["verdict"] == "healthy"
    assert "worker node 1" in n[1]["message"] and v["figures"]["http_max_total_num_tokens"] > 0  # rank 0's HTTP
    units_seen = {e.get("unit") for e in json_lines(p) if e["event"] == "milestone"}
    assert {f"{name}-node0.service", f"{name}-node1.service"} <= units_seen
    out = rig.run(["journalctl", "--no-pager", "-o", "cat", "-u", f"{name}-node1.service"]).stdout
    assert b"'node_rank': 1" in out and b"Uvicorn" not in out  # node 1: schedulers only
    st = sv(rig, units, "status", name, "--json")
    rows = [json.loads(x) for x in st.stdout.decode().splitlines()]
    assert [(r["node_rank"], r["verdict"]["verdict"]) for r in rows] == [(0, "healthy"), (1, "healthy")]
    d = sv(rig, units, "down", name)
    assert d.returncode == 0


@pytest.mark.parametrize(("scenario", "verdict", "phase"), [("segfault", "failed", "loading_weights"),
                                                           ("hang", "timed_out", "loading_weights")])
def test_a_failing_or_hanging_worker_node_is_named_and_the_others_stopped(rig, units: Path, scenario, verdict, phase) -> None:
    name = multinode(units, f"mn-{scenario}", f'simulate = "{scenario}"\n', timeouts="[timeouts]\nloading_weights = 6\n")
    p = sv(rig, units, "up", name, "--wait-ready", "--json")
    v = verdict_of(p)
    code = {"failed": 1, "timed_out": 3}[verdict]
    assert p.returncode == code and v["verdict"] == verdict, p.stdout.decode()[-2500:]
    assert v["figures"]["failed_node_rank"] == 1 and v["phase"] == phase
    assert v["message"].startswith(f"node 1 ({name}-node1.service on localhost)"), v["message"]
    assert nodes_of(v)[1]["verdict"] == verdict
    # the other node is stopped; the failing one is left as it is, for its evidence (as a single-node start)
    assert is_active(rig, f"{name}-node0.service") in ("inactive", "failed", "deactivating")
    assert any("stopping node 0" in e.get("message", "") for e in json_lines(p) if e["event"] == "note")
    sv(rig, units, "down", name)


def test_two_node_start_over_ssh(rig, units: Path, sshd) -> None:
    name = multinode(units, "mn-ssh")
    p = on_host(sshd, units, "up", name, "--wait-ready", "--json", "--host", sshd.target)
    v = verdict_of(p)
    assert p.returncode == 0 and v["verdict"] == "healthy", p.stdout.decode()[-2500:] + p.stderr.decode()
    assert {n["host"] for n in v["figures"]["nodes"]} == {sshd.target}
    st = on_host(sshd, units, "status", name, "--host", sshd.target)
    assert st.stdout.count(f"on {sshd.target}".encode()) == 2, st.stdout
    assert on_host(sshd, units, "down", name, "--host", sshd.target).returncode == 0


def test_events_follow_merges_two_hosts_by_time(rig, units: Path, sshd) -> None:
    first = variant(units, "ev-a", "demo-smoke")
    assert sv(rig, units, "up", first, "--wait-ready").returncode == 0  # svcdiag in the rig writes its events there
    hosts = ["--host", sshd.target, "--host", sshd.alias]
    p = on_host(sshd, units, "events", "--json", "-u", first, *hosts)
    recs = [json.loads(x) for x in p.stdout.decode().splitlines()]
    assert p.returncode == 0 and recs, p.stderr
    by = {h: [(r["event"], r.get("ts")) for r in recs if r["host"] == h] for h in (sshd.target, sshd.alias)}
    assert by[sshd.target] == by[sshd.alias] and ("verdict", recs[-1]["ts"]) in by[sshd.target]
    ts = [r["ts"] for r in recs]
    assert ts == sorted(ts)  # one stream, ordered by time

    second = variant(units, "ev-b", "demo-smoke")
    proc = subprocess.Popen([SVCDIAG, "--units", str(units), "events", "-f", "--json", "-u", second, *hosts],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=host_env(sshd, units))
    try:
        # no wait for the followers: they read each host's journal from its start (--lines=all)
        assert sv(rig, units, "up", second, "--wait-ready").returncode == 0
        verdicts: set[str] = set()
        deadline = time.monotonic() + 60
        while len(verdicts) < 2 and time.monotonic() < deadline:
            line = proc.stdout.readline()
            if not line:
                break
            r = json.loads(line)
            assert r["unit"] == f"{second}.service"
            if r["event"] == "verdict":
                verdicts.add(r["host"])
        assert verdicts == {sshd.target, sshd.alias}, proc.stderr.read1(4000) if proc.poll() is not None else verdicts
    finally:
        proc.send_signal(signal.SIGINT)  # Ctrl-C: the SSH connections are closed on the way out
        try:
            assert proc.wait(timeout=15) == 130
        finally:
            proc.kill()
            proc.wait()
            sv(rig, units, "down", first, second)
