"""svcdiag's D-Bus connection on a real PID 1: as root, PID 1's private socket (one hop fewer
for a notify unit's STATUS=), the system bus otherwise; a follower whose private connection
closes because PID 1 re-executes connects again and judges the start to its end."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

import pytest

from .helpers import config, json_lines, unit_name

pytestmark = pytest.mark.rig

WHICH = "from svcdiag.systemd.dbus import Systemd; sd = Systemd.connect(); print(sd.direct, sd.props('{u}').load_state)"


def test_root_uses_pid1s_private_bus_unless_told_the_system_bus(rig) -> None:
    u = "systemd-journald.service"
    assert rig.run(["python", "-c", WHICH.format(u=u)]).stdout.split() == [b"True", b"loaded"]
    assert rig.run(["env", "SVCDIAG_BUS=system", "python", "-c", WHICH.format(u=u)]).stdout.split() == \
        [b"False", b"loaded"]


def test_a_follower_survives_daemon_reexec(rig, units: Path) -> None:
    name = config(units, unit_name("reexec"), "demo-smoke", readiness="notify", sim_time_scale=0.2)
    proc = rig.popen(["svcdiag", "--units", str(units), "up", name, "--wait-ready", "--json"],
                     stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 60
    while not rig.run(["systemctl", "show", "-P", "StatusText", f"{name}.service"]).stdout.startswith(b"loading"):
        assert time.monotonic() < deadline and proc.poll() is None, "the start never reached the weight load"
        time.sleep(0.05)
    rig.run(["systemctl", "daemon-reexec"])  # every private connection to PID 1 closes
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err.decode()[-1500:]
    recs = json_lines(subprocess.CompletedProcess([], 0, out, err))
    assert recs[-1]["event"] == "verdict" and recs[-1]["verdict"] == "healthy"
    # what came after the re-exec was still seen as it happened: the KV pool, then ready
    assert any(r.get("milestone") == "kv_cache" for r in recs), [r.get("milestone") for r in recs]
    rig.run(["systemctl", "stop", f"{name}.service"])
