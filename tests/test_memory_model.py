"""svcdiag.sglang.memory.predict: SGLang's own sizing arithmetic, release by release."""

from __future__ import annotations

from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from svcdiag.sglang.memory import GB, SizingInputs, auto_mem_fraction, family, predict, state_slots_per_request

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
    ("0.4.0", "0.4.0"), ("0.4.5.post2", "0.4.0"), ("0.4.5.post3", "0.4"), ("0.4.6", "0.4"), ("0.4.7", "0.5.2"), ("0.5.2", "0.5.2"), ("0.5.3", "0.5.3"), ("0.5.4", "0.5.6"), ("0.5.6", "0.5.6"),
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


def test_a_hybrid_gdn_model_keeps_its_page_on_sm100() -> None:
    """Qwen3-Next / Qwen3.5's own SM100 choice depends on its Mamba radix cache: not modeled, so the
    page stays as given (the oracle leaves those rows out)."""
    from svcdiag.sglang.memory import attention_page

    assert attention_page(seed(gpu_sm=100))[0] == 1


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
