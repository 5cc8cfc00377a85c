"""Campaigns, start-up history, GPU hygiene and post-mortem bundles on the private rig (#17)."""

from __future__ import annotations

import json
import os
import shlex
import signal
import subprocess
import tarfile
import time
import uuid
from pathlib import Path

import pytest

from svcdiag.ops.host.history import LEARNED_FACTOR, LEARNED_FLOOR_S, percentile

from .helpers import config, json_lines, sv, unit_name, verdict_of

pytestmark = pytest.mark.rig


def plan(units: Path, phases: list[dict], *, baseline: str | bool = False, **top) -> Path:
    name = f"camp-{uuid.uuid4().hex[:6]}"
    body = [f'name = "{name}"', f"baseline = {json.dumps(baseline)}"]
    body += [f"{k} = {json.dumps(v)}" for k, v in top.items()]
    for ph in phases:
        body += ["[[phase]]"] + [f"{k} = {json.dumps(v)}" for k, v in ph.items()]
    path = units / "plans" / f"{name}.toml"  # a plan is not a config: not in the units folder itself
    path.parent.mkdir(exist_ok=True)
    path.write_text("\n".join(body) + "\n")
    return path


def campaign(rig, units: Path, path: Path, *args: str, timeout: float = 300):
    p = sv(rig, units, "campaign", str(path), "--json", *args, timeout=timeout)
    lines = json_lines(p)
    assert lines and lines[-1]["event"] == "campaign_result", p.stdout.decode()[-3000:] + p.stderr.decode()
    return p, lines[-1], lines


def rows_by_config(result: dict) -> dict[str, dict]:
    return {r["config"]: r for r in result["rows"]}


def test_a_campaign_whose_baseline_fails_stops_before_any_variant(rig, units: Path) -> None:
    bad = config(units, unit_name("cbase"), "demo-smoke", simulate="cuda-oom")
    variant = config(units, unit_name("cvar"), "demo-smoke")
    p, res, lines = campaign(rig, units, plan(units, [{"name": "tp1", "configs": [variant]}], baseline=bad))
    assert p.returncode == 1 and res["stopped_by_baseline"] and res["baseline"]["verdict"] == "failed"
    assert rows_by_config(res)[variant]["status"] == "not_run"
    assert not [ln for ln in lines if ln.get("unit") == f"{variant}.service" and ln["event"] != "note"]
    inv = rig.run(f"systemctl show -p InvocationID --value {variant}.service").stdout.decode().strip()
    assert inv == ""  # never started
    hist = json_lines(sv(rig, units, "history", bad, "--json"))
    assert hist[-1]["command"] == "baseline-check" and hist[-1]["cause"] == "cuda_oom"


def test_a_failing_variant_is_recorded_and_gpu_sets_decide_what_runs_together(rig, units: Path) -> None:
    a = config(units, unit_name("ga"), "demo-smoke", gpus=[0])
    b = config(units, unit_name("gb"), "demo-smoke", gpus=[0], simulate="cuda-oom")
    c = config(units, unit_name("gc"), "demo-smoke", gpus=[1], sim_time_scale=0.15)
    bench = "python3 -c 'import json; print(json.dumps({{\"port\": {port}, \"throughput\": 12.5}}))'"
    path = plan(units, [{"name": "mixed", "configs": [a, b, c], "parallel": True}], benchmark=bench)
    p, res, _ = campaign(rig, units, path)
    rows = rows_by_config(res)
    assert p.returncode == 1 and not res["interrupted"]
    assert rows[a]["status"] == "healthy" and rows[c]["status"] == "healthy"
    assert rows[b]["status"] == "failed" and rows[b]["cause"] == "cuda_oom" and rows[b]["diagnosis"]["fixes"]
    assert rows[a]["benchmark"]["exit_code"] == 0 and rows[a]["benchmark"]["figures"]["throughput"] == 12.5
    assert rows[b]["benchmark"] is None  # no benchmark against a failed start
    # a and b share GPU 0: one after the other; c, on GPU 1, ran beside them
    (s1, e1), (s2, e2) = sorted((rows[x]["started"], rows[x]["ended"]) for x in (a, b))
    assert e1 <= s2
    sc, ec = rows[c]["started"], rows[c]["ended"]
    assert (sc < e1 and ec > s1) or (sc < e2 and ec > s2)  # overlaps one of them
    d = path.with_name(f"{path.stem}-results")
    md = (d / "results.md").read_text()
    assert f"| {b} | failed | cuda_oom |" in md and "throughput" in md
    assert (d / "results.csv").read_text().count("\n") == 4
    assert any(json.loads(ln)["event"] == "verdict" for ln in (d / "events.jsonl").read_text().splitlines())


def _child(pid: int) -> int:
    for _ in range(100):
        kids = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
        if kids:
            return int(kids[0])
        time.sleep(0.05)
    raise AssertionError("no child process")


def test_an_interrupted_campaign_resumes_without_rerunning_what_is_recorded(rig, units: Path) -> None:
    a = config(units, unit_name("ra"), "demo-smoke")
    b = config(units, unit_name("rb"), "demo-smoke", sim_time_scale=0.15)  # in its weight load for ~6 s: time to interrupt it
    c = config(units, unit_name("rc"), "demo-smoke")
    path = plan(units, [{"name": "one", "configs": [a, b]}, {"name": "two", "configs": [c]}])
    proc = rig.popen(f"exec svcdiag --units {shlex.quote(str(units))} campaign {shlex.quote(str(path))} --json",
                     stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    from .helpers import wait_for_phase

    got = wait_for_phase(proc, b, "loading_weights", timeout=120)
    os.kill(_child(proc.pid), signal.SIGINT)  # nsenter's child is svcdiag (exec'd)
    out, err = proc.communicate(timeout=120)
    res = [json.loads(ln) for ln in (got + out).decode().splitlines() if ln.startswith("{")][-1]
    assert proc.returncode == 130 and res["interrupted"], err.decode()
    rows = rows_by_config(res)
    assert (rows[a]["status"], rows[b]["status"], rows[c]["status"]) == ("healthy", "interrupted", "not_run"), rows
    assert rig.run(f"systemctl is-active {b}.service || true").stdout.decode().strip() != "active"
    p, res2, _ = campaign(rig, units, path)
    rows2 = rows_by_config(res2)
    assert rows2[a]["skipped"] and rows2[a]["status"] == "healthy"  # recorded: not run again
    assert not rows2[b]["skipped"] and rows2[b]["status"] == "healthy" and rows2[c]["status"] == "healthy", rows2[b]
    starts = json_lines(sv(rig, units, "history", a, "--json"))
    assert len(starts) == 1  # one start of a in all


def test_slow_phase_while_running_and_advise_follows_from_the_recorded_starts(rig, units: Path) -> None:
    name = config(units, unit_name("slow"), "demo-smoke")
    for _ in range(3):
        assert sv(rig, units, "up", name, "--wait-ready", "--restart").returncode == 0
    rows = json_lines(sv(rig, units, "history", name, "--json"))
    assert len(rows) == 3 and all(r["verdict"] == "healthy" and r["command"] == "up" for r in rows)
    assert rows[0]["sglang_phase_seconds"] and rows[0]["figures"]["kv_tokens"] > 0
    advice = json_lines(sv(rig, units, "history", name, "--advise", "--json"))[0]
    w = [r["phase_seconds"]["loading_weights"] for r in rows]
    got = {p["phase"]: p for p in advice["phases"]}["loading_weights"]
    assert got["n"] == 3 and got["p90"] == round(percentile(w, 90), 2)
    assert got["advised"] == max(-(-LEARNED_FACTOR * percentile(w, 99) // 1), LEARNED_FLOOR_S)
    total = max(-(-LEARNED_FACTOR * percentile([r["startup_s"] for r in rows], 99) // 1), LEARNED_FLOOR_S)
    probe = advice["startup_probe"]
    assert advice["timeout_start_sec"] == total and probe["timeoutSeconds"] >= 2
    assert probe["failureThreshold"] * probe["periodSeconds"] >= total
    # the same config, ten times slower: slow_phase while the weights still load
    cfg = units / f"{name}.toml"
    cfg.write_text(cfg.read_text().replace("sim_time_scale", "# sim_time_scale") + "sim_time_scale = 0.5\n")
    proc = rig.popen(["svcdiag", "--units", str(units), "up", name, "--wait-ready", "--restart", "--json"],
                     stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    fd, got_b, deadline = proc.stdout.fileno(), b"", time.monotonic() + 90

    def slow() -> list[dict]:  # every phase is slower now: "starting" (~5 s, usually ~1) may be flagged too
        return [r for ln in got_b.decode(errors="replace").split("\n")[:-1] if '"slow_phase"' in ln
                for r in [json.loads(ln)] if r["phase"] == "loading_weights"]

    while not slow():
        assert time.monotonic() < deadline and proc.poll() is None, got_b.decode()
        got_b += os.read(fd, 65536)
    state = rig.run(f"systemctl is-active {name}.service || true").stdout.decode().strip()
    assert state in ("active", "activating")  # said while it still runs
    rec = slow()[0]
    assert rec["message"].startswith("loading weights ")
    assert "usually" in rec["message"] and rec["seconds"] > rec["threshold_s"]
    sv(rig, units, "down", name)
    proc.communicate(timeout=60)


FAKE_SMI = """#!/bin/sh
case "$*" in
  *query-gpu=index,uuid*) echo "0, GPU-aaaa"; echo "1, GPU-bbbb" ;;
  *query-compute-apps*) echo "{pid}, GPU-aaaa, 73216" ;;
  *query-gpu=memory*) echo "memory.total [MiB], memory.used [MiB]"; echo "97887 MiB, 73216 MiB"; echo "97887 MiB, 0 MiB" ;;
  *) echo "fake nvidia-smi" ;;
esac
"""


def test_a_foreign_process_on_the_gpu_makes_up_refuse(rig, units: Path) -> None:
    name = config(units, unit_name("hyg"), "demo-smoke")
    orphan = unit_name("orphan-sched")
    rig.run(f"systemd-run --unit={orphan} sleep 600")
    pid = rig.run(f"systemctl show -p MainPID --value {orphan}.service").stdout.decode().strip()
    bindir = units / "fakebin"
    bindir.mkdir()
    (bindir / "nvidia-smi").write_text(FAKE_SMI.format(pid=pid))
    (bindir / "nvidia-smi").chmod(0o755)
    env = f"PATH={shlex.quote(str(bindir))}:$PATH"
    p = rig.run(f"{env} svcdiag --units {shlex.quote(str(units))} up {name} --wait-ready", check=False)
    err = p.stderr.decode().strip()
    assert p.returncode == 1 and len(err.splitlines()) == 1 and err.startswith("svcdiag: error: "), err
    assert f"PID {pid} ({orphan}.service) holds 71.5 GB on GPU 0" in err and "--force" in err
    assert rig.run(f"systemctl show -p InvocationID --value {name}.service").stdout.decode().strip() == ""
    # a config on GPU 1 is not concerned; --force starts anyway
    other = config(units, unit_name("hyg1"), "demo-smoke", gpus=[1])
    assert rig.run(f"{env} svcdiag --units {shlex.quote(str(units))} up {other} --wait-ready", check=False).returncode == 0
    p = rig.run(f"{env} svcdiag --units {shlex.quote(str(units))} up {name} --force", check=False)
    assert p.returncode == 0 and "--force: starting anyway" in p.stdout.decode() + p.stderr.decode()
    rig.run(f"systemctl stop {orphan}.service")
    sv(rig, units, "down", name, other)


def test_a_bundle_redacts_secrets_and_replays_to_the_same_verdict(rig, units: Path) -> None:
    token, key = "hf_SeCrEt0123456789", "sk-test-Secret-9876"
    # [env] refuses a secret-looking name now (docs/security.md): the token lives in [secrets], whose
    # value svcdiag reads only to hand it to the server, and must never reach the bundle either
    secret = units / "hf_token"
    secret.write_text(token + "\n")
    secret.chmod(0o600)
    name = config(units, unit_name("bun"), "demo-smoke", simulate="cuda-oom", extra_args=["--api-key", key],
                  secrets={"HF_TOKEN": str(secret)})
    up = verdict_of(sv(rig, units, "up", name, "--wait-ready", "--json"))
    assert up["verdict"] == "failed" and up["cause"] == "cuda_oom"
    out = units / "b.tar.gz"
    p = sv(rig, units, "bundle", name, "-o", str(out), "--json")
    row = json_lines(p)[0]
    assert p.returncode == 0 and row["invocation"] == up["invocation"], p.stderr.decode()
    with tarfile.open(out) as tar:
        files = {m.name.split("/", 1)[1]: tar.extractfile(m).read() for m in tar.getmembers() if m.isfile()}
    assert {"journal.export", "unit.service", "config.json", "verdict.json", "history.json", "MANIFEST.json",
            "versions.json"} <= set(files)
    for fname, data in files.items():
        assert token.encode() not in data and key.encode() not in data, fname
    manifest = json.loads(files["MANIFEST.json"])
    red = {r["what"]: r["found_in"] for r in manifest["redacted"]}
    assert "secrets.HF_TOKEN" in red and "[REDACTED]" in files["unit.service"].decode()
    assert any(k.startswith("extra_args") and "unit.service" in v for k, v in red.items())
    replayed = verdict_of(sv(rig, units, "replay", str(out), "--json"))
    assert (replayed["verdict"], replayed["cause"], replayed["invocation"]) == ("failed", "cuda_oom", up["invocation"])


def test_a_config_preflight_refuses_is_a_row_of_the_table_not_a_crash(rig, units: Path) -> None:
    # issue 39 item 7: the refused config was never installed, so its unit is not loaded: taking it down
    # after the phase ("StopUnit failed: Unit … not loaded.") crashed the campaign, exit 2, no table
    refused = config(units, unit_name("cpre"), "demo-max-running-zero")
    fine = config(units, unit_name("cok"), "demo-smoke")
    p, res, _ = campaign(rig, units, plan(units, [{"name": "p", "configs": [refused, fine]}]))
    rows = rows_by_config(res)
    assert (rows[refused]["status"], rows[refused]["cause"]) == ("refused", "preflight"), rows[refused]
    assert rows[fine]["status"] == "healthy", rows[fine]
    assert p.returncode == 1 and "not loaded" not in p.stdout.decode() + p.stderr.decode()
    table = Path(res["results"][0]).read_text()  # results.md
    assert refused in table and "refused" in table
