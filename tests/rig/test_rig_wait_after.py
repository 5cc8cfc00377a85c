"""`svcdiag wait` on a unit whose start was healthy and which has ended since: the start is
judged as it ended, by the one decision `replay` takes on the same journal (svcdiag.judge.ending).
A clean stop leaves it healthy; a SIGKILL from outside leaves it healthy with a post-ready incident
`killed`; systemd's watchdog is `failed` / `died_after_ready` (incident wedged); never an HTTP check
of a server that is gone. The kill may come while `up --wait-ready` still runs, or while the notify
supervisor watches: the live verdict and incident are replay's."""

from __future__ import annotations

import time

import pytest

from .helpers import config, json_lines, sv, unit_name, verdict_of
from .test_rig_notify import install, show

pytestmark = pytest.mark.rig


def ended(rig, unit: str, timeout: float = 30.0) -> dict[str, str]:
    deadline = time.monotonic() + timeout
    while True:
        out = rig.run(["systemctl", "show", unit, "-p", "ActiveState", "-p", "Result"]).stdout.decode()
        got = dict(line.split("=", 1) for line in out.splitlines() if "=" in line)
        if got["ActiveState"] in ("failed", "inactive"):
            return got
        assert time.monotonic() < deadline, got
        time.sleep(0.1)


def history_verdicts(rig, units, name: str) -> list[str]:
    return [r["verdict"] for r in json_lines(sv(rig, units, "history", name, "--json"))]


def test_watchdog_after_a_healthy_start_is_died_after_ready(rig, units) -> None:
    # WATCHDOG=trigger ends it at once: WatchdogSec only has to outlast a loaded machine's stalls (at 2 s a missed
    # WATCHDOG=1 could end it first, no incident said); /health each second, each given a second
    name = config(units, unit_name("wdwait"), "demo-smoke", simulate="stops-serving", watchdog_s=30, restart="no",
                  health_interval_s=1)
    assert verdict_of(sv(rig, units, "up", name, "--wait-ready", "--json"))["verdict"] == "healthy"
    assert ended(rig, f"{name}.service", timeout=60)["Result"] == "watchdog"
    got = sv(rig, units, "wait", name, "--json")
    v = verdict_of(got)
    assert got.returncode == 1, got.stderr.decode()
    assert (v["verdict"], v["cause"], v["phase"]) == ("failed", "died_after_ready", "ready"), v
    assert v["figures"]["incident"] == "wedged" and v["figures"]["unit_result"] == "watchdog"
    assert "watchdog killed it" in v["message"] and v["figures"]["kv_tokens"] > 0
    assert same(v, replayed(rig, units, name)), (v, replayed(rig, units, name))
    assert "serving watch found it wedged" in " ".join(v["diagnosis"]["explanation"])
    assert not any("http" in e.lower() for e in v["evidence"]), v["evidence"]  # nothing serves: no HTTP check
    assert history_verdicts(rig, units, name) == ["healthy"]  # the start, as it was judged when ready


def test_sigkill_after_ready_names_the_signal_and_a_stopped_unloaded_unit_has_nothing_to_judge(rig, units) -> None:
    name = config(units, unit_name("killwait"), "demo-smoke", readiness="journal")
    assert verdict_of(sv(rig, units, "up", name, "--wait-ready", "--json"))["verdict"] == "healthy"
    rig.run(["systemctl", "kill", "-s", "SIGKILL", f"{name}.service"])
    ended(rig, f"{name}.service")
    got = sv(rig, units, "wait", name, "--json")
    v = verdict_of(got)
    assert got.returncode == 0, got.stderr.decode()  # the start was healthy: a kill from outside is an incident of it
    assert (v["verdict"], v.get("cause"), v["figures"]["incident"]) == ("healthy", None, "killed"), v
    assert "status=9/KILL" in v["message"] and "post-ready incident" in v["message"], v["message"]
    assert same(v, replayed(rig, units, name))
    # stopped cleanly: systemd unloads the unit and keeps no invocation: `wait` has nothing to judge, and says so
    assert verdict_of(sv(rig, units, "up", name, "--wait-ready", "--json"))["verdict"] == "healthy"
    assert sv(rig, units, "down", name).returncode == 0
    got = sv(rig, units, "wait", name)
    assert got.returncode == 2 and "has no start to judge" in got.stderr.decode(), got.stderr.decode()
    assert f"svcdiag up {name} --wait-ready" in got.stderr.decode()


def replayed(rig, units, name: str) -> dict:
    """`svcdiag replay` of the unit's journal (`journalctl -u … -o export`), its last start."""
    path = units / f"{name}.export"
    path.write_bytes(rig.run(["journalctl", "-u", f"{name}.service", "-o", "export", "--no-pager"]).stdout)
    return verdict_of(sv(rig, units, "replay", "--json", "--config", name, str(path)))


def same(live: dict, offline: dict) -> bool:
    """The live verdict is replay's: the verdict, its cause, the post-ready incident and what the log said of it."""
    keys = ("incident", "killed_after_ready", "oom_killer_line", "died_of", "stopped_after_ready_by", "kv_tokens")
    return ((live["verdict"], live.get("cause"), *(live["figures"].get(k) for k in keys))
            == (offline["verdict"], offline.get("cause"), *(offline["figures"].get(k) for k in keys)))


def test_a_kill_while_up_still_checks_http_is_the_incident_replay_finds(rig, units) -> None:
    """The stand-in's killed-while-serving: from its ready line, /ready answers 503; 2 s later (40 s × 0.05) its
    scheduler is SIGKILLed and the launcher kills itself. `up --wait-ready` is asking HTTP when the kill comes: its
    verdict is the journal's, read to the end, as `replay` reads it, not an unreachable server."""
    name = config(units, unit_name("killup"), "demo-smoke", simulate="killed-while-serving", readiness="journal",
                  timeouts={"http_check": 8})
    got = sv(rig, units, "up", name, "--wait-ready", "--json")
    v = verdict_of(got)
    assert got.returncode == 0, (v, got.stderr.decode())
    assert (v["verdict"], v.get("cause"), v["figures"]["incident"]) == ("healthy", None, "killed"), v
    assert "crashed with exit code -9" in v["figures"]["killed_after_ready"], v["figures"]
    assert ended(rig, f"{name}.service")["Result"] == "signal"
    assert same(v, replayed(rig, units, name)), (v, replayed(rig, units, name))
    assert same(verdict_of(sv(rig, units, "wait", name, "--json")), v)  # and `wait` after the end, the same
    assert history_verdicts(rig, units, name) == ["healthy"]


def test_a_kill_the_notify_supervisor_sees_is_the_incident_replay_finds(rig, units) -> None:
    """SGLang (the supervisor's child) SIGKILLed from outside while the serving watch runs: the supervisor's
    incident (history, `incident` event) is `killed`, and `wait` after the end says what `replay` says."""
    # watchdog_s: the supervisor may write the history (hardening grants it only then); restart "no": no restart after.
    # Neither the watchdog nor the watch may end it first on a loaded machine: fed every 15 s, /health given 2 s
    name = config(units, unit_name("killsup"), "demo-smoke", readiness="notify", health_interval_s=2, watchdog_s=30,
                  restart="no")
    unit = install(rig, units, name)
    assert verdict_of(sv(rig, units, "up", name, "--wait-ready", "--json"))["verdict"] == "healthy"
    main = show(rig, unit, "MainPID", "InvocationID")
    child = rig.run(["cat", f"/proc/{main['MainPID']}/task/{main['MainPID']}/children"]).stdout.decode().split()
    assert len(child) == 1, child
    rig.run(["kill", "-9", child[0]])
    assert ended(rig, unit, timeout=60)["Result"] == "signal"
    rows = {r["invocation"]: r for r in json_lines(sv(rig, units, "history", name, "--json"))}
    incidents = rows[main["InvocationID"]]["incidents"]
    assert [(i["kind"], i["cause"]) for i in incidents] == [("killed", "killed_by_signal")], rows
    events = [e for e in json_lines(sv(rig, units, "events", "--unit", name, "--json")) if e["event"] == "incident"]
    assert [(e["kind"], e["cause"]) for e in events] == [("killed", "killed_by_signal")], events
    v = verdict_of(sv(rig, units, "wait", name, "--json"))
    assert (v["verdict"], v["figures"]["incident"]) == ("healthy", "killed"), v
    assert same(v, replayed(rig, units, name)), (v, replayed(rig, units, name))
