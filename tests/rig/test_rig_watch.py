"""#42 on the rig: after ready, the serving watch and systemd act on a wedged server. A
stops-serving stand-in (healthy, then silent with /health 503) under a notify unit with
watchdog_s is wedged, systemd restarts it (WATCHDOG=trigger, Restart=on-failure), the restart is
judged like any start, and `history` shows healthy → wedged → restarted → healthy; an operator's
`svcdiag down` is never an incident. Short cadences (the stand-in's time scale, 0.05) keep it to
seconds.

Load (CI: 2 cores at load 15) may stall any process for seconds: /health is asked each second and given a
second (a healthy answer late by half a second is no failure), and WatchdogSec is far above any stall where
only WATCHDOG=trigger may end the unit, a few seconds where the test needs the watchdog fed."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from .helpers import config, json_lines, sv, unit_name, verdict_of
from .test_rig_notify import install, show, until

pytestmark = pytest.mark.rig

INTERVAL, FAILURES, WATCHDOG, RESTART = 1.0, 3, 30, 1
#: the loaded server's WatchdogSec: fed every 4 s (a 3 s stall is no missed WATCHDOG=1), so the wait spans two
FED_WATCHDOG = 8


def test_a_wedged_server_is_restarted_by_systemd_and_history_shows_the_chain(rig, units: Path) -> None:
    name = config(units, unit_name("wedge"), "demo-smoke", simulate="stops-serving", watchdog_s=WATCHDOG,
                  restart_sec=RESTART, health_interval_s=INTERVAL, health_failures=FAILURES)
    unit = install(rig, units, name)
    assert verdict_of(sv(rig, units, "up", name, "--wait-ready", "--json"))["verdict"] == "healthy"
    first = show(rig, unit, "InvocationID", "MainPID")
    # serving 2 s (40 s × 0.05), then /health 503 and a silent log: wedged after 3 checks, WATCHDOG=trigger,
    # systemd aborts the supervisor (Result=watchdog) and starts the unit again RestartSec later
    until(rig, unit, "NRestarts", lambda n: n.isdigit() and int(n) >= 1, timeout=60)
    # the restarted start and its main process's start (whole seconds), read together once systemd has forked it
    # (NRestarts counts the restart job before the fork: read then, ExecMainStartTimestamp was still the first
    # start's); at once, for the restarted stand-in wedges again 2 s after ready
    deadline = time.monotonic() + 60
    while True:
        out = rig.run(["systemctl", "show", "--timestamp=unix", "-p", "InvocationID", "-p", "MainPID",
                       "-p", "ExecMainStartTimestamp", unit]).stdout.decode()
        again = dict(line.split("=", 1) for line in out.splitlines() if "=" in line)
        if again["InvocationID"] not in ("", first["InvocationID"]) and again["MainPID"] not in ("0", first["MainPID"]):
            break
        assert time.monotonic() < deadline, again
        time.sleep(0.1)
    began = float(again["ExecMainStartTimestamp"].lstrip("@"))
    second = again["InvocationID"]
    until(rig, unit, "StatusText", lambda s: s.startswith("ready · KV "), timeout=90)  # READY=1: judged healthy again
    rows = {r["invocation"]: r for r in json_lines(sv(rig, units, "history", name, "--json"))}
    assert rows[first["InvocationID"]]["verdict"] == rows[second]["verdict"] == "healthy", rows
    wedged = rows[first["InvocationID"]]["incidents"]
    assert [i["kind"] for i in wedged] == ["wedged"] and wedged[0]["cause"] == "health_failed", (rows, [
        ln for ln in rig.run(["journalctl", "-u", unit, "--no-pager"]).stdout.decode().splitlines() if "svcdiag" in ln])
    assert wedged[0]["action"] == "restart (WATCHDOG=trigger)" and "HTTP 503" in wedged[0]["message"]
    # the documented bound: wedged within health_failures × interval + the check's limit of /health first failing
    assert wedged[0]["ts"] - wedged[0]["since"] <= FAILURES * INTERVAL + INTERVAL + 1.0, wedged
    assert rows[second]["restarted_after"] == "wedged"
    # systemd aborted the first start because it was asked (WATCHDOG=trigger), not for want of a WATCHDOG=1, and
    # restarted it long before WatchdogSec could have (ordering only: the time is load's, printed, not asserted)
    said = rig.run(["journalctl", "--no-pager", "-o", "cat", "-u", unit]).stdout.decode()
    assert "Watchdog request" in said and "Watchdog timeout" not in said, said[-3000:]
    took = began - wedged[0]["ts"]
    print(f"restart began {took:.2f} s after the wedged verdict (WatchdogSec={WATCHDOG}, RestartSec={RESTART})")
    assert 0 < took < WATCHDOG, took
    text = sv(rig, units, "history", name).stdout.decode()
    assert "! wedged [health_failed]" in text and "→ restart (WATCHDOG=trigger)" in text and "↻ restarted after wedged" in text
    events = json_lines(sv(rig, units, "events", "--unit", name, "--json"))
    assert any(e["event"] == "incident" and e.get("verdict") == "wedged" for e in events), events
    # an operator's stop (of whichever start runs now): never an incident, and systemd does not restart it
    assert sv(rig, units, "down", name).returncode == 0
    time.sleep(RESTART + 1)
    assert show(rig, unit, "ActiveState")["ActiveState"] in ("inactive", "failed")  # stopped stays stopped
    incidents = [i for r in json_lines(sv(rig, units, "history", name, "--json")) for i in r["incidents"]]
    assert incidents and {i["kind"] for i in incidents} == {"wedged"}, incidents  # the stop added none


def test_a_loaded_server_is_never_restarted(rig, units: Path) -> None:
    name = config(units, unit_name("loaded"), "demo-smoke", simulate="loaded-serving", watchdog_s=FED_WATCHDOG,
                  restart_sec=RESTART, health_interval_s=INTERVAL, health_failures=FAILURES)
    unit = install(rig, units, name)
    assert verdict_of(sv(rig, units, "up", name, "--wait-ready", "--json"))["verdict"] == "healthy"
    first = show(rig, unit, "MainPID")
    busy = until(rig, unit, "StatusText", lambda s: "· busy since " in s, timeout=60)  # slow /health, batches run
    assert "left alone" in busy["StatusText"], busy
    fed_before = int(show(rig, unit, "WatchdogTimestampMonotonic")["WatchdogTimestampMonotonic"])
    time.sleep(max(FAILURES * INTERVAL * 2, FED_WATCHDOG))  # twice what a wedge would take, a whole watchdog period
    later = show(rig, unit, "MainPID", "ActiveState", "NRestarts", "StatusText", "WatchdogTimestampMonotonic")
    assert (later["ActiveState"], later["NRestarts"], later["MainPID"]) == ("active", "0", first["MainPID"]), later
    assert int(later["WatchdogTimestampMonotonic"]) > fed_before, later  # busy: the watchdog is still fed
    assert "· busy since " in later["StatusText"], later
    st_ = json_lines(sv(rig, units, "status", name, "--json"))[0]
    assert st_["verdict"]["verdict"] == "healthy" and st_["watch"]["state"] == "busy", st_  # status says it too
    assert "    busy since " in sv(rig, units, "status", name).stdout.decode()
    assert sv(rig, units, "down", name).returncode == 0
    [row] = [r for r in json_lines(sv(rig, units, "history", name, "--json"))]
    assert row["incidents"] == [], row
