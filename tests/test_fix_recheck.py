"""Every memory fix svcdiag prints is re-checked through SGLang's own arithmetic for the start's
release (svcdiag.sglang.preflight.recheck_fixes), and baseline-check's estimate of a candidate
that never ran is that arithmetic too (estimate_candidate): what a user is told to set serves
what it says, or says what it serves instead."""

from __future__ import annotations

import dataclasses
import io
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from svcdiag.config.service import UnitsDir
from svcdiag.judge.diagnosis import diagnose
from svcdiag.judge.pipeline import Judge
from svcdiag.ops.fleet.baseline import estimate
from svcdiag.ops.offline.replay import replay
from svcdiag.sglang import memory
from svcdiag.sglang.figures import Figures
from svcdiag.sglang.preflight import FIX_FIELDS, estimate_candidate, logged_sizing, recheck_fixes

from .conftest import UNITS
from .test_diagnosis import sim_log

U = UnitsDir(UNITS, "t")
H100_LOG = Path(__file__).parent / "fixtures" / "memory-backtest" / "otel-h100-qwen3.8-27b-fp8-0.5.18.log"


def h100() -> tuple[Figures, object]:
    """The real Qwen3.8-27B-FP8 start on one H100 (SGLang 0.5.18), and its config."""
    judge = Judge()
    for line in H100_LOG.read_text().splitlines():
        if not line.startswith("#"):
            judge.line(line)
    f = judge.finish().figures
    figures = f.replace(avail_before_load_gb=f.avail_after_load_gb + f.weights_gb)
    cfg = dataclasses.replace(U.load("nospec-tp1"), mem_fraction_static=0.85, max_running_requests=32,
                              max_mamba_cache_size=None, context_length=262144, sglang_version="0.5.18",
                              speculative=None, extra_args=())
    return figures, cfg


def serves(base, fix: dict) -> memory.Prediction:
    return memory.predict(dataclasses.replace(base, **{FIX_FIELDS[k]: v for k, v in fix["set"].items()
                                                       if k in FIX_FIELDS}))


def test_the_seeds_fixes_serve_what_they_say_by_sglangs_arithmetic() -> None:
    cfg = U.load("dflash-tp1-mr8")
    v = replay(io.BytesIO(sim_log("dflash-tp1-mr8", "max-running-zero")), "x", cfg).verdict
    d = diagnose(v, cfg)
    base = logged_sizing(v.figures, cfg)
    assert base is not None and d["fixes"]
    for fix in d["fixes"]:
        p = serves(base, fix)
        assert p.failure is None and p.max_running_requests >= fix["set"].get("max_running_requests", 8)
        assert p.kv_tokens >= 32768
        assert "SGLang 0.5.23's arithmetic" in fix["reason"]


def test_a_fix_short_of_memory_is_raised_to_the_smallest_fraction_that_serves() -> None:
    figures, cfg = h100()
    base = logged_sizing(figures, cfg)
    # one request of 500,000 tokens with 10 Mamba slots: 0.70 leaves the KV pool short of it
    short = {"set": {"mem_fraction_static": 0.7, "max_mamba_cache_size": 10, "max_running_requests": 1,
                     "context_length": 500000}, "reason": "holds 1 request(s) of 500,000 tokens"}
    assert serves(base, short).kv_tokens < 500000
    [fixed] = recheck_fixes([short], figures, cfg)
    mfs = fixed["set"]["mem_fraction_static"]
    assert mfs > 0.7 and "not 0.7, by SGLang 0.5.18's arithmetic" in fixed["reason"]
    assert {k: v for k, v in fixed["set"].items() if k != "mem_fraction_static"} == \
        {"max_mamba_cache_size": 10, "max_running_requests": 1, "context_length": 500000}
    p = serves(base, fixed)
    assert p.failure is None and p.kv_tokens >= 500000 and p.max_running_requests >= 1
    less = serves(base, {"set": {**fixed["set"], "mem_fraction_static": round(mfs - 0.01, 2)}})
    assert less.kv_tokens < 500000  # the smallest that serves


def test_a_fix_that_cannot_serve_all_it_was_for_says_what_it_serves() -> None:
    figures, cfg = h100()
    # 200 requests with the Mamba cache capped at 50 slots (5 per request): 10 at most, whatever the fraction
    fix = {"set": {"max_mamba_cache_size": 50, "max_running_requests": 200}, "reason": "serves 200 requests"}
    [said] = recheck_fixes([fix], figures, cfg)
    assert said["set"] == fix["set"]
    assert said["reason"].startswith("serves 10 of the 200 request(s) it was for, bound by mamba")


def test_a_fix_that_serves_no_request_is_not_offered_and_others_pass_as_given() -> None:
    figures, cfg = h100()
    nothing = {"set": {"max_mamba_cache_size": 2}, "reason": "fewer slots"}  # 2 slots at 5 per request: none
    other = {"set": {"timeouts.loading_weights": 1200}, "reason": "a slow disk"}
    assert recheck_fixes([nothing, other], figures, cfg) == [other]
    # a log with no KV pool cannot be re-checked: its fixes pass as given
    assert recheck_fixes([nothing], Figures(avail_before_load_gb=78.48), cfg) == [nothing]


def test_the_logged_start_is_what_the_model_reads_back() -> None:
    """The real H100 start, read back as the model's inputs, predicts what SGLang logged."""
    figures, cfg = h100()
    p = memory.predict(logged_sizing(figures, cfg))
    assert p.family == "0.5.18"
    assert p.kv_tokens == pytest.approx(figures.kv_tokens, rel=0.01)
    assert abs(p.mamba_slots - figures.mamba_slots) <= 1 and p.max_running_requests in (24, 25)


def test_baseline_checks_estimate_is_sglangs_arithmetic_for_the_candidate() -> None:
    figures, base = h100()
    same = estimate({"figures": figures}, base, base)
    assert same is not None and same["sizing_family"] == "0.5.18" and same["cause"] is None
    assert same["kv_tokens"] == pytest.approx(figures.kv_tokens, rel=0.01)
    starved = estimate({"figures": figures}, base, dataclasses.replace(base, max_mamba_cache_size=4))
    assert starved["cause"] == "mamba_cache_too_small" and starved["max_running_requests"] == 0
    other_tp = estimate({"figures": figures}, base, dataclasses.replace(base, tp_size=2))
    assert other_tp is None


@settings(max_examples=40, deadline=None)
@given(a=st.integers(60, 95), b=st.integers(60, 95))
def test_more_mem_fraction_static_never_gives_fewer_kv_tokens(a: int, b: int) -> None:
    figures, base = h100()
    lo, hi = sorted((a / 100, b / 100))
    est = [estimate_candidate(figures, base, dataclasses.replace(base, mem_fraction_static=m)) for m in (lo, hi)]
    assert est[0]["kv_tokens"] <= est[1]["kv_tokens"]
