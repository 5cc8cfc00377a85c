"""Memory preflight on model configs shaped like real checkpoints, against the stand-in's GPU."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from svcdiag.config.service import UnitsDir
from svcdiag.errors import SvcdiagError
from svcdiag.ops.host.gpumem import gpu_free_gb, parse_nvidia_smi
from svcdiag.ops.host.preflight import Calibration, plan
from svcdiag.sglang.modelinfo import ModelInfoError, read_shape, shape_from_config
from svcdiag.sglang.preflight import GB, inputs_from_shape, predict
from svcdiag.sim.model import DENSE_8B, HYBRID_27B, IDLE_GPU_FREE_GB, compute
from svcdiag.sim.scenarios import SCENARIOS

from .conftest import UNITS, assert_one_line_error
from .model_fixtures import (
    DENSE_QWEN3_8B,
    HYBRID_QWEN3_NEXT,
    HYBRID_QWEN35_27B,
    MLA_DEEPSEEK_V3,
    model_dir,
    seed_models,
)


def configure(units: Path, name: str, base: str, models: Path, **fields) -> object:
    target, draft = seed_models(models)
    body = [f'extends = "{base}"', f'model_path = "{fields.pop("model_path", target)}"']
    body += [f"{k} = {json.dumps(v)}" for k, v in fields.items()]
    if base.startswith("dflash") or base.startswith("demo-smoke"):
        body += ["[speculative]", 'algorithm = "DFLASH"', f'draft_model_path = "{draft}"']
    (units / f"{name}.toml").write_text("\n".join(body) + "\n")
    return UnitsDir(units, "test").load(name)


# ---------------------------------------------------------------- the shapes


def test_dense_qwen3_kv_cell_is_kv_heads_times_head_dims_times_layers() -> None:
    s = shape_from_config(DENSE_QWEN3_8B, Path("config.json"))
    assert (s.kind, s.attention_layers) == ("dense", 36)
    assert s.kv_bytes_per_token(1) == 8 * (128 + 128) * 36 * 2
    assert s.kv_bytes_per_token(2) == s.kv_bytes_per_token(1) // 2
    assert s.kv_bytes_per_token(16) == 1 * 256 * 36 * 2  # fewer KV heads than ranks: replicated


def test_hybrid_counts_full_attention_layers_only_and_sizes_the_state() -> None:
    s = shape_from_config(HYBRID_QWEN35_27B, Path("config.json"))
    assert (s.kind, s.attention_layers, s.linear_layers) == ("hybrid", 16, 50)
    assert s.kv_bytes_per_token(1) == 4 * 512 * 16 * 2
    conv, ssm = s.mamba_bytes_per_slot(1)
    assert ssm == 50 * 48 * 128 * 128 * 4  # float32 SSM state
    assert conv == 50 * 3 * (2 * 16 * 128 + 48 * 128) * 2
    nxt = shape_from_config(HYBRID_QWEN3_NEXT, Path("config.json"))  # interval form, in text_config
    assert (nxt.kind, nxt.attention_layers, nxt.linear_layers) == ("hybrid", 12, 36)
    assert nxt.kv_bytes_per_token(2) == 1 * 512 * 12 * 2


def test_mla_keeps_one_latent_per_token_on_every_rank() -> None:
    s = shape_from_config(MLA_DEEPSEEK_V3, Path("config.json"))
    assert s.kind == "mla"
    assert s.kv_bytes_per_token(1) == s.kv_bytes_per_token(8) == (512 + 64) * 61 * 2


def test_unknown_architecture_names_the_missing_fields(tmp_path: Path) -> None:
    d = model_dir(tmp_path, "odd", {"architectures": ["RWKV7ForCausalLM"], "hidden_size": 4096}, 10)
    with pytest.raises(ModelInfoError) as e:
        read_shape(d)
    msg = str(e.value)
    assert "RWKV7ForCausalLM" in msg and "num_hidden_layers" in msg and "num_attention_heads" in msg
    assert "--kv-bytes-per-token" in msg and str(d / "config.json") in msg
    half = {k: v for k, v in HYBRID_QWEN35_27B.items() if k != "linear_num_value_heads"}
    with pytest.raises(ModelInfoError, match="linear_num_value_heads"):
        shape_from_config(half, Path("config.json"))


# ---------------------------------------------------------------- the seed's case


def test_seed_case_is_cannot_serve_with_a_fix_sglangs_arithmetic_and_the_stand_in_serve(units: Path,
                                                                                         tmp_path: Path) -> None:
    cfg = configure(units, "seed", "dflash-tp1-mr8", tmp_path, gpu_memory_gb=69.67)
    p = plan(cfg)
    pred = p.prediction
    assert pred.verdict == "cannot_serve" and pred.max_running_requests == 0 and pred.family == "0.5.23"
    # 0.5.23 counts the draft's weights (1.66 GB) and reserves (0 + 1) × 16 intermediate states: nothing is left
    assert pred.failure == "not_enough_memory" and pred.kv_tokens == 0
    assert any("2 Mamba slot(s) at 5 per request serve no request" in r for r in pred.reasons)
    assert p.inputs is not None and p.inputs.gpu_source.endswith("gpu_memory_gb")
    fix = pred.fixes[0]["set"]
    assert fix["mem_fraction_static"] <= 0.95 and fix["max_running_requests"] >= 1
    fixed = dataclasses.replace(cfg, **fix)
    assert plan(fixed).prediction.verdict in ("ok", "tight")
    # the stand-in's own copy of 0.5.23's arithmetic agrees: the unfixed config dies, the fixed one serves
    sim = dataclasses.replace(SCENARIOS["healthy-hybrid-dflash"], gpu_free_gb=69.67)
    args = {"tp": 1, "context_length": 32768, "speculative": True, "new": True}
    before = compute(HYBRID_27B, sim, mem_fraction_static=0.75, max_mamba_cache_size=2, max_running_requests=8, **args)
    after = compute(HYBRID_27B, sim, mem_fraction_static=fix["mem_fraction_static"],
                    max_mamba_cache_size=fix.get("max_mamba_cache_size", 2),
                    max_running_requests=fix.get("max_running_requests", 8), **args)
    assert before.max_running == 0 and after.max_running >= 1 and not after.not_enough_memory
    assert abs(after.kv_tokens - plan(fixed).prediction.kv_tokens) / after.kv_tokens < 0.05
    # on the seed's release (0.5.12) the intermediate state for all 8 asked requests is reserved up front
    old = plan(dataclasses.replace(cfg, sglang_version="0.5.12")).prediction
    assert (old.family, old.verdict, old.failure) == ("0.5.12", "cannot_serve", "not_enough_memory")


def test_the_seeds_config_alone_cannot_serve(units: Path, tmp_path: Path, cli) -> None:
    """No config.json, no GPU figure: its own max_mamba_cache_size = 2 serves nobody (exit 1)."""
    empty = model_dir(tmp_path, "empty", None, None)
    configure(units, "alone", "dflash-tp1-mr8", tmp_path, model_path=str(empty))
    r = cli("preflight", "alone")
    assert r.exit_code == 1, r.output
    assert "CANNOT SERVE" in r.output and "2 Mamba slot(s) at 5 per request serve no request" in r.output
    assert "judged from the config alone" in r.output
    out = json.loads(cli("preflight", "alone", "--json").output)
    assert (out["verdict"], out["cause"], out["limits"]) == ("cannot_serve", "mamba_cache_too_small", {"mamba": 0})
    # the case: --kv-bytes-per-token and --weights-gb with no config.json still count the config's slots
    r = cli("preflight", "alone", "--kv-bytes-per-token", "65024", "--weights-gb", "51.9", "--gpu-memory", "80")
    assert r.exit_code == 1 and "CANNOT SERVE" in r.output, r.output
    configure(units, "alone-smoke", "dflash-smoke", tmp_path, model_path=str(empty))
    r = cli("preflight", "alone-smoke")  # 24 slots serve 4: the config alone does not decide
    assert r.exit_code == 2 and "config.json: no such file" in r.output


@pytest.mark.parametrize("scenario, base, tp", [
    ("healthy-hybrid-dflash", "dflash-smoke", 1), ("healthy-hybrid-dflash", "dflash-tp4", 4),
    ("healthy-hybrid-dflash", "dflash-tp8", 8), ("healthy-dense", "nospec-tp1", 1),
])
def test_prediction_within_5pct_of_the_stand_ins_kv_pool(units: Path, tmp_path: Path, scenario: str, base: str,
                                                          tp: int) -> None:
    dense = SCENARIOS[scenario].dense
    target = model_dir(tmp_path, "dense", DENSE_QWEN3_8B, DENSE_8B.weights_gb) if dense else None
    cfg = configure(units, f"cal-{base}", base, tmp_path, gpu_memory_gb=IDLE_GPU_FREE_GB,
                    **({"model_path": str(target)} if target else {}))
    pred = plan(cfg).prediction
    profile = DENSE_8B if dense else HYBRID_27B
    sim = compute(profile, SCENARIOS[scenario], tp=tp, mem_fraction_static=cfg.mem_fraction_static,
                  max_mamba_cache_size=cfg.max_mamba_cache_size, max_running_requests=cfg.max_running_requests,
                  context_length=cfg.context_length, speculative=cfg.speculative is not None, new=True)
    assert abs(pred.kv_tokens - sim.kv_tokens) / sim.kv_tokens < 0.05, (pred.kv_tokens, sim.kv_tokens)
    assert pred.max_running_requests == sim.max_running
    assert pred.verdict in ("ok", "tight")


# ---------------------------------------------------------------- the arithmetic's properties

_shape = shape_from_config(HYBRID_QWEN35_27B, Path("config.json"))


@settings(max_examples=150, deadline=None)
@given(free=st.floats(40, 200), mfs=st.floats(0.5, 0.94), slots=st.integers(1, 64), running=st.integers(1, 64),
       ctx=st.sampled_from([4096, 32768, 131072]), spec=st.booleans())
def test_more_memory_never_means_fewer_tokens_and_every_fix_serves(free: float, mfs: float, slots: int,
                                                                   running: int, ctx: int, spec: bool) -> None:
    base = UnitsDir(UNITS, "t").load("dflash-smoke" if spec else "nospec-tp1")
    cfg = dataclasses.replace(base, mem_fraction_static=round(mfs, 2), max_mamba_cache_size=slots,
                              max_running_requests=running, context_length=ctx)
    inp = inputs_from_shape(cfg, _shape, gpu_free_gb=free, gpu_source="test", weights_bytes=int(50.29 * GB),
                            draft_bytes=int(1.66 * GB))
    p = predict(cfg, inp)
    more = predict(dataclasses.replace(cfg, mem_fraction_static=min(0.95, cfg.mem_fraction_static + 0.05)), inp)
    assert more.kv_tokens >= p.kv_tokens
    assert (p.verdict == "cannot_serve") == (p.kv_tokens < ctx or p.max_running_requests == 0 or not p.kv_tokens)
    for fix in p.fixes:
        if "context_length" in fix["set"]:
            fixed = predict(cfg, dataclasses.replace(inp, context_len=fix["set"]["context_length"]))
        else:
            fixed = predict(dataclasses.replace(cfg, **fix["set"]), inp)
        assert fixed.verdict != "cannot_serve", fix


# ---------------------------------------------------------------- GPU memory, overrides, CLI


def test_gpu_memory_source_order_and_a_clear_error(units: Path, tmp_path: Path, monkeypatch) -> None:
    cfg = configure(units, "g", "dflash-smoke", tmp_path, gpu_memory_gb=80.0)
    assert gpu_free_gb(cfg, 96.0) == (96.0, "--gpu-memory")
    assert gpu_free_gb(cfg, None)[0] == 80.0
    bare = dataclasses.replace(cfg, gpu_memory_gb=None)
    monkeypatch.setattr("svcdiag.ops.host.gpumem.torch_subprocess", lambda cfg: None)
    monkeypatch.setattr("shutil.which", lambda exe: None)
    with pytest.raises(SvcdiagError, match="pass --gpu-memory GB"):
        gpu_free_gb(bare, None, nvml=lambda: None)


def test_nvidia_smi_csv_gives_the_smallest_free_of_the_configs_gpus() -> None:
    csv = "memory.total [MiB], memory.used [MiB]\n97871 MiB, 1 MiB\n97871 MiB, 20481 MiB\n97871 MiB, 0 MiB\n"
    assert parse_nvidia_smi(csv, [0]) == pytest.approx((97871 - 1) / 1024)
    assert parse_nvidia_smi(csv, [0, 1]) == pytest.approx((97871 - 20481) / 1024)
    with pytest.raises(SvcdiagError, match="lists 3 GPU"):
        parse_nvidia_smi(csv, [7])


def test_without_config_json_overrides_are_used_and_said(units: Path, tmp_path: Path, cli) -> None:
    empty = model_dir(tmp_path, "empty", None, None)
    configure(units, "bare", "dflash-smoke", tmp_path, model_path=str(empty))
    r = cli("preflight", "bare", "--gpu-memory", "139.72")
    assert r.exit_code == 2 and "config.json: no such file" in r.output and "--kv-bytes-per-token" in r.output
    r = cli("preflight", "bare", "--gpu-memory", "139.72", "--kv-bytes-per-token", "65536")
    assert r.exit_code == 2 and "pass --weights-gb" in r.output
    r = cli("preflight", "bare", "--gpu-memory", "139.72", "--kv-bytes-per-token", "65536", "--weights-gb", "50.29",
            "--json")
    out = json.loads(r.output)
    assert r.exit_code == 0 and out["sources"]["kv_bytes_per_token"] == "--kv-bytes-per-token"
    assert any("upper bound" in n for n in out["notes"])  # the Mamba cache could not be counted


def test_preflight_cli_exit_codes_and_human_budget(units: Path, tmp_path: Path, cli) -> None:
    configure(units, "seed", "dflash-tp1-mr8", tmp_path)
    r = cli("preflight", "seed", "--gpu-memory", "69.67")
    assert r.exit_code == 1
    assert "CANNOT SERVE" in r.output and "mem_fraction_static = 0.8" in r.output and "--gpu-memory" in r.output
    more = cli("preflight", "seed", "--gpu-memory", "139.72")  # memory does not mend 2 Mamba slots at 5 a request
    assert more.exit_code == 1 and "2 Mamba slot(s) at 5 per request serve no request" in more.output
    configure(units, "smoke", "dflash-smoke", tmp_path)
    ok = cli("preflight", "smoke", "--gpu-memory", "139.72", "--json")
    assert ok.exit_code == 0 and json.loads(ok.output)["verdict"] == "ok"


@pytest.mark.parametrize("release", ["0.5.9", "0.5.10", "0.5.12", "0.5.13", "0.5.14", "0.5.23"])
def test_a_release_that_refuses_a_speculative_hybrid_with_the_radix_cache_is_cannot_serve(
        units: Path, tmp_path: Path, cli, release: str) -> None:
    """0.5.10-0.5.13 ServerArgs._handle_mamba_radix_cache raise a ValueError for a speculative hybrid that keeps
    the radix cache under no_buffer (their "auto"): certain whatever the GPU reads, so CANNOT SERVE with SGLang's
    words and the flags that get past it; 0.5.9 turns the radix cache off instead (one state slot a request),
    0.5.14+ pick extra_buffer; an architecture the check does not name is sized as before."""
    real = model_dir(tmp_path, "Qwen3.6-27B-vl", {**HYBRID_QWEN35_27B,
                                                  "architectures": ["Qwen3_5ForConditionalGeneration"]}, 50.29)
    configure(units, "r", "dflash-smoke", tmp_path, sglang_version=release, model_path=str(real))
    r = cli("preflight", "r", "--gpu-memory", "139.72", "--json")
    out = json.loads(r.output)
    refused = release in ("0.5.10", "0.5.12", "0.5.13")
    human = cli("preflight", "r", "--gpu-memory", "139.72").output
    assert ("preflight CANNOT SERVE: SGLang refuses the arguments" in human) == refused, human
    assert (r.exit_code, out["verdict"] == "cannot_serve", out["failure"] == "bad_arguments") == \
        ((1, True, True) if refused else (0, False, False)), r.output
    assert out["slots_per_request"] == {"0.5.9": 1}.get(release, None if refused else 5), out
    # the architecture the fixtures name (not one SGLang's check lists) is sized on every release
    configure(units, "other", "dflash-smoke", tmp_path, sglang_version=release)
    assert json.loads(cli("preflight", "other", "--gpu-memory", "139.72", "--json").output)["failure"] is None
    if not refused:
        return
    assert out["kv_tokens"] == 0 and any("--mamba-scheduler-strategy no_buffer.To use radix cache" in why
                                         and "Qwen3_5ForConditionalGeneration" in why for why in out["reasons"])
    fixes = {tuple(f["set"]["extra_args"]): f for f in out["fixes"]}
    assert ("--disable-radix-cache",) in fixes and "predicted" in fixes[("--disable-radix-cache",)]["reason"]
    assert fixes[("--mamba-scheduler-strategy", "extra_buffer")]["set"]["env.SGLANG_ENABLE_SPEC_V2"] == "1"
    for extra in fixes:  # each fix gets past SGLang's check, by svcdiag's own model of it
        configure(units, "f", "dflash-smoke", tmp_path, sglang_version=release, extra_args=list(extra),
                  model_path=str(real))
        fixed = json.loads(cli("preflight", "f", "--gpu-memory", "139.72", "--json").output)
        assert fixed["failure"] != "bad_arguments" and fixed["verdict"] != "cannot_serve", fixed
    # a ROCm host: SGLang turns the radix cache off instead ("Automatically disabling radix cache")
    configure(units, "amd", "dflash-smoke", tmp_path, sglang_version=release, devices=["rocm"], model_path=str(real))
    amd = json.loads(cli("preflight", "amd", "--gpu-memory", "139.72", "--json").output)
    assert amd["verdict"] != "cannot_serve" and amd["slots_per_request"] == 1
    # `up` refuses it (the gate), naming the cause
    from svcdiag.ops.host.preflight import predicted_cause
    from svcdiag.ops.serve.start import preflight_gate

    class Pub:
        def note(self, text: str) -> None:
            pass

        def record(self, *a, **k):
            return k

        def publish(self, rec) -> None:
            self.rec = rec

    pub = Pub()
    cfg = UnitsDir(units, "t").load("r")
    plan_, refuse = preflight_gate(cfg, pub, force=False, gpu_memory=139.72)  # type: ignore[arg-type]
    assert refuse and plan_ is not None and predicted_cause(plan_.prediction) == "bad_arguments"
    assert pub.rec["cause"] == "bad_arguments" and "refuses these arguments" in pub.rec["message"]


def test_calibration_is_appended_and_a_torn_line_loses_nothing_else(units: Path, tmp_path: Path, cli) -> None:
    from svcdiag.judge.verdict import Verdict

    cfg = configure(units, "seed", "dflash-smoke", tmp_path, gpu_memory_gb=IDLE_GPU_FREE_GB)
    cal = Calibration(tmp_path / "state")
    pred = plan(cfg).prediction
    logged = compute(HYBRID_27B, SCENARIOS["healthy-hybrid-dflash"], tp=1, mem_fraction_static=0.75,
                     max_mamba_cache_size=24, max_running_requests=4, context_length=32768, speculative=True,
                     new=True).kv_tokens
    v = Verdict(verdict="healthy", phase="ready", cause=None, message="",
                figures={"kv_tokens": logged}, invocation="a" * 32)
    row = cal.record(cfg, pred, v)
    assert row["logged_kv_tokens"] == logged and abs(row["error_pct"]) < 5
    with open(tmp_path / "state" / "seed" / "calibration.jsonl", "a") as f:
        f.write('{"config": "seed", "predicted_kv')  # a crash mid-write
    cal.record(cfg, pred, v)
    assert len(cal.rows()) == 2
    out = cli("preflight", "--calibration", "--state-dir", str(tmp_path / "state")).output
    assert "seed" in out and "2 start(s)" in out and "> 5 %" not in out
    assert cal.record(cfg, pred, dataclasses.replace(v, figures={})) is None  # died before the KV pool


def test_bad_overrides_are_refused_naming_the_option() -> None:
    from .conftest import run_svcdiag

    r = run_svcdiag("--units", "units", "preflight", "dflash-smoke", "--kv-bytes-per-token", "0")
    assert r.returncode == 2 and "'--kv-bytes-per-token': 0 is not in the range" in r.stderr.decode()
    r = run_svcdiag("--units", "units", "preflight", "dflash-smoke", "--gpu-memory", "lots")
    assert r.returncode == 2 and "'--gpu-memory': 'lots' is not a valid float" in r.stderr.decode()
    assert_one_line_error(run_svcdiag("--units", "units", "preflight"), "name a config")


def test_baseline_against_a_candidate_that_never_ran_uses_preflight(units: Path, tmp_path: Path) -> None:
    from svcdiag.ops.fleet.baseline import explain_candidate

    base = configure(units, "smoke", "dflash-smoke", tmp_path, gpu_memory_gb=139.72)
    cand = configure(units, "mr8", "dflash-tp1-mr8", tmp_path, gpu_memory_gb=139.72)
    out = explain_candidate(base, cand, None, None, preflight=plan(cand).to_json())
    # memory enough; 2 Mamba slots at 5 per request: 0.5.23's Hybrid state cache RuntimeError
    assert (out["source"], out["cause"], out["verdict"]) == ("preflight", "mamba_cache_too_small", "failed (predicted)")
    assert "max_mamba_cache_size" in out["explaining_keys"]
    assert "would fail with mamba_cache_too_small" in out["explanation"]


# ---------------------------------------------------------------- hub ids, --model-config, bounded options


def hub_cache(root: Path, model: str, config: dict | None, *, ref: bool = True, rev: str = "0123abcd") -> Path:
    """`root/hub/models--ORG--NAME/snapshots/REV/` as huggingface_hub lays it out."""
    repo = root / "hub" / ("models--" + model.replace("/", "--"))
    snap = model_dir(repo / "snapshots", rev, config, DENSE_8B.weights_gb)
    if ref:
        (repo / "refs").mkdir(parents=True, exist_ok=True)
        (repo / "refs" / "main").write_text(rev)
    return snap


def test_a_hub_id_is_found_where_sglang_finds_it(units: Path, tmp_path: Path, cli, monkeypatch) -> None:
    monkeypatch.delenv("HF_HUB_CACHE", raising=False)
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "nohome"))
    hf = tmp_path / "hf"
    snap = hub_cache(hf, "Qwen/Qwen3-8B", DENSE_QWEN3_8B)
    hub_cache(hf, "Qwen/Qwen3-8B", None, ref=False, rev="ffff")  # a snapshot cut short: no config.json
    (units / "hub.toml").write_text('extends = "nospec-tp1"\nmodel_path = "Qwen/Qwen3-8B"\ngpu_memory_gb = 78.5\n'
                                    f'[env]\nHF_HOME = "{hf}"\n')
    r = cli("preflight", "hub", "--json")
    assert r.exit_code == 0, r.output
    out = json.loads(r.output)
    assert out["sources"]["model"] == f"hub id Qwen/Qwen3-8B: {snap}"
    assert out["sources"]["shape"].startswith(f"{snap}/config.json (Qwen3ForCausalLM")
    assert out["kv_bytes_per_token"] == 8 * 256 * 36 * 2 and out["verdict"] in ("ok", "tight")
    # no refs/main (a cache copied by hand): the snapshot that has a config.json
    (hf / "hub" / "models--Qwen--Qwen3-8B" / "refs" / "main").unlink()
    out = json.loads(cli("preflight", "hub", "--json").output)
    assert out["sources"]["model"].startswith("hub id Qwen/Qwen3-8B: ") and out["verdict"] != "cannot_serve"
    # the process's HF_HOME when the unit sets none
    (units / "hub2.toml").write_text('extends = "nospec-tp1"\nmodel_path = "Qwen/Qwen3-8B"\ngpu_memory_gb = 78.5\n')
    monkeypatch.setenv("HF_HOME", str(hf))
    assert cli("preflight", "hub2").exit_code == 0


def test_a_hub_id_not_cached_says_what_sglang_will_do(units: Path, tmp_path: Path, cli, monkeypatch) -> None:
    for var in ("HF_HOME", "HF_HUB_CACHE", "XDG_CACHE_HOME", "HF_HUB_OFFLINE"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "nohome"))
    (units / "hub.toml").write_text('extends = "nospec-tp1"\nmodel_path = "Qwen/Qwen3-8B"\ngpu_memory_gb = 78.5\n'
                                    f'[env]\nHF_HOME = "{tmp_path / "hf"}"\n')
    r = cli("preflight", "hub")
    assert r.exit_code == 2 and "hub id not in the Hugging Face cache" in r.output
    assert f"{tmp_path / 'hf'}/hub" in r.output and "SGLang will download it at start" in r.output
    assert "--model-config FILE" in r.output and "Qwen/Qwen3-8B/config.json" in r.output
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    assert "with HF_HUB_OFFLINE set, SGLang will fail to load it" in cli("preflight", "hub").output
    # --model-config FILE for a model read elsewhere, --weights-gb for its size
    conf = tmp_path / "qwen3-8b.json"
    conf.write_text(json.dumps(DENSE_QWEN3_8B))
    r = cli("preflight", "hub", "--model-config", str(conf), "--weights-gb", "15.26", "--json")
    out = json.loads(r.output)
    assert r.exit_code == 0 and out["sources"]["shape"].startswith(f"{conf} (Qwen3ForCausalLM")


def test_up_says_in_one_line_that_its_gate_was_skipped(units: Path, tmp_path: Path, monkeypatch) -> None:
    from svcdiag.ops.serve.start import preflight_gate

    monkeypatch.setenv("HOME", str(tmp_path / "nohome"))
    for var in ("HF_HOME", "HF_HUB_CACHE", "XDG_CACHE_HOME"):
        monkeypatch.delenv(var, raising=False)
    notes: list[str] = []

    class Pub:
        def note(self, text: str) -> None:
            notes.append(text)

        def record(self, *a, **k):
            return k

        def publish(self, rec) -> None:
            pass

    (units / "hub.toml").write_text('extends = "nospec-tp1"\nmodel_path = "Qwen/Qwen3-8B"\ngpu_memory_gb = 78.5\n')
    cfg = UnitsDir(units, "t").load("hub")
    assert preflight_gate(cfg, Pub(), force=False, gpu_memory=None) == (None, False)  # type: ignore[arg-type]
    assert len(notes) == 1 and "\n" not in notes[0]
    assert notes[0].startswith("preflight skipped: Qwen/Qwen3-8B/config.json: hub id not in the Hugging Face cache")
    # the seed's config is refused from its own limits, the gate says why
    notes.clear()
    seed = UnitsDir(units, "t").load("dflash-tp1-mr8")
    plan_, refuse = preflight_gate(seed, Pub(), force=False, gpu_memory=None)  # type: ignore[arg-type]
    assert refuse and plan_ is not None and plan_.inputs is None
    assert notes == ["preflight: cannot_serve from the config's own limits: 2 Mamba slot(s) at 5 per request serve "
                     "no request (max_mamba_cache_size // state slots per request = 0), whatever the GPU"]


@pytest.mark.parametrize("option", ["--gpu-memory", "--weights-gb", "--kv-bytes-per-token"])
@pytest.mark.parametrize("value", ["inf", "nan", "0", "-5", "-inf"])
def test_numeric_options_are_finite_positive_and_bounded(cli, option: str, value: str) -> None:
    r = cli("preflight", "dflash-smoke", f"{option}={value}")
    assert r.exit_code == 2 and f"Invalid value for '{option}'" in r.output, r.output
    assert "Traceback" not in r.output


def test_timeout_is_finite_too(cli) -> None:
    for value in ("inf", "nan", "0", "-5"):
        r = cli("wait", "dflash-smoke", "--timeout", value)
        assert r.exit_code == 2 and "Invalid value for '--timeout'" in r.output, (value, r.output)
