"""`svcdiag wait` on a unit whose start was healthy and which has ended since: the start is
judged as it ended. A clean stop leaves it healthy; a death while serving (the watchdog, a
signal) is `failed` / `died_after_ready`, not an HTTP check of a server that is gone."""

from __future__ import annotations

import time

import pytest

from .helpers import config, json_lines, sv, unit_name, verdict_of

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
    name = config(units, unit_name("wdwait"), "demo-smoke", simulate="stops-serving", watchdog_s=2, restart="no",
                  health_interval_s=0.5)
    assert verdict_of(sv(rig, units, "up", name, "--wait-ready", "--json"))["verdict"] == "healthy"
    assert ended(rig, f"{name}.service")["Result"] == "watchdog"
    got = sv(rig, units, "wait", name, "--json")
    v = verdict_of(got)
    assert got.returncode == 1, got.stderr.decode()
    assert (v["verdict"], v["cause"], v["phase"]) == ("failed", "died_after_ready", "ready"), v
    assert "watchdog killed it" in v["message"] and v["figures"]["kv_tokens"] > 0
    assert "serving watch found it wedged" in " ".join(v["diagnosis"]["explanation"])
    assert not any("http" in e.lower() for e in v["evidence"]), v["evidence"]  # nothing serves: no HTTP check
    assert history_verdicts(rig, units, name) == ["healthy"]  # the start, as it was judged when ready


def test_sigkill_after_ready_names_the_signal_and_a_stopped_unloaded_unit_has_nothing_to_judge(rig, units) -> None:
    name = config(units, unit_name("killwait"), "demo-smoke", readiness="journal")
    assert verdict_of(sv(rig, units, "up", name, "--wait-ready", "--json"))["verdict"] == "healthy"
    rig.run(["systemctl", "kill", "-s", "SIGKILL", f"{name}.service"])
    ended(rig, f"{name}.service")
    v = verdict_of(sv(rig, units, "wait", name, "--json"))
    assert (v["verdict"], v["cause"]) == ("failed", "died_after_ready"), v
    assert "status=9/KILL" in v["message"], v["message"]
    # stopped cleanly: systemd unloads the unit and keeps no invocation: `wait` has nothing to judge, and says so
    assert verdict_of(sv(rig, units, "up", name, "--wait-ready", "--json"))["verdict"] == "healthy"
    assert sv(rig, units, "down", name).returncode == 0
    got = sv(rig, units, "wait", name)
    assert got.returncode == 2 and "has no start to judge" in got.stderr.decode(), got.stderr.decode()
    assert f"svcdiag up {name} --wait-ready" in got.stderr.decode()
