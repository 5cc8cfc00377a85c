"""readiness = "notify" (#16) without systemd: the config field, the rendered unit, and
`svcdiag supervise` talking the real sd_notify protocol to a socket the test holds."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import struct
import subprocess
import sys
import time
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from svcdiag.config.service import READINESS_MODES, UnitsDir, check_raw
from svcdiag.errors import ConfigError
from svcdiag.sglang.flags import exec_argv
from svcdiag.systemd.notify import slice_s, start_limit_s
from svcdiag.systemd.render import render_unit, supervise_argv

from .children import CHILD
from .conftest import ROOT, assert_one_line_error, run_svcdiag
from .ports import free_port
from .systemd_quoting import split_exec


def write(units: Path, name: str, body: str) -> str:
    (units / f"{name}.toml").write_text(body)
    return name


# ---------------------------------------------------------------- config and unit


@settings(max_examples=80, deadline=None)
@given(st.one_of(st.text(max_size=12), st.sampled_from(READINESS_MODES), st.integers(), st.booleans()))
def test_readiness_is_notify_or_journal_else_an_error_naming_the_field(value: object) -> None:
    path = Path("/units/x.toml")
    if value in READINESS_MODES:
        check_raw(path, {"model_path": "/m", "readiness": value})
    else:
        with pytest.raises(ConfigError) as e:
            check_raw(path, {"model_path": "/m", "readiness": value})
        assert str(e.value).startswith(f"{path}: readiness: ")


def test_bad_readiness_and_watchdog_without_notify_through_the_cli(units: Path) -> None:
    write(units, "bad", 'extends = "dflash-smoke"\nreadiness = "notfy"\n')
    assert_one_line_error(run_svcdiag("--units", str(units), "render", "bad"),
                          f"{units / 'bad.toml'}: readiness", "did you mean 'notify'")
    write(units, "wd", 'extends = "dflash-smoke"\nreadiness = "journal"\nwatchdog_s = 30\n')
    assert_one_line_error(run_svcdiag("--units", str(units), "render", "wd"),
                          f"{units / 'wd.toml'}: watchdog_s", 'needs readiness = "notify"')


def test_notify_unit_wraps_the_same_argv_and_systemd_accepts_it(units: Path, tmp_path: Path) -> None:
    write(units, "n", 'extends = "demo-hang"\nreadiness = "notify"\nwatchdog_s = 20\n')
    cfg = UnitsDir(units, "t").load("n")
    text = render_unit(cfg)
    lines = text.splitlines()
    for line in ("Type=notify", "NotifyAccess=main", "KillMode=mixed", "WatchdogSec=20",
                 f"TimeoutStartSec={start_limit_s(cfg.timeout):g}"):
        assert line in lines, line
    assert slice_s(cfg.timeout) == 8  # demo-hang's loading_weights deadline is the shortest
    # systemd's own limit is the whole start's: a daemon-reload re-arms it from the start's beginning
    assert start_limit_s(cfg.timeout) >= sum(v for k, v in cfg.timeout.items() if k != "jit_compile") + 1800
    exec_start = next(ln for ln in lines if ln.startswith("ExecStart="))[len("ExecStart="):]
    assert split_exec(exec_start) == supervise_argv(cfg) + exec_argv(cfg)  # the server's argv exactly as today
    write(units, "j", 'extends = "demo-hang"\nreadiness = "journal"\n')
    journal_mode = UnitsDir(units, "t").load("j")
    assert "Type=exec" in render_unit(journal_mode) and "TimeoutStartSec=infinity" in render_unit(journal_mode)
    assert journal_mode.config_hash != cfg.config_hash
    if shutil.which("systemd-analyze"):
        unit = tmp_path / "n.service"
        unit.write_text(text)
        r = subprocess.run(["systemd-analyze", "verify", str(unit)], capture_output=True, text=True)
        assert r.returncode == 0 and "n.service" not in r.stderr, r.stderr


# ---------------------------------------------------------------- the supervisor, on a socket of ours


#: SO_TIMESTAMP (asm-generic's; Python's socket module does not name it)
SO_TIMESTAMP = 29
TIMEVAL = struct.Struct("@ll")


class NotifySocket:
    """What systemd's end of NOTIFY_SOCKET would receive, with the time each datagram was sent (the
    kernel's stamp, SO_TIMESTAMP: not when this test, maybe stalled on a loaded machine, read it):
    `got` holds each assignment (a datagram may carry several, one a line, as sd_notify allows)."""

    def __init__(self, path: Path):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.sock.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMP, 1)
        self.sock.bind(str(path))
        self.path = path
        self.got: list[tuple[float, str]] = []
        self.datagrams: list[str] = []

    def _recv(self) -> None:
        data, ancillary, _, _ = self.sock.recvmsg(65536, socket.CMSG_SPACE(TIMEVAL.size))
        sent = time.time()
        for level, kind, raw in ancillary:
            if (level, kind) == (socket.SOL_SOCKET, SO_TIMESTAMP) and len(raw) >= TIMEVAL.size:
                sec, usec = TIMEVAL.unpack(raw[:TIMEVAL.size])
                sent = sec + usec / 1e6
        msg = data.decode()
        self.datagrams.append(msg)
        self.got += [(sent, line) for line in msg.split("\n")]

    def until(self, prefix: str, timeout: float = 30.0) -> str:
        """The first datagram with an assignment starting with `prefix`."""
        deadline = time.monotonic() + timeout
        while True:
            for msg in self.datagrams:
                if any(line.startswith(prefix) for line in msg.split("\n")):
                    return msg
            left = deadline - time.monotonic()
            assert left > 0, f"no {prefix!r} within {timeout} s; got {self.datagrams}"
            self.sock.settimeout(left)
            try:
                self._recv()
            except TimeoutError:
                pass

    def drain(self) -> list[str]:
        self.sock.settimeout(0.2)
        try:
            while True:
                self._recv()
        except TimeoutError:
            return [m for _, m in self.got]


def supervise(units: Path, name: str, argv: list[str], sock: NotifySocket, **kw) -> subprocess.Popen:
    env = {**os.environ, "NOTIFY_SOCKET": str(sock.path), "PYTHONUNBUFFERED": "1"}
    return subprocess.Popen([sys.executable, "-m", "svcdiag", "--units", str(units), "supervise", "--config", name,
                             "--", *argv], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=ROOT, **kw)


def test_bytes_pass_through_unchanged_and_the_exit_status_is_the_childs(units: Path, tmp_path: Path) -> None:
    write(units, "n", 'extends = "demo-dense"\nreadiness = "notify"\n')
    child = tmp_path / "child.py"
    child.write_text(CHILD)
    bare = subprocess.run([sys.executable, str(child), "3"], capture_output=True, check=False)
    sock = NotifySocket(tmp_path / "notify")
    p = supervise(units, "n", [sys.executable, str(child), "3"], sock)
    out, err = p.communicate(timeout=60)
    assert p.returncode == 3 and err == b""
    tail = b"tail without newline"
    assert bare.stdout.endswith(tail) and bare.stderr == b"on stderr\n"
    assert out == bare.stdout[: -len(tail)] + bare.stderr + tail  # one pipe, in the order written, byte for byte
    sent = sock.drain()
    assert not any(m.startswith("READY=1") for m in sent)  # no SGLang start was seen: never ready
    assert any(m.startswith("STATUS=failed [exited]") for m in sent), sent


def test_ready_only_after_the_http_cross_check_and_sigterm_is_forwarded(units: Path, tmp_path: Path) -> None:
    write(units, "n", f'extends = "demo-dense"\nreadiness = "notify"\nport = {free_port()}\nsim_time_scale = 0.02\n')
    cfg = UnitsDir(units, "t").load("n")
    sock = NotifySocket(tmp_path / "notify")
    p = supervise(units, "n", exec_argv(cfg), sock)
    try:
        ready = sock.until("READY=1", timeout=60)
        assert "STATUS=ready · KV " in ready and "HTTP agrees" in ready
        before = [m for _, m in sock.got[:-1]]
        assert any(m.startswith("STATUS=loading weights") for m in before), before
        assert any(m.startswith("EXTEND_TIMEOUT_USEC=") for m in before)
        assert all(int(m.split("=")[1]) <= slice_s(cfg.timeout) * 1e6 for m in before if m.startswith("EXTEND"))
        p.send_signal(signal.SIGTERM)
        out, _ = p.communicate(timeout=30)
    finally:
        p.kill()
    assert p.returncode == 0  # the stand-in exits 0 on SIGTERM, as SGLang does: so does its supervisor
    assert b"The server is fired up and ready to roll!" in out


def test_a_child_killed_by_a_signal_kills_the_supervisor_with_it(units: Path, tmp_path: Path) -> None:
    write(units, "n", 'extends = "demo-segfault"\nreadiness = "notify"\nsim_time_scale = 0.02\n')
    cfg = UnitsDir(units, "t").load("n")
    sock = NotifySocket(tmp_path / "notify")
    p = supervise(units, "n", exec_argv(cfg), sock)
    p.communicate(timeout=60)
    assert p.returncode == -signal.SIGSEGV  # systemd records signal/SEGV, as for the bare server
    sent = sock.drain()
    assert any(m.startswith("STATUS=failed [killed_by_signal]: main process killed by SIGSEGV in phase")
               for m in sent), sent


def test_a_hang_stops_being_extended_at_its_phase_deadline(units: Path, tmp_path: Path) -> None:
    write(units, "n", 'extends = "demo-hang"\nreadiness = "notify"\n[timeouts]\nloading_weights = 2.5\n')
    cfg = UnitsDir(units, "t").load("n")
    sock = NotifySocket(tmp_path / "notify")
    p = supervise(units, "n", exec_argv(cfg), sock)
    try:
        sock.until("STATUS=timed_out", timeout=30)
        entered = next(t for t, m in sock.got if m.startswith("STATUS=loading weights"))
        ends = [t + int(m.split("=")[1]) / 1e6 for t, m in sock.got if m.startswith("EXTEND_TIMEOUT_USEC=")]
        # systemd's start timeout, as extended, ends at the phase's deadline: not before, and not later
        assert entered + 2.3 <= max(ends) <= entered + 2.8, (entered, ends)
        timed_out = next(m for _, m in sock.got if m.startswith("STATUS=timed_out"))
        assert "phase loading_weights" in timed_out
        # the supervisor enforces the deadline itself: the server is stopped, the supervisor exits 3
        p.communicate(timeout=30)
        assert p.returncode == 3
    finally:
        if p.poll() is None:
            p.send_signal(signal.SIGTERM)
            p.communicate(timeout=30)


def test_systemds_start_timeout_line_is_timed_out_in_the_phase_it_hit() -> None:
    from svcdiag.judge.pipeline import Judge

    j = Judge(None, unit="n.service", start_ts=1000.0)
    j.line("[2026-12-03 10:00:00] Load weight begin. avail mem=94.50 GB", 1000.5)
    assert j.readiness.phase == "loading_weights"
    # systemd ends the phase at its deadline a moment before the journal's clock reaches it
    out = j.systemd_line("n.service: start operation timed out. Terminating.", 1000.5 + 899.999)
    v = out[-1]
    assert (v.verdict, v.phase, v.cause) == ("timed_out", "loading_weights", None)
    j.systemd_line("Main process exited, code=killed, status=15/TERM", 1901.0)
    assert j.verdict is not None and j.verdict.verdict == "timed_out"  # not killed_by_signal


@pytest.mark.parametrize("left_for", ["this-start", "an-earlier-start"])
def test_a_stop_up_explains_is_said_and_ends_the_unit_failed(units: Path, tmp_path: Path, monkeypatch,
                                                            left_for: str) -> None:
    """#42 §5: `up` stops the other nodes of a multi-node start whose node 1 failed, leaving the reason
    for this start (its INVOCATION_ID); the supervisor says it on SIGTERM and exits 1. A reason left for
    another start is not taken: that stop is an operator's, the child's status stands."""
    from svcdiag.systemd import stop_reason

    monkeypatch.setattr(stop_reason, "STOP_DIR", tmp_path / "stopped")
    write(units, "n", 'extends = "demo-dense"\nreadiness = "notify"\n')
    why = "the multi-node start failed: node 1 (n-node1.service on gpu-b) failed in phase loading_weights: SIGSEGV"
    stop_reason.leave("n.service", left_for, why)
    sock = NotifySocket(tmp_path / "notify")
    child = [sys.executable, "-c", "import signal, sys, time; signal.signal(signal.SIGTERM, lambda *a: sys.exit(0)); "
                                   "print('up', flush=True); time.sleep(60)"]
    env = {**os.environ, "NOTIFY_SOCKET": str(sock.path), "PYTHONUNBUFFERED": "1", "INVOCATION_ID": "this-start",
           "SVCDIAG_STOP_DIR": str(tmp_path / "stopped")}
    p = subprocess.Popen([sys.executable, "-m", "svcdiag", "--units", str(units), "supervise", "--config", "n", "--", *child],
                         env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=ROOT)
    try:
        assert p.stdout is not None and p.stdout.readline() == b"up\n"
        p.send_signal(signal.SIGTERM)
        _, err = p.communicate(timeout=30)
    finally:
        p.kill()
    sent = sock.drain()
    if left_for == "this-start":
        assert p.returncode == 1 and err.decode().splitlines()[-1] == f"svcdiag: {why}"
        assert f"STATUS=stopping: {why}" in sent and sent[-1] == f"STATUS=failed: {why}"
    else:
        assert p.returncode == 0 and b"multi-node" not in err
        assert not any("multi-node" in m for m in sent)
