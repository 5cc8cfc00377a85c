"""#31 §1's measure: the same stand-in start, once as a notify unit in the rig's systemd and once
as a pod's PID 1 (`unshare --pid --fork --mount-proc`, no systemd, the config from the command
line), is judged the same: verdict, cause, phase and figures."""

from __future__ import annotations

import json
import shutil
import signal
import time
from pathlib import Path

import pytest

from svcdiag.config.service import UnitsDir
from svcdiag.sglang.flags import exec_argv

from ..ports import free_port
from ..test_container_pod import Pod
from .helpers import sv, unit_name, verdict_of

pytestmark = pytest.mark.rig
FIGURES = ("kv_tokens", "max_running_requests", "mamba_slots", "context_len", "sglang_version")


def pod_verdict(tmp: Path, argv: list[str]) -> tuple[int, dict, str]:
    """The pod's exit status, its verdict record (--events) and its termination message; a healthy
    pod runs on, as a server does, until SIGTERM (from its runtime, as the kubelet sends it)."""
    pod = Pod(tmp, argv)
    try:
        deadline = time.monotonic() + 120
        while True:
            alive = pod.p.poll() is None
            records = [json.loads(line) for line in pod.events.read_text().splitlines()] if pod.events.exists() else []
            if records and records[-1]["event"] == "verdict":
                break
            assert alive and time.monotonic() < deadline, "the pod gave no verdict"
            time.sleep(0.1)
        if records[-1]["verdict"] == "healthy":
            pod.signal(signal.SIGTERM)
        pod.end()
    finally:
        pod.p.kill()
    return pod.p.returncode, records[-1], pod.term.read_text()


@pytest.mark.skipif(shutil.which("unshare") is None, reason="needs unshare")
@pytest.mark.parametrize(("base", "code"), [("demo-smoke", 0), ("demo-max-running-zero", 1)])
def test_a_pod_judges_the_stand_in_as_its_systemd_unit_does(rig, units: Path, tmp_path: Path, base: str, code: int) -> None:
    name = unit_name("pod-vs-unit")
    (units / f"{name}.toml").write_text(f'extends = "{base}"\nport = {free_port()}\nsim_time_scale = 0.05\n')
    # --force: up's preflight gate would refuse demo-max-running-zero's start, which is what is compared
    unit = sv(rig, units, "up", name, "--wait-ready", "--json", "--force")
    sv(rig, units, "down", name)
    uv = verdict_of(unit)
    cfg = UnitsDir(units, "t").load(name)
    pod_code, pv, message = pod_verdict(tmp_path, exec_argv(cfg))
    assert unit.returncode == code, unit.stdout.decode()[-2000:]
    assert (pv["verdict"], pv.get("cause"), pv["phase"]) == (uv["verdict"], uv.get("cause"), uv["phase"])
    assert {k: pv["figures"].get(k) for k in FIGURES} == {k: uv["figures"].get(k) for k in FIGURES}
    assert pod_code == code  # 0: the stand-in's clean exit on SIGTERM; 1: the verdict's code
    if code:
        assert pod_code == code and message.startswith(f"FAILED [{uv['cause']}] in phase {uv['phase']}: ")
