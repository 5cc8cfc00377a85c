"""Diagnosis on replayed logs of each failure, its numbers checked against SGLang's formula."""

from __future__ import annotations

import io
import subprocess
import sys
from pathlib import Path

import pytest

from svcdiag.config.service import UnitsDir
from svcdiag.judge.diagnosis import diagnose
from svcdiag.judge.pipeline import Judge
from svcdiag.ops.offline.replay import replay
from svcdiag.sglang.flags import SIM_MODULE, sglang_args
from svcdiag.sim.model import HYBRID_27B, compute
from svcdiag.sim.scenarios import SCENARIOS, Scenario

from .conftest import EXAMPLES, UNITS

U = UnitsDir(UNITS, "t")


#: the seed's campaign ran a release from before 0.5.23, where KV below the context is fatal
SEED_RELEASE = "0.5.12"


def sim_log(config: str, scenario: str, *extra: str) -> bytes:
    cfg = U.load(config)
    cmd = [sys.executable, "-m", SIM_MODULE, scenario, "--virtual-clock", "2026-05-23T09:42:00", "--no-http",
           "--sglang-version", SEED_RELEASE, *extra, *sglang_args(cfg, SEED_RELEASE)]
    return subprocess.run(cmd, capture_output=True).stdout


def judged(config: str, scenario: str, *extra: str):
    v = replay(io.BytesIO(sim_log(config, scenario, *extra)), "x", U.load(config)).verdict
    return v, diagnose(v, U.load(config))


def test_seed_failure_reads_like_an_expert_wrote_it() -> None:
    v, d = judged("dflash-tp1-mr8", "max-running-zero")
    text = " ".join(d["explanation"])
    assert d["cause"] == "max_running_zero"
    assert "The KV cache holds 11,893 tokens, but one request needs context_len 32,768" in text
    assert "max_running_requests came out zero" in text
    assert "2 slots and each request takes 5" in text
    cell_kib = float(text.split("Each token costs about ")[1].split(" KiB")[0])
    # the model's true cell: 1 KV head at TP1? 4 heads × (256+256) × 16 full-attention layers × 2 bytes
    assert cell_kib == pytest.approx(HYBRID_27B.cell_bytes(1) / 1024, rel=0.02)
    assert "69.67 GB free before loading" in text
    assert "does not fit" in text  # 8 full-length requests need more than the GPU has
    fix = d["fixes"][0]["set"]
    assert fix["max_running_requests"] == 1 and fix["max_mamba_cache_size"] == 5
    # the fix, applied to the same GPU (69.67 GB free), through SGLang's formula, serves a request
    fig = compute(HYBRID_27B, Scenario("same GPU", gpu_free_gb=v.figures.avail_before_load_gb), tp=1,
                  mem_fraction_static=fix["mem_fraction_static"], max_mamba_cache_size=fix["max_mamba_cache_size"],
                  max_running_requests=fix["max_running_requests"], context_length=32768, speculative=True)
    assert fig.max_running >= 1 and fig.kv_tokens >= 32768
    # and one step less memory would not have been enough
    short = compute(HYBRID_27B, Scenario("same GPU", gpu_free_gb=v.figures.avail_before_load_gb), tp=1,
                    mem_fraction_static=fix["mem_fraction_static"] - 0.02, max_mamba_cache_size=5,
                    max_running_requests=1, context_length=32768, speculative=True)
    assert short.max_running == 0


def test_kv_only_shortfall_offers_a_shorter_context_that_fits() -> None:
    # KV too small for the context, Mamba slots plenty: 24 slots, 4 requests
    log = sim_log("dflash-smoke", "max-running-zero")
    v = replay(io.BytesIO(log), "x", U.load("dflash-smoke")).verdict
    d = diagnose(v, U.load("dflash-smoke"))
    text = " ".join(d["explanation"])
    assert "11,893 tokens" in text and "24 slots" in text
    ctx_fix = next(f["set"] for f in d["fixes"] if "context_length" in f["set"])
    assert ctx_fix["context_length"] <= v.figures.kv_tokens // ctx_fix.get("max_running_requests", 4)
    mfs_fix = next(f["set"] for f in d["fixes"] if "mem_fraction_static" in f["set"] and "max_running_requests" not in f["set"])
    fig = compute(HYBRID_27B, Scenario("same GPU", gpu_free_gb=v.figures.avail_before_load_gb), tp=1,
                  mem_fraction_static=mfs_fix["mem_fraction_static"], max_mamba_cache_size=24, max_running_requests=4,
                  context_length=32768, speculative=True)
    assert fig.max_running == 4


@pytest.mark.parametrize("scenario,cause,needles,fix_keys", [
    ("cuda-oom", "cuda_oom", ["capturing CUDA graphs", "23.63 GB were free"], {"cuda_graph_max_bs", "mem_fraction_static"}),
    ("not-enough-memory", "not_enough_memory", ["71.50 GB free before loading", "weights alone take 50.29 GB"],
     {"mem_fraction_static", "tp_size"}),
    ("model-missing", "model_not_found", ["/dev/shm/Qwen3.6-27B"], set()),
    ("nccl-error", "nccl_error", ["NCCL failed"], {"env.NCCL_DEBUG"}),
])
def test_diagnosis_per_cause(scenario: str, cause: str, needles: list[str], fix_keys: set[str]) -> None:
    v, d = judged("dflash-smoke", scenario)
    assert v.cause == cause and d["cause"] == cause
    text = " ".join(d["explanation"])
    for n in needles:
        assert n in text, (n, text)
    assert {k for f in d["fixes"] for k in f["set"]} == fix_keys
    for f in d["fixes"]:
        assert f["reason"]


def test_not_enough_memory_fix_fits_by_the_formula() -> None:
    v, d = judged("dflash-smoke", "not-enough-memory")
    mfs = d["fixes"][0]["set"]["mem_fraction_static"]
    fig = compute(HYBRID_27B, SCENARIOS["not-enough-memory"], tp=1, mem_fraction_static=mfs, max_mamba_cache_size=None,
                  max_running_requests=None, context_length=4096, speculative=False)
    assert not fig.not_enough_memory


def test_signals_and_stall_and_exit() -> None:
    from svcdiag.judge.pipeline import Judge

    j = Judge(U.load("dflash-smoke"))
    j.service_line("[2026-05-23 09:42:09] Load weight begin. avail mem=139.72 GB")
    j.systemd_line("Main process exited, code=killed, status=9/KILL", 1779529400.0)
    d = diagnose(j.finish(), U.load("dflash-smoke"))
    assert "OOM killer" in d["explanation"][0] and "journalctl -k" in d["explanation"][1]
    j = Judge(U.load("dflash-smoke"))
    j.service_line("[2026-05-23 09:42:09] Load weight begin. avail mem=139.72 GB")
    j.systemd_line("Main process exited, code=dumped, status=11/SEGV", 1779529400.0)
    d = diagnose(j.finish(), U.load("dflash-smoke"))
    assert "SIGSEGV" in d["explanation"][0] and "coredumpctl" in d["explanation"][1]
    import dataclasses

    cfg = U.load("dflash-smoke")
    cfg = dataclasses.replace(cfg, timeouts=tuple({**cfg.timeout, "loading_weights": 600.0}.items()))
    j = Judge(cfg)
    j.service_line("[2026-05-23 09:42:09] Load weight begin. avail mem=139.72 GB")
    j.service_line("Loading safetensors checkpoint shards:  25% Completed | 3/12")
    j.service_line("[2026-05-23 09:55:00] TP rank 3 could finish the model loading, but there are other ranks that didn't finish loading.")
    v = j.finish()
    d = diagnose(v, cfg)
    text = " ".join(d["explanation"])
    assert "No progress in phase loading_weights for 771 s (its deadline is 600 s)" in text
    assert "Loading safetensors checkpoint shards:  25%" in text
    assert d["fixes"][0]["set"] == {"timeouts.loading_weights": 1200}


def test_port_in_use_names_our_unit_that_holds_it(cli, units: Path) -> None:
    import json

    (units / "other.toml").write_text('extends = "demo-smoke"\nport = 31006\n')
    log = sim_log("demo-port-in-use", "port-in-use")
    (units.parent / "p.log").write_bytes(log)
    r = cli("replay", "--json", "--config", "demo-port-in-use", str(units.parent / "p.log"))
    d = json.loads(r.output.splitlines()[-1])["diagnosis"]
    assert d["cause"] == "port_in_use" and "other (configured)" in " ".join(d["explanation"])


def test_replay_json_carries_the_diagnosis_object() -> None:
    import json

    from .conftest import run_svcdiag

    r = run_svcdiag("--units", str(UNITS), "replay", "--json", "--config", "dflash-tp1-mr8", str(EXAMPLES / "max-running-zero.log"))
    v = json.loads(r.stdout.decode().splitlines()[-1])
    assert set(v["diagnosis"]) == {"cause", "detail", "explanation", "fixes"}
    assert all(set(f) == {"set", "reason"} for f in v["diagnosis"]["fixes"])


def test_no_baseline_configured_lists_candidates(cli, units: Path) -> None:
    from .conftest import assert_one_line_error

    (units / "dflash-smoke.toml").write_text((units / "dflash-smoke.toml").read_text().replace("baseline = true\n", ""))
    assert_one_line_error(cli("baseline-check"), "has `baseline = true`", "dflash-smoke", "nospec-tp1")


def ended(config: str, scenario: str, *systemd: str):
    """A healthy start of the stand-in, then PID 1's account of the unit's end, as `wait` and `replay` both read it."""
    from svcdiag.judge.pipeline import Judge

    j = Judge(U.load(config))
    for line in sim_log(config, scenario).decode().splitlines():
        j.service_line(line)
    healthy = j.verdict
    assert healthy is not None and healthy.verdict == "healthy"
    for i, line in enumerate(systemd):
        j.systemd_line(line, healthy.ts + 60 + i)
    return healthy, j.finish()


@pytest.mark.parametrize("result, exit_line, says", [
    ("watchdog", "Main process exited, code=dumped, status=6/ABRT", "watchdog killed it"),
    ("exit-code", "Main process exited, code=exited, status=1/FAILURE", "status=1/FAILURE (systemd result exit-code)"),
    ("core-dump", "Main process exited, code=dumped, status=11/SEGV", "status=11/SEGV (systemd result core-dump)"),
])
def test_a_healthy_start_that_ended_while_serving_is_judged_as_it_ended(result: str, exit_line: str | None,
                                                                         says: str) -> None:
    healthy, v = ended("dflash-smoke", "healthy-hybrid-dflash", exit_line, f"Failed with result '{result}'.")
    assert (v.verdict, v.cause, v.phase, v.ts) == ("failed", "died_after_ready", "ready", healthy.ts + 60)
    assert says in v.message and v.figures.kv_tokens == healthy.figures.kv_tokens  # the start's figures kept
    d = diagnose(v, U.load("dflash-smoke"))
    assert d["cause"] == "died_after_ready" and "svcdiag logs dflash-smoke" in " ".join(d["explanation"])
    assert ("serving watch found it wedged" in " ".join(d["explanation"])) == (result == "watchdog")


@pytest.mark.parametrize("lines", [
    ("Main process exited, code=killed, status=9/KILL", "Failed with result 'signal'."),
    ("A process of this unit has been killed by the OOM killer.", "Failed with result 'oom-kill'."),
])
def test_a_healthy_start_killed_while_serving_stays_healthy_with_the_incident(lines: tuple[str, ...]) -> None:
    healthy, v = ended("dflash-smoke", "healthy-hybrid-dflash", *lines)
    assert (v.verdict, v.cause, v.figures.incident) == ("healthy", None, "killed") and "post-ready incident" in v.message
    assert (v.figures.oom_killer_line is not None) == ("oom-kill" in lines[-1])


def test_a_healthy_start_stopped_cleanly_stays_healthy() -> None:
    healthy, v = ended("dflash-smoke", "healthy-hybrid-dflash", "Stopping dflash-smoke.service...",
                       "Main process exited, code=killed, status=9/KILL", "Failed with result 'signal'.")
    assert (v.verdict, v.figures.incident, v.figures.stopped_after_ready_by) == ("healthy", None, "systemd")


FIXTURES = Path(__file__).parent / "fixtures" / "sglang"


@pytest.mark.parametrize(("fixture", "needles", "fix_keys"), [
    ("v056-no-cuda-gpus-visible.log", ["PrivateDevices", "DeviceAllow"], set()),
    ("v0523-cuda-driver-too-old.log", ["driver is older than the CUDA"], set()),
    ("v054-illegal-memory-access-in-capture.log", ["not out of memory", "attention_backend"],
     {"env.CUDA_LAUNCH_BLOCKING"}),
    ("v043-import-sgl-kernel-missing.log", ["cannot import", "sgl_kernel"], set()),
    ("v049-safetensors-header-corrupt.log", ["download", "again"], set()),
    ("v046-load-weights-keyerror.log", ["tensor the model class does not know", "config.json"], set()),
    ("v056-no-space-left-downloading.log", ["HF_HOME", "df -h"], set()),
    ("v0511-hf-offline-not-cached.log", ["HF_HUB_OFFLINE", "cache"], set()),
    ("v052-node1-tcpstore-timeout.log", ["node 1", "node 0's TCP store"], set()),
    ("v052-node0-store-clients-missing.log", ["Only 8 of 16 ranks joined"], set()),
    ("v046-context-length-above-derived.log", ["SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN"], {"context_length"}),
    ("v0511-speculative-args-rejected.log", ["own check of its flags", "speculative_eagle_topk"], set()),
    ("v0511-download-dir-read-only-sandbox.log", ["'/data/hf/.locks'", "ProtectSystem=strict"], {"read_write_paths"}),
    ("v056-bind-port-80-no-capability.log", ["port 80", "CAP_NET_BIND_SERVICE"], {"port"}),
    ("v049-triton-no-c-compiler.log", ["C compiler", "PATH"], set()),
    ("v046-eagle3-draft-for-another-target.log", ["draft model 'yuhuili/EAGLE3-LLaMA3.3-Instruct-70B'"], set()),
    ("v043-tokenizers-too-old-untagged-enum.log", ["tokenizers", "newer release"], set()),
    ("v046-tp4-sees-two-gpus-invalid-ordinal.log", ["invalid device ordinal", "tp_size 4"], {"tp_size"}),
    ("v049-nccl-dev-shm-too-small.log", ["/dev/shm", "--shm-size"], {"env.NCCL_SHM_DISABLE"}),
])
def test_diagnosis_of_the_non_memory_failures(fixture: str, needles: list[str], fix_keys: set[str]) -> None:
    """Each failure class beyond memory says what to change, in words that fit that class only."""
    v = replay(io.BytesIO((FIXTURES / fixture).read_bytes()), fixture).verdict
    d = diagnose(v)
    assert d is not None and d["cause"] == v.cause
    said = " ".join(d["explanation"])
    assert all(n in said for n in needles), said
    assert {k for f in d["fixes"] for k in f["set"]} == fix_keys, d["fixes"]
    if fix_keys == {"context_length"}:
        assert d["fixes"][0]["set"]["context_length"] == 32768
    if fix_keys == {"read_write_paths"}:
        assert d["fixes"][0]["set"]["read_write_paths"] == ["/data/hf"]  # the folder, not its lock subfolder


def test_a_multi_node_start_stuck_at_the_rendezvous_says_so() -> None:
    """torch's default store timeout (1800 s) outlasts our starting deadline (300 s): the log of the
    whole wait ends in the store's own timeout, which names the ranks that never came; cut before
    it, the wait is timed_out in starting, and the diagnosis says they were waiting for each other."""
    text = (FIXTURES / "v052-node0-store-clients-missing.log").read_text().replace(
        ", dist_timeout=180", "").replace("07:13:09", "07:40:08").replace("181 seconds", "1801 seconds")
    v = replay(io.BytesIO(text.encode()), "x").verdict
    assert (v.verdict, v.phase, v.cause) == ("failed", "starting", "rendezvous_failed")
    assert "Only 8 of 16 ranks joined" in " ".join(diagnose(v)["explanation"])
    j = Judge()
    for line in text.splitlines()[:2]:  # server_args, `Init torch distributed begin`: then the wait
        j.service_line(line)
    j.tick(j.parser.last_ts + 400)  # the clock, 400 s after the last line: past the 300 s deadline
    v = j.finish()
    assert v.verdict == "timed_out" and v.phase == "starting"
    assert "waiting for each other at dist_init_addr" in " ".join(diagnose(v)["explanation"])
