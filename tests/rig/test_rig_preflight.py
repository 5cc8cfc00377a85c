"""Preflight in front of a real start: the seed's config is refused before it wastes a
2-minute start, the fix preflight names starts healthy on the stand-in, and every start
leaves a calibration record."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ..model_fixtures import seed_models
from .helpers import config, json_lines, next_port, unit_name, verdict_of

pytestmark = pytest.mark.rig


def sv_state(rig, units: Path, *args: str):
    return rig.run(f"SVCDIAG_STATE_DIR={units}/state svcdiag --units {units} " + " ".join(args), check=False,
                   timeout=120)


def test_seed_config_is_refused_then_its_fix_starts_healthy(rig, units: Path) -> None:
    target, draft = seed_models(units / "models")
    # the seed's flags on an idle H200 and 0.5.23 (the stand-in's release): memory enough, but
    # 2 Mamba slots at 5 per request serve nobody (SGLang's Hybrid state cache RuntimeError)
    fields = {"model_path": str(target), "gpu_memory_gb": 139.72, "max_running_requests": 8,
              "max_mamba_cache_size": 2, "sim_time_scale": 0.05, "port": next_port(),
              "speculative": {"algorithm": "DFLASH", "draft_model_path": str(draft)}}
    name = config(units, unit_name("seed"), "demo-smoke", **fields)
    refused = sv_state(rig, units, "up", name, "--wait-ready")
    out = refused.stdout.decode()
    assert refused.returncode == 1, out + refused.stderr.decode()
    assert "preflight CANNOT SERVE" in out and "2 Mamba slot(s) at 5 per request serve no request" in out
    assert "not started" in out
    assert rig.run(f"systemctl show -P InvocationID {name}.service").stdout.strip() == b""  # never started
    [diag] = [json.loads(e) for e in rig.run(["journalctl", "-o", "json", "SVCDIAG_EVENT=diagnosis",
                                              f"SVCDIAG_CONFIG={name}"]).stdout.decode().splitlines()]
    fix = json.loads(diag["SVCDIAG_JSON"])["fixes"][0]["set"]

    # --force: the start SGLang (the stand-in) then makes fails exactly as predicted
    forced = sv_state(rig, units, "up", name, "--wait-ready", "--force", "--json")
    v = verdict_of(forced)
    assert forced.returncode == 1 and (v["verdict"], v["cause"]) == ("failed", "mamba_cache_too_small")
    assert any("preflight predicted" in e.get("message", "") for e in json_lines(forced) if e["event"] == "note")
    sv_state(rig, units, "down", name)

    # the fix, applied: preflight passes it, the stand-in serves
    config(units, name, "demo-smoke", **{**fields, **fix})
    healthy = sv_state(rig, units, "up", name, "--wait-ready", "--json")
    hv = verdict_of(healthy)
    assert healthy.returncode == 0 and hv["verdict"] == "healthy", healthy.stdout.decode()[-2000:]
    assert hv["figures"]["max_running_requests"] >= 1
    sv_state(rig, units, "down", name)

    # calibration: both starts recorded, each within 5 % of what was logged
    rows = [json.loads(line) for line in
            sv_state(rig, units, "preflight", "--calibration", name, "--json").stdout.decode().splitlines()]
    assert [r["verdict"] for r in rows] == ["failed", "healthy"]
    assert all(abs(r["error_pct"]) < 5 for r in rows), rows
    human = sv_state(rig, units, "preflight", "--calibration").stdout.decode()
    assert name in human and "2 start(s)" in human


def test_a_config_preflight_cannot_read_still_starts_and_says_why(rig, units: Path) -> None:
    name = config(units, unit_name("nomodel"), "demo-smoke", sim_time_scale=0.05)
    p = sv_state(rig, units, "up", name, "--wait-ready")
    assert p.returncode == 0
    assert "preflight skipped: /dev/shm/Qwen3.6-27B/config.json: no such file" in p.stdout.decode()
    sv_state(rig, units, "down", name)


TIGHT_SMI = """#!/bin/sh
case "$*" in
  *query-gpu=index,uuid*) echo "0, GPU-aaaa" ;;
  *query-compute-apps*) ;;
  *query-gpu=memory*) echo "memory.total [MiB], memory.used [MiB]"; echo "23552 MiB, 0 MiB" ;;
  *) echo "fake nvidia-smi" ;;
esac
"""


def test_a_config_that_fails_only_at_the_nominal_reading_is_tight_and_up_starts_it(rig, units: Path) -> None:
    """nvidia-smi reads 23.00 GB free; less SGLang's context and the driver's reserve, 22.00 GB
    (21.65–22.50). Qwen3-8B's 16 GB at 0.85 holds 19,660 KV tokens there, below its 20,480
    context, and 22,755 at the high end: not certain to fail, so up warns and starts it."""
    import shlex

    from ..model_fixtures import DENSE_QWEN3_8B, model_dir

    model = model_dir(units / "models", "Qwen3-8B", DENSE_QWEN3_8B, 16.0)
    name = config(units, unit_name("tight"), "demo-dense", model_path=str(model), context_length=20480)
    bindir = units / "fakebin"
    bindir.mkdir()
    (bindir / "nvidia-smi").write_text(TIGHT_SMI)
    (bindir / "nvidia-smi").chmod(0o755)
    env = f"PATH={shlex.quote(str(bindir))}:$PATH SVCDIAG_STATE_DIR={shlex.quote(str(units))}/state"
    pre = rig.run(f"{env} svcdiag --units {shlex.quote(str(units))} preflight {name} --json", check=False)
    out = json.loads(pre.stdout.decode())
    assert pre.returncode == 0 and out["verdict"] == "tight", pre.stdout.decode() + pre.stderr.decode()
    assert out["kv_tokens"] < 20480 <= out["interval"]["kv_tokens"][1]
    up = rig.run(f"{env} svcdiag --units {shlex.quote(str(units))} up {name} --wait-ready --json", check=False,
                 timeout=180)
    notes = [e["message"] for e in json_lines(up) if e["event"] == "note"]
    assert any(n.startswith("preflight: tight, starting; the verdict decides:") for n in notes), notes
    assert rig.run(f"systemctl show -P InvocationID {name}.service").stdout.strip() != b""  # started
    assert up.returncode == 0 and verdict_of(up)["verdict"] == "healthy", up.stdout.decode()[-2000:]
    rig.run(f"{env} svcdiag --units {shlex.quote(str(units))} down {name}", check=False)
