"""Remote hosts and multi-node starts (docs/remote.md), on test hosts of their own.

Two more private systemds, gpu-a and gpu-b (tests/rig/conftest.py `test_hosts`), each with an
sshd on its own loopback address (127.0.0.2, 127.0.0.3; keys and known_hosts made for this
run); svcdiag runs on the host, where there is no systemd at all, so everything it knows comes
over SSH. Single-host tests use gpu-a; a two-node start puts node 0 on gpu-a and node 1 on
gpu-b, and `events --host A --host B` merges their two journals.
"""

from __future__ import annotations

import itertools
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from ..conftest import ROOT
from .helpers import json_lines, next_port, sv, unit_name, verdict_of, wait_for_phase
from .test_rig_notify import until

#: one worker boots gpu-a and gpu-b and runs every test of theirs (the "hosts" group, tests/xdist_groups.py)
pytestmark = pytest.mark.rig
SVCDIAG = str(ROOT / ".venv" / "bin" / "svcdiag")


@pytest.fixture
def sshd(test_hosts):
    """gpu-a (root@127.0.0.2:PORT): the host of the single-host tests."""
    return test_hosts[0]


@pytest.fixture
def gpu_b(test_hosts):
    """gpu-b (root@127.0.0.3:PORT): a second host, with its own systemd and journal."""
    return test_hosts[1]


def host_env(sshd, units: Path) -> dict[str, str]:
    return {**os.environ, **sshd.env(), "SVCDIAG_STATE_DIR": str(units / "state"),
            "SVCDIAG_LOCK_DIR": str(units / "locks"), "NO_COLOR": "1"}


def on_host(sshd, units: Path, *args: str, timeout: float = 180) -> subprocess.CompletedProcess[bytes]:
    """svcdiag run on the host (no systemd here), against a test host over SSH."""
    return subprocess.run([SVCDIAG, "--units", str(units), *args], capture_output=True, timeout=timeout,
                          env=host_env(sshd, units), check=False)


def write(units: Path, name: str, text: str) -> str:
    (units / f"{name}.toml").write_text(text)
    return name


def variant(units: Path, prefix: str, base: str, scale: float = 0.02, *, readiness: str | None = None,
            extra: str = "") -> str:
    """A config extending `base` on a port of its own; `readiness` unset: the default mode. The
    stand-in at 0.02 starts in ~1.3 s of its own; a test that acts during the start sets its scale."""
    name = unit_name(prefix)
    mode = f'readiness = "{readiness}"\n' if readiness else ""
    return write(units, name, f'extends = "{base}"\nport = {next_port()}\nsim_time_scale = {scale}\n{mode}{extra}')


def is_active(rig, unit: str) -> str:
    return rig.run(["systemctl", "is-active", unit], check=False).stdout.decode().strip()


def show(rig, unit: str, prop: str) -> str:
    return rig.run(["systemctl", "show", "-P", prop, unit], check=False).stdout.decode().strip()


# ---------------------------------------------------------------- one host over SSH


@pytest.mark.parametrize("readiness", ["notify", "journal"])
def test_up_status_down_over_ssh_match_local_verdicts(units: Path, sshd, gpu_b, readiness: str) -> None:
    name = variant(units, "remote-ok", "demo-smoke", readiness=readiness)
    unit = f"{name}.service"
    t0 = time.monotonic()
    p = on_host(sshd, units, "up", name, "--wait-ready", "--json", "--host", sshd.target)
    v = verdict_of(p)
    assert p.returncode == 0 and v["verdict"] == "healthy", p.stdout.decode()[-2000:] + p.stderr.decode()
    assert v["figures"]["kv_tokens"] == v["figures"]["http_max_total_num_tokens"] > 0  # HTTP through the tunnel
    notes = " ".join(e.get("message", "") for e in json_lines(p) if e["event"] == "note")
    assert f"installed {sshd.target}:/etc/systemd/system/{unit}" in notes
    assert is_active(sshd.rig, unit) == "active" and is_active(gpu_b.rig, unit) in ("inactive", "unknown")
    assert show(sshd.rig, unit, "Type") == {"notify": "notify", "journal": "exec"}[readiness]
    if readiness == "notify":  # systemd there holds the supervisor's word
        assert show(sshd.rig, unit, "StatusText").startswith("ready · KV ")
    print(f"up --host ({readiness}) healthy in {time.monotonic() - t0:.1f} s")

    st = on_host(sshd, units, "status", name, "--json", "--host", sshd.target)
    row = json.loads(st.stdout.decode().splitlines()[0])
    assert st.returncode == 0 and row["verdict"]["verdict"] == "healthy" and row["host"] == sshd.target

    lg = on_host(sshd, units, "logs", name, "--host", sshd.target)
    assert b"The server is fired up and ready to roll!" in lg.stdout

    d = on_host(sshd, units, "down", name, "--host", sshd.target)
    assert d.returncode == 0 and b"active \xe2\x86\x92 inactive" in d.stdout, d.stdout + d.stderr
    assert is_active(sshd.rig, unit) in ("inactive", "unknown")


@pytest.mark.parametrize("readiness", ["notify", "journal"])
def test_failed_start_over_ssh_has_the_local_verdict(units: Path, sshd, readiness: str) -> None:
    name = variant(units, "remote-segv", "demo-segfault", readiness=readiness)
    remote = on_host(sshd, units, "up", name, "--wait-ready", "--json", "--host", sshd.target)
    local = sv(sshd.rig, units, "up", name, "--wait-ready", "--json", "--restart")  # svcdiag on gpu-a itself
    rv, lv = verdict_of(remote), verdict_of(local)
    assert remote.returncode == local.returncode == 1, remote.stdout.decode()[-1500:] + remote.stderr.decode()
    assert (rv["verdict"], rv["cause"], rv["phase"]) == (lv["verdict"], lv["cause"], lv["phase"]) \
        == ("failed", "killed_by_signal", "loading_weights")


NO_TIMER = """
import sys, time
from svcdiag.config.service import find_units_dir
from svcdiag.ops.serve.follow import follow, start_unit
from svcdiag.systemd.dbus import Systemd
cfg = find_units_dir({units!r}).load({name!r})
with Systemd.connect({target!r}) as sd:
    props = start_unit(sd, cfg.unit, restart=False, notify=True)
    t0 = time.process_time()
    res = follow(sd, cfg, cfg.unit, props, emit=lambda ev: None)
    print(res.wakeups, res.verdict.verdict, res.verdict.phase, round(time.process_time() - t0, 3))
"""


def test_a_notify_hang_over_ssh_is_timed_out_by_its_supervisor_with_no_timer(units: Path, sshd) -> None:
    name = variant(units, "remote-nhang", "demo-hang", readiness="notify", extra="[timeouts]\nloading_weights = 5\n")
    unit = f"{name}.service"
    assert on_host(sshd, units, "install", name, "--host", sshd.target).returncode == 0
    py = str(ROOT / ".venv" / "bin" / "python")
    t0 = time.monotonic()
    out = subprocess.run([py, "-c", NO_TIMER.format(units=str(units), name=name, target=sshd.target)],
                         capture_output=True, timeout=90, env=host_env(sshd, units), check=False)
    assert out.returncode == 0, out.stderr.decode()[-2000:]
    wakeups, verdict, phase, cpu = out.stdout.decode().split()
    assert (verdict, phase) == ("timed_out", "loading_weights")
    # the same lines and STATUS= signals as locally, then 5 s of nothing: the loop woke only for
    # what arrived (the journal stream's records, D-Bus signals), never on a timer
    assert int(wakeups) < 40, out.stdout  # measured: 9 (a timer would wake > 100 times in the silence)
    print(f"hung notify start over SSH: {wakeups} wakeups, {cpu} s CPU, {time.monotonic() - t0:.1f} s")
    deadline = time.monotonic() + 30
    while show(sshd.rig, unit, "ActiveState") not in ("failed", "inactive"):
        assert time.monotonic() < deadline, show(sshd.rig, unit, "ActiveState")
        time.sleep(0.1)
    # the supervisor there enforced the phase's deadline (exit status 3; systemd's own limit is the whole start's)
    assert (show(sshd.rig, unit, "Result"), show(sshd.rig, unit, "ExecMainStatus")) == ("exit-code", "3")
    # and `up --host` says the same, exit 3
    p = on_host(sshd, units, "up", name, "--wait-ready", "--json", "--restart", "--host", sshd.target)
    v = verdict_of(p)
    assert p.returncode == 3 and (v["verdict"], v["phase"]) == ("timed_out", "loading_weights"), v
    on_host(sshd, units, "down", name, "--host", sshd.target)


def test_notify_unit_needs_svcdiag_on_the_gpu_host(units: Path, sshd, tmp_path: Path) -> None:
    """A notify unit runs `svcdiag supervise` there: no such interpreter there is one line, exit 2."""
    name = variant(units, "remote-nosv", "demo-smoke", readiness="notify")
    venv = tmp_path / "venv"  # svcdiag run by an interpreter of this host only: the GPU host has no such path
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)  # the same Python release
    site = next((ROOT / ".venv" / "lib").glob("python3*/site-packages"))
    env = {**host_env(sshd, units), "PYTHONPATH": f"{ROOT}:{site}"}
    for cmd in (("install", name), ("up", name, "--wait-ready")):
        p = subprocess.run([str(venv / "bin" / "python"), "-m", "svcdiag", "--units", str(units), *cmd, "--host", sshd.target],
                           capture_output=True, timeout=120, env=env, check=False)
        err = p.stderr.decode().strip().splitlines()
        assert p.returncode == 2 and len(err) == 1, p.stdout.decode()[-800:] + p.stderr.decode()
        assert f"{venv}/bin/python" in err[0] and sshd.target in err[0] and "svcdiag" in err[0], err[0]
    assert show(sshd.rig, f"{name}.service", "LoadState") == "not-found"  # nothing was installed


def test_unknown_host_key_is_refused_in_one_line(units: Path, sshd) -> None:
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
    p = on_host(sshd, units, "status", "demo-smoke", "--host", f"root@{sshd.addr}:1")
    assert p.returncode == 2 and b"unreachable" in p.stderr and len(p.stderr.splitlines()) == 1, p.stderr
    p = on_host(sshd, units, "status", "demo-smoke", "--host", f"nobody-here@{sshd.addr}:{sshd.port}")
    assert p.returncode == 2 and b"authentication refused" in p.stderr and len(p.stderr.splitlines()) == 1, p.stderr


@pytest.mark.parametrize("readiness", ["notify", "journal"])
def test_sshd_killed_mid_wait_is_incomplete_then_wait_reattaches(units: Path, sshd, readiness: str) -> None:
    name = variant(units, "remote-cut", "demo-smoke", scale=0.12, readiness=readiness)  # 5 s of weight load to cut it in
    proc = subprocess.Popen([SVCDIAG, "--units", str(units), "up", name, "--wait-ready", "--json", "--host", sshd.target],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=host_env(sshd, units))
    try:
        head = wait_for_phase(proc, name, "loading_weights", timeout=120)
        t_cut = time.monotonic()
        sshd.kill()
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
        if show(sshd.rig, sshd.unit, "ActiveState") != "active":  # the next test finds gpu-a reachable
            sshd.start()
    lost_s = time.monotonic() - t_cut
    v = verdict_of(subprocess.CompletedProcess([], proc.returncode, head + out, err))
    assert proc.returncode == 4 and v["verdict"] == "incomplete" and "connection lost" in v["message"], v
    print(f"{readiness}: connection loss noticed in {lost_s:.2f} s")
    assert is_active(sshd.rig, f"{name}.service") in ("active", "activating")  # the start goes on there

    w = on_host(sshd, units, "wait", name, "--json", "--host", sshd.target)
    wv = verdict_of(w)
    assert w.returncode == 0 and wv["verdict"] == "healthy", w.stdout.decode()[-1500:] + w.stderr.decode()
    on_host(sshd, units, "down", name, "--host", sshd.target)


# ---------------------------------------------------------------- multi-node


def multinode(units: Path, prefix: str, node1: str = "", *, timeouts: str = "", hosts: tuple[str, str] | None = None,
              readiness: str | None = None) -> str:
    """A two-node config (`readiness` unset: its default, notify: each node supervised); `hosts`:
    node 0's and node 1's, else both on the host that runs svcdiag."""
    name = unit_name(prefix)
    port = next_port(2)  # and port + 1: node 0's --dist-init-addr
    h0, h1 = (f'host = "{h}"\n' for h in hosts) if hosts else ("", "")
    mode = f'readiness = "{readiness}"\n' if readiness else ""
    return write(units, name, f'extends = "demo-smoke"\ntp_size = 2\ngpus = [0]\nport = {port}\nnnodes = 2\n{mode}'
                              f'dist_init_addr = "127.0.0.1:{port + 1}"\n{timeouts}\n'
                              f'[[nodes]]\nnode_rank = 0\n{h0}\n[[nodes]]\nnode_rank = 1\n{h1}{node1}')


def nodes_of(v: dict) -> dict[int, dict]:
    return {n["node_rank"]: n for n in v["figures"]["nodes"]}


@pytest.mark.parametrize("readiness", [None, "journal"])
def test_two_node_start_is_healthy_when_both_nodes_are(rig, units: Path, readiness: str | None) -> None:
    name = multinode(units, "mn-ok", readiness=readiness)
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
    kind = "exec" if readiness == "journal" else "notify"
    for r in (0, 1):  # notify: each node's systemd holds its supervisor's word (#31 §3)
        assert show(rig, f"{name}-node{r}.service", "Type") == kind
    if kind == "notify":
        # each node's supervisor judges its own start, and may say so after `up` (which read the journal) returned
        until(rig, f"{name}-node0.service", "StatusText", lambda s: s.endswith("HTTP agrees"))
        until(rig, f"{name}-node1.service", "StatusText", lambda s: s.endswith("node 1: no HTTP of its own"))
    d = sv(rig, units, "down", name)
    assert d.returncode == 0


def test_a_node_stopped_because_another_failed_says_so_and_ends_failed(rig, units: Path) -> None:
    """#42 §5: node 1 fails; `up` stops node 0, whose unit was then Result=success with an empty status,
    as after an operator's stop. Its supervisor now says where the start failed and why, and exits 1."""
    name = multinode(units, "mn-why", 'simulate = "segfault"\n')
    p = sv(rig, units, "up", name, "--wait-ready", "--json")
    v = verdict_of(p)
    assert p.returncode == 1 and v["figures"]["failed_node_rank"] == 1, p.stdout.decode()[-2500:] + p.stderr.decode()
    node0 = f"{name}-node0.service"
    deadline = time.monotonic() + 60
    while is_active(rig, node0) not in ("inactive", "failed"):
        assert time.monotonic() < deadline, is_active(rig, node0)
        time.sleep(0.2)
    why = f"the multi-node start failed: {v['message']}"  # node 1 (NAME-node1.service on localhost) failed in phase …
    assert v["message"].startswith(f"node 1 ({name}-node1.service on localhost) failed in phase ")
    assert (show(rig, node0, "Result"), show(rig, node0, "ExecMainStatus")) == ("exit-code", "1")
    assert show(rig, node0, "StatusText") == f"failed: {why}"
    log = rig.run(["journalctl", "--no-pager", "-o", "cat", "-u", node0]).stdout.decode()
    assert f"svcdiag: {why}\n" in log, log[-2000:]
    sv(rig, units, "down", name)


def test_two_node_start_over_ssh_on_two_hosts(units: Path, sshd, gpu_b) -> None:
    name = multinode(units, "mn-ssh", hosts=(sshd.target, gpu_b.target))
    p = on_host(sshd, units, "up", name, "--wait-ready", "--json")
    v = verdict_of(p)
    assert p.returncode == 0 and v["verdict"] == "healthy", p.stdout.decode()[-2500:] + p.stderr.decode()
    assert {r: n["host"] for r, n in nodes_of(v).items()} == {0: sshd.target, 1: gpu_b.target}
    assert v["figures"]["http_max_total_num_tokens"] > 0  # rank 0's HTTP, through gpu-a's tunnel
    # each node's unit runs on its own host only, and each host's journal holds its own node's lines
    for host, mine, other in ((sshd, 0, 1), (gpu_b, 1, 0)):
        assert is_active(host.rig, f"{name}-node{mine}.service") == "active"
        assert is_active(host.rig, f"{name}-node{other}.service") in ("inactive", "unknown")
    out = gpu_b.rig.run(["journalctl", "--no-pager", "-o", "cat", "-u", f"{name}-node1.service"]).stdout
    assert b"'node_rank': 1" in out and b"Uvicorn" not in out  # node 1: schedulers only
    st = on_host(sshd, units, "status", name)
    assert st.stdout.count(f"[rank 0 on {sshd.target}]".encode()) == 1, st.stdout
    assert st.stdout.count(f"[rank 1 on {gpu_b.target}]".encode()) == 1, st.stdout
    assert on_host(sshd, units, "down", name).returncode == 0
    assert is_active(gpu_b.rig, f"{name}-node1.service") in ("inactive", "unknown")


@pytest.mark.parametrize(("scenario", "verdict", "phase"), [("segfault", "failed", "loading_weights"),
                                                           ("hang", "timed_out", "loading_weights")])
def test_a_failing_or_hanging_worker_node_on_gpu_b_is_named_and_node_0_stopped(
        units: Path, sshd, gpu_b, scenario, verdict, phase) -> None:
    name = multinode(units, f"mn-{scenario}", f'simulate = "{scenario}"\n', timeouts="[timeouts]\nloading_weights = 6\n",
                     hosts=(sshd.target, gpu_b.target))
    p = on_host(sshd, units, "up", name, "--wait-ready", "--json")
    v = verdict_of(p)
    code = {"failed": 1, "timed_out": 3}[verdict]
    assert p.returncode == code and v["verdict"] == verdict, p.stdout.decode()[-2500:] + p.stderr.decode()
    assert v["figures"]["failed_node_rank"] == 1 and v["phase"] == phase
    assert v["message"].startswith(f"node 1 ({name}-node1.service on {gpu_b.target})"), v["message"]
    assert nodes_of(v)[1]["verdict"] == verdict and nodes_of(v)[1]["host"] == gpu_b.target
    # node 0 is stopped on gpu-a; the failing node is left as it is on gpu-b, for its evidence
    assert is_active(sshd.rig, f"{name}-node0.service") in ("inactive", "failed", "deactivating")
    # ... and node 0's own systemd says why, told over SSH before the stop (#42 §5)
    deadline = time.monotonic() + 60
    while is_active(sshd.rig, f"{name}-node0.service") == "deactivating":
        assert time.monotonic() < deadline
        time.sleep(0.2)
    assert show(sshd.rig, f"{name}-node0.service", "Result") == "exit-code"
    said, meant = show(sshd.rig, f"{name}-node0.service", "StatusText"), f"failed: the multi-node start failed: {v['message']}"
    assert said == meant or (said.endswith("…") and meant.startswith(said[:-1])), said  # STATUS= is kept short
    assert any(f"stopping node 0 ({name}-node0.service on {sshd.target})" in e.get("message", "")
               for e in json_lines(p) if e["event"] == "note")
    on_host(sshd, units, "down", name)


# ---------------------------------------------------------------- events of two hosts


def test_events_merges_two_hosts_journals_by_time(units: Path, sshd, gpu_b) -> None:
    """svcdiag's records in gpu-a's and in gpu-b's journal (each written by an `up` run on that
    host, the two starts at the same time): one stream, ordered by time, each record with its host."""
    # ~6.5 s each: they overlap even when a loaded machine starts one of them seconds after the other
    a, b = (variant(units, p, "demo-smoke", 0.1) for p in ("ev-a", "ev-b"))
    on = {sshd.target: f"{a}.service", gpu_b.target: f"{b}.service"}
    hosts = ["--host", sshd.target, "--host", gpu_b.target]
    follower = subprocess.Popen([SVCDIAG, "--units", str(units), "events", "-f", "--json", "-u", a, "-u", b, *hosts],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=host_env(sshd, units))
    try:
        starts = [h.rig.popen(["svcdiag", "--units", str(units), "up", n, "--wait-ready"], stdout=subprocess.DEVNULL)
                  for h, n in ((sshd, a), (gpu_b, b))]
        assert [s.wait(timeout=120) for s in starts] == [0, 0]
        # following: each host's records as they arrive, each from the journal of its own host
        verdicts: set[str] = set()
        deadline = time.monotonic() + 60
        while len(verdicts) < 2 and time.monotonic() < deadline:
            line = follower.stdout.readline()
            if not line:
                break
            r = json.loads(line)
            assert r["unit"] == on[r["host"]], r
            if r["event"] == "verdict":
                verdicts.add(r["host"])
        assert verdicts == set(on), follower.stderr.read1(4000) if follower.poll() is not None else verdicts
    finally:
        follower.send_signal(signal.SIGINT)  # Ctrl-C: the SSH connections are closed on the way out
        try:
            assert follower.wait(timeout=15) == 130
        finally:
            follower.kill()
            follower.wait()
    # the history: both journals merged into one stream by time
    p = on_host(sshd, units, "events", "--json", "-u", a, "-u", b, *hosts)
    recs = [json.loads(x) for x in p.stdout.decode().splitlines()]
    assert p.returncode == 0 and recs, p.stderr
    assert all(r["unit"] == on[r["host"]] for r in recs)  # each record carries the host whose journal held it
    ts = [r["ts"] for r in recs]
    assert ts == sorted(ts)
    order = [r["host"] for r in recs]
    switches = sum(1 for x, y in itertools.pairwise(order) if x != y)
    assert switches >= 2, order  # the two starts overlapped: their records interleave, not one host then the other
    for h, n in ((sshd, a), (gpu_b, b)):
        h.rig.run(["systemctl", "stop", f"{n}.service"], check=False)
