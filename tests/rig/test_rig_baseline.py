"""`svcdiag baseline-check` on the private rig with the stand-in."""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

import pytest

from .helpers import config, json_lines, sv, unit_name, wait_for_phase

pytestmark = pytest.mark.rig


def check(rig, units: Path, state: str, *args: str):
    p = sv(rig, units, "baseline-check", *args, "--state-dir", state, "--json")
    lines = json_lines(p)
    assert lines and lines[-1]["event"] == "baseline_result", p.stdout.decode() + p.stderr.decode()
    return p, lines[-1], lines


def state_dir(units: Path) -> str:
    return str(units / "state")


def active(rig, name: str) -> str:
    return rig.run(f"systemctl is-active {name}.service || true").stdout.decode().strip()


def test_healthy_then_drifted_with_history_and_state_restored(rig, units: Path) -> None:
    name = config(units, unit_name("base"), "demo-smoke")
    st = state_dir(units)
    p, r, lines = check(rig, units, st, name)
    assert p.returncode == 0 and r["healthy"] and r["drift"] == [] and r["compared_with"] is None
    assert (r["state_before"], r["state_after"]) == ("inactive", "inactive")  # a stopped baseline is stopped again
    assert active(rig, name) == "inactive"
    snap = json.loads(Path(r["snapshot"]).read_text())
    assert snap["figures"]["kv_tokens"] > 0 and snap["figures"]["sglang_version"] == "0.5.23"
    assert snap["config_hash"] and "loading_weights" in snap["phase_seconds"]
    # running before: left running, and the check still judged a fresh start
    assert sv(rig, units, "up", name, "--wait-ready").returncode == 0
    inv_before = json_lines(sv(rig, units, "status", name, "--json"))[0]["invocation"]
    p, r2, lines = check(rig, units, st, name)
    assert (r2["state_before"], r2["state_after"]) == ("active", "active") and active(rig, name) == "active"
    assert [ln for ln in lines if ln["event"] == "verdict"][-1]["invocation"] != inv_before
    assert r2["compared_with"] == r["snapshot"] and r2["drift"] == []
    # less memory for the caches: KV tokens drop more than 5 %
    cfg = units / f"{name}.toml"
    cfg.write_text(cfg.read_text() + "mem_fraction_static = 0.73\n")
    p, r3, _ = check(rig, units, st, name)
    assert p.returncode == 1 and not r3["healthy"] and r3["verdict"] == "healthy"
    assert [d["what"] for d in r3["drift"]] == ["kv_tokens"] and "KV cache down" in r3["drift"][0]["message"]
    assert len(list(Path(st, name).glob("*.json"))) == 3  # history kept
    sv(rig, units, "down", name)


def test_failing_baseline_and_against_names_the_keys(rig, units: Path) -> None:
    name = config(units, unit_name("base"), "demo-smoke")
    st = state_dir(units)
    # preflight: the candidate never ran, and its own config already serves nobody
    cand = config(units, unit_name("cand"), name, max_running_requests=8, max_mamba_cache_size=2,
                  sglang_version="0.5.12")  # the seed's release: max_running_request is zero
    p, r, _ = check(rig, units, st, name, "--against", cand)
    a = r["against"]
    assert p.returncode == 0 and a["source"] == "preflight" and a["cause"] == "max_running_zero"
    assert sorted(a["explaining_keys"]) == ["max_mamba_cache_size", "max_running_requests"]
    assert "max_mamba_cache_size 24 → 2" in a["explanation"]
    # the candidate's own last verdict, once it has run
    assert sv(rig, units, "up", cand, "--wait-ready").returncode == 1  # preflight refuses it: no start, no verdict
    assert sv(rig, units, "up", cand, "--wait-ready", "--force").returncode == 1
    p, r, _ = check(rig, units, st, name, "--against", cand)
    assert r["against"]["source"] == "last verdict" and r["against"]["cause"] == "max_running_zero"
    assert sorted(r["against"]["explaining_keys"]) == ["max_mamba_cache_size", "max_running_requests"]
    # a baseline that fails: exit 1, not healthy, snapshot still written and marked so
    bad = config(units, unit_name("badbase"), "demo-smoke", simulate="cuda-oom")
    p, r, lines = check(rig, units, st, bad)
    assert p.returncode == 1 and not r["healthy"] and r["verdict"] == "failed"
    v = [ln for ln in lines if ln["event"] == "verdict"][-1]
    assert v["cause"] == "cuda_oom" and v["diagnosis"]["fixes"]
    assert json.loads(Path(r["snapshot"]).read_text())["healthy"] is False


def test_corrupt_snapshot_is_set_aside_and_crash_keeps_history(rig, units: Path) -> None:
    name = config(units, unit_name("base"), "demo-smoke")
    st = Path(state_dir(units))
    _, r, _ = check(rig, units, str(st), name)
    good = Path(r["snapshot"])
    good_bytes = good.read_bytes()
    bad = st / name / "20990101T000000Z-garbage.json"
    bad.write_text("{not json")
    _, r2, lines = check(rig, units, str(st), name)
    notes = " ".join(ln.get("message", "") for ln in lines if ln["event"] == "note")
    assert "unreadable" in notes and "set aside" in notes
    assert not bad.exists() and list((st / name).glob("20990101T000000Z-garbage.json.corrupt-*"))
    assert r2["compared_with"] == str(good)
    # svcdiag killed mid-check: earlier snapshots are untouched, nothing half-written
    before = sorted(p.name for p in (st / name).iterdir())
    since = time.time()
    waiter = rig.popen(["svcdiag", "--units", str(units), "baseline-check", name, "--state-dir", str(st)],
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wait_for_phase(rig, name, "loading_weights", since=since)  # its fresh start is under way
    rig.run(f"pkill -KILL -f '[b]in/svcdiag --units {units} baseline-check {name}'")
    waiter.wait(timeout=60)
    assert sorted(p.name for p in (st / name).iterdir()) == before
    assert good.read_bytes() == good_bytes
    sv(rig, units, "down", name)
