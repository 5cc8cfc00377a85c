"""svcdiag's D-Bus connection on a real PID 1: as root, PID 1's private socket (one hop fewer
for a notify unit's STATUS=), the system bus otherwise; a follower whose private connection
closes because PID 1 re-executes connects again and judges the start to its end."""

from __future__ import annotations

import json
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


PATHS = """
from svcdiag.systemd.dbus import Systemd, unit_object_path
with Systemd.connect() as sd:
    for u in {names!r}:
        via_load = bytes(sd._call(b"/org/freedesktop/systemd1", b"org.freedesktop.systemd1.Manager", b"LoadUnit", b"s",
                                  [u.encode()]))
        p = sd.props(u)
        print(u, via_load == unit_object_path(u), p.name, p.load_state)
"""


def test_a_units_object_path_is_systemds_own_and_asking_it_loads_the_unit(rig) -> None:
    """`props` asks the unit's object directly (one GetAll, no LoadUnit): the path svcdiag makes is
    the one systemd gives, for names with digits first, dashes, '@', escapes and '_'."""
    names = ["systemd-journald.service", "4x-y@z.service", "a\\x2db.service", "sshd@1.service", "x_y.service",
             f"{unit_name('nope')}.service"]
    out = rig.run(["python", "-c", PATHS.format(names=names)]).stdout.decode().split("\n")
    rows = [ln.split() for ln in out if ln]
    assert [r[1] for r in rows] == ["True"] * len(names), out
    assert rows[0][3] == "loaded" and rows[-1][3] == "not-found", out


STATES = """
import json
from svcdiag.systemd.dbus import Systemd
keys = ("name", "load_state", "active_state", "sub_state", "result", "invocation", "job", "main_pid")
with Systemd.connect() as sd:
    units = {units!r}
    cheap = [{{k: getattr(p, k) for k in keys}} for p in sd.states(units)]
    full = [{{k: getattr(sd.props(u), k) for k in keys}} for u in units]
print(json.dumps([cheap, full]))
"""


def test_states_of_many_units_agree_with_each_units_own_properties(rig) -> None:
    """`status` reads every unit's state with one ListUnitsByNames and the rest only for a unit
    with a start: what it reads is what the unit's own GetAll says, in every state."""
    never, failed, running, gone = (unit_name(p) for p in ("never", "failed", "running", "gone"))
    rig.run(f"printf '[Service]\\nExecStart=/bin/true\\n' > /run/systemd/system/{never}.service && "
            "systemctl daemon-reload")
    rig.run(["systemd-run", "--quiet", f"--unit={failed}", "/bin/false"])
    rig.run(["systemd-run", "--quiet", f"--unit={running}", "/bin/sleep", "60"])
    units = [f"{u}.service" for u in (never, failed, running, gone)]
    deadline = time.monotonic() + 60
    while rig.run(["systemctl", "is-failed", units[1]], check=False).returncode != 0:
        assert time.monotonic() < deadline, "the failing unit never failed"
        time.sleep(0.05)
    cheap, full = json.loads(rig.run(["python", "-c", STATES.format(units=units)]).stdout)
    assert cheap == full
    by = {r["name"]: r for r in cheap}
    assert by[units[0]]["load_state"] == "loaded" and by[units[0]]["active_state"] == "inactive"
    assert by[units[1]]["active_state"] == "failed" and by[units[1]]["result"] == "exit-code" and by[units[1]]["invocation"]
    assert by[units[2]]["active_state"] == "active" and by[units[2]]["main_pid"] > 0
    assert by[units[3]]["load_state"] == "not-found" and not by[units[3]]["invocation"]
    rig.run(["systemctl", "stop", units[2]], check=False)
    rig.run(["systemctl", "reset-failed", units[1]], check=False)
