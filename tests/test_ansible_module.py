"""#31 §2 without a rig: the svcdiag_service module (ansible_collections/svcdiag/sglang) run as
ansible-core runs it on a host (its arguments in a file), and once through `ansible localhost -m`,
against a stand-in `svcdiag` command that keeps one unit's state in a file and answers --json as
svcdiag does. What `changed`, a failure and check mode say;
tests/rig/test_rig_ansible.py runs the real thing over SSH."""

from __future__ import annotations

import json
import os
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
def say(*recs):
    for r in recs:
        print(json.dumps(r))
def note(m):
    return {{"event": "note", "message": m}}
s["calls"].append(" ".join(args))
if cmd == "status":
    say({{"event": "status", "name": name, "unit": unit, "active_state": "active" if s["active"] else "inactive",
         "verdict": healthy if s["active"] else None}})
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
        say(note(unit + " runs a unit that differs from its config (hash); --restart to apply the config")
            if s.get("drift") else note(unit + " is already active"), note(unit + " is already active (invocation 1); attaching"))
        if s.get("drift"):
            s["drift"] = False
        say(healthy)
    else:
        s["active"] = True
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
        self.state.write_text(json.dumps({"active": False, "calls": [], **state}))
        self.fake = tmp / "svcdiag"
        self.fake.write_text(FAKE.format(python=sys.executable, state=str(self.state)))
        self.fake.chmod(0o755)
        self.tmp = tmp

    def module(self, *kv: str, check: bool = False) -> tuple[str, dict]:
        """The module run as Ansible runs it on a host, with its arguments in a file (ANSIBLE_MODULE_ARGS):
        ("CHANGED" | "SUCCESS" | "FAILED!", its result)."""
        args = dict(item.split("=", 1) for item in ["name=qwen", f"svcdiag={self.fake}", *kv])
        path = self.tmp / "args.json"
        path.write_text(json.dumps({"ANSIBLE_MODULE_ARGS": {**args, "_ansible_check_mode": check,
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


def test_a_drifted_running_unit_is_restarted(tmp_path: Path) -> None:
    host = Host(tmp_path, active=True, drift=True)
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
    assert host.calls == ["status qwen", "preflight qwen"]  # nothing started
    host = Host(tmp_path, preflight="cannot_serve")
    status, r = host.module("state=started", check=True)
    assert status == "FAILED!" and r["msg"].startswith("qwen: would refuse to start: preflight: cannot_serve")


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
