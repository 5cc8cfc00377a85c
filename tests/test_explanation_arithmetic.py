"""The diagnosis's explanation of a memory failure is SGLang's own arithmetic for the start's
release, the same model its fixes are re-checked with (svcdiag.sglang.memory_plan): the
mem_fraction_static the explanation names is the one the fix under it sets, never one the
re-check then has to raise."""

from __future__ import annotations

import dataclasses
import io
import re

from hypothesis import given, settings
from hypothesis import strategies as st

from svcdiag.config.service import UnitsDir
from svcdiag.judge.diagnosis import diagnose
from svcdiag.ops.offline.replay import replay
from svcdiag.sglang import memory
from svcdiag.sglang.preflight import logged_sizing

from .conftest import EXAMPLES, UNITS

U = UnitsDir(UNITS, "t")
SEED = U.load("dflash-tp1-mr8")
SEED_VERDICT = replay(io.BytesIO((EXAMPLES / "max-running-zero.log").read_bytes()), "x", SEED).verdict
#: "N full-length request(s) need … mem_fraction_static F, which still leaves": a plan that fits
FITS = re.compile(r"^(\d+) full-length request\(s\) need .*: mem_fraction_static (\d\.\d\d), which still leaves")


def fitting_plans(d: dict) -> dict[int, float]:
    return {int(m[1]): float(m[2]) for line in d["explanation"] if (m := FITS.match(line))}


def test_the_seeds_explanation_names_the_fraction_its_fix_sets() -> None:
    d = diagnose(SEED_VERDICT, SEED)
    text = " ".join(d["explanation"])
    assert fitting_plans(d) == {1: 0.81}
    [fix] = d["fixes"]
    assert fix["set"] == {"mem_fraction_static": 0.81, "max_mamba_cache_size": 5, "max_running_requests": 1}
    assert ", not " not in fix["reason"] and "SGLang 0.5.23's arithmetic" in fix["reason"]
    assert "8 full-length request(s) would need" in text and "that does not fit" in text
    assert "(SGLang 0.5.23's arithmetic)" in text


def test_the_per_request_costs_are_the_models() -> None:
    d = diagnose(SEED_VERDICT, SEED)
    text = " ".join(d["explanation"])
    inp = logged_sizing(SEED_VERDICT.figures, SEED)
    p = memory.predict(inp)
    assert f"Each token costs about {p.cell_bytes / 1024:.1f} KiB" in text
    slot_gb = inp.mamba_per_req_bytes / memory.GB
    assert f"Each request takes {p.slots_per_request} Mamba state slots of {slot_gb:.2f} GB" in text
    assert f"its {memory.draft_tokens(inp)} draft tokens' intermediate state another {16 * slot_gb:.2f} GB" in text


@settings(max_examples=40, deadline=None)
@given(before=st.floats(60, 140), mfs=st.integers(60, 90), slots=st.integers(1, 30), asked=st.integers(1, 16))
def test_every_fitting_plan_is_a_fix_the_recheck_keeps_as_it_is(before: float, mfs: int, slots: int,
                                                                 asked: int) -> None:
    """On other GPUs, fractions and settings of the seed's start: each plan the explanation says
    fits is a fix with that very fraction (unless it changes nothing), and no fix has to be
    raised by the re-check."""
    f = SEED_VERDICT.figures
    after = round(before - f.weights_gb, 2)
    f = f.replace(avail_before_load_gb=round(before, 2), avail_after_load_gb=after, mem_fraction_static=mfs / 100,
                  mamba_slots=slots, mamba_conv_gb=0.0, mamba_ssm_gb=round((slots + 1) * 0.1, 2),
                  requested_max_mamba_cache_size=slots, requested_max_running_requests=asked)
    cfg = dataclasses.replace(SEED, mem_fraction_static=mfs / 100, max_mamba_cache_size=slots, max_running_requests=asked)
    d = diagnose(dataclasses.replace(SEED_VERDICT, figures=f), cfg)
    fractions = {fix["set"]["mem_fraction_static"] for fix in d["fixes"] if "mem_fraction_static" in fix["set"]}
    for requests, fraction in fitting_plans(d).items():  # one that changes nothing is no fix
        assert fraction in fractions or (fraction, requests) == (mfs / 100, asked), (requests, fraction, d)
    for fix in d["fixes"]:
        assert ", not " not in fix["reason"], fix


def test_a_log_the_model_cannot_read_still_states_its_facts() -> None:
    """No free memory before loading: the logged pools are said, no plan and no fix is invented."""
    f = SEED_VERDICT.figures.replace(avail_before_load_gb=None)
    d = diagnose(dataclasses.replace(SEED_VERDICT, figures=f), dataclasses.replace(SEED, mem_fraction_static=None))
    assert d["explanation"][0].startswith("The KV cache holds 11,893 tokens")
    assert "2 slots and each request takes 5" in d["explanation"][1]
    assert not any("mem_fraction_static" in line for line in d["explanation"]) and d["fixes"] == []


def test_a_kv_pool_below_the_context_offers_no_fix_that_changes_nothing() -> None:
    """The stand-in's 0.5.23 start whose KV pool holds less than one context: degraded; no fix
    sets the fraction it already had, and none has to be raised by the re-check."""
    from .test_sim import NEW, sim, smoke

    cfg = U.load("dflash-smoke")
    out = sim("healthy-hybrid-dflash", "--gpu-free-gb", "93", *smoke(NEW)).stdout
    v = replay(io.BytesIO(out.encode()), "x", cfg).verdict
    d = diagnose(v, cfg)
    assert d["cause"] == "degraded" and d["fixes"]
    for fix in d["fixes"]:
        assert fix["set"].get("mem_fraction_static") != v.figures.mem_fraction_static, fix
        assert ", not " not in fix["reason"], fix


def test_a_replay_without_its_config_reads_the_speculative_start_from_the_log() -> None:
    """server_args' speculative algorithm is the log's own: without --config the seed's start is
    still a DFlash start (its draft tokens' state counted), and its fix the same."""
    bare = replay(io.BytesIO((EXAMPLES / "max-running-zero.log").read_bytes()), "x").verdict
    assert bare.figures.speculative_algorithm == "DFLASH"
    assert diagnose(bare)["fixes"] == diagnose(SEED_VERDICT, SEED)["fixes"]
