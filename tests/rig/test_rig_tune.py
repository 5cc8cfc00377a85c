"""`svcdiag tune` end to end on the stand-in (SGLang 0.5.23's sizing): the seed's dflash-tp1-mr8
(8 × 32,768) on the stand-in's 96 GB card is proven impossible with no start spent, a target
that fits is found in fewer starts than a grid, its written config starts healthy with `up`,
and a prior a few percent wrong is corrected by what the first start logs."""

from __future__ import annotations

import json
import os
import signal
import subprocess
from pathlib import Path

import pytest

from ..model_fixtures import DFLASH_DRAFT, HYBRID_QWEN35_27B, model_dir
from .helpers import config, unit_name, wait_for_phase
from .test_rig_campaign import _child

pytestmark = pytest.mark.rig


def sv_state(rig, units: Path, *args: str, timeout: float = 300):
    return rig.run(f"SVCDIAG_STATE_DIR={units}/state svcdiag --units {units} " + " ".join(args), check=False,
                   timeout=timeout)


def seed_config(units: Path, weights_gb: float = 50.29, **fields) -> str:
    """dflash-tp1-mr8's settings on the stand-in's healthy DFlash start, with model files preflight reads."""
    target = model_dir(units / "models", f"target-{weights_gb}", HYBRID_QWEN35_27B, weights_gb)
    draft = model_dir(units / "models", "draft", DFLASH_DRAFT, 1.66)
    fields = {"model_path": str(target), "max_running_requests": 8, "max_mamba_cache_size": 2, "sim_time_scale": 0.02,
              "gpu_memory_gb": 94.5, "speculative": {"algorithm": "DFLASH", "draft_model_path": str(draft)}, **fields}
    return config(units, unit_name("tune"), "demo-smoke", **fields)


def tune_json(rig, units: Path, name: str, *args: str):
    p = sv_state(rig, units, "tune", name, *args, "--json")
    lines = [json.loads(x) for x in p.stdout.decode().splitlines() if '"event": "tune_result"' in x]
    assert lines, p.stdout.decode()[-3000:] + p.stderr.decode()
    assert all(r["schema"] == 1 for r in lines)  # as every --json record (issue 39 item 12)
    return p, lines[-1]


def test_the_seed_target_is_impossible_on_the_96_gb_card_and_says_what_would_serve(rig, units: Path) -> None:
    name = seed_config(units)
    p, r = tune_json(rig, units, name, "--target", "max_running=8")
    assert p.returncode == 1 and r["status"] == "impossible", r["message"]
    assert r["message"].startswith("8 × 32,768 needs 10.8 GB more KV cache and Mamba state than 0.95 of the card "
                                   "leaves: at most 6 at this context, or 8 at 15,360"), r["message"]
    assert r["starts"] == 0 and r["written"] is None  # the proof needs no start
    assert r["fallbacks"][0] == {"max_running": 6, "context": 32768}
    assert rig.run(f"systemctl show -P InvocationID {name}-tuned.service").stdout.strip() == b""


def test_a_reachable_target_is_found_in_fewer_starts_than_a_grid_and_its_config_starts(rig, units: Path) -> None:
    name = seed_config(units)
    p, r = tune_json(rig, units, name, "--target", "max_running=5")
    assert p.returncode == 0 and r["status"] == "met", r["message"]
    assert r["starts"] < r["grid_starts"], (r["starts"], r["grid_starts"])
    assert r["starts"] == 1
    best = r["best"]
    assert best["figures"]["max_running_requests"] >= 5 and best["figures"]["kv_tokens"] >= 5 * 32768
    assert best["history_id"] is not None
    written = Path(r["written"])
    assert written.name == f"{name}-tuned.toml" and f'extends = "{name}"' in written.read_text()
    assert {d["key"] for d in r["diff"]} >= {"mem_fraction_static", "max_mamba_cache_size"}
    # the history keeps the start under the run's id
    rows = [json.loads(x) for x in sv_state(rig, units, "history", f"{name}-tuned", "--json").stdout.decode().splitlines()
            if x.startswith("{")]
    assert any(row.get("campaign") == r["run_id"] for row in rows), rows
    # the written config starts healthy with `up`
    up = sv_state(rig, units, "up", f"{name}-tuned", "--wait-ready")
    assert up.returncode == 0, up.stdout.decode()[-2000:]
    sv_state(rig, units, "down", f"{name}-tuned")
    human = sv_state(rig, units, "tune", name, "--target", "max_running=5", "--max-starts", "1").stdout.decode()
    assert "tune SERVED" in human and "a 0.01 grid of mem_fraction_static would take 21" in human


def test_a_prior_a_few_percent_off_is_corrected_by_the_measured_costs(rig, units: Path) -> None:
    # the checkpoint's index says 47.8 GB; the stand-in's weights take 50.29 (5 % more)
    name = seed_config(units, weights_gb=47.8)
    p, r = tune_json(rig, units, name, "--target", "max_running=5")
    assert p.returncode == 0 and r["status"] == "met", r["message"]
    first, last = r["trials"][0], r["trials"][-1]
    assert first["figures"]["kv_tokens"] < 5 * 32768  # the prior's candidate was short
    assert "measured costs" in last["why"] and r["starts"] == 2


def test_ctrl_c_stops_the_candidate_and_resume_finishes_the_run(rig, units: Path) -> None:
    name = seed_config(units, weights_gb=47.8, sim_time_scale=0.15)  # ~6 s in its weight load: time to interrupt
    state = units / "state"
    proc = rig.popen(f"SVCDIAG_STATE_DIR={state} exec svcdiag --units {units} tune {name} --target max_running=5 --json",
                     stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    got = wait_for_phase(proc, f"{name}-tuned", "loading_weights", timeout=120)
    os.kill(_child(proc.pid), signal.SIGINT)
    out, err = proc.communicate(timeout=120)
    res = [json.loads(x) for x in (got + out).decode().splitlines() if '"event": "tune_result"' in x][-1]
    assert proc.returncode == 130 and res["status"] == "interrupted" and res["starts"] == 0, err.decode()
    assert rig.run(f"systemctl is-active {name}-tuned.service || true").stdout.decode().strip() != "active"
    p, again = tune_json(rig, units, name, "--target", "max_running=5", "--resume")
    assert p.returncode == 0 and again["status"] == "met" and again["run_id"] == res["run_id"]
    assert again["starts"] == 2


def test_a_campaign_phase_tunes_its_config_then_runs_the_tuned_one(rig, units: Path) -> None:
    name = seed_config(units)
    plan = units / "plans" / f"{name}.toml"
    plan.parent.mkdir(exist_ok=True)
    plan.write_text(f'name = "{name}"\nbaseline = false\n[[phase]]\nname = "fit"\nconfigs = ["{name}"]\n'
                    'tune = { target = { max_running = 5 }, max_starts = 3 }\n')
    p = sv_state(rig, units, "campaign", str(plan), "--json")
    res = [json.loads(x) for x in p.stdout.decode().splitlines() if '"event": "campaign_result"' in x][-1]
    [row] = res["rows"]
    assert p.returncode == 0 and (row["config"], row["status"]) == (f"{name}-tuned", "healthy"), row
    assert row["figures"]["max_running_requests"] >= 5
    # run again: the tuned config's row is recorded, so neither the search nor its start is repeated
    p = sv_state(rig, units, "campaign", str(plan), "--json")
    res = [json.loads(x) for x in p.stdout.decode().splitlines() if '"event": "campaign_result"' in x][-1]
    [row] = res["rows"]
    assert p.returncode == 0 and row["skipped"] and row["config"] == f"{name}-tuned", row


def test_allowed_to_lower_dflash_block_size_the_seed_target_serves_on_the_96_gb_card(rig, units: Path) -> None:
    name = seed_config(units)
    p, r = tune_json(rig, units, name, "--target", "max_running=8", "--allow", "speculative.num_draft_tokens")
    assert p.returncode == 0 and r["status"] == "met", r["message"]
    best = r["best"]
    assert best["settings"]["speculative.num_draft_tokens"] == 7 and r["starts"] == 1
    assert best["figures"]["kv_tokens"] >= 8 * 32768 and best["figures"]["max_running_requests"] == 8
    assert "[speculative]\nnum_draft_tokens = 7" in Path(r["written"]).read_text()
    up = sv_state(rig, units, "up", f"{name}-tuned", "--wait-ready", "--json")
    v = [json.loads(x) for x in up.stdout.decode().splitlines() if x.startswith("{")][-1]
    assert up.returncode == 0 and v["verdict"] == "healthy", up.stdout.decode()[-2000:]
    assert v["figures"]["kv_tokens"] == best["figures"]["kv_tokens"]  # block size 7, as tuned (16 leaves far fewer)
    sv_state(rig, units, "down", f"{name}-tuned")
