"""`tune`'s search against a fake GPU: a true set of costs decides every start, the search sees
only a prior (sometimes a few percent wrong) and what each start logs."""

from __future__ import annotations

import itertools
from dataclasses import replace
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from svcdiag.ops.fleet.tune_model import ACTIVATION_HEADROOM_GB, Costs
from svcdiag.ops.fleet.tune_search import (
    Problem,
    Start,
    Stop,
    Target,
    Trial,
    grid_starts,
    impossibility,
    shortfall_gb,
    step,
)
from svcdiag.sglang import memory
from svcdiag.sglang.memory import GB, SizingInputs

#: the stand-in's Qwen3.6-27B + DFlash on a 96 GB card, per GPU, as SGLang 0.5.23 sizes it
SEED = Costs(SizingInputs(free_before_gb=94.5, weights_gb=50.29, kv_cell_bytes=65536, context_len=32768,
                          attention_layers=16, draft_weights_gb=1.66, mamba_per_req_bytes=int((0.07 + 3.52) / 24 * GB),
                          speculative_algorithm="DFLASH", num_draft_tokens=16, draft_layers=5, draft_cell_bytes=20480),
             graph_gb=1.21)
BASE = {"mem_fraction_static": 0.75, "max_mamba_cache_size": 2, "max_running_requests": 8, "context_length": 32768,
        "cuda_graph_max_bs": 4, "chunked_prefill_size": 8192}


def costs(c: Costs, **changes: Any) -> Costs:
    return replace(c, sizing=replace(c.sizing, **changes))


#: what tune knows with no prior: the config's speculative settings and release, no cost
UNKNOWN = Costs(replace(SEED.sizing, free_before_gb=0.0, weights_gb=0.0, kv_cell_bytes=0, mamba_per_req_bytes=0,
                        draft_weights_gb=0.0, draft_cell_bytes=None, draft_layers=None), source="none")


def fake_start(true: Costs, s: dict[str, Any], *, slack_gb: float = 1.0, graph_per_bs: float = 0.0) -> Trial:
    """What the GPU does with these settings: the pools by the true costs (SGLang's arithmetic),
    out of memory at graph capture when the reserve cannot hold the graphs and `slack_gb` of activations."""
    f = s["mem_fraction_static"]
    graph = true.graph_gb + graph_per_bs * (s.get("cuda_graph_max_bs") or 8)
    p = memory.predict(true.at(fraction=f, mamba_slots=s["max_mamba_cache_size"], context=s["context_length"],
                               requested=s["max_running_requests"], draft_tokens=s.get("speculative.num_draft_tokens")))
    figures: dict[str, Any] = {"avail_before_load_gb": true.free_gb, "weights_gb": true.sizing.weights_gb}
    if p.failure == "not_enough_memory" and p.rest_gb <= 0:
        return Trial(s, "failed", "not_enough_memory", figures)
    if p.mamba_slots is not None:
        figures.update(mamba_slots=p.mamba_slots, mamba_ssm_gb=p.mamba_gb, mamba_intermediate_ssm_gb=p.intermediate_gb)
    if p.failure is not None:
        return Trial(s, "failed", p.failure, figures, seconds=60)
    figures.update(kv_tokens=p.kv_tokens, kv_gb=p.kv_tokens * true.sizing.kv_cell_bytes / GB)
    if true.free_gb * (1 - f) < graph + slack_gb:
        return Trial(s, "failed", "cuda_oom", figures, seconds=60)
    figures.update(cuda_graph_gb=graph, draft_weights_gb=true.sizing.draft_weights_gb,
                   max_running_requests=p.max_running_requests, context_len=s["context_length"])
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


def test_the_seed_case_on_a_96_gb_card_is_proven_impossible_without_a_start() -> None:
    # 0.5.23 pays the DFlash draft's KV and 16 intermediate states per request from the same budget
    stop, trials = run(problem(Target(8, 32768), SEED), SEED)
    assert trials == [] and stop.status == "impossible"
    assert stop.message == ("8 × 32,768 needs 10.8 GB more KV cache and Mamba state than 0.95 of the card leaves: "
                            "at most 6 at this context, or 8 at 15,360 (the memory model's estimate, by more than "
                            "its margin)"), stop.message
    assert stop.fallbacks == ({"max_running": 6, "context": 32768}, {"max_running": 8, "context": 15360})


def test_a_shortfall_within_the_priors_margin_spends_one_start_to_measure() -> None:
    card = costs(SEED, free_before_gb=103.0)  # short by ~2.8 GB at 0.95: inside 5 % of 98 GB
    stop, trials = run(problem(Target(8, 32768), card), card)
    assert [t.settings["mem_fraction_static"] for t in trials] == [0.95] and stop.status == "impossible"
    assert "within its margin" in trials[0].why and stop.best is trials[0]
    assert "(the memory model's estimate" not in stop.message


def test_the_seed_case_on_an_h200_is_served_in_one_start_at_the_least_fraction() -> None:
    h200 = costs(SEED, free_before_gb=139.0)
    stop, trials = run(problem(Target(8, 32768), h200), h200)
    assert stop.status == "met" and len(trials) == 1 and stop.best is trials[0]
    assert trials[0].settings["max_mamba_cache_size"] == 40 and trials[0].settings["max_running_requests"] == 8
    assert trials[0].settings["mem_fraction_static"] == truly_serves(h200, Target(8, 32768), 5)


def test_a_prior_a_few_percent_low_is_corrected_by_the_first_start() -> None:
    true = costs(SEED, free_before_gb=139.0, weights_gb=53.0)  # the checkpoint is 5 % heavier than the prior thinks
    stop, trials = run(problem(Target(8, 32768), costs(SEED, free_before_gb=139.0)), true)
    first = trials[0]
    assert first.verdict == "healthy" and not Target(8, 32768).met_by(first.figures)  # the prior's guess was short
    assert stop.status == "met" and len(trials) == 2
    assert stop.best is not None and stop.best.settings["mem_fraction_static"] == truly_serves(true, Target(8, 32768), 5)
    assert "measured costs" in trials[1].why


def test_an_out_of_memory_at_graph_capture_steers_to_less_reserve_not_more_static_memory() -> None:
    tight = costs(SEED, free_before_gb=108.0)
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
    h200 = costs(SEED, free_before_gb=139.0)
    t = Trial(dict(BASE), "failed", "segfault", {})
    d = step(problem(Target(8, 32768), h200), [t])
    assert isinstance(d, Stop) and d.status == "stuck" and "segfault" in d.message


def test_budget_stops_with_the_best_so_far() -> None:
    true = costs(SEED, free_before_gb=139.0, weights_gb=53.0)
    stop, trials = run(problem(Target(8, 32768), costs(SEED, free_before_gb=139.0), max_starts=1), true)
    assert stop.status == "budget" and len(trials) == 1 and stop.best is trials[0]
    timed = problem(Target(8, 32768), costs(SEED, free_before_gb=139.0), budget_s=150)
    stop, trials = run(timed, true)
    assert stop.status == "budget" and len(trials) == 1 and "budget" in stop.message


def test_without_a_prior_the_first_start_measures() -> None:
    h200 = costs(SEED, free_before_gb=139.0)
    stop, trials = run(problem(Target(8, 32768), UNKNOWN), h200)
    assert trials[0].settings["mem_fraction_static"] == 0.75  # the config's own: it measures the costs
    assert stop.status == "met" and len(trials) <= 3


def test_the_proof_sentence_names_a_ceiling_an_out_of_memory_set() -> None:
    s = {**BASE, "max_mamba_cache_size": 40}
    sentence, _ = impossibility(SEED, s, Target(8, 32768), 0.9, " (0.91 ran out of memory)")
    assert sentence == ("8 × 32,768 needs 15.6 GB more KV cache and Mamba state than 0.90 of the card "
                               "leaves (0.91 ran out of memory): at most 5 at this context, or 8 at 8,192")


def test_the_grid_a_hand_search_takes() -> None:
    assert grid_starts(problem(Target(8, 32768), SEED)) == 21  # 0.75 … 0.95


free = st.floats(70, 150)
weights = st.floats(0.95, 1.05)  # the prior's error on the checkpoint's size: a few percent
requests = st.integers(1, 12)
contexts = st.sampled_from([4096, 8192, 16384, 32768, 65536])


PLAIN = {"speculative_algorithm": None, "num_draft_tokens": None, "draft_cell_bytes": None, "draft_layers": None,
         "draft_weights_gb": 0.0}


@settings(max_examples=150, deadline=None)
@given(free, weights, requests, contexts, st.booleans(), st.booleans())
def test_the_search_ends_and_its_answer_is_the_truth(free_gb: float, err: float, r: int, ctx: int, dense: bool,
                                                     speculative: bool) -> None:
    true = costs(SEED, free_before_gb=free_gb, mamba_per_req_bytes=None if dense else SEED.sizing.mamba_per_req_bytes,
                 **({} if speculative else PLAIN))
    prior = replace(costs(true, weights_gb=true.sizing.weights_gb * err), graph_gb=0.0)
    base = {**BASE, "max_mamba_cache_size": None if dense else 2}
    p = Problem(base, Target(r, ctx), speculative=speculative, hybrid=not dense, prior=prior)
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
    true = costs(SEED, free_before_gb=free_gb)
    stop, trials = run(problem(Target(r, ctx), true), true)
    short = shortfall_gb(true, {**BASE, "max_running_requests": r, "context_length": ctx, "max_mamba_cache_size": r * 5},
                         Target(r, ctx), 0.95)
    if stop.status == "impossible" and (short is None or short > 0.05 * free_gb * 0.95):
        assert trials == []
    if stop.status == "met":
        assert trials and all(t.verdict == "healthy" or t.cause == "cuda_oom" for t in trials)


def test_reserve_headroom_is_what_activations_get() -> None:
    assert SEED.reserve_gb == 1.21 + ACTIVATION_HEADROOM_GB  # 0.5.23 counts the draft in the static part


# ---------------------------------------------------------------- ops.fleet.tune: the loop, the run file, Ctrl-C

import pytest  # noqa: E402

from svcdiag.config.campaign import load_plan  # noqa: E402
from svcdiag.config.service import UnitsDir  # noqa: E402
from svcdiag.errors import ConfigError, SvcdiagError  # noqa: E402
from svcdiag.judge.verdict import Verdict  # noqa: E402
from svcdiag.ops.fleet import tune as ops_tune  # noqa: E402
from svcdiag.ops.serve.start import StartOutcome  # noqa: E402
from svcdiag.output.publish import Publisher  # noqa: E402
from svcdiag.output.report import render_tune  # noqa: E402

_REQUIRE_SGLANG = getattr(ops_tune, "require_sglang", None)  # the world fixture stubs it; one test puts it back


class Props:
    def __init__(self, running: bool = False):
        self.running = running
        self.active_state = "active" if running else "inactive"
        self.invocation = "inv"


class FakeSystemd:
    """Which units run: started by tune (ensure_started, patched), stopped through stop()/wait_job()."""

    remote = None

    def __init__(self) -> None:
        self.active: set[str] = set()
        self.stopped: list[str] = []

    def props(self, unit: str) -> Props:
        return Props(unit in self.active)

    def stop(self, unit: str) -> str:
        self.active.discard(unit)
        self.stopped.append(unit)
        return unit

    def wait_job(self, job: str, timeout: float) -> str:
        return "done"


@pytest.fixture
def world(tmp_path, monkeypatch):
    """A units folder with the seed's config, the search's costs as the GPU's, every start faked."""
    units = tmp_path / "units"
    units.mkdir()
    (units / "seed.toml").write_text('model_path = "/m"\nmem_fraction_static = 0.6\nmax_running_requests = 8\n'
                                     'context_length = 32768\nmax_mamba_cache_size = 2\ncuda_graph_max_bs = 4\n'
                                     'chunked_prefill_size = 8192\n[speculative]\nalgorithm = "DFLASH"\n')
    sd = FakeSystemd()
    true = costs(SEED, free_before_gb=139.0, weights_gb=53.0)
    monkeypatch.setattr(ops_tune, "quiet_plan", lambda cfg, gpu_memory=None, remote=None: None)
    monkeypatch.setattr(ops_tune.gpu_hygiene, "gate", lambda *a, **k: [])
    monkeypatch.setattr(ops_tune, "flag_check", lambda cfg, note: None)
    monkeypatch.setattr(ops_tune, "require_sglang", lambda cfg: None, raising=False)
    monkeypatch.setattr(ops_tune, "unit_lock", lambda name, note: __import__("contextlib").nullcontext())

    def started(sd_, cfg, note, *, restart, sglang):
        sd_.active.add(cfg.unit)
        return Props(True)

    interrupt_at: list[int] = []

    def waited(sd_, cfg, units_, props, pub, timeout, plan, **kw):
        n = len(sd.stopped) + 1
        if n in interrupt_at:
            return StartOutcome(interrupted=True)
        s = ops_tune.base_settings(cfg)
        t = fake_start(true, s)
        return StartOutcome(verdict=Verdict(verdict=t.verdict, phase="ready", cause=t.cause, message="",
                                            figures=t.figures), started=True, history_id=n)

    monkeypatch.setattr(ops_tune, "ensure_started", started)
    monkeypatch.setattr(ops_tune, "wait_verdict", waited)
    return UnitsDir(units, "test"), sd, interrupt_at, tmp_path / "state"


def _tune(world, **kw):
    units, sd, _, state = world
    cfg = units.load("seed")
    notes: list[str] = []
    pub = Publisher([], config="seed")
    pub.note = notes.append  # type: ignore[method-assign]
    target = ops_tune.parse_target(["max_running=8"], cfg)
    return ops_tune.tune(sd, cfg, units, pub, target=target, state=str(state), **kw), notes


def test_tune_writes_a_config_that_extends_the_original_and_stops_every_unit_it_started(world) -> None:
    units, sd, _, _ = world
    res, notes = _tune(world)
    assert res.status == "met" and res.starts == 2  # the first measures (no prior), the second serves
    assert sd.active == set() and sd.stopped == ["seed-tuned.service"] * 2
    text = (units.path / "seed-tuned.toml").read_text()
    assert 'extends = "seed"' in text and "max_mamba_cache_size = 40" in text and "run tune-seed-" in text
    tuned = units.load("seed-tuned")
    assert tuned.mem_fraction_static == res.best.settings["mem_fraction_static"] and tuned.max_running_requests == 8
    assert {d["key"] for d in res.diff} == {"mem_fraction_static", "max_mamba_cache_size"}
    assert any("no prior" in n for n in notes) and any("would take 36 starts" in n for n in notes)
    out = render_tune(res.to_json())
    assert "tune SERVED: 8 × 32,768" in out and "2 start(s) spent; a 0.01 grid" in out and "seed-tuned.toml" in out


def test_ctrl_c_stops_the_unit_and_resume_continues_the_run(world) -> None:
    units, sd, interrupt_at, state = world
    interrupt_at.append(2)
    res, notes = _tune(world)
    assert res.status == "interrupted" and res.starts == 1 and sd.active == set()
    assert any("seed-tuned.service stopped" in n for n in notes) and "--resume" in res.message
    interrupt_at.clear()
    again, notes = _tune(world, resume=True)
    assert again.run_id == res.run_id and again.status == "met" and again.starts == 2
    assert any("resuming" in n and "1 start(s) already made" in n for n in notes)


def test_tune_refuses_while_the_original_runs_and_resume_needs_a_run(world) -> None:
    units, sd, _, _ = world
    with pytest.raises(SvcdiagError, match="no tune run of seed to resume"):
        _tune(world, resume=True)
    sd.active.add("seed.service")
    with pytest.raises(SvcdiagError, match=r"seed.service is running .*svcdiag down seed"):
        _tune(world)


@pytest.mark.parametrize(("items", "message"), [
    (["max_running=0"], "--target 'max_running=0': expected max_running=N or context=N"),
    (["speed=3"], "--target 'speed=3'"),
    (["context=4096"], "--target max_running=N is required"),
])
def test_target_errors_name_the_option(world, items, message) -> None:
    units = world[0]
    with pytest.raises(SvcdiagError, match=__import__("re").escape(message)):
        ops_tune.parse_target(items, units.load("seed"))


def test_keep_and_budget_are_checked() -> None:
    assert ops_tune.parse_keep(["cuda_graph_max_bs"]) == frozenset({"cuda_graph_max_bs"})
    with pytest.raises(SvcdiagError, match="--keep 'tp_size': not a key tune may hold; one of mem_fraction_static"):
        ops_tune.parse_keep(["tp_size"])
    assert ops_tune.parse_keep(["speculative.num_draft_tokens"], "--allow") == {"speculative.num_draft_tokens"}
    with pytest.raises(SvcdiagError, match="--allow 'context_length': not a key tune may change; one of "
                                           "speculative.num_draft_tokens"):
        ops_tune.parse_keep(["context_length"], "--allow")
    assert ops_tune.parse_budget("45m") == 2700 and ops_tune.parse_budget("1h30m") == 5400
    assert ops_tune.parse_budget("90s") == 90 and ops_tune.parse_budget("10") == 600
    for bad in ("soon", "0m", ""):
        with pytest.raises(SvcdiagError, match="--budget"):
            ops_tune.parse_budget(bad)


def test_a_campaign_phase_may_tune(tmp_path) -> None:
    units = tmp_path / "units"
    units.mkdir()
    (units / "seed.toml").write_text('model_path = "/m"\n')
    plan = tmp_path / "plan.toml"
    plan.write_text('baseline = false\n[[phase]]\nname = "fit"\nconfigs = ["seed"]\n'
                    'tune = { target = { max_running = 8, context = 32768 }, max_starts = 4 }\n')
    p = load_plan(plan, UnitsDir(units, "test"))
    assert p.phases[0].tune == {"target": {"max_running": 8, "context": 32768}, "max_starts": 4}
    plan.write_text('baseline = false\n[[phase]]\nname = "fit"\nconfigs = ["seed"]\ntune = { target = { context = 8 } }\n')
    with pytest.raises(ConfigError, match=r"phase\[0\]\.tune.*needs target = \{ max_running = N \}"):
        load_plan(plan, UnitsDir(units, "test"))


def test_without_a_prior_a_start_that_logs_no_pool_is_followed_by_the_most_static_memory() -> None:
    # 40 Mamba slots at the config's 0.75 leave nothing for the KV pool: SGLang says only "Not enough memory"
    stop, trials = run(problem(Target(8, 32768), UNKNOWN), SEED)
    assert [(t.settings["mem_fraction_static"], t.cause) for t in trials] == [(0.75, "not_enough_memory"), (0.95, None)]
    assert stop.status == "impossible" and "at most 6 at this context" in stop.message


def test_a_foreign_process_on_the_gpus_refuses_the_start_and_the_run_can_resume(world, monkeypatch) -> None:
    from svcdiag.ops.host.gpu_hygiene import GpuBusy

    def busy(cfg, note, *, force, remote=None):
        raise GpuBusy(f"{cfg.name}: GPU memory held by another process: pid 4242 (python3, 30.0 GB) on GPU 0")

    monkeypatch.setattr(ops_tune.gpu_hygiene, "gate", busy)
    with pytest.raises(GpuBusy, match="pid 4242"):
        _tune(world)
    assert world[1].stopped == [] and world[1].active == set()


def test_baseline_that_drifted_refuses_the_search(world, monkeypatch) -> None:
    from svcdiag.ops.fleet import baseline

    units = world[0]
    (units.path / "base.toml").write_text('model_path = "/m"\nbaseline = true\n')
    checked: list[str] = []

    def drifted(sd, cfg, units_, pub, **kw):
        checked.append(cfg.name)
        return baseline.CheckOutcome(Verdict(verdict="healthy", phase="ready", cause=None, message=""),
                                     {"summary": "baseline base drifted: healthy, 1 drift item(s)"},
                                     ({"message": "KV cache down 9.0 %"},))

    monkeypatch.setattr(baseline, "check", drifted)
    with pytest.raises(SvcdiagError, match=r"--baseline: base did not hold \(baseline base drifted.*refuses to search"):
        _tune(world, baseline=True)
    assert checked == ["base"] and world[1].stopped == []


@settings(max_examples=200, deadline=None)
@given(st.lists(st.text(max_size=20), max_size=3), st.text(max_size=12))
def test_target_and_budget_parsers_answer_in_one_line_or_a_value(items: list[str], budget: str) -> None:
    from svcdiag.config.service import ServiceConfig

    conf = ServiceConfig(name="x", path=__import__("pathlib").Path("/u/x.toml"), model_path="/m", context_length=4096)
    try:
        t = ops_tune.parse_target(items, conf)
        assert t.requests >= 1 and t.context >= 1
    except SvcdiagError as e:
        assert "\n" not in str(e) and "--target" in str(e)
    try:
        b = ops_tune.parse_budget(budget)
        assert b is None or b > 0
    except SvcdiagError as e:
        assert "\n" not in str(e) and str(e).startswith("--budget")


@settings(max_examples=150, deadline=None)
@given(st.floats(70, 150), st.floats(0.85, 1.15), st.floats(0.9, 1.1), requests, contexts, st.integers(0, 3))
def test_any_prior_however_wrong_ends_in_the_truth_or_the_budget(free_gb: float, w_err: float, cell_err: float,
                                                               r: int, ctx: int, spent: int) -> None:
    """A prior off by up to 15 % in the weights and 10 % in the KV cell: the search still ends, says
    the truth when it says anything, and never starts the same candidate twice."""
    true = costs(SEED, free_before_gb=free_gb)
    prior = costs(true, weights_gb=true.sizing.weights_gb * w_err, kv_cell_bytes=int(65536 * cell_err))
    stop, trials = run(problem(Target(r, ctx), prior, max_starts=spent + 3 if spent else None), true)
    settings_seen = [tuple(sorted(t.settings.items())) for t in trials]
    assert len(settings_seen) == len(set(settings_seen))
    oracle = truly_serves(true, Target(r, ctx), 5)
    if stop.status == "met":
        assert stop.best is not None and stop.best.settings["mem_fraction_static"] == oracle
    elif stop.status == "impossible" and trials:
        assert oracle is None, stop.message
    else:
        assert stop.status in ("budget", "impossible"), stop.message


def test_allowed_fewer_draft_tokens_serve_what_the_block_size_cannot() -> None:
    # the seed's card: 16 intermediate states per request leave room for 6 requests; allowed, the search
    # lowers DFlash's block size to the most that leave room for 8, and proves it with a start
    p = problem(Target(8, 32768), SEED, allow=frozenset({"speculative.num_draft_tokens"}))
    stop, trials = run(p, SEED)
    assert stop.status == "met" and stop.best is not None, stop.message
    d = stop.best.settings["speculative.num_draft_tokens"]
    assert 1 <= d < 16 and "speculative.num_draft_tokens 16 → " in trials[0].why
    held = {**stop.best.settings, "speculative.num_draft_tokens": d + 1}
    assert not any(Target(8, 32768).met_by(fake_start(SEED, {**held, "mem_fraction_static": f / 100}).figures)
                   for f in range(50, 96))  # one more draft token serves at no fraction


def test_the_tuned_config_sets_the_draft_tokens_in_its_speculative_table(tmp_path) -> None:
    (tmp_path / "seed.toml").write_text('model_path = "/m"\nmax_mamba_cache_size = 2\n[speculative]\n'
                                        'algorithm = "DFLASH"\ndraft_model_path = "/d"\n')
    units = UnitsDir(tmp_path, "test")
    cfg = units.load("seed")
    text = ops_tune.render_tuned(cfg, {**ops_tune.base_settings(cfg), "speculative.num_draft_tokens": 10,
                                       "mem_fraction_static": 0.9}, "header")
    (tmp_path / "seed-tuned.toml").write_text(text)
    tuned = units.load("seed-tuned")
    assert tuned.speculative is not None and tuned.speculative.num_draft_tokens == 10
    assert tuned.speculative.draft_model_path == "/d" and tuned.mem_fraction_static == 0.9


def test_a_new_run_says_it_replaces_an_unfinished_one(world) -> None:
    world[2].append(1)
    _tune(world)
    world[2].clear()
    res, notes = _tune(world)
    assert res.status == "met" and any("held an unfinished run of seed; this run replaces it" in n for n in notes)


# ---------------------------------------------------------------- issue 39 item 8: what a newcomer met


def _tune_target(world, items: list[str], name: str = "seed", **kw):
    units, sd, _, state = world
    cfg = units.load(name)
    notes: list[str] = []
    pub = Publisher([], config=name)
    pub.note = notes.append  # type: ignore[method-assign]
    return ops_tune.tune(sd, cfg, units, pub, target=ops_tune.parse_target(items, cfg), state=str(state), **kw), notes


def test_a_later_run_that_serves_nothing_never_replaces_a_tuned_file_that_served(world) -> None:
    units = world[0]
    first, _ = _tune(world)
    assert first.status == "met"
    good = (units.path / "seed-tuned.toml").read_text()
    short, _ = _tune(world, max_starts=1)  # its one start measures, and does not serve
    assert short.status == "budget" and short.best is not None and short.best.verdict == "healthy"
    assert (units.path / "seed-tuned.toml").read_text() == good  # the earlier result, as it was
    assert "kept as it was (an earlier run's settings, which met its target)" in short.message
    assert short.written is None


def test_a_budget_stop_whose_best_start_serves_does_not_say_it_does_not_serve(world) -> None:
    units = world[0]
    (units.path / "roomy.toml").write_text('extends = "seed"\nmem_fraction_static = 0.9\n')
    res, _ = _tune_target(world, ["max_running=8"], "roomy", max_starts=1)
    assert res.status == "budget" and res.starts == 1 and res.best is not None
    text = (units.path / "roomy-tuned.toml").read_text()
    assert "does not serve" not in text and "The best start so far serves 8 × 32,768" in text, text
    assert "the best start serves 8 × 32,768 (written)" in res.message


def test_a_context_longer_than_the_model_takes_is_refused_before_any_start(world, tmp_path) -> None:
    units, sd, _, _ = world
    with pytest.raises(SvcdiagError, match=r"context=10000000: longer than seed's context_length \(32,768\)"):
        _tune_target(world, ["max_running=8", "context=10000000"])
    model = tmp_path / "model"
    model.mkdir()
    (model / "config.json").write_text('{"architectures": ["Qwen3ForCausalLM"], "num_hidden_layers": 36, '
                                       '"num_attention_heads": 32, "num_key_value_heads": 8, "head_dim": 128, '
                                       '"max_position_embeddings": 40960}')
    (units.path / "known.toml").write_text(f'extends = "seed"\nmodel_path = "{model}"\n')
    with pytest.raises(SvcdiagError, match=r"context=65536: longer than the model's longest context, 40,960 "
                                           r"\(max_position_embeddings, .*config.json\)"):
        _tune_target(world, ["max_running=8", "context=65536"], "known")
    assert sd.stopped == [] and not (units.path / "seed-tuned.toml").exists()  # nothing started, nothing written


def test_resume_of_another_target_is_refused_before_anything_else(world, monkeypatch) -> None:
    world[2].append(2)
    _tune(world)  # interrupted at its second start: a run to resume, for 8 × 32,768
    world[2].clear()

    def never(*a, **k):
        raise AssertionError("preflight ran before --resume was checked")

    monkeypatch.setattr(ops_tune, "quiet_plan", never)
    with pytest.raises(SvcdiagError, match=r"--resume: .* is a run for 8 × 32,768, not 4 × 32,768"):
        _tune_target(world, ["max_running=4"], resume=True)


def test_a_target_given_twice_is_refused(world) -> None:
    cfg = world[0].load("seed")
    with pytest.raises(SvcdiagError, match=r"--target max_running given twice \(max_running=8 and max_running=4\)"):
        ops_tune.parse_target(["max_running=8", "max_running=4"], cfg)
    with pytest.raises(SvcdiagError, match="--target context given twice"):
        ops_tune.parse_target(["max_running=8", "context=32768", "context_length=8192"], cfg)


def test_an_interpreter_without_sglang_is_refused_before_any_unit_starts(world, monkeypatch) -> None:
    units, sd, _, _ = world
    monkeypatch.setattr(ops_tune, "require_sglang", _REQUIRE_SGLANG)
    (units.path / "nosglang.toml").write_text('extends = "seed"\npython = "/nonexistent/venv/bin/python"\n')
    with pytest.raises(SvcdiagError, match=r"/nonexistent/venv/bin/python does not exist here: the unit cannot "
                                           r"start SGLang"):
        _tune_target(world, ["max_running=8"], "nosglang")
    assert sd.stopped == [] and sd.active == set()


def test_ctrl_c_during_a_candidate_says_stopped_not_left_as_it_is(world, monkeypatch) -> None:
    from svcdiag.ops.serve import start

    def hit(*a, **k):
        raise KeyboardInterrupt

    monkeypatch.setattr(start, "judge_start", hit)
    notes: list[str] = []
    pub = Publisher([], config="seed")
    pub.note = notes.append  # type: ignore[method-assign]
    cfg = world[0].load("seed")
    out = start.wait_verdict(world[1], cfg, world[0], Props(True), pub, None, left_running=False)
    assert out.interrupted and notes == []  # tune stops the unit and says so itself
    out = start.wait_verdict(world[1], cfg, world[0], Props(True), pub, None)
    assert out.interrupted and "is left as it is" in notes[0]  # up and wait leave it running, as they say
    seen: list[object] = []
    waited = ops_tune.wait_verdict
    monkeypatch.setattr(ops_tune, "wait_verdict", lambda *a, **k: seen.append(k.get("left_running")) or waited(*a, **k))
    _tune(world)
    assert seen and set(seen) == {False}


def test_a_target_no_start_could_even_measure_says_what_to_try_instead(world) -> None:
    # max_running=1000: each start died allocating its Mamba state, before logging a pool: no costs, no fallbacks
    res, _ = _tune_target(world, ["max_running=1000"])
    assert res.status == "impossible" and res.fallbacks == () and res.starts == 2
    assert all(t.figures.kv_tokens is None for t in res.trials)
    assert ("no start logged its memory pools, so nothing measured says what would serve instead: try a smaller "
            "--target max_running (the config's own is 8)") in res.message
