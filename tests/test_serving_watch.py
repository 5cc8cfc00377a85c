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
from .ports import free_port
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


def test_an_operators_stop_is_no_incident_and_an_unasked_end_is_the_judges_incident() -> None:
    """The watch names no ending itself: the judge's one decision (judge.ending) says which, as replay's does."""
    from svcdiag.judge.ending import DIED, KILLED, STOPPED, Ending

    stopped = ServingWatch(WatchPolicy(), ready_ts=0.0)
    assert stopped.ended(50, Ending(STOPPED, None, "stopped from outside (SIGTERM), a clean stop"), "status 0") is None
    assert stopped.incidents == [] and stopped.state == "dead"
    for kind, cause in ((KILLED, "host_oom"), (DIED, "cuda_error")):
        w = ServingWatch(WatchPolicy(), ready_ts=0.0)
        inc = w.ended(50, Ending(kind, cause, "what the log said", ("a line",), since=49), "killed by SIGKILL")
        assert inc is not None and (inc.kind, inc.cause, inc.since) == (kind, cause, 49), inc
        assert "50 s after it was ready: what the log said" in inc.message and w.incidents == [inc]
        assert inc.evidence == ("a line", "exit: killed by SIGKILL")


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
    write(units, "w", 'extends = "demo-smoke"\nwatchdog_s = 20\nrestart_sec = 5\n')
    cfg = UnitsDir(units, "t").load("w")
    text = render_unit(cfg)
    policy = restart_policy(cfg.timeout, cfg.watchdog_s, cfg.restart, cfg.restart_sec)
    assert policy.interval_s == START_LIMIT_BURST * (start_limit_s(cfg.timeout) + 5)
    for line in ("Restart=on-failure", "RestartSec=5", "WatchdogSec=20", f"StartLimitBurst={START_LIMIT_BURST}",
                 f"StartLimitIntervalSec={policy.interval_s:g}", f"TimeoutStartSec={start_limit_s(cfg.timeout):g}"):
        assert re.search(rf"^{re.escape(line)}$", text, re.M), (line, text)
    assert text.index("StartLimitIntervalSec=") < text.index("[Service]")  # systemd reads it in [Unit] only
    write(units, "plain", 'extends = "demo-smoke"\n')
    plain = render_unit(UnitsDir(units, "t").load("plain"))
    assert "Restart=no" in plain and "StartLimit" not in plain and "RestartSec" not in plain
    write(units, "never", 'extends = "demo-smoke"\nwatchdog_s = 20\nrestart = "no"\n')
    never = render_unit(UnitsDir(units, "t").load("never"))  # a wedge fails the unit and it stays failed
    assert "WatchdogSec=20" in never and "Restart=no" in never and "RestartSec" not in never
    write(units, "always", 'extends = "demo-smoke"\nrestart = "always"\n')  # an imported unit's own policy
    assert re.search(r"^Restart=always\nRestartSec=10$", render_unit(UnitsDir(units, "t").load("always")), re.M)
    write(units, "bad", 'extends = "demo-smoke"\nrestart_sec = 5\n')
    with pytest.raises(ConfigError, match=r"bad\.toml: restart_sec: needs a unit that restarts"):
        UnitsDir(units, "t").load("bad")


def test_the_whole_starts_limit_is_one_figure_in_the_unit_the_import_warning_and_the_docs() -> None:
    limit = start_limit_s(dict(DEFAULT_TIMEOUTS))
    docs = (ROOT / "docs" / "config.md").read_text()
    assert f"TimeoutStartSec={limit:g}" in docs, limit
    assert f"{int(limit // 3600)} h {int(limit % 3600 // 60)} min" in docs
    from svcdiag.ops.host import adopt

    warnings: list[str] = []
    adopt._timeouts(adopt.parse_unit("[Service]\nTimeoutStartSec=900\n"), warnings)
    assert f"TimeoutStartSec={limit:.0f} by default" in warnings[0], warnings


# ---------------------------------------------------------------- the supervisor, on a socket of ours


def watched(units: Path, tmp_path: Path, name: str, scenario: str) -> tuple[subprocess.Popen, NotifySocket]:
    """The supervisor of a stand-in at 0.02: /health answers in 0.02 s, loaded in 0.62 s; asked every 0.5 s and
    given 0.5 s (at 0.25 s, a loaded machine's stall of a quarter second made a healthy answer a failure)."""
    write(units, name, f'extends = "demo-dense"\nsimulate = "{scenario}"\nport = {free_port()}\n'
                       "sim_time_scale = 0.02\nwatchdog_s = 1\nhealth_interval_s = 0.5\nhealth_failures = 3\n")
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
            said(sock, "WATCHDOG=1", timeout=30, after=len(sock.got))
        sent = [m for _, m in sock.got]
        assert "WATCHDOG=trigger" not in sent and not any(m.startswith("STATUS=wedged") for m in sent), sent
        p.send_signal(signal.SIGTERM)
        p.communicate(timeout=30)
    finally:
        _stop(p)
    last = [m for m in sock.drain() if m.startswith("STATUS=")][-1]
    assert last.startswith("STATUS=stopped: the server exited") and "SIGTERM: not an incident" in last, last


# ---------------------------------------------------------------- where incidents are shown


def test_history_prints_each_incident_under_its_start_and_the_restart_that_followed(cli, tmp_path: Path) -> None:
    from svcdiag.config.service import find_units_dir
    from svcdiag.ops.host import history as h

    from .test_history import verdict

    cfg = find_units_dir("units").load("demo-smoke")
    first, second = verdict(40.0, ts=1000.0), verdict(41.0, ts=2000.0)
    h.record_start(cfg, first, "up", state=str(tmp_path))
    wedged = ServingWatch(WatchPolicy(interval_s=1, failures=1), ready_ts=1000.0).health(1500.0, False, None, "HTTP 503")
    assert wedged is not None
    assert h.record_incident(cfg.name, first.invocation, wedged.to_json(), "restart (WATCHDOG=trigger)",
                             state=str(tmp_path)) is None
    h.record_start(cfg, second, "supervise", state=str(tmp_path))
    h.record_start(cfg, first, "wait", state=str(tmp_path))  # `wait` on the first start again: one row still
    rows = h.read_rows(str(tmp_path), cfg.name)
    assert [r["invocation"] for r in rows] == [first.invocation, second.invocation]
    assert [i["kind"] for i in rows[0]["incidents"]] == ["wedged"] and rows[1]["incidents"] == []
    assert rows[1]["restarted_after"] == "wedged" and "restarted_after" not in rows[0]
    text = cli("history", "demo-smoke", "--state-dir", str(tmp_path)).output.splitlines()
    at = next(i for i, ln in enumerate(text) if ln.startswith("  ! wedged [health_failed]"))
    assert text[at].endswith("→ restart (WATCHDOG=trigger)") and first.invocation[:12] in text[at - 1]
    assert text[at + 1] == "  ↻ restarted after wedged" and second.invocation[:12] in text[at + 2]


def test_the_textfile_counts_incidents_and_the_restart_after_one_in_names_prometheus_parses(tmp_path: Path) -> None:
    from prometheus_client.parser import text_string_to_metric_families

    from svcdiag.output.schema import ReadinessEvent
    from svcdiag.output.textfile import Textfile

    tf = Textfile(tmp_path / "svcdiag.prom")
    for inv, events in (("a", [("verdict", {"verdict": "healthy"}),
                               ("incident", {"verdict": "wedged", "cause": "health_failed",
                                             "data": {"kind": "wedged", "action": "restart (WATCHDOG=trigger)"}})]),
                        ("b", [("verdict", {"verdict": "healthy"})])):
        for event, kw in events:
            tf.publish(ReadinessEvent(event=event, ts=1.0, unit="w.service", config="w", invocation=inv, phase="ready",
                                      **kw))
        samples = {(s.name, tuple(sorted(s.labels.items()))): s.value
                   for fam in text_string_to_metric_families(tf.path.read_text()) for s in fam.samples}
        def key(**more: str) -> tuple[tuple[str, str], ...]:
            return tuple(sorted({"config": "w", "unit": "w.service", **more}.items()))

        if inv == "a":
            assert samples[("svcdiag_incidents_total", key(kind="wedged"))] == 1
            assert samples[("svcdiag_watch_state", key(state="wedged"))] == 1
        else:  # the restart: a new start, no incident of its own, one restart counted
            assert samples[("svcdiag_incidents_total", key(kind="wedged"))] == 0
            assert samples[("svcdiag_restarts_total", key())] == 1


def test_status_and_top_show_what_the_watch_says_after_ready() -> None:
    from svcdiag.ops.serve.board import BoardRow
    from svcdiag.ops.serve.status_line import watch_word
    from svcdiag.output.board import cells
    from svcdiag.output.report import render_status

    serving = "ready · KV 94,126 tokens · max_running 4 · HTTP agrees · serving 12 s · /health HTTP 200 in 0.01 s"
    wedged = "wedged [health_failed] since 12:00:03 (31 s): /health failed 3 times in a row over 20 s (HTTP 503)"
    assert watch_word(serving) == ("serving", "serving 12 s · /health HTTP 200 in 0.01 s")
    assert watch_word(wedged) == ("wedged", wedged)
    assert watch_word("loading weights 12 s · busy since forever") is None  # a start's news is not the watch
    assert watch_word("failed [cuda_oom]: …") is None
    row = {"name": "w", "active_state": "active", "result": "success", "phase": "ready", "kv_tokens": 94126,
           "verdict": {"verdict": "healthy", "figures": {}}, "watch": {"state": "wedged", "status": wedged}}
    assert f"    {wedged}\n" in render_status(row)
    board = BoardRow("w", "w.service", "wedged", "active", "running", verdict="healthy", watch=("wedged", wedged))
    assert cells(board)[-1] == f"healthy · {wedged}" and board.order[0] == 0  # listed with the failures


def test_the_watchs_cadence_from_a_containers_environment_is_checked_in_one_line() -> None:
    from svcdiag.config.from_argv import env_watch

    assert env_watch({"SVCDIAG_HEALTH_INTERVAL_S": "0.5", "SVCDIAG_HEALTH_FAILURES": "4"}) == \
        {"health_interval_s": 0.5, "health_failures": 4}
    for name, bad in (("SVCDIAG_HEALTH_INTERVAL_S", "0"), ("SVCDIAG_HEALTH_FAILURES", "2.5"),
                      ("SVCDIAG_HEALTH_FAILURES", "x")):
        with pytest.raises(ConfigError) as e:
            env_watch({name: bad})
        assert str(e.value).startswith(f"environment: {name}: must be ") and "\n" not in str(e.value)


def test_a_fatal_line_after_ready_then_failing_health_is_wedged_with_the_lines_cause() -> None:
    """The scheduler's own watchdog line after ready, the process alive, /health failing: wedged, its cause the
    line's, its evidence the line (the supervisor in-process, on a healthy example log, its clock the test's)."""
    from svcdiag.config.service import find_units_dir
    from svcdiag.ops.serve.supervise import Supervisor
    from svcdiag.systemd.notify import Notifier

    cfg = find_units_dir("units").load("dflash-smoke")
    sent: list[str] = []
    now = [1000.0]
    sup = Supervisor(cfg, ["true"], notifier=Notifier(send=sent.append), environ={}, clock=lambda: now[0])
    for line in (ROOT / "svcdiag" / "examples" / "dflash-smoke.log").read_text().splitlines():
        sup._feed(line)
    assert sup.judge.verdict is not None and sup.judge.verdict.verdict == "healthy"
    sup.verdict = sup.judge.verdict  # as the HTTP cross-check leaves it
    sup._watchdog_s = 1.0
    sup._start_watch(sup.verdict, now[0])
    sup._feed(BATCH)
    now[0] += 5
    sup._feed("[2026-05-23 09:50:40 TP0] Scheduler watchdog timeout (self.watchdog_timeout=300, self.soft=False)")
    for _ in range(sup.policy.failures):
        now[0] += sup.policy.interval_s
        sup._health.put((now[0], False, None, "no answer within 5 s"))
    sup._on_time(now[0])
    sup._watching.clear()  # the health thread (it asked nobody: the test fed the answers) ends
    [inc] = sup.watch.incidents
    assert (inc.kind, inc.cause) == (WEDGED, "watchdog_timeout") and inc.since == 1005.0, inc
    assert inc.evidence[0].startswith("Scheduler watchdog timeout") and "KV Cache" not in " ".join(inc.evidence)
    trigger = next(m for m in sent if m.endswith("WATCHDOG=trigger"))
    assert trigger.startswith("STATUS=wedged [watchdog_timeout] since ") and "Scheduler watchdog timeout" in trigger


def test_health_generate_is_asked_every_nth_check_only() -> None:
    p = WatchPolicy(generate_every=3)
    assert [p.path(n) for n in range(7)] == ["/health", "/health", "/health_generate"] * 2 + ["/health"]
    assert {WatchPolicy(generate_every=0).path(n) for n in range(10)} == {"/health"}
