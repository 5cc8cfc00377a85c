"""SGLang's sizing rules per release family, each as the wheel's own code has it (issue 38):
speculative starts run 48 requests, the automatic mem_fraction_static by card, DP attention's
KV heads and GPUs, 0.5.2 / 0.5.6's hybrid state cache, and where an EAGLE draft's KV goes."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

import svcdiag.ops.host.preflight as ops_preflight
from svcdiag.config.service import UnitsDir
from svcdiag.errors import ConfigError
from svcdiag.sglang import memory
from svcdiag.sglang.memory import GB, SizingInputs, auto_mem_fraction, family, predict
from svcdiag.sglang.modelinfo import shape_from_config
from svcdiag.sglang.preflight import inputs_from_shape, sizing_inputs

from .model_fixtures import DENSE_QWEN3_8B, model_dir

QWEN3_8B_CELL = 8 * (128 + 128) * 36 * 2
# Qwen3-Next-80B-A3B at tp 4: 12 full-attention layers of 2 KV heads (replicated), and the state of
# 36 linear layers: conv (4 − 1) × (2 × 16 × 128 + 32 × 128) bf16 + ssm 32 × 128 × 128 float32, / tp
NEXT_CELL = 1 * 512 * 12 * 2
NEXT_PER_REQ = (3 * (2 * 16 * 128 + 32 * 128) * 2 * 36 + 32 * 128 * 128 * 4 * 36) // 4
RTX_4090_GB = 24564 / 1024  # what torch reports as the card's capacity (MiB / 1024)
L40S_GB = 46068 / 1024


def units_with(tmp_path: Path, name: str, body: str) -> object:
    d = tmp_path / "units"
    d.mkdir(exist_ok=True)
    (d / f"{name}.toml").write_text(body)
    return UnitsDir(d, "t").load(name)


def dense(**kw: object) -> SizingInputs:
    base: dict[str, object] = dict(free_before_gb=78.0, weights_gb=15.26, kv_cell_bytes=QWEN3_8B_CELL,
                                   context_len=40960, attention_layers=36, mem_fraction_static=0.85)
    base.update(kw)
    return SizingInputs(**base)  # type: ignore[arg-type]


def next80b(**kw: object) -> SizingInputs:
    base: dict[str, object] = dict(free_before_gb=77.67, weights_gb=38.09, kv_cell_bytes=NEXT_CELL,
                                   context_len=262144, attention_layers=12, mem_fraction_static=0.85,
                                   mamba_per_req_bytes=NEXT_PER_REQ, tp_size=4)
    base.update(kw)
    return SizingInputs(**base)  # type: ignore[arg-type]


# ---------------------------------------------------------------- 1: a speculative start runs 48


@pytest.mark.parametrize("version", ["0.4.6", "0.5.2", "0.5.6", "0.5.9", "0.5.11", "0.5.15", "0.5.18", "0.5.23"])
def test_a_dense_eagle3_start_with_no_max_running_runs_48(version: str) -> None:
    p = predict(dense(speculative_algorithm="EAGLE3", draft_layers=1, version=version))
    assert p.max_running_requests == 48 and p.limits["requested"] == 48
    plain = predict(dense(version=version))
    assert plain.max_running_requests >= 2048  # without a draft: the pool's own estimate


@pytest.mark.parametrize("version", ["0.5.9", "0.5.15", "0.5.23"])
def test_a_hybrid_mtp_start_with_no_max_running_runs_48_and_reserves_48_requests_state(version: str) -> None:
    p = predict(next80b(speculative_algorithm="NEXTN", num_draft_tokens=4, draft_layers=1, version=version))
    assert p.max_running_requests == 48 or p.binding == "mamba"
    assert p.limits["requested"] == 48
    # the intermediate state SGLang reserves is for those 48 (capped) requests, not for thousands
    assert p.intermediate_gb <= 49 * 4 * NEXT_PER_REQ / GB + 1e-9


def test_an_explicit_max_running_is_kept_under_speculation() -> None:
    assert predict(dense(speculative_algorithm="EAGLE", max_running_requests=8)).max_running_requests == 8


# ---------------------------------------------------------------- 2: the automatic mem_fraction_static


def test_auto_fraction_on_a_24_gb_card_is_sglangs_0_704() -> None:
    # 0.5.23 memory_hook: a 20-35 GB card gets chunked prefill 4096 and 48 decode graphs; reserved =
    # 512 + 4096 × 1.5 + 1/8 GB + 48 × 2 + 50 prefill graph sizes × 8 = 7,280 MB
    assert auto_mem_fraction(RTX_4090_GB) == round((24564 - 7280) / 24564, 3) == 0.704
    # L40S: 4096 and 32 graphs, reserved 512 + 6144 + 128 + 64 + 400
    assert auto_mem_fraction(L40S_GB) == round((46068 - 7248) / 46068, 3) == 0.843


def test_auto_fraction_follows_each_releases_own_rule() -> None:
    h200 = 143771 / 1024
    mb = 143771
    assert auto_mem_fraction(h200, fam=family("0.4.6")) == (mb - 13 * 1024) / mb  # 0.4.6: capacity − 13 GB
    assert auto_mem_fraction(80.0, tp_size=8, fam=family("0.4.6")) == 0.81  # ≤ 80 GB: by tp
    assert auto_mem_fraction(h200, tp_size=2, fam=family("0.5.2")) == round((mb - 13 * 1024) / mb, 3)
    assert auto_mem_fraction(h200, tp_size=2, fam=family("0.5.2"), speculative_algorithm="EAGLE") == \
        round((mb - 15 * 1024) / mb, 3)
    base = 512 + 8192 * 1.5 + 128 + 256 * 2  # 0.5.6-0.5.18 on an H200 at tp 1
    assert auto_mem_fraction(h200, fam=family("0.5.6")) == round((mb - base) / mb, 3)
    assert auto_mem_fraction(h200, fam=family("0.5.6"), speculative_algorithm="EAGLE3") == \
        round((mb - base - 2048) / mb, 3)
    assert auto_mem_fraction(h200, fam=family("0.5.6"), speculative_algorithm="NGRAM") == round((mb - base) / mb, 3)
    # 0.5.11: the piecewise graph's 58 sizes × 8 MB, and 4 GB for a draft
    assert auto_mem_fraction(h200, fam=family("0.5.11"), speculative_algorithm="EAGLE3") == \
        round((mb - base - 58 * 8 - 4096) / mb, 3)
    assert auto_mem_fraction(h200, fam=family("0.5.11"), attn_dp_size=2, tp_size=2) == \
        round((mb - (base + 128 + 256 * 2 * 3)) / mb, 3)  # DP attention: no piecewise graph, 3 MB × bs × dp
    assert auto_mem_fraction(h200, fam=family("0.5.18"), speculative_algorithm="EAGLE3") == \
        round((mb - base - 58 * 8) / mb, 3)  # no draft reserve from 0.5.18
    assert auto_mem_fraction(h200, fam=family("0.5.18"), mla=True) == round((mb - base - 1536) / mb, 3)
    assert auto_mem_fraction(RTX_4090_GB, fam=family("0.5.18")) == \
        round((24564 - (512 + 2048 * 1.5 + 128 + 24 * 2 + 42 * 8)) / 24564, 3)  # 0.5.18's 2048 / 24 table


def test_qwen3_8b_from_the_hub_cache_on_a_24_gb_card_at_8192_serves(tmp_path: Path, monkeypatch) -> None:
    hf = tmp_path / "hf"
    repo = hf / "hub" / "models--Qwen--Qwen3-8B"
    model_dir(repo / "snapshots", "abc", DENSE_QWEN3_8B, 15.26)
    (repo / "refs").mkdir(parents=True)
    (repo / "refs" / "main").write_text("abc")
    cfg = units_with(tmp_path, "q8", f'model_path = "Qwen/Qwen3-8B"\ncontext_length = 8192\ngpu_memory_gb = 23.5\n'
                                     f'[env]\nHF_HOME = "{hf}"\n')
    monkeypatch.setattr(ops_preflight, "gpu_total_gb", lambda cfg, remote=None: RTX_4090_GB)
    out = ops_preflight.plan(cfg)  # type: ignore[arg-type]
    p = out.prediction
    assert p.budget["mem_fraction_static"] == 0.704
    assert p.verdict != "cannot_serve", p.reasons
    expected = int((23.5 * 0.704 - 15.26) * GB // QWEN3_8B_CELL)  # free × m − weights, one cell a token
    assert p.kv_tokens == expected and 9_000 < expected < 9_800


# ---------------------------------------------------------------- 3: DP attention

QWEN3_235B = {"architectures": ["Qwen3MoeForCausalLM"], "num_hidden_layers": 94, "num_attention_heads": 64,
              "num_key_value_heads": 4, "head_dim": 128, "max_position_embeddings": 40960, "hidden_size": 4096,
              "vocab_size": 151936}


@pytest.mark.parametrize("args", [
    'dp_size = 8\nextra_args = ["--enable-dp-attention"]',
    'extra_args = ["--attn-dp-size", "8"]',  # 0.5.23's spelling
])
def test_dp_attention_splits_kv_heads_by_the_attention_group(tmp_path: Path, args: str) -> None:
    cfg = units_with(tmp_path, "big", f'model_path = "/m/Qwen3-235B-A22B"\ntp_size = 8\nmax_running_requests = 512\n'
                                      f'mem_fraction_static = 0.85\ngpus = [0, 1, 2, 3, 4, 5, 6, 7]\n{args}\n')
    shape = shape_from_config(QWEN3_235B, Path("config.json"))
    inp = inputs_from_shape(cfg, shape, gpu_free_gb=139.0, gpu_source="t", weights_bytes=int(438 * GB))  # type: ignore[arg-type]
    # attention tp = 8 / 8 = 1: every GPU keeps all 4 KV heads (SGLang's get_num_kv_heads(attn_tp_size))
    assert inp.kv_bytes_per_token == 4 * (128 + 128) * 94 * 2
    # and every GPU holds all of the attention layers' q/k/v/o and the embedding, the rest split by tp 8
    replicated = (94 * 4096 * 128 * (2 * 64 + 2 * 4) + 151936 * 4096) * 2
    assert inp.weights_bytes == int(438 * GB) // 8 + replicated - replicated // 8
    s = sizing_inputs(cfg, inp)  # type: ignore[arg-type]
    assert s.dp_size == 8
    p = predict(s)
    assert p.limits["requested"] == 512 // 8  # resolve_max_num_reqs: max_running per attention-DP worker
    assert p.kv_tokens == int(p.rest_gb * GB // (4 * 256 * 94 * 2))


def test_a_dp_attention_config_uses_its_tp_gpus(tmp_path: Path) -> None:
    body = 'model_path = "/m"\ntp_size = 8\ndp_size = 8\ngpus = [0, 1, 2, 3, 4, 5, 6, 7]\n'
    cfg = units_with(tmp_path, "dpa", body + 'extra_args = ["--enable-dp-attention"]\n')
    assert cfg.gpu_count == 8  # type: ignore[attr-defined]
    with pytest.raises(ConfigError, match="tp_size 8 × dp_size 8 needs 64 GPUs"):
        units_with(tmp_path, "dp", body)  # plain data parallelism: 8 replicas of tp 8


# ---------------------------------------------------------------- 4: 0.5.2 and 0.5.6's hybrid state cache


def test_0_5_2_turns_the_radix_cache_off_and_keeps_max_running_slots() -> None:
    p = predict(next80b(version="0.5.2", max_running_requests=64))
    assert p.mamba_slots == 64 and p.slots_per_request == 1 and p.limits["mamba"] == 64
    assert predict(next80b(version="0.5.2")).mamba_slots == 512  # none asked: 512
    assert predict(next80b(version="0.5.2", max_mamba_cache_size=100)).mamba_slots == 100
    kv = p.rest_gb - 64 * NEXT_PER_REQ / GB
    assert p.kv_tokens == int(kv * GB // NEXT_CELL)


def test_0_5_6_divides_the_slots_by_the_draft_tokens_and_overrides_an_explicit_size() -> None:
    spec = dict(speculative_algorithm="NEXTN", num_draft_tokens=4, draft_layers=1, version="0.5.6")
    p = predict(next80b(**spec))
    budget = p.rest_gb * 0.9 / 1.9 * GB
    assert p.mamba_slots == int(budget // NEXT_PER_REQ // 5)  # (1 + D) states a slot
    assert p.mamba_gb + p.intermediate_gb == pytest.approx(p.mamba_slots * NEXT_PER_REQ * 5 / GB)
    assert predict(next80b(max_mamba_cache_size=10, **spec)).mamba_slots == p.mamba_slots  # overridden
    assert p.slots_per_request == 3
    assert predict(next80b(version="0.5.9", **{k: v for k, v in spec.items() if k != "version"})).mamba_slots \
        != p.mamba_slots


# ---------------------------------------------------------------- 5: where an EAGLE draft's KV goes


def test_eagle_draft_kv_per_release() -> None:
    eagle = dict(speculative_algorithm="EAGLE", draft_layers=1, max_running_requests=48)
    alone = predict(dense(version="0.5.11", **eagle))
    assert alone.cell_bytes == QWEN3_8B_CELL  # 0.5.9-0.5.15: the target's pool alone
    assert predict(dense(version="0.5.18", **eagle)).cell_bytes == int(QWEN3_8B_CELL * (1 + 1 / 36))
    assert predict(dense(version="0.5.23", **eagle)).cell_bytes == QWEN3_8B_CELL + int(QWEN3_8B_CELL / 36)
    for version in ("0.4.6", "0.5.6"):  # init_memory_pool: + 48 × (3 steps × 1 + 4 draft) + 100 tokens
        p = predict(dense(version=version, **eagle))
        assert p.cell_bytes == QWEN3_8B_CELL
        assert p.kv_tokens == int(p.rest_gb * GB // QWEN3_8B_CELL) + 48 * 7 + 100


def test_mtp_draft_layers_come_from_the_targets_nextn_layers(tmp_path: Path) -> None:
    cfg = units_with(tmp_path, "ds", 'model_path = "/m/DeepSeek-V3"\ntp_size = 8\nmem_fraction_static = 0.85\n'
                                     '[speculative]\nalgorithm = "NEXTN"\n')
    shape = shape_from_config({**json.loads(json.dumps(QWEN3_235B)), "num_nextn_predict_layers": 1},
                              Path("config.json"))
    inp = inputs_from_shape(cfg, shape, gpu_free_gb=139.0, gpu_source="t", weights_bytes=int(600 * GB))  # type: ignore[arg-type]
    assert inp.draft_layers == 1
    assert memory.predict(sizing_inputs(cfg, inp)).cell_bytes > inp.kv_bytes_per_token  # type: ignore[arg-type]


# ---------------------------------------------------------------- 6: sliding-window pools

GPT_OSS_120B = {"architectures": ["GptOssForCausalLM"], "num_hidden_layers": 36, "num_attention_heads": 64,
                "num_key_value_heads": 8, "head_dim": 64, "sliding_window": 128, "max_position_embeddings": 131072,
                "layer_types": ["sliding_attention", "full_attention"] * 18}


@pytest.mark.parametrize("extra", [[], ["--disable-hybrid-swa-memory"], ["--swa-full-tokens-ratio", "0.5"]])
def test_gpt_oss_sizes_its_full_pool_beside_a_smaller_sliding_window_pool(tmp_path: Path, extra: list[str]) -> None:
    cfg = units_with(tmp_path, "oss", 'model_path = "/m/gpt-oss-120b"\nmem_fraction_static = 0.85\n'
                                      f'extra_args = {json.dumps(extra)}\n')
    shape = shape_from_config(GPT_OSS_120B, Path("config.json"))
    assert (shape.attention_layers, shape.swa_layers) == (18, 18)
    inp = inputs_from_shape(cfg, shape, gpu_free_gb=139.0, gpu_source="t", weights_bytes=int(61 * GB))  # type: ignore[arg-type]
    layer = 8 * (64 + 64) * 2
    p = predict(sizing_inputs(cfg, inp))  # type: ignore[arg-type]
    kv_bytes = p.rest_gb * GB
    if extra == ["--disable-hybrid-swa-memory"]:  # one pool, every layer a full one
        assert p.kv_tokens == int(kv_bytes // (36 * layer))
    else:  # HybridSWAPoolConfigurator: full tokens = bytes // (full + ratio × swa)
        ratio = 0.5 if extra else 0.8
        assert p.kv_tokens == int(kv_bytes // (18 * layer + ratio * 18 * layer))
        assert p.kv_tokens > int(kv_bytes // (36 * layer)) * 1.1


def test_up_to_0_5_9_the_swa_pool_is_split_from_an_every_layer_profile() -> None:
    layer = 8 * 128 * 2
    inp = dense(kv_cell_bytes=18 * layer, attention_layers=18, swa_cell_bytes=18 * layer, version="0.5.9")
    p = predict(inp)
    profiled = int(p.rest_gb * GB // (36 * layer))
    assert p.kv_tokens == int(profiled * 36 * layer / (18 * layer + 0.8 * 18 * layer))


def test_0_5_10_page_aligns_the_every_layer_profile_before_the_swa_split() -> None:
    """0.5.10 _resolve_token_capacity aligns the profiled tokens to the page, then _resolve_hybrid_swa_tokens
    splits them: a page-64 gpt-oss start lands a page off the 0.5.11+ direct solve."""
    layer = 8 * 128 * 2
    inp = dense(kv_cell_bytes=18 * layer, attention_layers=18, swa_cell_bytes=18 * layer, page_size=64, version="0.5.10")
    p = predict(inp)
    profiled = int(p.rest_gb * GB // (36 * layer)) // 64 * 64
    assert p.kv_tokens == int(profiled * 36 * layer / (18 * layer + 0.8 * 18 * layer)) // 64 * 64
    assert predict(replace(inp, version="0.5.12")).kv_tokens == int(p.rest_gb * GB // (1.8 * 18 * layer)) // 64 * 64


@pytest.mark.parametrize("version", ["0.5.2", "0.5.6", "0.5.7"])
def test_up_to_0_5_7_gpt_oss_has_one_pool_of_every_layer(version: str) -> None:
    """0.5.2-0.5.6 _handle_model_specific_adjustments sets disable_hybrid_swa_memory for gpt-oss; 0.5.7's
    is_hybrid_model gives a sliding pool to MiMoV2Flash only; 0.5.8's is_hybrid_swa_model lists gpt-oss."""
    layer = 8 * 128 * 2
    inp = dense(kv_cell_bytes=18 * layer, attention_layers=18, swa_cell_bytes=18 * layer, sliding_window=127,
                architecture="GptOssForCausalLM")
    old = predict(replace(inp, version=version))
    assert old.kv_tokens == int(old.rest_gb * GB // (36 * layer))
    new = predict(replace(inp, version="0.5.8"))
    assert new.kv_tokens > old.kv_tokens * 1.1  # its own SWA pool, 0.8 of the full one


def test_a_dflash_draft_beside_a_sliding_window_pool() -> None:
    """HybridSWAPoolConfigurator prices a DFlash draft by its own resolved cell from 0.5.19 (none when the
    draft's geometry is unknown), and not at all up to 0.5.18: never by the target's layers."""
    layer = 8 * 128 * 2
    swa = dict(kv_cell_bytes=18 * layer, attention_layers=18, swa_cell_bytes=18 * layer,
               speculative_algorithm="DFLASH", draft_layers=5, max_running_requests=8)
    assert predict(dense(version="0.5.18", **swa)).cell_bytes == 18 * layer
    assert predict(dense(version="0.5.23", **swa)).cell_bytes == 18 * layer
    assert predict(dense(version="0.5.23", draft_cell_bytes=5 * layer, **swa)).cell_bytes == 23 * layer


# ---------------------------------------------------------------- 7: the smaller ones


def test_paging_without_the_overlap_scheduler_takes_four_state_slots_from_0_5_18() -> None:
    inp = next80b(disable_overlap_schedule=True, page_size=64, version="0.5.23")
    assert memory.state_slots_per_request(inp, family("0.5.23")) == 4  # auto → extra_buffer for paging
    assert memory.state_slots_per_request(next80b(disable_overlap_schedule=True), family("0.5.23")) == 3


def test_an_explicit_max_running_is_capped_per_release() -> None:
    tiny = dict(free_before_gb=20.0, weights_gb=15.26, max_running_requests=10000)
    assert predict(dense(version="0.5.23", **tiny)).binding == "kv_half"  # 0.5.18+: min(asked, tokens // 2)
    p = predict(dense(version="0.5.11", **tiny))  # 0.5.11: min(asked, the 2048-4096 estimate)
    assert "kv_half" not in p.limits and p.max_running_requests == p.limits["auto"] == 2048
    p = predict(dense(version="0.5.6", **tiny))  # ≤ 0.5.9: the request pool of asked requests
    assert "kv_half" not in p.limits and p.max_running_requests == 10000


def test_a_multimodal_models_kv_budget_leaves_100_mb_from_0_5_18() -> None:
    for version, less in (("0.5.12", 0.0), ("0.5.18", 100 / 1024), ("0.5.23", 100 / 1024)):
        assert predict(dense(version=version)).rest_gb - predict(dense(version=version, multimodal=True)).rest_gb \
            == pytest.approx(less)


def test_0_5_18_prices_a_dflash_draft_by_its_own_cell() -> None:
    draft_cell = 8 * 256 * 5 * 2
    spec = dict(speculative_algorithm="DFLASH", draft_layers=5, draft_cell_bytes=draft_cell, max_running_requests=8)
    assert predict(dense(version="0.5.18", **spec)).cell_bytes == QWEN3_8B_CELL + draft_cell
    assert predict(dense(version="0.5.15", **spec)).cell_bytes == -(-QWEN3_8B_CELL * 41 // 36)


def test_a_vlms_automatic_fraction_is_scaled_by_its_vision_tower() -> None:
    vl = {"architectures": ["Qwen2_5_VLForConditionalGeneration"], "num_hidden_layers": 28, "num_attention_heads": 28,
          "num_key_value_heads": 4, "hidden_size": 3584, "vision_config": {"depth": 32, "hidden_size": 1280}}
    shape = shape_from_config(vl, Path("config.json"))
    assert shape.multimodal and shape.vit == (24, 1280)  # SGLang reads num_hidden_layers, 24 when absent
    h100 = 81559 / 1024
    plain = auto_mem_fraction(h100, multimodal=True)  # a VLM off the breakable allowlist: no prefill graph
    assert plain == round((81559 - max(512 + 8192 * 1.5 + 128 + 512, 10240)) / 81559, 3)
    factor = 0.95 * (1 - 0.1 * (1280**2 / 1024**2 - 1))
    assert auto_mem_fraction(h100, multimodal=True, vit=shape.vit) == pytest.approx(plain * factor)


def test_0_5_11_captures_no_piecewise_graph_for_qwen3_next() -> None:
    h200 = 143771 / 1024
    base = 512 + 8192 * 1.5 + 128 + 256 * 2
    assert auto_mem_fraction(h200, fam=family("0.5.11"), architecture="Qwen3NextForCausalLM") == \
        round((143771 - base) / 143771, 3)


def test_0_5_6_ignores_the_configs_own_two_slots(tmp_path: Path) -> None:
    from svcdiag.sglang.preflight import from_config_alone

    body = 'model_path = "/m"\nmax_mamba_cache_size = 2\nmax_running_requests = 8\n'
    assert from_config_alone(units_with(tmp_path, "new", body + 'sglang_version = "0.5.23"\n')) is not None  # type: ignore[arg-type]
    assert from_config_alone(units_with(tmp_path, "old", body + 'sglang_version = "0.5.6"\n')) is None  # type: ignore[arg-type]


def test_a_radix_less_gpt_oss_start_sizes_its_swa_pool_from_its_requests_on_0_5_23(tmp_path: Path) -> None:
    cfg = units_with(tmp_path, "oss", 'model_path = "/m/gpt-oss-120b"\nmem_fraction_static = 0.85\n'
                                      'max_running_requests = 64\nextra_args = ["--disable-radix-cache"]\n')
    shape = shape_from_config(GPT_OSS_120B, Path("config.json"))
    inp = inputs_from_shape(cfg, shape, gpu_free_gb=139.0, gpu_source="t", weights_bytes=int(61 * GB),  # type: ignore[arg-type]
                            gpu_total_gb=143771 / 1024)
    s = sizing_inputs(cfg, inp)  # type: ignore[arg-type]
    layer = 8 * (64 + 64) * 2
    # compute_swa_request_cap: (window + eviction 128 + page + page) × 64 requests + 2 chunks of 8,192 + page, the
    # window gpt_oss.py's get_attention_sliding_window_size gives: config.json's 128 − 1
    assert shape.sliding_window == 127
    swa_tokens = (127 + 128 + 1 + 1) * 64 + 2 * 8192 + 1
    p = predict(s)
    assert p.kv_tokens == int((p.rest_gb * GB - swa_tokens * 18 * layer) // (18 * layer))
    ratio = predict(sizing_inputs(units_with(tmp_path, "oss2", 'model_path = "/m/gpt-oss-120b"\n'  # type: ignore[arg-type]
                                             'mem_fraction_static = 0.85\nmax_running_requests = 64\n'), inp))
    assert ratio.kv_tokens == int(ratio.rest_gb * GB // (18 * layer * 1.8))  # the radix cache on: the 0.8 split



@pytest.mark.parametrize(("version", "from_requests"), [("0.5.13", False), ("0.5.14", True), ("0.5.18", True)])
def test_the_request_sized_swa_pool_starts_with_0_5_14(version: str, from_requests: bool) -> None:
    """0.5.14-0.5.18 SWAChunkCapPoolConfigurator sizes a radix-less start's sliding pool from its requests, as
    0.5.19+'s SWARequestCapPoolConfigurator; 0.5.13 splits by --swa-full-tokens-ratio."""
    layer = 8 * 128 * 2
    inp = dense(kv_cell_bytes=18 * layer, attention_layers=18, swa_cell_bytes=18 * layer, sliding_window=127,
                max_running_requests=64, disable_radix_cache=True, chunked_prefill_size=8192, version=version)
    p = predict(inp)
    swa_tokens = (127 + 128 + 1 + 1) * 64 + 2 * 8192 + 1
    capped = int((p.rest_gb * GB - swa_tokens * 18 * layer) // (18 * layer))
    assert (p.kv_tokens == capped) is from_requests
    assert (p.kv_tokens == int(p.rest_gb * GB // (1.8 * 18 * layer))) is not from_requests


# ---------------------------------------------------------------- a speculative hybrid's radix cache, 0.5.7-0.5.14


@pytest.mark.parametrize(("version", "rule"), [("0.5.7", None), ("0.5.8", None), ("0.5.9", "off"), ("0.5.10", "refuse"),
                                               ("0.5.12", "refuse"), ("0.5.13", "refuse"), ("0.5.14", None)])
def test_a_speculative_hybrid_keeping_the_radix_cache_per_release(version: str, rule: str | None) -> None:
    """0.5.9 turns a speculative Qwen3-Next's radix cache off (its slots are then the 48 requests), 0.5.10-0.5.13
    refuse it with SGLang's ValueError; 0.5.7-0.5.8 (NemotronH only in 0.5.8) and 0.5.14+ size it with the cache."""
    inp = next80b(speculative_algorithm="NGRAM", num_draft_tokens=8, version=version,
                  architecture="Qwen3NextForCausalLM")
    p = predict(inp)
    assert memory.spec_radix_rule(inp) == rule
    if rule == "refuse":
        assert (p.failure, p.kv_tokens, p.max_running_requests) == ("bad_arguments", 0, 0)
        assert p.refusal is not None and p.refusal.startswith("ValueError: Speculative decoding for Qwen3NextForCausalLM")
        # a start SGLang ran (read from its log), a ROCm host, an explicit extra_buffer or no radix cache: sized
        for other in ({"logged": True}, {"rocm": True}, {"mamba_scheduler_strategy": "extra_buffer"},
                      {"disable_radix_cache": True}):
            assert predict(memory.replace(inp, **other)).failure is None, other
        assert predict(memory.replace(inp, rocm=True)).slots_per_request == 1  # is_hip(): the radix cache off
    elif rule == "off":
        assert p.failure is None and (p.slots_per_request, p.mamba_slots, p.max_running_requests) == (1, 48, 48)
    else:
        assert p.failure is None and p.slots_per_request in (3, 5) and p.mamba_slots > 48
    other_arch = predict(memory.replace(inp, architecture="Qwen3_5ForCausalLM"))  # not one server_args names
    assert other_arch.failure is None and other_arch.slots_per_request != 1


@pytest.mark.parametrize("version", ["0.4.6", "0.5.6", "0.5.9"])
def test_up_to_0_5_9_the_request_estimate_is_taken_before_the_page_alignment(version: str) -> None:
    """init_memory_pool estimates max_num_reqs (tokens / context × 512) from profile_max_num_token's figure,
    then rounds the pool down to the page: at page 64 the cap can be one above what the aligned pool gives."""
    inp = dense(context_len=60007, page_size=64, free_before_gb=43.9, weights_gb=27.5, mem_fraction_static=0.8,
                kv_cell_bytes=QWEN3_8B_CELL // 8, version=version)
    p = predict(inp)
    profiled = int(p.rest_gb * GB // p.cell_bytes)
    assert p.kv_tokens == profiled // 64 * 64 < profiled
    want = min(max(int(profiled / 60007 * 512), 2048), 4096)
    assert want == min(max(int(p.kv_tokens / 60007 * 512), 2048), 4096) + 1  # the case tells the two apart
    assert p.limits["auto" if version != "0.4.6" else "req_pool"] == want + (version == "0.4.6")


def test_the_fewest_slots_a_request_takes_follow_the_release_and_the_architecture(tmp_path: Path) -> None:
    """A config alone can be called CANNOT SERVE only at the fewest slots a request may take: on 0.5.9 a
    speculative hybrid of a listed architecture takes one (its radix cache off), another three; unread, one."""
    from svcdiag.sglang.preflight import fewest_slots_per_request

    cfg = units_with(tmp_path, "s", 'model_path = "/m"\nmax_mamba_cache_size = 2\nsglang_version = "0.5.9"\n'
                                    '[speculative]\nalgorithm = "EAGLE3"\n')
    assert fewest_slots_per_request(cfg, "Qwen3NextForCausalLM") == 1
    assert fewest_slots_per_request(cfg, "Qwen3_5ForCausalLM") == 3
    assert fewest_slots_per_request(cfg) == 1
    assert fewest_slots_per_request(memory.replace(cfg, sglang_version="0.5.12"), "Qwen3NextForCausalLM") == 3
