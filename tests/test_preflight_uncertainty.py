"""`up` refuses only what is certain: preflight judges a config over the uncertainty of its
inputs (the free-memory reading, SGLang's own CUDA context and the driver's reserve, a model
file it could not read). CANNOT SERVE only when no reading within it would serve; a nominal
failure that the high end serves is TIGHT, and `up` starts it (docs/preflight.md)."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from svcdiag.config.service import UnitsDir
from svcdiag.ops.host import preflight as ops_preflight
from svcdiag.ops.host.gpumem import CONTEXT_FIGURES, MiB, context_figure, reading_kind, sglang_sees
from svcdiag.ops.host.preflight import plan
from svcdiag.ops.serve.start import preflight_gate
from svcdiag.output.report import render_preflight
from svcdiag.sglang.memory import GB
from svcdiag.sglang.preflight import predict, predict_at

from .model_fixtures import DENSE_QWEN3_8B, model_dir, seed_models


class Pub:
    """What preflight_gate publishes: its notes and records."""

    def __init__(self) -> None:
        self.notes: list[str] = []
        self.records: list[dict] = []

    def note(self, text: str) -> None:
        self.notes.append(text)

    def record(self, *a, **k) -> dict:
        return k

    def publish(self, rec: dict) -> None:
        self.records.append(rec)


def read_by_nvidia_smi(monkeypatch, gb: float, gpu: str | None = None, driver: int | None = None) -> None:
    """This host's nvidia-smi reads `gb` free (total − used) on the config's GPU."""
    monkeypatch.setattr(ops_preflight, "gpu_free_gb", lambda cfg, option, remote=None: (
        (option, "--gpu-memory") if option is not None else (gb, "nvidia-smi (GPUs 0, now)")))
    monkeypatch.setattr(ops_preflight, "gpu_identity", lambda cfg, remote=None: (gpu, driver))


def dense(units: Path, tmp_path: Path, name: str, context_length: int) -> object:
    d = model_dir(tmp_path, "Qwen3-8B", DENSE_QWEN3_8B, 16.0)
    (units / f"{name}.toml").write_text(f'extends = "nospec-tp1"\nmodel_path = "{d}"\n'
                                        f"mem_fraction_static = 0.85\ncontext_length = {context_length}\n")
    return UnitsDir(units, "t").load(name)


def test_a_nominal_failure_that_the_reading_s_high_end_serves_is_tight_and_up_starts_it(
        units: Path, tmp_path: Path, monkeypatch) -> None:
    read_by_nvidia_smi(monkeypatch, 23.0)  # a 24 GB card; no figure for it: the widest range
    # a context that grows no RoPE cache (svcdiag.sglang.rope): the pool does not depend on it
    probe = plan(dense(units, tmp_path, "probe", 32768))
    assert probe.inputs is not None and probe.inputs.gpu_free_range_gb is not None
    nominal = probe.prediction.kv_tokens
    # a context just above what the nominal reading holds, below what its high end holds
    cfg = dense(units, tmp_path, "edge", nominal + 1000)
    p = plan(cfg)
    assert p.inputs is not None
    low_gb, high_gb = p.inputs.gpu_free_range_gb
    assert low_gb < p.inputs.gpu_free_gb < high_gb <= 23.0  # SGLang's context taken off the reading
    at_nominal = predict_at(cfg, p.inputs, with_fixes=False)
    assert at_nominal.verdict == "cannot_serve" and at_nominal.kv_tokens == nominal
    assert p.prediction.verdict == "tight" and not p.prediction.fixes
    lo, hi = p.prediction.interval["kv_tokens"]
    assert lo < nominal < nominal + 1000 <= hi
    assert any("within the reading's uncertainty" in r and "the start decides" in r for r in p.prediction.reasons)
    # the JSON carries the interval, and the text says it
    out = p.to_json()
    assert out["interval"]["kv_tokens"] == [lo, hi] and out["interval"]["gpu_free_gb"] == [low_gb, high_gb]
    assert out["interval"]["kv_pct"] > 0 and out["sources"]["gpu_reading"].startswith("23.00 GB read")
    text = render_preflight("edge", {**out, "notes": []})
    assert f"preflight TIGHT: {nominal:,} KV tokens predicted ± {out['interval']['kv_pct']} %" in text
    assert f"uncertainty: {lo:,}–{hi:,} KV tokens" in text
    # up: a warning, and it starts
    pub = Pub()
    plan_, refuse = preflight_gate(cfg, pub, force=False, gpu_memory=None)  # type: ignore[arg-type]
    assert not refuse and plan_ is not None and not pub.records
    assert any(n.startswith("preflight: tight, starting; the verdict decides:") for n in pub.notes)
    # the same config on a figure given as SGLang's own (no uncertainty) is refused
    pub = Pub()
    given = at_nominal.budget["free_before_load"]
    _, refuse = preflight_gate(cfg, pub, force=False, gpu_memory=given)  # type: ignore[arg-type]
    assert refuse and pub.records and "less than one" in pub.records[0]["message"]


def test_a_failure_far_outside_the_uncertainty_stays_cannot_serve(units: Path, tmp_path: Path, monkeypatch) -> None:
    """The seed's dflash-tp1-mr8 read by nvidia-smi on its H200: nothing within the reading serves."""
    target, draft = seed_models(tmp_path)
    (units / "seed.toml").write_text(f'extends = "dflash-tp1-mr8"\nmodel_path = "{target}"\n'
                                     f'[speculative]\nalgorithm = "DFLASH"\ndraft_model_path = "{draft}"\n')
    cfg = UnitsDir(units, "t").load("seed")
    read_by_nvidia_smi(monkeypatch, 70.78, "NVIDIA H200", 580)
    p = plan(cfg)
    assert p.prediction.verdict == "cannot_serve" and p.prediction.fixes
    lo, hi = p.prediction.interval["max_running_requests"]
    assert lo == hi == 0 and p.prediction.interval["kv_tokens"][1] == 0
    assert p.inputs is not None and p.inputs.gpu_free_gb == pytest.approx(70.78 - 0.506 - 0.602, abs=0.01)
    pub = Pub()
    _, refuse = preflight_gate(cfg, pub, force=False, gpu_memory=None)  # type: ignore[arg-type]
    assert refuse and pub.records[0]["data"]["preflight"]["interval"]["kv_tokens"] == [0, 0]


def test_a_nominal_success_that_the_low_end_fails_is_tight(units: Path, tmp_path: Path, monkeypatch) -> None:
    read_by_nvidia_smi(monkeypatch, 23.0)
    cfg = dense(units, tmp_path, "probe", 40960)
    p = plan(cfg)
    assert p.inputs is not None
    low_tokens = p.prediction.interval["kv_tokens"][0]
    # two full contexts fit at the nominal reading, not at the low end
    ctx = (low_tokens + p.prediction.kv_tokens) // 4
    edge, inp = dataclasses.replace(cfg, context_length=ctx), dataclasses.replace(p.inputs, context_len=ctx)
    q = predict(edge, inp)
    assert predict_at(edge, inp).verdict == "ok" and q.verdict == "tight"
    assert any("at the low end of the reading" in r for r in q.reasons)


def test_a_model_file_not_read_makes_the_prediction_an_upper_bound(units: Path, tmp_path: Path,
                                                                    monkeypatch) -> None:
    """A draft whose weights cannot be read: the KV figure is at most the prediction, so only a
    failure of that upper bound is certain."""
    target, _ = seed_models(tmp_path)
    empty = model_dir(tmp_path, "no-draft", None, None)
    (units / "smoke.toml").write_text(f'extends = "dflash-smoke"\nmodel_path = "{target}"\n'
                                      f'[speculative]\nalgorithm = "DFLASH"\ndraft_model_path = "{empty}"\n')
    cfg = UnitsDir(units, "t").load("smoke")
    p = plan(cfg, gpu_memory=139.0)
    assert p.inputs is not None and p.inputs.upper_bound and p.inputs.gpu_free_range_gb is None
    assert p.prediction.interval["kv_tokens"] == [None, p.prediction.kv_tokens]
    assert "the draft's weights unread" in p.prediction.interval["why"][0]
    out = p.to_json()
    assert f"{p.prediction.kv_tokens:,} KV tokens predicted at most" in render_preflight("smoke", out)
    json.dumps(out)  # the interval is plain JSON


# ---------------------------------------------------------------- the reading: what SGLang will see


def test_the_h200_figures_give_torch_s_own_free_memory_from_nvidia_smi() -> None:
    """tests/fixtures/nvidia-smi-h200: total − used 143,771 MiB idle; a torch process there saw
    139.29 GiB free (its context 518 MiB, the driver's reserve 616 MiB)."""
    row = context_figure("NVIDIA H200", 580)
    assert row is CONTEXT_FIGURES[0]
    view = sglang_sees(143771 * MiB / GB, "nvidia-smi", gpu_name="NVIDIA H200", driver_major=580)
    assert view.nominal == 139.29 and view.low < 139.29 < view.high
    assert context_figure("NVIDIA H200", 535) is CONTEXT_FIGURES[-1]  # an older driver: not measured
    assert context_figure(None, None) is CONTEXT_FIGURES[-1]


@pytest.mark.parametrize("total_mib, ranks, logged, what", [
    (23034, 4, 21.63, "4 × L4, tp 4, 0.4.3.post4: QwQ-32B's 'Load weight begin. avail mem=21.63 GB'"),
    (81559, 1, 78.48, "H100 80GB, 0.5.18: 'Load weight end' 50.01 GB + 'mem usage' 28.47 GB"),
])
def test_real_logs_first_avail_mem_lies_in_the_range_from_the_card_s_total(total_mib: int, ranks: int,
                                                                           logged: float, what: str) -> None:
    """The default row's range holds the real logs' first 'avail mem' (tests/fixtures/memory-backtest)
    from the card's nvidia-smi memory.total, an idle card's total − used."""
    view = sglang_sees(total_mib * MiB / GB, "nvidia-smi", ranks_=ranks)
    assert view.low <= logged <= view.high, what


def test_each_reading_kind_takes_off_what_it_still_counts() -> None:
    smi = sglang_sees(80.0, "nvidia-smi")
    nvml = sglang_sees(80.0, "nvml")
    torch = sglang_sees(80.0, "torch")
    given = sglang_sees(80.0, "given")
    assert smi.nominal < nvml.nominal < torch.nominal <= given.nominal == 80.0
    assert given.low == given.high == 80.0
    assert sglang_sees(80.0, "nvidia-smi", ranks_=4).nominal < smi.nominal  # NCCL's buffers with tp > 1
    assert [reading_kind(s) for s in ("NVML (GPUs 0, now)", "nvidia-smi (GPUs 0, now)", "nvidia-smi on h (GPUs 0)",
                                      "torch in /venv/bin/python, a subprocess", "--gpu-memory", "x.toml: gpu_memory_gb")
            ] == ["nvml", "nvidia-smi", "nvidia-smi", "torch", "given", "given"]


def test_a_b200_read_by_name_sizes_the_pool_in_64_token_pages(units: Path, tmp_path: Path, monkeypatch) -> None:
    """nvidia-smi names the card: on a B200 (SM100) SGLang's default attention backend, trtllm_mha,
    turns page size 1 into 64 (memory.attention_page); the same reading on an H200 keeps page 1."""
    cfg = dense(units, tmp_path, "b200", 32768)
    read_by_nvidia_smi(monkeypatch, 177.6, "NVIDIA B200", 570)
    b200 = plan(cfg)
    read_by_nvidia_smi(monkeypatch, 177.6, "NVIDIA H200", 570)
    h200 = plan(cfg)
    assert b200.inputs is not None and b200.inputs.gpu_name == "NVIDIA B200"
    assert b200.prediction.kv_tokens % 64 == 0
    assert "SM100" in b200.to_json()["sources"]["gpu_sm"] and "gpu_sm" not in h200.to_json()["sources"]
    assert h200.prediction.kv_tokens % 64 != 0  # this pool is one the page changes


def test_the_seeds_dflash_config_on_a_b200_is_sized_at_the_page_its_release_picks(
        units: Path, tmp_path: Path, monkeypatch) -> None:
    """The seed's Qwen3.6-27B + DFlash on a B200: 0.5.23's hybrid override picks trtllm_mha (DFlash's
    top-k forced to one) and page 64; 0.5.22's default has no top-k for DFlash, so triton and page 1;
    preflight says which in its sources and sizes the pool so. 0.5.12 refuses the start on any card
    (speculative decoding with the no_buffer radix cache: SGLang's own ValueError)."""
    from .model_fixtures import HYBRID_QWEN35_27B

    _, draft = seed_models(tmp_path)
    # Qwen3.6-27B's config.json names the multimodal class, whose override SGLang registers
    target = model_dir(tmp_path, "Qwen3.6-27B-mm", {**HYBRID_QWEN35_27B,
                                                   "architectures": ["Qwen3_5ForConditionalGeneration"]}, 50.29)
    (units / "seed.toml").write_text(f'extends = "dflash-smoke"\nmodel_path = "{target}"\n'
                                     f'[speculative]\nalgorithm = "DFLASH"\ndraft_model_path = "{draft}"\n')
    cfg = UnitsDir(units, "t").load("seed")
    read_by_nvidia_smi(monkeypatch, 177.6, "NVIDIA B200", 570)
    new, old = (plan(dataclasses.replace(cfg, sglang_version=v)) for v in ("0.5.23", "0.5.22"))
    assert "_qwen3_5_hybrid_overrides" in new.to_json()["sources"]["gpu_sm"]
    assert new.to_json()["sources"]["gpu_sm"].endswith("sized at page size 64")
    assert old.to_json()["sources"]["gpu_sm"].endswith("sized at page size 1")
    assert new.prediction.kv_tokens % 64 == 0 and old.prediction.kv_tokens % 64 != 0
    assert not any("not modeled" in n for n in new.notes + old.notes)
    refused = plan(dataclasses.replace(cfg, sglang_version="0.5.12")).prediction
    assert refused.verdict == "cannot_serve" and any("no_buffer" in r for r in refused.reasons)
    read_by_nvidia_smi(monkeypatch, 139.0, "NVIDIA H200", 570)
    h200 = plan(dataclasses.replace(cfg, sglang_version="0.5.23"))
    assert "gpu_sm" not in h200.to_json()["sources"] and h200.prediction.kv_tokens % 64 != 0


def test_a_hybrid_sglang_names_no_sm100_rule_for_is_noted_on_a_b200(units: Path, tmp_path: Path,
                                                                   monkeypatch) -> None:
    """Qwen3.5's text-only class before 0.5.19 (no Mamba radix-cache list names it yet): its SM100
    page size is not modeled, preflight says so; from 0.5.19 it is SGLang's default backend's."""
    target, _ = seed_models(tmp_path)  # config.json: Qwen3_5ForCausalLM
    (units / "text.toml").write_text(f'extends = "nospec-tp1"\nmodel_path = "{target}"\n'
                                     "mem_fraction_static = 0.85\ncontext_length = 32768\n")
    cfg = UnitsDir(units, "t").load("text")
    read_by_nvidia_smi(monkeypatch, 177.6, "NVIDIA B200", 570)
    old = plan(dataclasses.replace(cfg, sglang_version="0.5.18"))
    assert any("SM100" in n and "not modeled" in n for n in old.notes)
    new = plan(dataclasses.replace(cfg, sglang_version="0.5.23"))
    assert not any("SM100" in n for n in new.notes)
    assert new.to_json()["sources"]["gpu_sm"].endswith("sized at page size 64") and new.prediction.kv_tokens % 64 == 0

