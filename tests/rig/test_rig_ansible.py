"""#31 §2: the Ansible collection (ansible_collections/svcdiag/sglang, docs/ansible.md), run by
ansible-core from PyPI against the suite's SSH test hosts (gpu-a, gpu-b: tests/rig/conftest.py
`test_hosts`). Every play goes over SSH, as to a real fleet: the module runs svcdiag there."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest

from ..conftest import ROOT
from ..ports import free_port
from .helpers import unit_name

#: on the worker that boots gpu-a and gpu-b (the "hosts" group, tests/xdist_groups.py)
pytestmark = pytest.mark.rig
PLAYBOOK = ROOT / ".venv" / "bin" / "ansible-playbook"
SVCDIAG = str(ROOT / ".venv" / "bin" / "svcdiag")
ROLLOUT = ROOT / "ansible_collections" / "svcdiag" / "sglang" / "playbooks" / "rollout.yml"


@pytest.fixture
def ansible(tmp_path: Path):
    if not PLAYBOOK.exists():
        pytest.skip("ansible-core is not installed (pip install -e '.[test]')")
    return tmp_path


def inventory(tmp: Path, hosts, host_vars: dict[str, str] | None = None) -> Path:
    lines = ["[gpu_hosts]"] + [
        f"gpu-{chr(97 + i)} ansible_host={h.addr} ansible_port={h.port} ansible_user=root "
        f"ansible_python_interpreter={ROOT}/.venv/bin/python ansible_ssh_common_args='-F {h.ssh_config}'"
        + (f" {host_vars[f'gpu-{chr(97 + i)}']}" if host_vars else "")
        for i, h in enumerate(hosts)]
    path = tmp / "inventory.ini"
    path.write_text("\n".join(lines) + "\n")
    return path


def play(tmp: Path, hosts, playbook: Path, *args: str, host_vars: dict[str, str] | None = None,
         ) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "ANSIBLE_COLLECTIONS_PATH": str(ROOT), "ANSIBLE_HOME": str(tmp / "ansible-home"),
           "ANSIBLE_LOCAL_TEMP": str(tmp / "ansible-tmp"), "ANSIBLE_REMOTE_TMP": "/tmp/.ansible-svcdiag",
           "ANSIBLE_NOCOLOR": "1", "ANSIBLE_FORCE_COLOR": "0", "ANSIBLE_DEPRECATION_WARNINGS": "0"}
    return subprocess.run([str(PLAYBOOK), "-i", str(inventory(tmp, hosts, host_vars)), str(playbook), *args],
                          capture_output=True, text=True, timeout=300, env=env, check=False)


def recap(out: str) -> dict[str, dict[str, int]]:
    """PLAY RECAP: host → {ok, changed, failed, ...}."""
    return {m.group(1): {k: int(v) for k, v in re.findall(r"(\w+)=(\d+)", m.group(2))}
            for m in re.finditer(r"^(gpu-\w)\s+:\s+(.*)$", out, re.M)}


TASK = """
- hosts: gpu_hosts
  gather_facts: false
  tasks:
    - svcdiag.sglang.svcdiag_service:
        name: {name}
        state: {state}
        svcdiag: {svcdiag}
        units: {units}
      register: r
    - ansible.builtin.debug:
        msg: "verdict={{{{ r.verdict | default('none') }}}} kv={{{{ r.figures.kv_tokens | default('none') }}}} changed={{{{ r.changed }}}} {{{{ r.msg | default('') }}}}"
"""


def task(tmp: Path, units: Path, name: str, state: str) -> Path:
    path = tmp / f"{state}.yml"
    path.write_text(TASK.format(name=name, state=state, svcdiag=SVCDIAG, units=units))
    return path


def test_started_is_idempotent_check_mode_says_what_it_would_do_and_stopped_stops(ansible: Path, units: Path,
                                                                                    test_hosts) -> None:
    gpu_a = test_hosts[0]
    name = unit_name("ans-ok")
    (units / f"{name}.toml").write_text(f'extends = "demo-smoke"\nport = {free_port()}\nsim_time_scale = 0.02\n')
    try:
        first = play(ansible, [gpu_a], task(ansible, units, name, "started"))
        assert first.returncode == 0, first.stdout[-3000:] + first.stderr[-2000:]
        assert recap(first.stdout)["gpu-a"]["changed"] == 1
        assert re.search(r"verdict=healthy kv=\d+ changed=True", first.stdout), first.stdout[-2000:]
        again = play(ansible, [gpu_a], task(ansible, units, name, "started"))
        assert again.returncode == 0 and recap(again.stdout)["gpu-a"]["changed"] == 0, again.stdout[-3000:]
        assert "verdict=healthy" in again.stdout  # the running start's verdict, judged again, nothing restarted

        check = play(ansible, [gpu_a], task(ansible, units, name, "started"), "--check")
        assert check.returncode == 0 and recap(check.stdout)["gpu-a"]["changed"] == 0, check.stdout[-3000:]
        assert "runs healthy: left alone" in check.stdout
        would = play(ansible, [gpu_a], task(ansible, units, name, "stopped"), "--check")
        assert would.returncode == 0 and recap(would.stdout)["gpu-a"]["changed"] == 1
        assert f"would stop {name}.service" in would.stdout
        active = gpu_a.rig.run(["systemctl", "is-active", f"{name}.service"], check=False).stdout.decode().strip()
        assert active == "active"  # check mode changed nothing

        # #42 §5: the config edited since its start. Check mode once said "left alone" while the real run
        # restarted it: now both restart it, and --diff shows the unit file's change
        (units / f"{name}.toml").write_text(f'extends = "demo-smoke"\nport = {free_port()}\nsim_time_scale = 0.02\n')
        edited = play(ansible, [gpu_a], task(ansible, units, name, "started"), "--check", "--diff")
        assert edited.returncode == 0 and recap(edited.stdout)["gpu-a"]["changed"] == 1, edited.stdout[-3000:]
        assert f"would restart {name}.service, its unit not its config's" in edited.stdout
        assert f"--- before: /etc/systemd/system/{name}.service" in edited.stdout
        assert re.search(r"^\+.*--port \d+", edited.stdout, re.M), edited.stdout[-3000:]
        restarted = play(ansible, [gpu_a], task(ansible, units, name, "started"), "--diff")
        assert restarted.returncode == 0 and recap(restarted.stdout)["gpu-a"]["changed"] == 1, restarted.stdout[-3000:]
        assert f"--- before: /etc/systemd/system/{name}.service" in restarted.stdout
        assert "verdict=healthy" in restarted.stdout

        stop = play(ansible, [gpu_a], task(ansible, units, name, "stopped"))
        assert stop.returncode == 0 and recap(stop.stdout)["gpu-a"]["changed"] == 1, stop.stdout[-3000:]
        stop2 = play(ansible, [gpu_a], task(ansible, units, name, "stopped"))
        assert stop2.returncode == 0 and recap(stop2.stdout)["gpu-a"]["changed"] == 0
    finally:
        gpu_a.rig.run(["systemctl", "stop", f"{name}.service"], check=False)


def test_the_rollout_stops_at_the_first_unhealthy_start_with_its_diagnosis(ansible: Path, units: Path,
                                                                          test_hosts) -> None:
    gpu_a, gpu_b = test_hosts
    name = unit_name("ans-mr0")
    new_config = ansible / f"{name}.toml"
    new_config.write_text(f'extends = "demo-max-running-zero"\nport = {free_port()}\nsim_time_scale = 0.05\n')
    r = play(ansible, [gpu_a, gpu_b], ROLLOUT, "-e", f"config={name}", "-e", f"config_file={new_config}",
             "-e", f"units_dir={units}", "-e", f"svcdiag_command={SVCDIAG}")
    try:
        assert r.returncode != 0, r.stdout[-3000:]
        fatal = next(line for line in r.stdout.splitlines() if line.startswith("fatal: [gpu-a]"))
        # up's preflight gate refuses a config whose own Mamba slots serve nobody: never started, cause and fix said
        assert f'"msg": "{name}: NOT STARTED [max_running_zero]: preflight: 2 Mamba slot(s)' in fatal, fatal
        assert "fix: max_mamba_cache_size = " in fatal
        assert '"cause": "max_running_zero"' in fatal  # the refusal's record, in the task's result
        rows = recap(r.stdout)
        assert rows["gpu-a"]["failed"] == 1 and rows["gpu-b"]["ok"] == rows["gpu-b"]["changed"] == 0  # the roll stopped
        there = gpu_b.rig.run(["systemctl", "show", "-P", "LoadState", f"{name}.service"], check=False)
        assert there.stdout.decode().strip() == "not-found"  # gpu-b was never touched
    finally:
        gpu_a.rig.run(["systemctl", "stop", f"{name}.service"], check=False)


def test_the_rollout_of_a_healthy_config_reaches_every_host_in_turn(ansible: Path, units: Path, test_hosts) -> None:
    name = unit_name("ans-roll")
    files, host_vars = {}, {}
    for host in ("gpu-a", "gpu-b"):  # the test hosts share one network (and other runs): a free port each
        files[host] = ansible / host / f"{name}.toml"
        files[host].parent.mkdir()
        files[host].write_text(f'extends = "demo-smoke"\nport = {free_port()}\nsim_time_scale = 0.02\n')
        baseline = f"{name}-baseline-{host}"  # each host's known-good config, checked on both hosts at once
        (units / f"{baseline}.toml").write_text(f'extends = "demo-smoke"\nport = {free_port()}\nsim_time_scale = 0.02\n')
        host_vars[host] = f"config_file={files[host]} baseline={baseline}"
    try:
        r = play(ansible, list(test_hosts), ROLLOUT, "-e", f"config={name}", "-e", f"units_dir={units}",
                 "-e", f"svcdiag_command={SVCDIAG}", host_vars=host_vars)
        assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-2000:]
        rows = recap(r.stdout)
        assert rows["gpu-a"]["changed"] == rows["gpu-b"]["changed"] == 2  # the file, then the start
        assert rows["gpu-a"]["ok"] == rows["gpu-b"]["ok"] == 4  # the baseline check (changed=false), then the roll's 3
        said = re.findall(r"\"msg\": \"(gpu-\w): healthy,", r.stdout)
        assert said == ["gpu-a", "gpu-b"], r.stdout[-3000:]  # one host at a time, in order
    finally:
        for h in test_hosts:
            h.rig.run(["systemctl", "stop", f"{name}.service"], check=False)
