"""`tune`'s search against a fake GPU: a true set of costs decides every start, the search sees
only a prior (sometimes a few percent wrong) and what each start logs."""

from __future__ import annotations

import itertools
from dataclasses import replace
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from svcdiag.ops.tune_model import ACTIVATION_HEADROOM_GB, Costs, capacity
from svcdiag.ops.tune_search import Problem, Start, Stop, Target, Trial, grid_starts, impossibility, step
from svcdiag.sglang.memory import GB

#: the stand-in's Qwen3.6-27B + DFlash on a 96 GB card, per GPU
SEED = Costs(free_gb=94.5, weights_gb=50.29, cell_bytes=65536.0, slot_gb=(0.07 + 3.52 + 11.25) / 24, slots_per_req=5,
             speculative=True, graph_gb=1.21, draft_gb=1.66)
BASE = {"mem_fraction_static": 0.75, "max_mamba_cache_size": 2, "max_running_requests": 8, "context_length": 32768,
        "cuda_graph_max_bs": 4, "chunked_prefill_size": 8192}


def fake_start(true: Costs, s: dict[str, Any], *, slack_gb: float = 1.0, graph_per_bs: float = 0.0) -> Trial:
    """What the GPU does with these settings: the pools by the true costs, out of memory at graph
    capture when the reserve cannot hold graphs, draft and `slack_gb` of activations."""
    f = s["mem_fraction_static"]
    graph = true.graph_gb + graph_per_bs * (s.get("cuda_graph_max_bs") or 8)
    cap = capacity(true, fraction=f, mamba_slots=s["max_mamba_cache_size"], context=s["context_length"],
                   requested=s["max_running_requests"])
    figures: dict[str, Any] = {"avail_before_load_gb": true.free_gb, "weights_gb": true.weights_gb}
    if true.static_gb(f) <= 0 or cap.kv_tokens <= 0:
        return Trial(s, "failed", "not_enough_memory", figures)
    slots = cap.mamba_slots
    figures.update(kv_tokens=cap.kv_tokens, kv_gb=cap.kv_tokens * true.cell_bytes / GB)
    if slots is not None:
        figures.update(mamba_slots=slots, mamba_ssm_gb=slots * (true.slot_gb or 0))
    if true.free_gb * (1 - f) < graph + true.draft_gb + slack_gb:
        return Trial(s, "failed", "cuda_oom", figures, seconds=60)
    figures.update(cuda_graph_gb=graph, draft_weights_gb=true.draft_gb)
    if cap.max_running <= 0:
        return Trial(s, "failed", "max_running_zero", figures, seconds=60)
    figures.update(max_running_requests=cap.max_running, context_len=s["context_length"])
    return Trial(s, "healthy", None, figures, seconds=120)


def run(p: Problem, true: Costs, limit: int = 40, **world: Any) -> tuple[Stop, list[Trial]]:
    trials: list[Trial] = []
    for _ in range(limit):
        d = step(p, trials, sum(t.seconds for t in trials))
        if isinstance(d, Stop):
            return d, trials
        assert isinstance(d, Start)
        trials.append(replace(fake_start(true, d.settings, **world), why=d.why))
    raise AssertionError(f"no stop after {limit} starts: {[t.settings['mem_fraction_static'] for t in trials]}")


def truly_serves(true: Costs, target: Target, spr: int, *, slack_gb: float = 1.0) -> float | None:
    """The oracle: the least fraction whose start is healthy and serves the target."""
    s = {**BASE, "max_running_requests": target.requests, "context_length": target.context,
         "max_mamba_cache_size": target.requests * spr}
    for i in range(1, 96):
        s["mem_fraction_static"] = i / 100
        t = fake_start(true, s, slack_gb=slack_gb)
        if t.verdict == "healthy" and target.met_by(t.figures):
            return i / 100
    return None


def problem(target: Target, prior: Costs | None, **kw: Any) -> Problem:
    return Problem(BASE, target, speculative=True, hybrid=True, prior=prior, **kw)


def test_the_seed_case_on_a_96_gb_card_is_proven_impossible_by_one_start() -> None:
    # short by 2.5 %, inside the prior's margin: one start at 0.95 measures, and the measurement proves it
    stop, trials = run(problem(Target(8, 32768), SEED), SEED)
    assert [t.settings["mem_fraction_static"] for t in trials] == [0.95] and stop.status == "impossible"
    assert stop.best is trials[0] and trials[0].figures["max_running_requests"] == 7
    assert stop.message.startswith("8 × 32,768 needs 1.2 GB more KV cache and Mamba state than 0.95 of the card "
                                   "leaves: at most 7 at this context, or 8 at 29,696"), stop.message
    assert stop.fallbacks == ({"max_running": 7, "context": 32768}, {"max_running": 8, "context": 29696})


def test_the_seed_case_on_an_h200_is_served_in_one_start_at_the_least_fraction() -> None:
    h200 = replace(SEED, free_gb=139.0)
    stop, trials = run(problem(Target(8, 32768), h200), h200)
    assert stop.status == "met" and len(trials) == 1 and stop.best is trials[0]
    assert trials[0].settings["max_mamba_cache_size"] == 40 and trials[0].settings["max_running_requests"] == 8
    assert trials[0].settings["mem_fraction_static"] == truly_serves(h200, Target(8, 32768), 5)


def test_a_prior_a_few_percent_low_is_corrected_by_the_first_start() -> None:
    true = replace(SEED, free_gb=139.0, weights_gb=53.0)  # the checkpoint is 5 % heavier than the prior thinks
    stop, trials = run(problem(Target(8, 32768), replace(SEED, free_gb=139.0)), true)
    first = trials[0]
    assert first.verdict == "healthy" and not Target(8, 32768).met_by(first.figures)  # the prior's guess was short
    assert stop.status == "met" and len(trials) == 2
    assert stop.best is not None and stop.best.settings["mem_fraction_static"] == truly_serves(true, Target(8, 32768), 5)
    assert "measured costs" in trials[1].why


def test_an_out_of_memory_at_graph_capture_steers_to_less_reserve_not_more_static_memory() -> None:
    tight = replace(SEED, free_gb=101.0)
    # graphs grow with the batch sizes captured: at bs 16 the least fraction that serves runs out of memory
    base = {**BASE, "cuda_graph_max_bs": 16}
    p = Problem(base, Target(8, 32768), speculative=True, hybrid=True, prior=tight)
    stop, trials = run(p, tight, graph_per_bs=0.4)
    assert trials[0].cause == "cuda_oom"
    fractions = [t.settings["mem_fraction_static"] for t in trials]
    assert all(b <= a for a, b in itertools.pairwise(fractions)), fractions
    assert stop.status == "met", stop.message
    assert stop.best is not None and stop.best.settings["cuda_graph_max_bs"] == 8
    assert "cuda_graph_max_bs 16 → 8" in trials[-1].why


def test_a_kept_key_that_cannot_serve_is_the_reason_and_no_start_is_spent() -> None:
    p = problem(Target(8, 32768), SEED, keep=frozenset({"max_mamba_cache_size"}))
    stop, trials = run(p, SEED)
    assert trials == [] and stop.status == "impossible"
    assert stop.message == "max_mamba_cache_size is kept at 2, and 8 × 32,768 needs 40"


def test_a_failure_memory_cannot_fix_stops_the_search_with_the_best_so_far() -> None:
    h200 = replace(SEED, free_gb=139.0)
    t = Trial(dict(BASE), "failed", "segfault", {})
    d = step(problem(Target(8, 32768), h200), [t])
    assert isinstance(d, Stop) and d.status == "stuck" and "segfault" in d.message


def test_budget_stops_with_the_best_so_far() -> None:
    true = replace(SEED, free_gb=139.0, weights_gb=53.0)
    stop, trials = run(problem(Target(8, 32768), replace(SEED, free_gb=139.0), max_starts=1), true)
    assert stop.status == "budget" and len(trials) == 1 and stop.best is trials[0]
    timed = problem(Target(8, 32768), replace(SEED, free_gb=139.0), budget_s=150)
    stop, trials = run(timed, true)
    assert stop.status == "budget" and len(trials) == 1 and "budget" in stop.message


def test_without_a_prior_the_first_start_measures() -> None:
    h200 = replace(SEED, free_gb=139.0)
    stop, trials = run(problem(Target(8, 32768), None), h200)
    assert trials[0].settings["mem_fraction_static"] == 0.75  # the config's own: it measures the costs
    assert stop.status == "met" and len(trials) <= 3


def test_the_proof_sentence_names_a_ceiling_an_out_of_memory_set() -> None:
    sentence, _ = impossibility(SEED, Target(8, 32768), 0.9, " (0.91 ran out of memory)")
    assert sentence == ("8 × 32,768 needs 6.0 GB more KV cache and Mamba state than 0.90 of the card "
                               "leaves (0.91 ran out of memory): at most 6 at this context, or 8 at 20,480")


def test_the_grid_a_hand_search_takes() -> None:
    assert grid_starts(problem(Target(8, 32768), SEED)) == 21  # 0.75 … 0.95


free = st.floats(70, 150)
weights = st.floats(0.95, 1.05)  # the prior's error on the checkpoint's size: a few percent
requests = st.integers(1, 12)
contexts = st.sampled_from([4096, 8192, 16384, 32768, 65536])


@settings(max_examples=150, deadline=None)
@given(free, weights, requests, contexts, st.booleans())
def test_the_search_ends_and_its_answer_is_the_truth(free_gb: float, err: float, r: int, ctx: int, dense: bool) -> None:
    true = replace(SEED, free_gb=free_gb, slot_gb=None if dense else SEED.slot_gb,
                   slots_per_req=3 if dense else 5)
    prior = replace(true, weights_gb=true.weights_gb * err, graph_gb=0.0)
    base = {**BASE, "max_mamba_cache_size": None if dense else 2}
    p = Problem(base, Target(r, ctx), speculative=True, hybrid=not dense, prior=prior)
    stop, trials = run(p, true)
    oracle = truly_serves(true, Target(r, ctx), true.slots_per_req)
    if stop.status == "met":
        assert stop.best is not None and stop.best.settings["mem_fraction_static"] == oracle
        assert len(trials) <= 4, [t.settings["mem_fraction_static"] for t in trials]
    else:
        assert stop.status == "impossible", stop.message
        assert oracle is None, (oracle, stop.message, [t.settings["mem_fraction_static"] for t in trials])
        # one start to measure, at most one to confirm what the measurement says, and the steered retries
        assert len([t for t in trials if t.cause != "cuda_oom"]) <= 2, [t.why for t in trials]
        assert len(trials) <= 4


@settings(max_examples=60, deadline=None)
@given(free, requests, contexts)
def test_a_proof_from_an_exact_prior_spends_no_start(free_gb: float, r: int, ctx: int) -> None:
    true = replace(SEED, free_gb=free_gb)
    stop, trials = run(problem(Target(r, ctx), true), true)
    if stop.status == "impossible" and r * true.request_gb(ctx) - true.static_gb(0.95) > 0.05 * free_gb * 0.95:
        assert trials == []
    if stop.status == "met":
        assert trials and all(t.verdict == "healthy" or t.cause == "cuda_oom" for t in trials)


def test_reserve_headroom_is_what_activations_get() -> None:
    assert SEED.reserve_gb == 1.21 + 1.66 + ACTIVATION_HEADROOM_GB
