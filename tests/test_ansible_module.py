"""#31 §2 without a rig: the svcdiag_service module (ansible_collections/svcdiag/sglang) run as
ansible-core runs it on a host (its arguments in a file), and once through `ansible localhost -m`,
against a stand-in `svcdiag` command that keeps one unit's state in a file and answers --json as
svcdiag does. What `changed`, a failure and check mode say;
tests/rig/test_rig_ansible.py runs the real thing over SSH."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from .conftest import ROOT

ANSIBLE = ROOT / ".venv" / "bin" / "ansible"
MODULE = ROOT / "ansible_collections" / "svcdiag" / "sglang" / "plugins" / "modules" / "svcdiag_service.py"
pytestmark = pytest.mark.skipif(not ANSIBLE.exists(), reason="ansible-core is not installed (pip install -e '.[test]')")

FAKE = r'''#!{python}
import json, sys
STATE = {state!r}
s = json.load(open(STATE))
args = [a for a in sys.argv[1:] if a not in ("--json",)]
if args[0] == "--units":
    args = args[2:]
cmd, name = args[0], args[1]
unit = name + ".service"
healthy = {{"event": "verdict", "verdict": "healthy", "cause": None, "phase": "ready", "message": "ready",
            "figures": {{"kv_tokens": 94126, "max_running_requests": 4}}, "diagnosis": None}}
failed = {{"event": "verdict", "verdict": "failed", "cause": "max_running_zero", "phase": "scheduler",
           "message": "AssertionError: max_running_request is zero", "figures": {{"kv_tokens": 11893}},
           "diagnosis": {{"explanation": ["The KV cache holds 11,893 tokens."],
                         "fixes": [{{"set": {{"mem_fraction_static": 0.8}}, "reason": "holds 1 request"}}]}}}}
def unit_text(port):
    return "[Service]\nExecStart=/usr/bin/python3 -m sglang.launch_server --port %d\n" % port
rendered = unit_text(s.get("port", 30000))
installed = s.get("installed")
unit_drift = None if installed == rendered else "not installed" if installed is None else "installed from config hash 1, config is now 2"
def say(*recs):
    for r in recs:
        print(json.dumps(r))
def note(m):
    return {{"event": "note", "message": m}}
s["calls"].append(" ".join(args))
if cmd == "status":
    say({{"event": "status", "name": name, "unit": unit, "active_state": "active" if s["active"] else "inactive",
         "verdict": s.get("verdict", healthy) if s["active"] else None}})
elif cmd == "render":
    say({{"event": "render", "name": name, "unit": unit, "text": rendered, "unit_file": "/etc/systemd/system/" + unit,
         "installed_text": installed, "drift": unit_drift}})
elif cmd == "preflight":
    say({{"verdict": s.get("preflight", "fits"), "reasons": []}})
elif cmd == "down":
    s["active"] = False
    say({{"event": "down", "name": name, "unit": unit, "state_before": "active", "state_after": "inactive"}})
elif cmd == "baseline-check":
    if s.get("drift"):
        say({{"event": "drift", "message": "kv_tokens 94,126 → 90,000 (the last healthy start of qwen)"}}, healthy)
        sys.exit(1)
    say(healthy)
elif cmd == "up":
    if s["active"] and "--restart" not in args:
        if unit_drift:
            say(note(unit + " runs a unit that differs from its config (" + unit_drift + "); --restart to apply the config"))
        say(note(unit + " is already active (invocation 1); attaching"), s.get("verdict", healthy))
    else:
        if unit_drift:
            s["installed"] = rendered
            say(note("updated /etc/systemd/system/" + unit + " (" + unit_drift + ")"))
        s["active"] = True
        s.pop("verdict", None)
        say(note("started " + unit + " (invocation 2)"))
        if s.get("fail"):
            say({{"event": "diagnosis", "message": "why"}}, failed)
            json.dump(s, open(STATE, "w"))
            sys.exit(1)
        if "--wait-ready" in args:
            say(healthy)
json.dump(s, open(STATE, "w"))
'''


class Host:
    def __init__(self, tmp: Path, **state):
        self.state = tmp / "state.json"
        if state.get("active") and "installed" not in state:  # a running unit: installed from its config
            state["installed"] = UNIT.format(port=state.get("port", 30000))
        self.state.write_text(json.dumps({"active": False, "calls": [], **state}))
        self.fake = tmp / "svcdiag"
        self.fake.write_text(FAKE.format(python=sys.executable, state=str(self.state)))
        self.fake.chmod(0o755)
        self.tmp = tmp

    def module(self, *kv: str, check: bool = False, diff: bool = False) -> tuple[str, dict]:
        """The module run as Ansible runs it on a host, with its arguments in a file (ANSIBLE_MODULE_ARGS):
        ("CHANGED" | "SUCCESS" | "FAILED!", its result)."""
        args = dict(item.split("=", 1) for item in ["name=qwen", f"svcdiag={self.fake}", *kv])
        path = self.tmp / "args.json"
        path.write_text(json.dumps({"ANSIBLE_MODULE_ARGS": {**args, "_ansible_check_mode": check, "_ansible_diff": diff,
                                                            "_ansible_remote_tmp": str(self.tmp / "rt")}}))
        r = subprocess.run([sys.executable, str(MODULE), str(path)], capture_output=True, text=True, timeout=60, check=False)
        out = json.loads(r.stdout)
        return ("FAILED!" if out.get("failed") else "CHANGED" if out.get("changed") else "SUCCESS"), out

    @property
    def calls(self) -> list[str]:
        return json.loads(self.state.read_text())["calls"]


def test_started_starts_once_then_leaves_a_healthy_unit_alone(tmp_path: Path) -> None:
    host = Host(tmp_path)
    status, r = host.module("state=started")
    assert status == "CHANGED" and r["verdict"] == "healthy" and r["figures"]["kv_tokens"] == 94126
    assert r["ansible_facts"]["svcdiag_verdict"]["verdict"] == "healthy"
    status, r = host.module("state=started")
    assert status == "SUCCESS" and r["changed"] is False and r["verdict"] == "healthy"
    assert host.calls == ["up qwen --wait-ready", "up qwen --wait-ready"]


def edited(**state) -> dict:
    """A unit installed and started from the config's port 30000; the config now says 31000."""
    return {"installed": UNIT.format(port=30000), "port": 31000, **state}


UNIT = "[Service]\nExecStart=/usr/bin/python3 -m sglang.launch_server --port {port}\n"


def test_a_drifted_running_unit_is_restarted(tmp_path: Path) -> None:
    host = Host(tmp_path, **edited(active=True))
    status, r = host.module("state=started")
    assert status == "CHANGED" and r["verdict"] == "healthy"
    assert host.calls == ["up qwen --wait-ready", "up qwen --restart --wait-ready"]


def test_a_failed_start_fails_the_task_with_its_diagnosis(tmp_path: Path) -> None:
    host = Host(tmp_path, fail=True)
    status, r = host.module("state=started")
    assert status == "FAILED!" and r["changed"] is True
    assert r["msg"] == ("qwen: FAILED [max_running_zero] in phase scheduler: AssertionError: max_running_request is zero; "
                        "fix: mem_fraction_static = 0.8 (holds 1 request); why: The KV cache holds 11,893 tokens.")
    assert (r["cause"], r["phase"], r["fixes"][0]["set"]) == ("max_running_zero", "scheduler", {"mem_fraction_static": 0.8})


def test_stopped_and_baseline_checked_say_changed_only_for_what_changed(tmp_path: Path) -> None:
    host = Host(tmp_path, active=True)
    assert host.module("state=stopped")[0] == "CHANGED"
    assert host.module("state=stopped")[0] == "SUCCESS"
    status, r = host.module("state=baseline_checked")
    assert status == "SUCCESS" and r["changed"] is False and r["verdict"] == "healthy"
    status, r = Host(tmp_path, drift=True).module("state=baseline_checked")
    assert status == "FAILED!" and r["msg"] == "qwen: healthy, but kv_tokens 94,126 → 90,000 (the last healthy start of qwen)"


def test_check_mode_runs_preflight_and_says_what_it_would_do(tmp_path: Path) -> None:
    host = Host(tmp_path)
    status, r = host.module("state=started", check=True)
    assert status == "CHANGED" and r["msg"] == "would start qwen.service (preflight: fits)"
    assert host.calls == ["status qwen", "render qwen", "preflight qwen"]  # nothing started
    host = Host(tmp_path, preflight="cannot_serve")
    status, r = host.module("state=started", check=True)
    assert status == "FAILED!" and r["msg"].startswith("qwen: would refuse to start: preflight: cannot_serve")


FAILED_NOW = {"event": "verdict", "verdict": "failed", "cause": "exited", "phase": "cuda_graph", "message": "exited",
              "figures": {}, "diagnosis": None}


@pytest.mark.parametrize(("state", "host"), [
    ("started", {}), ("started", {"active": True}), ("started", edited(active=True)), ("started", edited()),
    ("restarted", {"active": True}), ("restarted", edited(active=True)), ("stopped", {"active": True}), ("stopped", {}),
    ("started", {"active": True, "verdict": FAILED_NOW}),
], ids=["not-running", "running-its-config", "running-an-edited-config", "stopped-edited-config", "restart",
        "restart-edited", "stop", "stop-stopped", "running-failed"])
def test_check_mode_says_what_the_real_run_then_does(tmp_path: Path, state: str, host: dict) -> None:
    """#42 §5: check mode said "left alone" for a config edited since its start, and the real run restarted it."""
    (tmp_path / "check").mkdir()
    (tmp_path / "real").mkdir()
    checked, c = Host(tmp_path / "check", **host).module(f"state={state}", check=True)
    real = Host(tmp_path / "real", **host)
    ran, r = real.module(f"state={state}")
    assert checked == ran, (c, r)  # CHANGED, SUCCESS or FAILED! alike
    if state == "started" and host.get("installed") == UNIT.format(port=30000) and host.get("port") == 31000 and host.get("active"):
        assert c["msg"] == ("would restart qwen.service, its unit not its config's (qwen.service: installed from config "
                            "hash 1, config is now 2) (preflight: fits)")
        assert real.calls[-1] == "up qwen --restart --wait-ready"
    if host.get("verdict"):
        assert c["msg"].startswith("qwen: qwen.service runs its config, but its current start was judged failed")


@pytest.mark.parametrize("check", [True, False], ids=["check", "real"])
def test_diff_mode_returns_the_unit_file_before_and_after(tmp_path: Path, check: bool) -> None:
    host = Host(tmp_path, **edited(active=True))
    status, r = host.module("state=started", check=check, diff=True)
    assert status == "CHANGED"
    (d,) = r["diff"]
    assert d["before_header"] == "/etc/systemd/system/qwen.service" and d["after_header"].endswith("(as qwen renders it)")
    assert (d["before"], d["after"]) == (UNIT.format(port=30000), UNIT.format(port=31000))
    status, r = Host(tmp_path, active=True).module("state=started", check=check, diff=True)
    assert status == "SUCCESS" and "diff" not in r  # nothing to install: nothing to show
    status, r = Host(tmp_path).module("state=started", check=check, diff=True)
    assert r["diff"][0]["before_header"] == "/etc/systemd/system/qwen.service (not installed)" and r["diff"][0]["before"] == ""


def test_ansible_check_and_diff_print_the_units_change(tmp_path: Path) -> None:
    host = Host(tmp_path, **edited(active=True))
    env = {**os.environ, "ANSIBLE_COLLECTIONS_PATH": str(ROOT), "ANSIBLE_HOME": str(tmp_path / "ah"),
           "ANSIBLE_LOCAL_TEMP": str(tmp_path / "at"), "ANSIBLE_NOCOLOR": "1"}
    r = subprocess.run([str(ANSIBLE), "localhost", "-c", "local", "-i", "localhost,", "--check", "--diff",
                        "-e", f"ansible_python_interpreter={sys.executable}", "-m", "svcdiag.sglang.svcdiag_service",
                        "-a", f"name=qwen svcdiag={host.fake}"], capture_output=True, text=True, timeout=120, env=env,
                       check=False)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "--- before: /etc/systemd/system/qwen.service\n" in r.stdout, r.stdout
    assert "-ExecStart=/usr/bin/python3 -m sglang.launch_server --port 30000\n" in r.stdout
    assert "+ExecStart=/usr/bin/python3 -m sglang.launch_server --port 31000\n" in r.stdout
    assert "localhost | CHANGED" in r.stdout and host.calls == ["status qwen", "render qwen", "preflight qwen"]


def test_the_collection_builds_and_its_documentation_matches_the_module(tmp_path: Path) -> None:
    env = {**os.environ, "ANSIBLE_COLLECTIONS_PATH": str(ROOT), "ANSIBLE_HOME": str(tmp_path / "ah")}
    doc = subprocess.run([str(ANSIBLE) + "-doc", "-j", "-t", "module", "svcdiag.sglang.svcdiag_service"],
                         capture_output=True, text=True, timeout=120, env=env, check=True)
    d = json.loads(doc.stdout)["svcdiag.sglang.svcdiag_service"]["doc"]
    assert set(d["options"]) == {"name", "state", "wait_ready", "force", "timeout", "units", "svcdiag"}
    assert d["options"]["state"]["choices"] == ["started", "stopped", "restarted", "baseline_checked"]
    build = subprocess.run([str(ANSIBLE) + "-galaxy", "collection", "build", str(ROOT / "ansible_collections" / "svcdiag" / "sglang"),
                            "--output-path", str(tmp_path)], capture_output=True, text=True, timeout=120, env=env, check=False)
    assert build.returncode == 0 and (tmp_path / "svcdiag-sglang-0.1.0.tar.gz").exists(), build.stderr


def test_ansible_test_sanity_validate_modules_passes(tmp_path: Path) -> None:
    """#42 §5: validate-modules reported 12 errors (author, `returned:` of 10 keys, the license header).
    ansible-test runs in the collection's own layout (ansible_collections/NS/NAME, a copy: it writes
    tests/output there), with a HOME of the test's own, where the stand-in get-pip.py waits in its cache."""
    import ansible_test

    coll = tmp_path / "ansible_collections" / "svcdiag" / "sglang"
    shutil.copytree(ROOT / "ansible_collections" / "svcdiag" / "sglang", coll,
                    ignore=shutil.ignore_patterns("output", "__pycache__"))
    pinned = (Path(ansible_test.__file__).parent / "_internal" / "python_requirements.py").read_text()
    pip = re.search(r"pip='([\d.]+)'", pinned)
    assert pip, "ansible-test's pinned pip version not found: see tests/ansible_get_pip.py"
    home = tmp_path / "home"
    cache = home / ".ansible" / "test" / "cache" / f"get_pip_{pip.group(1).replace('.', '_')}.py"
    cache.parent.mkdir(parents=True)
    shutil.copy(ROOT / "tests" / "ansible_get_pip.py", cache)
    r = subprocess.run([str(ANSIBLE) + "-test", "sanity", "--test", "validate-modules", "--local",
                        "--python", f"{sys.version_info.major}.{sys.version_info.minor}"],
                       cwd=coll, env={**os.environ, "HOME": str(home)}, capture_output=True, text=True, timeout=600,
                       check=False)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    assert 'Running sanity test "validate-modules"' in r.stdout + r.stderr and "ERROR" not in r.stdout + r.stderr


def test_ansible_itself_runs_the_module_from_the_collection(tmp_path: Path) -> None:
    host = Host(tmp_path)
    env = {**os.environ, "ANSIBLE_COLLECTIONS_PATH": str(ROOT), "ANSIBLE_HOME": str(tmp_path / "ah"),
           "ANSIBLE_LOCAL_TEMP": str(tmp_path / "at"), "ANSIBLE_NOCOLOR": "1"}
    r = subprocess.run([str(ANSIBLE), "localhost", "-c", "local", "-i", "localhost,", "-o",
                        "-e", f"ansible_python_interpreter={sys.executable}", "-m", "svcdiag.sglang.svcdiag_service",
                        "-a", f"name=qwen svcdiag={host.fake}"], capture_output=True, text=True, timeout=120, env=env,
                       check=False)
    assert r.stdout.startswith("localhost | CHANGED => "), r.stdout + r.stderr
    assert json.loads(r.stdout.split(" => ", 1)[1])["verdict"] == "healthy"
