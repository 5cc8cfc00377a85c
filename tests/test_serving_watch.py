"""#42: after a healthy start, the serving watch. The pure machine (wedged needs failed /health in
a row AND a silent log or a fatal line; a loaded server is busy, never wedged; an operator's stop
is never an incident), then the supervisor in front of the stand-in talking sd_notify to a socket
the test holds (WATCHDOG=1 only while serving, WATCHDOG=trigger once wedged), and the unit's one
story of time (TimeoutStartSec, RestartSec, the start limits)."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from svcdiag.config.service import DEFAULT_TIMEOUTS, UnitsDir
from svcdiag.errors import ConfigError
from svcdiag.judge.watch import BUSY, SERVING, WEDGED, ServingWatch, WatchPolicy
from svcdiag.sglang.flags import exec_argv
from svcdiag.systemd.notify import START_LIMIT_BURST, restart_policy, start_limit_s
from svcdiag.systemd.render import render_unit

from .conftest import ROOT
from .test_supervise import NotifySocket, write

BATCH = "[2026-12-06 10:00:00 TP0] Decode batch. #running-req: 64, #token: 90000, token usage: 0.93, #queue-req: 212,"

# ---------------------------------------------------------------- the machine


def test_health_failing_with_a_silent_log_is_wedged_once_with_when_it_began() -> None:
    w = ServingWatch(WatchPolicy(interval_s=10, failures=3), ready_ts=100.0)
    assert w.health(110, True, 0.02, "HTTP 200") is None and w.state == SERVING
    assert w.health(120, False, None, "HTTP 503") is None
    assert w.health(130, False, None, "HTTP 503") is None and w.healthy  # two: not yet
    inc = w.health(140, False, None, "HTTP 503")
    assert inc is not None and (inc.kind, inc.cause, inc.since) == (WEDGED, "health_failed", 120)
    assert "failed 3 times in a row" in inc.message and "silent of progress" in inc.message
    assert not w.healthy and w.status(150).startswith("wedged [health_failed] since ")
    assert "(30 s)" in w.status(150)  # since the first failure, counting on: never frozen
    assert w.health(150, False, None, "HTTP 503") is None and w.incidents == [inc]  # said once


def test_a_loaded_server_printing_batches_is_busy_never_wedged_and_serving_again_when_health_answers() -> None:
    w = ServingWatch(WatchPolicy(interval_s=10, failures=3), ready_ts=0.0)
    for t in range(10, 200, 10):
        w.line(t - 1, BATCH)  # a batch between every two checks
        assert w.health(t, False, None, "no answer within 5 s") is None
    assert w.state == BUSY and w.healthy and "left alone" in w.status(200)
    w.health(210, True, 4.2, "HTTP 200")
    assert w.state == SERVING and w.incidents == [] and w.batches == 19


def test_a_fatal_line_makes_failing_health_wedged_even_with_batches_before_it() -> None:
    w = ServingWatch(WatchPolicy(interval_s=1, failures=2), ready_ts=0.0)
    w.line(5, BATCH)
    w.fatal_line(6, "watchdog_timeout", "Scheduler watchdog timeout (self.watchdog_timeout=300)", ("line",))
    w.line(6.5, BATCH)
    w.health(7, False, None, "no answer within 1 s")
    inc = w.health(8, False, None, "no answer within 1 s")
    assert inc is not None and inc.cause == "watchdog_timeout" and "Scheduler watchdog timeout" in inc.message


def test_an_operators_stop_is_no_incident_and_an_unasked_end_is_died_after_ready() -> None:
    stopped = ServingWatch(WatchPolicy(), ready_ts=0.0)
    assert stopped.ended(50, "status 0", stopped=True) is None and stopped.incidents == []
    died = ServingWatch(WatchPolicy(), ready_ts=0.0)
    inc = died.ended(50, "killed by SIGKILL", stopped=False)
    assert inc is not None and inc.kind == "died_after_ready" and "50 s after it was ready" in inc.message


@settings(max_examples=200, deadline=None)
@given(st.integers(1, 4), st.lists(st.sampled_from(["ok", "fail", "batch"]), max_size=40))
def test_wedged_exactly_when_n_failures_in_a_row_saw_no_batch_since_the_first(n: int, steps: list[str]) -> None:
    w = ServingWatch(WatchPolicy(interval_s=1, failures=n), ready_ts=0.0)
    streak: list[bool] = []  # for each failure of the current streak: a batch came after it began
    expect = False
    for t, step in enumerate(steps, 1):
        if step == "batch":
            w.line(t, BATCH)
            streak = [True] * len(streak)
        elif step == "ok":
            w.health(t, True, 0.1, "HTTP 200")
            streak = []
        else:
            w.health(t, False, None, "HTTP 503")
            streak.append(False)
            if len(streak) >= n and not streak[0] and not expect:
                expect = True
        if expect:
            break
    assert (w.state == WEDGED) == expect, (n, steps)


# ---------------------------------------------------------------- the unit's one story of time


def test_a_watchdog_unit_restarts_on_failure_within_start_limits_made_of_whole_starts(units: Path, tmp_path: Path) -> None:
    write(units, "w", 'extends = "demo-smoke"\nwatchdog_s = 20\nrestart_s = 5\n')
    cfg = UnitsDir(units, "t").load("w")
    text = render_unit(cfg)
    policy = restart_policy(cfg.timeout, cfg.watchdog_s, cfg.restart_s)
    assert policy.interval_s == START_LIMIT_BURST * (start_limit_s(cfg.timeout) + 5)
    for line in ("Restart=on-failure", "RestartSec=5", "WatchdogSec=20", f"StartLimitBurst={START_LIMIT_BURST}",
                 f"StartLimitIntervalSec={policy.interval_s:g}", f"TimeoutStartSec={start_limit_s(cfg.timeout):g}"):
        assert re.search(rf"^{re.escape(line)}$", text, re.M), (line, text)
    assert text.index("StartLimitIntervalSec=") < text.index("[Service]")  # systemd reads it in [Unit] only
    write(units, "plain", 'extends = "demo-smoke"\n')
    plain = render_unit(UnitsDir(units, "t").load("plain"))
    assert "Restart=no" in plain and "StartLimit" not in plain and "RestartSec" not in plain
    write(units, "bad", 'extends = "demo-smoke"\nrestart_s = 5\n')
    with pytest.raises(ConfigError, match=r"bad\.toml: restart_s: needs watchdog_s"):
        UnitsDir(units, "t").load("bad")


def test_the_whole_starts_limit_is_one_figure_in_the_unit_the_import_warning_and_the_docs() -> None:
    limit = start_limit_s(dict(DEFAULT_TIMEOUTS))
    docs = (ROOT / "docs" / "config.md").read_text()
    assert f"TimeoutStartSec={limit:g}" in docs, limit
    assert f"{int(limit // 3600)} h {int(limit % 3600 // 60)} min" in docs
    from svcdiag.ops import adopt

    warnings: list[str] = []
    adopt._timeouts(adopt.parse_unit("[Service]\nTimeoutStartSec=900\n"), warnings)
    assert f"TimeoutStartSec={limit:.0f} by default" in warnings[0], warnings


# ---------------------------------------------------------------- the supervisor, on a socket of ours


def watched(units: Path, tmp_path: Path, name: str, scenario: str) -> tuple[subprocess.Popen, NotifySocket]:
    write(units, name, f'extends = "demo-dense"\nsimulate = "{scenario}"\nport = {31960 + len(name)}\n'
                       "sim_time_scale = 0.02\nwatchdog_s = 1\nhealth_interval_s = 0.25\nhealth_failures = 3\n")
    cfg = UnitsDir(units, "t").load(name)
    sock = NotifySocket(tmp_path / f"notify-{name}")
    env = {**os.environ, "NOTIFY_SOCKET": str(sock.path), "PYTHONUNBUFFERED": "1", "WATCHDOG_USEC": "1000000"}
    env.pop("WATCHDOG_PID", None)
    env.pop("INVOCATION_ID", None)
    p = subprocess.Popen([sys.executable, "-m", "svcdiag", "--units", str(units), "supervise", "--config", name,
                          "--", *exec_argv(cfg)], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, cwd=ROOT)
    return p, sock


def said(sock: NotifySocket, text: str, timeout: float, after: int = 0) -> int:
    """The index in `sock.got` of the first assignment from `after` on that contains `text`."""
    deadline = time.monotonic() + timeout
    while True:
        for i, (_, m) in enumerate(sock.got[after:], after):
            if text in m:
                return i
        left = deadline - time.monotonic()
        assert left > 0, f"no {text!r} within {timeout} s; got {[m for _, m in sock.got[-8:]]}"
        sock.sock.settimeout(left)
        try:
            sock._recv()
        except TimeoutError:
            pass


def _stop(p: subprocess.Popen) -> None:
    if p.poll() is None:
        p.send_signal(signal.SIGTERM)
        p.communicate(timeout=30)


def test_a_server_that_stops_serving_is_wedged_and_systemd_is_told_to_act(units: Path, tmp_path: Path) -> None:
    p, sock = watched(units, tmp_path, "stuck", "stops-serving")
    try:
        sock.until("READY=1", timeout=60)
        trigger = sock.until("WATCHDOG=trigger", timeout=30)
        status = next(line for line in trigger.split("\n") if line.startswith("STATUS="))
        assert status.startswith("STATUS=wedged [health_failed] since ") and "HTTP 503" in status, status
        assert "systemd restarts it" in status
        sent = [m for _, m in sock.got]
        fed = [i for i, m in enumerate(sent) if m == "WATCHDOG=1"]
        assert fed and max(fed) < sent.index("WATCHDOG=trigger")  # fed while serving, never after the wedge
        assert any(m.startswith("STATUS=ready · KV ") and "· serving " in m for m in sent), sent
    finally:
        _stop(p)
    assert "WATCHDOG=1" not in sock.drain()[sent.index("WATCHDOG=trigger"):]


def test_a_loaded_server_is_left_alone_and_an_operators_stop_is_no_incident(units: Path, tmp_path: Path) -> None:
    p, sock = watched(units, tmp_path, "loaded", "loaded-serving")
    try:
        sock.until("READY=1", timeout=60)
        busy_at = said(sock, "· busy since ", timeout=30)  # /health slower than its limit, batches printed
        while len([m for _, m in sock.got[busy_at:] if m == "WATCHDOG=1"]) < 4:  # two seconds more of busy
            said(sock, "WATCHDOG=1", timeout=5, after=len(sock.got))
        sent = [m for _, m in sock.got]
        assert "WATCHDOG=trigger" not in sent and not any(m.startswith("STATUS=wedged") for m in sent), sent
        p.send_signal(signal.SIGTERM)
        p.communicate(timeout=30)
    finally:
        _stop(p)
    last = [m for m in sock.drain() if m.startswith("STATUS=")][-1]
    assert last.startswith("STATUS=stopped: the server exited") and "SIGTERM: not an incident" in last, last
