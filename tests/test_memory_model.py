"""svcdiag.sglang.memory.predict: SGLang's own sizing arithmetic, release by release."""

from __future__ import annotations

from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from svcdiag.sglang.memory import (
    GB,
    SizingInputs,
    auto_mem_fraction,
    family,
    predict,
    state_slots_per_request,
    vlm_factor,
)

# Qwen3.6-27B's public config.json: 64 layers, every 4th full attention (16), 4 KV heads × 256,
# 48 linear layers of 48 value heads × 128 × 128 (float32 SSM) and a (4 − 1)-wide conv state.
CELL_27B = 4 * (256 + 256) * 16 * 2
PER_REQ_27B = 3 * (2 * 16 * 128 + 48 * 128) * 2 * 48 + 48 * 128 * 128 * 4 * 48
DRAFT_CELL = 8 * (128 + 128) * 5 * 2  # a 5-layer DFlash draft, 8 KV heads × 128


def seed(**kw: object) -> SizingInputs:
    base: dict[str, object] = dict(free_before_gb=139.0, weights_gb=51.4, kv_cell_bytes=CELL_27B, context_len=32768,
                                   attention_layers=16, mem_fraction_static=0.85, mamba_per_req_bytes=PER_REQ_27B,
                                   max_running_requests=8, version="0.5.23")
    base.update(kw)
    return SizingInputs(**base)  # type: ignore[arg-type]


@pytest.mark.parametrize(("version", "name"), [
    ("0.3.6", "0.3.6"), ("0.3.6.post1", "0.4.0"), ("0.4.0", "0.4.0"), ("0.4.0.post1", "0.4.3"), ("0.4.3.post2", "0.4.3"),
    ("0.4.3.post3", "0.4.3.post3"), ("0.4.4.post3", "0.4.3.post3"), ("0.4.4.post4", "0.4.4"), ("0.4.5", "0.4.4"),
    ("0.4.5.post2", "0.4.4"), ("0.4.5.post3", "0.4"), ("0.4.6", "0.4"), ("0.4.6.post5", "0.4"), ("0.4.7", "0.4.7"),
    ("0.4.7.post1", "0.4.8"), ("0.4.8.post1", "0.4.8"), ("0.4.9", "0.4.9"), ("0.4.9.post2", "0.4.9"),
    ("0.4.9.post3", "0.5.2"), ("0.5.2", "0.5.2"), ("0.5.3", "0.5.3"), ("0.5.4", "0.5.6"), ("0.5.6", "0.5.6"),
    ("0.5.7", "0.5.9"), ("0.5.9", "0.5.9"), ("0.5.10", "0.5.10"), ("0.5.11", "0.5.12"), ("0.5.12", "0.5.12"),
    ("0.5.13", "0.5.13"), ("0.5.14", "0.5.15"), ("0.5.17", "0.5.15"), ("0.5.18", "0.5.18"), ("0.5.19", "0.5.19"), ("0.5.20", "0.5.20"), ("0.5.21", "0.5.20"), ("0.5.22", "0.5.22"), ("0.5.23", "0.5.23"), ("0.6.0", "0.5.23"), (None, "0.5.23"), ("not-a-version", "0.5.23"),
])
def test_release_families(version: str | None, name: str) -> None:
    assert family(version).name == name


def test_the_seeds_config_serves_nobody_on_either_release() -> None:
    # dflash-tp1-mr8: max_mamba_cache_size 2 at ≥ 3 slots per request is zero requests, whatever the memory
    for version in ("0.5.15", "0.5.23"):
        p = predict(seed(max_mamba_cache_size=2, speculative_algorithm="DFLASH", draft_layers=5,
                         draft_cell_bytes=DRAFT_CELL, version=version))
        assert p.max_running_requests == 0 and p.binding == "mamba"
        assert p.failure == "mamba_cache_too_small"


def test_dflash_draft_kv_is_paid_from_the_targets_budget() -> None:
    plain = predict(seed(max_mamba_cache_size=24))
    with_draft = predict(seed(max_mamba_cache_size=24, speculative_algorithm="DFLASH", draft_layers=5,
                              draft_cell_bytes=DRAFT_CELL, num_draft_tokens=16))
    assert with_draft.cell_bytes == CELL_27B + DRAFT_CELL
    # the same bytes for the KV pool (the intermediate state aside) buy target/(target+draft) as many tokens
    kv_gb = with_draft.rest_gb - with_draft.mamba_gb - with_draft.intermediate_gb
    assert with_draft.kv_tokens == int(kv_gb * GB // (CELL_27B + DRAFT_CELL))
    assert with_draft.kv_tokens < plain.kv_tokens * CELL_27B / (CELL_27B + DRAFT_CELL)


def test_older_dflash_scales_the_targets_cell_by_layers() -> None:
    p = predict(seed(version="0.5.15", speculative_algorithm="DFLASH", draft_layers=5, draft_cell_bytes=DRAFT_CELL))
    assert p.cell_bytes == -(-CELL_27B * 21 // 16)


def test_a_dflash_start_gets_several_times_fewer_mamba_slots() -> None:
    flags = dict(mamba_scheduler_strategy="no_buffer")
    plain = predict(seed(**flags))
    spec = predict(seed(speculative_algorithm="DFLASH", draft_layers=5, draft_cell_bytes=DRAFT_CELL, **flags))
    assert plain.mamba_slots and spec.mamba_slots
    assert 5.5 < plain.mamba_slots / spec.mamba_slots < 7  # (1 + 16/3) with 3 slots per request
    # the ratio solve, exactly: K = (budget − per·(1+D)) // (per·(1 + D/ratio))
    budget = spec.rest_gb * 0.9 / 1.9 * GB
    assert spec.mamba_slots == int((budget - PER_REQ_27B * 17) // (PER_REQ_27B * (1 + 16 / 3)))


@pytest.mark.parametrize(("flags", "version", "slots"), [
    ({"disable_radix_cache": True}, "0.5.23", 1),
    ({"mamba_scheduler_strategy": "no_buffer"}, "0.5.23", 3),
    ({}, "0.5.23", 5),  # auto → extra_buffer with the overlap scheduler
    ({"disable_overlap_schedule": True}, "0.5.23", 3),  # auto → no_buffer
    ({"mamba_scheduler_strategy": "extra_buffer", "disable_overlap_schedule": True}, "0.5.23", 4),
    ({"mamba_scheduler_strategy": "extra_buffer_lazy"}, "0.5.23", 4),
    ({}, "0.5.9", 3),  # auto → no_buffer
    ({"mamba_scheduler_strategy": "extra_buffer"}, "0.5.9", 5),
    ({"mamba_scheduler_strategy": "extra_buffer", "speculative_algorithm": "EAGLE"}, "0.5.9", 4),
    ({"mamba_scheduler_strategy": "extra_buffer", "speculative_algorithm": "EAGLE"}, "0.5.12", 5),
    ({"mamba_scheduler_strategy": "extra_buffer", "disable_overlap_schedule": True}, "0.5.12", 4),
    ({}, "0.5.12", 3),
    ({"slots_per_request": 7}, "0.5.23", 7),  # the logged figure wins
])
def test_state_slots_per_request_from_the_flags(flags: dict[str, object], version: str, slots: int) -> None:
    inp = seed(version=version, **flags)
    assert state_slots_per_request(inp, family(version)) == slots


def test_max_total_tokens_and_dp_caps() -> None:
    p = predict(seed(mamba_per_req_bytes=None, max_total_tokens=10_000, max_running_requests=64, dp_size=4))
    assert p.kv_tokens == 10_000
    assert p.limits["requested"] == 16 and p.max_running_requests == 16 and p.binding == "requested"


def test_legacy_request_pool_is_one_larger() -> None:
    p = predict(seed(version="0.4.6", mamba_per_req_bytes=None, max_running_requests=None, context_len=131072))
    assert p.max_running_requests == 4097 and p.binding == "req_pool"  # 4096 + 1


def test_weights_beyond_the_fraction_is_not_enough_memory() -> None:
    p = predict(seed(weights_gb=130.0))
    assert p.failure == "not_enough_memory" and p.kv_tokens == 0 and p.max_running_requests == 0


def test_auto_mem_fraction_by_gpu_size() -> None:
    # 0.5.23 memory_hook: 512 + 1.5 MB per chunked-prefill token + tp/8 GB + 2 MB per decode graph batch
    # + 8 MB per prefill graph size, at least 10 GB on a card over 60 GB
    h200 = 139.81 * 1024
    assert auto_mem_fraction(139.81, chunked_prefill_size=8192) == round((h200 - 512 - 12288 - 128 - 512 - 58 * 8) / h200, 3)
    assert auto_mem_fraction(80.0, chunked_prefill_size=2048) == round((80 * 1024 - 10240) / (80 * 1024), 3)
    # 0.5.9: no prefill graph; 8,192 chunked prefill and 256 graph batches on an 80 GB card
    assert auto_mem_fraction(80.0, fam=family("0.5.9")) == round((80 * 1024 - 512 - 12288 - 128 - 512) / (80 * 1024), 3)
    assert auto_mem_fraction(80.0, fam=family("0.4.6")) == 0.88  # 0.4.6: by tp on a card up to 80 GB


@settings(max_examples=200, deadline=None)
@given(free=st.floats(20, 200), weights=st.floats(1, 100), mfs=st.floats(0.3, 0.94),
       hybrid=st.booleans(), spec=st.sampled_from([None, "DFLASH", "EAGLE"]),
       version=st.sampled_from(["0.4.6", "0.5.9", "0.5.15", "0.5.23"]), mr=st.one_of(st.none(), st.integers(1, 512)))
def test_predictions_are_consistent(free: float, weights: float, mfs: float, hybrid: bool, spec: str | None,
                                    version: str, mr: int | None) -> None:
    inp = seed(free_before_gb=free, weights_gb=weights, mem_fraction_static=mfs, version=version,
               mamba_per_req_bytes=PER_REQ_27B if hybrid else None, speculative_algorithm=spec,
               max_running_requests=mr if mr or not (hybrid and spec) else 4, draft_layers=1 if spec else None,
               draft_cell_bytes=DRAFT_CELL if spec == "DFLASH" else None)
    p = predict(inp)
    assert p.kv_tokens >= 0 and p.max_running_requests >= 0
    assert p.max_running_requests == max(0, min(p.limits.values()))
    assert p.limits[p.binding] == min(p.limits.values())
    assert (p.failure is None) == (p.max_running_requests > 0 and p.kv_tokens > 0)
    more = predict(replace(inp, mem_fraction_static=mfs + 0.01))
    assert more.kv_tokens >= p.kv_tokens or hybrid  # a hybrid's slots take their share first
    assert (more.mamba_slots or 0) >= (p.mamba_slots or 0) or p.failure is not None


# ---------------------------------------------------------------- the sizing flags of extra_args


@settings(max_examples=200, deadline=None)
@given(ratio=st.floats(0.01, 10), tokens=st.integers(1, 10**8), page=st.integers(1, 256),
       strategy=st.sampled_from(["auto", "no_buffer", "extra_buffer", "extra_buffer_lazy"]),
       radix=st.booleans(), overlap=st.booleans(), equals=st.booleans(),
       noise=st.lists(st.sampled_from(["--trust-remote-code", "--log-level", "info", "--enable-metrics"]),
                      max_size=4))
def test_sizing_flags_are_read_from_extra_args_in_either_spelling(ratio: float, tokens: int, page: int,
                                                                  strategy: str, radix: bool, overlap: bool,
                                                                  equals: bool, noise: list[str]) -> None:
    from svcdiag.sglang.preflight import sizing_flags

    def opt(name: str, value: object) -> list[str]:
        return [f"--{name}={value}"] if equals else [f"--{name}", str(value)]

    args = [*opt("mamba-full-memory-ratio", ratio), *opt("max-total-tokens", tokens), *opt("page-size", page),
            *opt("mamba-scheduler-strategy", strategy)]
    args += ["--disable-radix-cache"] * radix + ["--disable-overlap-schedule"] * overlap
    f = sizing_flags(tuple(noise + args + noise[:1]))
    assert (f.mamba_full_memory_ratio, f.max_total_tokens, f.page_size) == (ratio, tokens, page)
    assert (f.mamba_scheduler_strategy, f.disable_radix_cache, f.disable_overlap_schedule) == (strategy, radix, overlap)


def test_unreadable_sizing_flags_fall_back_to_sglangs_defaults() -> None:
    from svcdiag.sglang.preflight import sizing_flags

    f = sizing_flags(("--page-size", "big", "--mamba-full-memory-ratio", "--max-total-tokens"))
    assert (f.page_size, f.mamba_full_memory_ratio, f.max_total_tokens) == (1, 0.9, None)


def test_the_decode_graph_reserve_follows_max_running_requests_from_0_5_22() -> None:
    """0.5.22+ memory_hook caps a default decode graph max_bs at max_running_requests; 0.5.19-0.5.21
    reserve for the card's 512 whatever the cap (oracle tables sglang-0.5.19/20/22.jsonl)."""
    from svcdiag.sglang.memory import auto_mem_fraction

    h200 = 143169 / 1024
    for_64 = {v: auto_mem_fraction(h200, tp_size=8, attn_dp_size=8, fam=family(v), max_running_requests=64)
              for v in ("0.5.19", "0.5.21", "0.5.22")}
    assert for_64["0.5.19"] == for_64["0.5.21"] < for_64["0.5.22"]
    # a 24 GB card: 0.5.19 keeps 0.5.18's chunked prefill 2048 / graph 80 at tp 8, 0.5.20 takes 4096 / 160
    l4 = 22563 / 1024
    assert auto_mem_fraction(l4, tp_size=8, fam=family("0.5.19")) > auto_mem_fraction(l4, tp_size=8, fam=family("0.5.20"))


def test_fewer_requests_than_dp_workers_serve_one_each_only_from_0_5_23() -> None:
    """resolve_max_num_reqs: 0.5.23 takes max(1, asked // attn_dp_size); 0.5.22 and before give each
    worker asked // dp, 0 when fewer are asked than there are workers."""
    kw = {"mamba_per_req_bytes": None, "max_total_tokens": 10_000, "max_running_requests": 2, "dp_size": 4}
    assert predict(seed(version="0.5.23", **kw)).max_running_requests == 1
    assert predict(seed(version="0.5.22", **kw)).max_running_requests == 0


def test_before_0_4_5_post3_the_automatic_fraction_is_by_tp_alone_on_a_big_card() -> None:
    """0.4.0-0.4.5.post2 server_args.py: 0.88 at tp 1 on any card; 0.4.5.post3+ leave a 141 GB card 13 GB."""
    from svcdiag.sglang.memory import auto_mem_fraction

    h200 = 143771 / 1024
    assert auto_mem_fraction(h200, tp_size=1, fam=family("0.4.0")) == 0.88
    assert auto_mem_fraction(h200, tp_size=8, fam=family("0.4.5.post2")) == 0.81
    assert auto_mem_fraction(h200, tp_size=1, fam=family("0.4.6")) == (143771 - 13 * 1024) / 143771
    assert auto_mem_fraction(80, tp_size=1, fam=family("0.4.0")) == auto_mem_fraction(80, tp_size=1, fam=family("0.4.6"))


def test_an_eagle_start_before_0_4_3_post3_keeps_its_target_pool_and_request_estimate() -> None:
    # SGLang's docs CI, 2025-01-27 (main between 0.4.1.post7 and 0.4.2): Llama-2-7b + EAGLE (5 steps, topk 8, 64
    # draft tokens) at 0.7 on an H100, 78.81 GB free before and 66.17 after loading: 87,096 tokens, 4097 requests
    llama2 = dict(free_before_gb=78.81, weights_gb=12.64, free_after_load_gb=66.17, kv_cell_bytes=524288,
                  context_len=4096, attention_layers=32, mem_fraction_static=0.7, speculative_algorithm="EAGLE",
                  draft_layers=1, num_draft_tokens=64, speculative_num_steps=5, speculative_eagle_topk=8)
    alone = predict(SizingInputs(**llama2, version="0.4.2"))  # type: ignore[arg-type]
    assert abs(alone.kv_tokens - 87096) <= 2  # the log's figures are rounded to 0.01 GB
    assert alone.max_running_requests == 4097
    # 0.4.3.post3-0.4.4.post3: 32 requests, the draft's extra tokens in the shared pool; 0.4.4.post4 on: 48
    for version, reqs in (("0.4.4", 32), ("0.4.4.post3", 32), ("0.4.4.post4", 48), ("0.4.5", 48), ("0.4.6", 48)):
        shared = predict(SizingInputs(**llama2, version=version))  # type: ignore[arg-type]
        assert shared.max_running_requests == reqs
        assert shared.kv_tokens == alone.kv_tokens + reqs * (5 * 8 + 64) + 100


def test_0_3_6_gives_tp_8_more_of_the_card_than_0_4_0() -> None:
    """0.3.6 server_args.py __post_init__: 0.82 at tp 8 (0.4.0: 0.81); tp 1-4 and 16 the same."""
    h100 = 81090 / 1024
    assert auto_mem_fraction(h100, tp_size=8, fam=family("0.3.6")) == 0.82
    assert auto_mem_fraction(h100, tp_size=8, fam=family("0.4.0")) == 0.81
    for tp in (1, 2, 4, 16):
        assert auto_mem_fraction(h100, tp_size=tp, fam=family("0.3.6")) == \
            auto_mem_fraction(h100, tp_size=tp, fam=family("0.4.0"))


def _dense(**kw: object) -> SizingInputs:
    base: dict[str, object] = dict(free_before_gb=78.5, weights_gb=7.72, kv_cell_bytes=4 * 128 * 2 * 28 * 2,
                                   context_len=32768, mem_fraction_static=0.8, gpu_total_gb=81090 / 1024,
                                   mamba_per_req_bytes=None, max_running_requests=None, version="0.4.0")
    base.update(kw)
    return SizingInputs(**base)  # type: ignore[arg-type]


def test_up_to_0_4_0_a_vlm_runs_with_95_percent_of_its_fraction() -> None:
    """0.3.6-0.4.0 ModelRunner.__init__: `self.mem_fraction_static *= 0.95` for a multimodal model,
    given or automatic (Qwen2-VL-7B: 0.8 → 0.76), up to 0.4.4.post3 (read from every wheel)."""
    text, vlm = predict(_dense()), predict(_dense(multimodal=True))
    assert vlm.mem_fraction_static == pytest.approx(0.76)
    assert vlm.kv_tokens < text.kv_tokens
    assert predict(_dense(multimodal=True, mem_fraction_static=None)).mem_fraction_static == pytest.approx(0.88 * 0.95)
    assert predict(_dense(multimodal=True, version="0.3.6")).mem_fraction_static == pytest.approx(0.76)
    assert predict(_dense(multimodal=True, version="0.4.3.post2")).mem_fraction_static == pytest.approx(0.76)
    assert predict(_dense(multimodal=True, version="0.4.4.post3")).mem_fraction_static == pytest.approx(0.76)


def test_0_4_4_post4_to_0_4_8_a_vlm_runs_with_90_percent_and_0_4_9_moves_it_to_the_automatic_one() -> None:
    """ModelRunner's `self.mem_fraction_static *= 0.90` (0.4.4.post4-0.4.8.post1 wheels, given or
    automatic: the 0.4.6.post1 table's Qwen2.5-VL 0.8 → 0.72); 0.4.9-0.4.9.post2 server_args.py
    multiplies only the automatic one by 0.90; 0.4.9.post3+ scale it by the vision tower instead."""
    h100 = 81090 / 1024
    for version in ("0.4.4.post4", "0.4.5.post2", "0.4.6", "0.4.6.post1", "0.4.7", "0.4.8.post1"):
        assert predict(_dense(multimodal=True, version=version)).mem_fraction_static == pytest.approx(0.72), version
        assert predict(_dense(version=version)).mem_fraction_static == 0.8, version
    auto = auto_mem_fraction(h100, fam=family("0.4.9"))
    assert predict(_dense(multimodal=True, version="0.4.9", mem_fraction_static=None)).mem_fraction_static == \
        pytest.approx(auto * 0.90)
    assert predict(_dense(multimodal=True, version="0.4.9.post2")).mem_fraction_static == 0.8  # given: kept
    assert predict(_dense(multimodal=True, version="0.4.9.post3", mem_fraction_static=None)).mem_fraction_static \
        == pytest.approx(auto)  # no vision tower given: adjust_mem_fraction_for_vlm leaves it
    assert predict(_dense(multimodal=True, version="0.4.9.post3", mem_fraction_static=None, vit=(32, 1280))) \
        .mem_fraction_static == pytest.approx(auto * vlm_factor((32, 1280)))


def test_up_to_0_5_6_the_eagle_headroom_rescues_a_budget_just_below_zero() -> None:
    """init_memory_pool adds max_num_reqs × (steps × topk + D) + 100 to profile_max_num_token's figure
    whatever its sign and raises only on a sum ≤ 0 (0.4.7's table: Llama-70B at tp 8 on an L4, 320
    tokens from a −116-token profile); from 0.5.9 the draft's KV is outside the pool: no rescue."""
    from svcdiag.sglang.memory import eagle_extra_tokens

    just_below = _dense(free_before_gb=20.0, weights_gb=16.001, version="0.4.6", speculative_algorithm="EAGLE")
    p = predict(just_below)
    assert p.rest_gb < 0 and p.failure is None
    assert p.kv_tokens == int(p.rest_gb * GB // just_below.kv_cell_bytes) + \
        eagle_extra_tokens(just_below, family("0.4.6"), 48)
    assert predict(replace(just_below, speculative_algorithm=None)).failure == "not_enough_memory"
    assert predict(replace(just_below, version="0.5.9")).failure == "not_enough_memory"
    assert predict(replace(just_below, weights_gb=17.0)).failure == "not_enough_memory"  # the sum ≤ 0


def test_0_4_7_has_its_own_automatic_fraction() -> None:
    """0.4.7 server_args.py __post_init__: tp's table up to 80 GB, 0.88 above, a card over 96 GB
    min(m + 48 GB·(1 − m) / capacity, (capacity − 18 GB) / capacity), 0.79 over 180,000 MB, a
    speculative start × 0.95 on the smaller cards; 0.4.7.post1 has 0.5.2's reserve table."""
    h100, h200, b200 = 81090 / 1024, 143169 / 1024, 183359 / 1024
    fam = family("0.4.7")
    assert auto_mem_fraction(h100, tp_size=4, fam=fam) == 0.85
    assert auto_mem_fraction(h100, tp_size=4, fam=fam, speculative_algorithm="EAGLE") == pytest.approx(0.85 * 0.95)
    assert auto_mem_fraction(h200, fam=fam) == pytest.approx(min(0.88 + 48 * 1024 * 0.12 / 143169,
                                                                 (143169 - 18 * 1024) / 143169))
    assert auto_mem_fraction(b200, fam=fam) == 0.79
    assert auto_mem_fraction(h100, tp_size=4, fam=family("0.4.7.post1")) == \
        auto_mem_fraction(h100, tp_size=4, fam=family("0.5.2"))


def test_gemma_3_is_served_text_only_unless_enable_multimodal() -> None:
    """ModelConfig.__init__'s mm_disabled_models (0.4.6+): Gemma 3 and Llama 4 are not multimodal
    without --enable-multimodal, so no VLM fraction; an architecture on multimodal_model_archs is one
    without a vision_config (Qwen3.5's text_config-only checkpoint)."""
    from pathlib import Path, PurePosixPath

    from svcdiag.config.service import ServiceConfig
    from svcdiag.sglang.modelinfo import shape_from_config
    from svcdiag.sglang.preflight import inputs_from_shape

    gemma = {"architectures": ["Gemma3ForConditionalGeneration"], "model_type": "gemma3",
             "text_config": {"num_hidden_layers": 62, "num_attention_heads": 32, "num_key_value_heads": 16,
                             "head_dim": 128, "hidden_size": 5376, "max_position_embeddings": 131072},
             "vision_config": {"num_hidden_layers": 27, "hidden_size": 1152}, "torch_dtype": "bfloat16"}
    shape = shape_from_config(gemma, PurePosixPath("config.json"))
    assert not shape.multimodal and shape.multimodal_opt_in

    def multimodal(version: str, *extra: str) -> bool:
        cfg = ServiceConfig(name="g", path=Path("g.toml"), model_path="google/gemma-3-27b-it",
                            sglang_version=version, extra_args=extra)
        inp = inputs_from_shape(cfg, shape, weights_bytes=51 * 2**30, gpu_free_gb=78.5, gpu_source="test")
        return inp.multimodal and inp.vit is not None

    assert not multimodal("0.5.23") and not multimodal("0.4.6")
    assert multimodal("0.5.23", "--enable-multimodal") and multimodal("0.4.5.post3")
    qwen35 = {"architectures": ["Qwen3_5ForConditionalGeneration"], "model_type": "qwen3_5",
              "text_config": gemma["text_config"], "torch_dtype": "bfloat16"}
    assert shape_from_config(qwen35, PurePosixPath("config.json")).multimodal


def test_up_to_0_4_6_an_asked_cap_sizes_its_own_request_pool() -> None:
    """init_memory_pool builds ReqToTokenPool(size=max_running_requests + 1) when one is asked: 4,096
    asked on a pool whose 2,048-4,096 estimate is 2,364 runs 4,096, not 2,365."""
    small = _dense(free_before_gb=43.9, weights_gb=16.425, kv_cell_bytes=8 // 8 * 128 * 2 * 80 * 2,
                   context_len=131072, mem_fraction_static=0.9, max_running_requests=4096)
    p = predict(small)
    assert 2048 < p.kv_tokens / 131072 * 512 < 4096  # the estimate is below what was asked
    assert p.max_running_requests == 4096 and p.limits["req_pool"] == 4097
    assert predict(replace(small, max_running_requests=None)).limits["req_pool"] == \
        min(max(int(p.kv_tokens / 131072 * 512), 2048), 4096) + 1
    assert predict(replace(small, version="0.4.6")).max_running_requests == 4096


def test_up_to_0_4_0_dp_attention_keeps_the_whole_tp() -> None:
    """0.3.6-0.4.0: --enable-dp-attention sets dp_size = tp_size, but each ModelRunner sizes its
    KV with get_num_kv_heads(tp_size) and each scheduler keeps the whole max_running_requests
    (tp_worker.py); 0.4.6 splits both over the attention DP ranks."""
    from pathlib import Path, PurePosixPath

    from svcdiag.config.service import ServiceConfig
    from svcdiag.sglang.modelinfo import shape_from_config
    from svcdiag.sglang.preflight import attn_dp_size, inputs_from_shape, sizing_inputs

    llama8b = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "num_hidden_layers": 32,
               "num_attention_heads": 32, "num_key_value_heads": 8, "hidden_size": 4096,
               "max_position_embeddings": 131072, "torch_dtype": "bfloat16"}
    shape = shape_from_config(llama8b, PurePosixPath("llama/config.json"))

    def run(version: str):
        cfg = ServiceConfig(name="dp", path=Path("dp.toml"), model_path="llama", tp_size=8, dp_size=8,
                            mem_fraction_static=0.8, max_running_requests=64,
                            extra_args=("--enable-dp-attention",), sglang_version=version)
        inp = inputs_from_shape(cfg, shape, gpu_free_gb=78.5, gpu_source="test", weights_bytes=16 * GB,
                                gpu_total_gb=81090 / 1024)
        return attn_dp_size(cfg), predict(sizing_inputs(cfg, inp))

    (dp_old, old), (dp_new, new) = run("0.4.0"), run("0.4.6")
    assert (dp_old, dp_new) == (1, 8)
    mid = run("0.4.3.post2")[1]  # get_attention_tp_size() and the asked cap // dp_size already
    assert (mid.cell_bytes, mid.kv_tokens, mid.max_running_requests) == (new.cell_bytes, new.kv_tokens, 8)
    assert old.cell_bytes == 1 * 128 * 2 * 32 * 2 and new.cell_bytes == 8 * 128 * 2 * 32 * 2
    assert old.max_running_requests == 64 and new.max_running_requests == 8
    assert run("0.3.6")[0] == 1


# ---------------------------------------------------------------- the attention backend's page size (SM100)

# gpt-oss-120b per GPU at tp 1: 18 full and 18 sliding layers, 8 KV heads × (64 + 64) × 2 bytes each
GPT_OSS_LAYER = 8 * (64 + 64) * 2


def dense(**kw: object) -> SizingInputs:
    """Qwen3-8B-like: 36 layers of 8 KV heads × 128, on a B200 (177.6 GB free) unless told otherwise."""
    base: dict[str, object] = dict(free_before_gb=177.6, weights_gb=16.4, kv_cell_bytes=8 * 256 * 36 * 2,
                                   context_len=40960, mem_fraction_static=0.8, version="0.5.23", gpu_sm=100)
    base.update(kw)
    return SizingInputs(**base)  # type: ignore[arg-type]


@pytest.mark.parametrize(("name", "sm"), [
    ("NVIDIA B200", 100), ("NVIDIA GB200", 100), ("NVIDIA B300 SXM6 AC", 100), ("B200-192GB", 100),
    ("NVIDIA H200", None), ("NVIDIA H100 80GB HBM3", None), ("NVIDIA GeForce RTX 5090", None),
    ("NVIDIA RTX PRO 6000 Blackwell Server Edition", None), ("NVIDIA L40S", None), ("", None), (None, None),
])
def test_the_card_name_says_whether_it_is_sm100(name: str | None, sm: int | None) -> None:
    from svcdiag.sglang.memory import gpu_sm

    assert gpu_sm(name) == sm


def test_a_dense_model_on_a_b200_sizes_at_page_64_from_0_5_7() -> None:
    """0.5.7+ _handle_attention_backend_compatibility picks trtllm_mha on SM100, which turns page
    size 1 into 64: the pool is rounded down to 64 tokens, on an H200 (no SM) or 0.5.6 it is not."""
    from svcdiag.sglang.memory import attention_page

    b200 = predict(dense())
    unknown = predict(dense(gpu_sm=None))
    assert attention_page(dense()) == (64, False)
    assert b200.kv_tokens % 64 == 0 and 0 <= unknown.kv_tokens - b200.kv_tokens < 64
    assert unknown.kv_tokens % 64 != 0  # the case is one the page changes
    assert attention_page(dense(version="0.5.6")) == (1, False)  # 0.5.6's default on SM100 is flashinfer
    assert attention_page(dense(page_size=32)) == (32, False)  # trtllm_mha takes 16 / 32 / 64 as they are


@pytest.mark.parametrize(("algo", "topk", "page", "version", "expected"), [
    ("EAGLE3", 1, 1, "0.5.23", 64),  # top-k 1 at page 1: trtllm_mha
    ("EAGLE3", None, 1, "0.5.23", 1),  # top-k not given yet when the backend is picked: flashinfer
    ("EAGLE3", 4, 1, "0.5.23", 1),
    ("NGRAM", None, 1, "0.5.23", 1),
    ("DFLASH", None, 1, "0.5.23", 64),  # 0.5.23 _forces_eagle_topk_one
    ("DFLASH", None, 1, "0.5.22", 1),
    ("EAGLE3", 1, 128, "0.5.15", 128),  # page > 1 with top-k: not the topk-one case, flashinfer keeps 128
])
def test_speculative_decoding_picks_trtllm_mha_only_at_top_k_one(algo: str, topk: int | None, page: int,
                                                                 version: str, expected: int) -> None:
    from svcdiag.sglang.memory import attention_page

    inp = dense(speculative_algorithm=algo, speculative_eagle_topk=topk, page_size=page, version=version)
    assert attention_page(inp)[0] == expected


def test_gpt_oss_on_a_b200_gets_page_64_and_on_0_5_8_to_0_5_9_one_pool() -> None:
    """gpt-oss's override picks trtllm_mha on SM100 whatever the speculative algorithm; 0.5.8-0.5.9
    then set disable_hybrid_swa_memory (every layer in the full pool), 0.5.10+ keep the sliding pool."""
    from svcdiag.sglang.memory import attention_page

    oss = dict(weights_gb=60.77, kv_cell_bytes=GPT_OSS_LAYER * 18, swa_cell_bytes=GPT_OSS_LAYER * 18,
               sliding_window=127, architecture="GptOssForCausalLM", context_len=131072, speculative_algorithm="NGRAM")
    assert attention_page(dense(**oss, version="0.5.9")) == (64, True)
    assert attention_page(dense(**oss, version="0.5.10")) == (64, False)
    one_pool, split = predict(dense(**oss, version="0.5.9")), predict(dense(**oss, version="0.5.10"))
    assert one_pool.kv_tokens % 64 == 0 and split.kv_tokens % 64 == 0
    assert one_pool.kv_tokens < split.kv_tokens * 0.95  # the sliding layers priced as full ones
    assert attention_page(dense(**oss, version="0.5.9", gpu_sm=90)) == (1, False)  # an H100: fa3, the split kept


@pytest.mark.parametrize(("flags", "version", "expected"), [
    (("flashmla", None, None), "0.5.23", 64), (("cutlass_mla", None, None), "0.5.23", 128),
    (("trtllm_mla", None, None), "0.5.23", 64), (("trtllm_mha", None, None), "0.5.23", 64),
    ((None, None, "trtllm_mha"), "0.5.9", 64), ((None, "fa3", "fa3"), "0.5.23", 1),
])
def test_an_asked_attention_backend_sets_its_page_size_on_any_card(flags: tuple[str | None, ...], version: str,
                                                                   expected: int) -> None:
    from svcdiag.sglang.memory import attention_page

    assert attention_page(dense(attention_backends=flags, gpu_sm=None, version=version))[0] == expected


def test_trtllm_mha_keeps_page_128_from_0_5_18() -> None:
    from svcdiag.sglang.memory import attention_page

    asked = ("trtllm_mha", None, None)
    assert attention_page(dense(attention_backends=asked, page_size=128, version="0.5.15"))[0] == 64
    assert attention_page(dense(attention_backends=asked, page_size=128, version="0.5.18"))[0] == 128


def test_deepseek_v3_on_sm100_takes_trtllm_mla_and_v2_does_not() -> None:
    from svcdiag.sglang.memory import attention_page

    mla = dict(mla=True, kv_cell_bytes=(512 + 64) * 61 * 2)
    assert attention_page(dense(**mla, architecture="DeepseekV3ForCausalLM"))[0] == 64
    assert attention_page(dense(**mla, architecture="DeepseekV3ForCausalLM", page_size=32))[0] == 32
    assert attention_page(dense(**mla, architecture="DeepseekV2ForCausalLM"))[0] == 1  # flashinfer
    assert attention_page(dense(**mla, architecture="DeepseekV3ForCausalLM", version="0.5.3"))[0] == 1


QWEN35 = "Qwen3_5ForConditionalGeneration"


@pytest.mark.parametrize(("version", "spec", "radix_off", "asked", "expected"), [
    ("0.5.23", None, False, 64, 1),  # the radix cache runs plain: triton, page 1 whatever was asked
    ("0.5.23", None, True, 1, 64),  # no radix cache: trtllm_mha, page 64
    ("0.5.23", "DFLASH", False, 1, 64),  # speculative decoding: trtllm_mha (DFlash's top-k forced to one)
    ("0.5.22", "DFLASH", False, 64, 1),  # no top-k yet when the override asks: flashinfer, so triton
    ("0.5.18", "NEXTN", False, 1, 64),
    ("0.5.18", "NEXTN", False, 64, 1),  # top-k 1 at page 64 is not trtllm_mha's case: triton, page 1
    ("0.5.14", None, True, 1, 64),
    ("0.5.13", None, True, 1, 64),  # trtllm_mha; the page is its handler's snap (0.5.13 sets none itself)
    ("0.5.10", None, False, 64, 64),  # triton, the page as asked (0.5.12-0.5.13: no_buffer's page 1, any card)
    ("0.5.9", None, True, 1, 1),  # 0.5.9: triton always
])
def test_a_hybrid_gdn_model_on_sm100_takes_its_own_backend_and_page(version: str, spec: str | None, radix_off: bool,
                                                                     asked: int, expected: int) -> None:
    """Qwen3-Next / Qwen3.5's own SM100 override (0.5.19+ model_overrides/qwen3_5.py
    _qwen3_5_hybrid_overrides; before, its branch of _handle_model_specific_adjustments) picks
    trtllm_mha unless the radix cache runs without extra_buffer and speculative decoding, and from
    0.5.14 sets page 64 for it, page 1 otherwise; the oracle's hybrid x B200 rows check it."""
    from svcdiag.sglang.memory import attention_page

    inp = seed(gpu_sm=100, architecture=QWEN35, version=version, speculative_algorithm=spec,
               speculative_eagle_topk=1 if spec == "NEXTN" else None, disable_radix_cache=radix_off, page_size=asked)
    assert attention_page(inp)[0] == expected
    assert attention_page(replace(inp, gpu_sm=None))[0] == asked  # another card: the page as asked
    assert attention_page(replace(inp, architecture=None))[0] == asked  # a hybrid it does not name: as asked


def test_qwen35s_text_only_class_gets_the_default_backend_on_sm100_from_0_5_19() -> None:
    """No override names Qwen3_5ForCausalLM: SGLang's default (trtllm_mha, page 64) where the
    multimodal class's override would pick triton and page 1; before 0.5.19 it is not modeled."""
    from svcdiag.sglang.memory import attention_page, sm100_page_modeled

    text = seed(gpu_sm=100, architecture="Qwen3_5ForCausalLM", page_size=1)
    assert attention_page(text)[0] == 64 and attention_page(replace(text, architecture=QWEN35))[0] == 1
    assert sm100_page_modeled(text) and not sm100_page_modeled(replace(text, version="0.5.18"))
    assert attention_page(replace(text, version="0.5.18"))[0] == 1
    assert not sm100_page_modeled(replace(text, architecture="NemotronHForCausalLM"))


@pytest.mark.parametrize("version", ["0.5.12", "0.5.13"])
def test_0_5_12_to_0_5_13_size_a_no_buffer_hybrid_at_page_1_on_any_card(version: str) -> None:
    """_handle_mamba_radix_cache: "with radix cache requires page_size=1 in the current Mamba
    scheduling mode (no_buffer) ... Automatically setting page_size=1": the pool is not rounded to
    the asked 64; without the radix cache, or on 0.5.10 / 0.5.14, the page stays."""
    from svcdiag.sglang.memory import attention_page

    inp = seed(architecture=QWEN35, version=version, page_size=64, max_mamba_cache_size=None)
    assert attention_page(inp)[0] == 1 and predict(inp).kv_tokens % 64 != 0
    assert attention_page(replace(inp, disable_radix_cache=True))[0] == 64
    assert attention_page(replace(inp, mamba_scheduler_strategy="extra_buffer"))[0] == 64
    assert attention_page(replace(inp, version="0.5.10"))[0] == 64 and attention_page(replace(inp, version="0.5.14"))[0] == 64


@pytest.mark.parametrize(("version", "off"), [("0.5.9", True), ("0.5.12", True), ("0.5.13", True), ("0.5.14", False),
                                              ("0.5.23", False)])
def test_an_asked_trtllm_mha_turns_a_no_buffer_hybrid_radix_cache_off_up_to_0_5_13(version: str, off: bool) -> None:
    """"Disabling radix cache since trtllm_mha does not support page_size = 1": one state slot a request,
    the slots the asked requests (here 8), page 64; from 0.5.14 the radix cache stays (extra_buffer: 5)."""
    inp = seed(architecture=QWEN35, version=version, gpu_sm=100, attention_backends=("trtllm_mha", None, None),
               max_mamba_cache_size=None, free_before_gb=177.6)
    p = predict(inp)
    assert p.kv_tokens % 64 == 0
    assert (p.slots_per_request, p.mamba_slots) == (1, 8) if off else p.slots_per_request == 5
    assert predict(replace(inp, attention_backends=(None, None, None))).slots_per_request != 1  # not asked: kept


def test_0_5_6_runs_qwen3_next_on_triton_on_sm100_even_when_trtllm_mha_is_asked() -> None:
    from svcdiag.sglang.memory import attention_page

    inp = seed(architecture="Qwen3NextForCausalLM", version="0.5.6", gpu_sm=100,
               attention_backends=("trtllm_mha", None, None))
    assert attention_page(inp)[0] == 1 and attention_page(replace(inp, gpu_sm=None))[0] == 64
    assert attention_page(replace(inp, version="0.5.18"))[0] == 64  # asked, kept


def test_a_b200_turns_a_paged_hybrid_without_overlap_to_three_state_slots_a_request() -> None:
    """--page-size 64 with --disable-overlap-schedule keeps extra_buffer on an H200 (paging wants it:
    4 state slots a request); on a B200 0.5.23's hybrid override sets page 1 first, so the Mamba
    radix cache resolves to no_buffer: 3 slots a request, more requests from the same slots."""
    inp = seed(architecture=QWEN35, page_size=64, disable_overlap_schedule=True, max_running_requests=None,
               max_mamba_cache_size=None, free_before_gb=177.6)
    h200, b200 = predict(inp), predict(replace(inp, gpu_sm=100))
    assert (h200.slots_per_request, b200.slots_per_request) == (4, 3)
    assert h200.mamba_slots == b200.mamba_slots and h200.kv_tokens % 64 == 0
    assert b200.limits["mamba"] == b200.mamba_slots // 3 > h200.limits["mamba"] == h200.mamba_slots // 4


def test_preflight_reads_the_backend_flags_and_the_card() -> None:
    from pathlib import Path

    from svcdiag.config.service import ServiceConfig
    from svcdiag.sglang.preflight import Inputs, sizing_flags, sizing_inputs

    f = sizing_flags(("--attention-backend", "flashmla", "--decode-attention-backend=trtllm_mla"))
    assert f.attention_backends == ("flashmla", None, "trtllm_mla")
    cfg = ServiceConfig(name="x", path=Path("x.toml"), model_path="m", extra_args=("--page-size", "1"))
    inp = Inputs(gpu_free_gb=177.6, gpu_source="nvml", weights_bytes=0, kv_bytes_per_token=1, gpu_name="NVIDIA B200")
    assert sizing_inputs(cfg, inp).gpu_sm == 100
    assert sizing_inputs(cfg, replace(inp, gpu_name="NVIDIA H200")).gpu_sm is None


def test_rocm_keeps_15_percent_of_the_fraction_above_8192_context() -> None:
    """aiter (ROCm's default from 0.5.4) scales mem_fraction_static by 0.85 for a context over 8,192;
    a logged start's fraction is already scaled; gpt-oss gets aiter only from 0.5.10."""
    rocm = dense(gpu_sm=None, rocm=True)
    assert predict(rocm).mem_fraction_static == pytest.approx(0.8 * 0.85)
    assert predict(replace(rocm, context_len=8192)).mem_fraction_static == 0.8
    assert predict(replace(rocm, logged=True)).mem_fraction_static == 0.8
    assert predict(replace(rocm, version="0.5.3")).mem_fraction_static == 0.8
    assert predict(replace(rocm, attention_backends=("triton", None, None))).mem_fraction_static == 0.8
    assert predict(replace(rocm, rocm=False)).mem_fraction_static == 0.8
    assert predict(rocm).kv_tokens < predict(replace(rocm, rocm=False)).kv_tokens * 0.9
    oss = replace(rocm, architecture="GptOssForCausalLM")
    assert predict(replace(oss, version="0.5.9")).mem_fraction_static == 0.8
    assert predict(replace(oss, version="0.5.10")).mem_fraction_static == pytest.approx(0.68)
