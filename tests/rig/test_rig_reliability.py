"""Issue #30: nothing an operator does around a start may kill it or hide it (docs/reliability.md).

Each test is one row of the fault matrix: what an operator does while a start runs (a reload,
a flood of log lines, running as a non-root user, a bad file among the configs) and what
svcdiag promises then, on a real systemd + journald + D-Bus (the private rig).
"""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

import pytest

from .helpers import config, sv, unit_name, wait_for_phase

pytestmark = pytest.mark.rig

#: every phase's deadline but the weight load's: the shortest deadline, where a unit rendered before
#: #30 had its TimeoutStartSec (a reload past it killed the start)
SHORT = 4


def _verdict(out: bytes) -> dict:
    return [json.loads(ln) for ln in out.decode().splitlines() if ln.startswith("{")][-1]


def test_a_daemon_reload_mid_start_never_shortens_its_deadline(rig, units: Path) -> None:
    timeouts = {p: SHORT for p in ("starting", "kv_cache", "mamba_cache", "cuda_graph", "scheduler", "http",
                                   "http_check")} | {"loading_weights": 15}
    name = config(units, unit_name("reload"), "demo-slow", sim_time_scale=0.07, timeouts=timeouts)  # ~7 s of loading
    other = config(units, unit_name("other"), "demo-port-in-use")
    waiter = rig.popen(["svcdiag", "--units", str(units), "up", name, "--wait-ready", "--json"],
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    early = wait_for_phase(waiter, name, "loading_weights")
    time.sleep(SHORT + 0.5)  # the start is now older than its shortest deadline
    assert sv(rig, units, "install", other).returncode == 0  # svcdiag's own install: a daemon-reload
    rig.run(["systemctl", "daemon-reload"])
    rig.run(["systemctl", "daemon-reexec"])
    out, err = waiter.communicate(timeout=60)
    v = _verdict(early + out)
    assert (v["verdict"], waiter.returncode) == ("healthy", 0), (v, err)
    limit = rig.run(["systemctl", "show", "-P", "TimeoutStartUSec", f"{name}.service"]).stdout.decode().strip()
    assert "h" in limit, limit  # the whole start's, not the shortest phase's 4 s
    sv(rig, units, "down", name)
