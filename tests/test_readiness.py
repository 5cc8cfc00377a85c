"""The readiness state machine alone: typed events in, on a clock the test gives, a verdict out.

No grammar and no journal here: each test feeds the events SGLang's lines would become
(svcdiag.sglang.events) and systemd's (svcdiag.judge.verdict.UnitState), with their `ts`,
and reads only the machine's public face (feed, tick, finish, next_deadline, verdict,
phase, figures, phase_seconds, evidence).
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from svcdiag.judge.readiness import Readiness
from svcdiag.judge.verdict import PhaseChange, UnitState, Verdict
from svcdiag.sglang.events import (
    CudaGraph,
    Event,
    Failure,
    KVCache,
    MambaCache,
    Ready,
    SchedulerInfo,
    ServerArgs,
    SlidingWindowPool,
    Uvicorn,
    WeightsBegin,
    WeightsEnd,
)

T0 = 1000.0  # the start, on the test's clock

LOADING = "Loading safetensors checkpoint shards:  50% Completed | 6/12"
MRZ = "AssertionError: max_running_request is zero"


# ---------------------------------------------------------------- the milestones of one start


def weights_begin(ts: float, ranks: str = "TP0") -> WeightsBegin:
    return WeightsBegin(ts=ts, ranks=ranks, avail_gb=139.72, line="Load weight begin. avail mem=139.72 GB")


def weights_end(ts: float, ranks: str = "TP0") -> WeightsEnd:
    return WeightsEnd(ts=ts, ranks=ranks, model_type="Qwen3_5ForCausalLM", elapsed_s=40.0, avail_gb=88.2,
                      mem_usage_gb=51.52, line="Load weight end. elapsed=40.00 s, mem usage=51.52 GB.")


def kv_cache(ts: float, ranks: str = "TP0") -> KVCache:
    return KVCache(ts=ts, ranks=ranks, tokens=11893, dtype="torch.bfloat16", k_gb=0.36, v_gb=0.36,
                   line="KV Cache is allocated. dtype: torch.bfloat16, #tokens: 11893, "
                        "K size: 0.36 GB, V size: 0.36 GB")


def mamba_cache(ts: float) -> MambaCache:
    return MambaCache(ts=ts, ranks="TP0", slots=24, conv_gb=0.07, ssm_gb=3.52,
                      line="Mamba Cache is allocated. max_mamba_cache_size: 24, conv_state size: 0.07GB, "
                           "ssm_state size: 3.52GB")


def graph(ts: float, stage: str) -> CudaGraph:
    return CudaGraph(ts=ts, ranks="TP0", stage=stage, name="target decode",
                     mem_usage_gb=1.25 if stage == "end" else None, line=f"Capture cuda graph {stage}.")


def scheduler(ts: float, max_running: int = 4) -> SchedulerInfo:
    return SchedulerInfo(ts=ts, ranks="TP0", max_total_num_tokens=11893, max_running_requests=max_running,
                         context_len=32768, available_gpu_mem_gb=20.1,
                         line=f"max_total_num_tokens=11893, max_running_requests={max_running}, context_len=32768")


def uvicorn(ts: float) -> Uvicorn:
    return Uvicorn(ts=ts, stage="running", url="http://127.0.0.1:30000", line="Uvicorn running on ...")


def ready(ts: float) -> Ready:
    return Ready(ts=ts, line="The server is fired up and ready to roll!")


def failure(ts: float, cause: str, message: str, ranks: str = "TP0") -> Failure:
    return Failure(ts=ts, ranks=ranks, cause=cause, message=message, line=message,
                   evidence=("Scheduler hit an exception: Traceback (most recent call last):", message))


def exited(ts: float, status: str = "1/FAILURE") -> UnitState:
    return UnitState(ts=ts, state="exited", code="exited", status=status,
                     line=f"Main process exited, code=exited, status={status}")


#: (factory, the phase a hybrid start is in after it) in SGLang's order: KV pool, then Mamba pool
HYBRID_START = [
    (weights_begin, "loading_weights"),
    (weights_end, "kv_cache"),
    (kv_cache, "mamba_cache"),
    (mamba_cache, "cuda_graph"),
    (lambda ts: graph(ts, "begin"), "cuda_graph"),
    (lambda ts: graph(ts, "end"), "scheduler"),
    (scheduler, "http"),
    (uvicorn, "http"),
    (ready, "ready"),
]
#: a dense model: no Mamba pool, the KV cache leads straight to the CUDA graphs
DENSE_START = [(f, "cuda_graph" if f is kv_cache else p) for f, p in HYBRID_START if f is not mamba_cache]


def machine(*, hybrid: bool | None = True, total: float | None = None, **timeouts: float) -> Readiness:
    return Readiness(timeouts, hybrid=hybrid, start_ts=T0, total_timeout=total)


def feed_all(r: Readiness, events: list[Event]) -> list[Event]:
    out: list[Event] = []
    for ev in events:
        out += r.feed(ev)
    return out


def entered(out: list[Event]) -> list[str]:
    return [e.phase for e in out if isinstance(e, PhaseChange)]


# ---------------------------------------------------------------- a healthy start


def test_phases_in_order_with_the_seconds_spent_in_each_then_healthy_with_startup_s() -> None:
    r = machine()
    assert (r.phase, r.verdict) == ("starting", None)
    out: list[Event] = []
    offsets = [3.0, 43.0, 44.0, 45.0, 46.0, 58.0, 60.0, 61.0, 62.5]
    for (make, phase), dt in zip(HYBRID_START, offsets, strict=True):
        out += r.feed(make(T0 + dt))
        assert r.phase == phase, make
    assert entered(out) == ["loading_weights", "kv_cache", "mamba_cache", "cuda_graph", "scheduler", "http", "ready"]
    changes = [e for e in out if isinstance(e, PhaseChange)]
    assert [(c.previous, c.previous_s) for c in changes] == [
        ("starting", 3.0), ("loading_weights", 40.0), ("kv_cache", 1.0), ("mamba_cache", 1.0),
        ("cuda_graph", 13.0), ("scheduler", 2.0), ("http", 2.5)]
    expected_seconds = {"starting": 3.0, "loading_weights": 40.0, "kv_cache": 1.0, "mamba_cache": 1.0,
                        "cuda_graph": 13.0, "scheduler": 2.0, "http": 2.5}
    assert r.phase_seconds == expected_seconds

    v = r.verdict
    assert isinstance(v, Verdict) and out[-1] is v  # the verdict is the last thing the operator sees
    assert (v.verdict, v.phase, v.cause) == ("healthy", "ready", None)
    assert v.figures.startup_s == 62.5
    assert v.phase_seconds == expected_seconds
    assert (v.figures.kv_tokens, v.figures.mamba_slots, v.figures.max_running_requests) == (11893, 24, 4)
    assert v.figures.weights_gb == 51.52
    assert r.next_deadline() is None  # nothing left to time out
    assert r.finish() is v


def test_dense_start_goes_from_kv_cache_straight_to_cuda_graph() -> None:
    r = machine(hybrid=False)
    out = feed_all(r, [make(T0 + i) for i, (make, _) in enumerate(DENSE_START, start=1)])
    assert entered(out) == ["loading_weights", "kv_cache", "cuda_graph", "scheduler", "http", "ready"]
    assert r.verdict is not None and r.verdict.verdict == "healthy"
    assert "mamba_cache" not in r.phase_seconds


def test_a_drafts_kv_line_in_the_targets_shape_is_the_drafts_not_the_targets() -> None:
    # before 0.5.23 an EAGLE draft's KV pool line looks like the target's; it comes after the draft's weights
    r = machine(hybrid=False)
    kv = "KV Cache is allocated. #tokens: 452802, K size: {0} GB, V size: {0} GB"
    feed_all(r, [WeightsBegin(ts=T0 + 1, avail_gb=78.5), WeightsEnd(ts=T0 + 2, mem_usage_gb=15.08, avail_gb=63.42),
                 KVCache(ts=T0 + 3, tokens=452802, k_gb=27.64, v_gb=27.64, line=kv.format(27.64)),
                 WeightsBegin(ts=T0 + 4, avail_gb=3.98), WeightsEnd(ts=T0 + 5, mem_usage_gb=0.8, avail_gb=3.18),
                 KVCache(ts=T0 + 6, tokens=452802, k_gb=0.86, v_gb=0.86, line=kv.format(0.86))])
    f = r.figures
    assert (f.kv_k_gb, f.kv_v_gb, f.draft_kv_gb, f.draft_kv_tokens) == (27.64, 27.64, 1.72, 452802)
    assert kv.format(0.86) not in r.evidence  # the target's pool is the evidence of its memory, not the draft's


@pytest.mark.parametrize("full_last", [True, False])
def test_a_sliding_window_models_two_unnamed_kv_lines_are_told_apart_by_the_announcement(full_last: bool) -> None:
    # before 0.5.23 both pools print `KV Cache is allocated. #tokens: N` without a name, in either order
    r = machine(hybrid=False)
    feed_all(r, [WeightsBegin(ts=T0 + 1, avail_gb=78.5), WeightsEnd(ts=T0 + 2, mem_usage_gb=15.0, avail_gb=63.0),
                 SlidingWindowPool(ts=T0 + 3, full_tokens=375360, swa_tokens=300288)])
    pools = [KVCache(ts=T0 + 3, tokens=300288, k_gb=8.38, v_gb=5.59), KVCache(ts=T0 + 3, tokens=375360, k_gb=1.07, v_gb=0.72)]
    feed_all(r, pools if full_last else pools[::-1])
    assert (r.figures.kv_tokens, r.figures.swa_kv_tokens, r.figures.kv_k_gb) == (375360, 300288, 1.07)
    assert r.phase == "cuda_graph"


# ---------------------------------------------------------------- hybrid: the Mamba cache before the graphs


def test_hybrid_config_waits_for_the_mamba_cache_before_cuda_graph() -> None:
    r = machine(hybrid=True)
    feed_all(r, [weights_begin(T0 + 1), weights_end(T0 + 2), kv_cache(T0 + 3)])
    assert r.phase == "mamba_cache"  # KV alone is not enough for a hybrid model
    r.feed(mamba_cache(T0 + 4))
    assert r.phase == "cuda_graph"


def test_mamba_pool_first_then_kv_pool_also_reaches_cuda_graph_once_both_are_there() -> None:
    r = machine(hybrid=True)
    feed_all(r, [weights_begin(T0 + 1), weights_end(T0 + 2), mamba_cache(T0 + 3)])
    assert r.phase == "kv_cache"
    r.feed(kv_cache(T0 + 4))
    assert r.phase == "cuda_graph"


def test_hybrid_unknown_is_learned_from_the_server_args_line() -> None:
    r = machine(hybrid=None)
    r.feed(ServerArgs(ts=T0 + 0.5, max_mamba_cache_size=24, context_length=32768, tp_size=1,
                      line="server_args=ServerArgs(...)"))
    feed_all(r, [weights_begin(T0 + 1), weights_end(T0 + 2), kv_cache(T0 + 3)])
    assert r.phase == "mamba_cache"
    assert r.figures.requested_max_mamba_cache_size == 24


# ---------------------------------------------------------------- deadlines


def test_phase_deadline_times_out_naming_the_phase_with_stalled_s() -> None:
    r = machine(loading_weights=10)
    r.feed(weights_begin(T0 + 1))
    assert r.next_deadline() == T0 + 11
    assert r.tick(T0 + 10.5) is None and r.verdict is None  # within the deadline
    v = r.tick(T0 + 11.5)
    assert v is not None and v is r.verdict
    assert (v.verdict, v.phase, v.cause) == ("timed_out", "loading_weights", None)
    assert v.stalled_s == 10.5
    assert "loading_weights" in v.message
    assert r.next_deadline() is None


def test_stall_quotes_the_last_line_seen() -> None:
    r = machine(loading_weights=10)
    r.feed(weights_begin(T0 + 1))
    v = r.tick(T0 + 20)
    assert v is not None and v.last_line == "Load weight begin. avail mem=139.72 GB"
    assert v.last_line in v.evidence


def test_total_deadline_times_out_though_every_phase_is_within_its_own() -> None:
    r = machine(total=20, loading_weights=100, kv_cache=100, mamba_cache=100)
    feed_all(r, [weights_begin(T0 + 5), weights_end(T0 + 12), kv_cache(T0 + 18)])
    assert r.phase == "mamba_cache"
    assert r.next_deadline() == T0 + 20  # the whole start's deadline is the nearer one
    assert r.tick(T0 + 19.5) is None
    v = r.tick(T0 + 21)
    assert v is not None
    assert (v.verdict, v.phase) == ("timed_out", "mamba_cache")
    assert "whole start" in v.message
    assert v.stalled_s == 3.0  # time in the phase it was stuck in


def test_a_milestone_after_its_deadline_ends_the_phase_as_slow_not_stuck() -> None:
    """A deadline passed on a line's time (a replay, a start's backlog) only holds the timed_out: the
    log goes on to show the phase ending after all (a first start's kernel compile), so the start
    goes on, and its healthy verdict names the phase that overran and the deadline to raise."""
    r = machine(loading_weights=10)
    r.feed(weights_begin(T0 + 1))
    out = r.feed(weights_end(T0 + 12))  # the phase's deadline passed at T0 + 11
    assert PhaseChange in [type(e) for e in out] and r.verdict is None and r.phase == "kv_cache"
    feed_all(r, [kv_cache(T0 + 13), graph(T0 + 13, "end"), scheduler(T0 + 13), ready(T0 + 14)])
    v = r.verdict
    assert v is not None and v.verdict == "healthy" and v.figures.overran_deadlines_s == {"loading_weights": 10}
    assert "phase loading_weights took 11 s, past its 10 s deadline" in v.message and "timeouts.loading_weights" in v.message


def test_past_its_deadline_with_no_milestone_the_clock_times_out_as_it_was_then() -> None:
    """No milestone after the deadline: the clock (a live tick, the end of input) concludes timed_out
    as it was when the deadline passed, with that time and that last line; a failure the log shows
    after the deadline says more than the deadline does."""
    r = machine(loading_weights=10)
    r.feed(weights_begin(T0 + 1))
    r.saw_line("Loading safetensors checkpoint shards:  25% Completed | 3/12")
    assert r.tick(T0 + 12, evidence=True) is None and r.verdict is None
    r.saw_line("a later line, not a milestone")
    v = r.tick(T0 + 40)
    assert v is not None and (v.verdict, v.phase, v.stalled_s, v.ts) == ("timed_out", "loading_weights", 11.0, T0 + 12)
    assert v.last_line == "Loading safetensors checkpoint shards:  25% Completed | 3/12"
    r = machine(loading_weights=10)
    r.feed(weights_begin(T0 + 1))
    r.tick(T0 + 12, evidence=True)
    r.feed(failure(T0 + 13, "cuda_oom", "torch.OutOfMemoryError: CUDA out of memory."))
    v = r.finish()
    assert (v.verdict, v.cause) == ("failed", "cuda_oom")


def test_the_first_timestamp_starts_the_clock_when_no_start_was_given() -> None:
    r = Readiness({"starting": 5})
    assert r.next_deadline() is None  # no clock yet
    r.feed(ServerArgs(ts=T0, tp_size=1, line="server_args=..."))
    assert r.next_deadline() == T0 + 5
    assert r.tick(T0 + 6) is not None and r.verdict is not None and r.verdict.phase == "starting"


# ---------------------------------------------------------------- failures


def test_failure_on_a_non_zero_tp_rank_still_fails() -> None:
    r = machine()
    feed_all(r, [weights_begin(T0 + 1), weights_end(T0 + 2), kv_cache(T0 + 3), mamba_cache(T0 + 4),
                 graph(T0 + 5, "begin")])
    out = r.feed(failure(T0 + 6, "cuda_oom", "torch.OutOfMemoryError: CUDA out of memory.", ranks="TP3"))
    v = r.verdict
    assert v is not None and (v.verdict, v.cause, v.phase) == ("failed", "cuda_oom", "cuda_graph")
    assert isinstance(out[0], Failure) and out[-1] is v  # the operator sees the failure, then the verdict
    assert "torch.OutOfMemoryError: CUDA out of memory." in v.evidence


def test_the_lowest_rank_seen_speaks_for_the_start() -> None:
    """A worker node of a two-node TP16 start prints ranks TP8..TP15 only: TP8 speaks there.
    Once a lower rank is seen, the higher ones' milestones no longer move the phase."""
    r = machine()
    r.feed(weights_begin(T0 + 1, ranks="TP8"))
    assert r.phase == "loading_weights"
    r = machine()
    r.feed(weights_begin(T0 + 1, ranks="TP0"))
    r.feed(weights_end(T0 + 2, ranks="TP2"))
    assert r.phase == "loading_weights"
    r.feed(weights_end(T0 + 3, ranks="TP0"))
    assert r.phase == "kv_cache"


def test_max_running_zero_fails_in_scheduler_with_a_zero_max_running_requests_figure() -> None:
    r = machine()
    feed_all(r, [weights_begin(T0 + 1), weights_end(T0 + 40), kv_cache(T0 + 41), mamba_cache(T0 + 42),
                 graph(T0 + 43, "begin"), graph(T0 + 53, "end")])
    assert r.phase == "scheduler"
    r.feed(failure(T0 + 56, "max_running_zero", MRZ))
    v = r.verdict
    assert v is not None
    assert (v.verdict, v.cause, v.phase, v.message) == ("failed", "max_running_zero", "scheduler", MRZ)
    assert v.figures.max_running_requests == 0 and r.figures.max_running_requests == 0
    assert v.figures.kv_tokens == 11893
    assert v.phase_seconds["scheduler"] == 3.0


def test_systemd_exit_before_any_log_line_says_why_is_a_failure() -> None:
    r = machine()
    feed_all(r, [weights_begin(T0 + 1), weights_end(T0 + 2)])
    r.feed(exited(T0 + 3))
    v = r.verdict
    assert v is not None and (v.verdict, v.cause, v.phase) == ("failed", "exited", "kv_cache")
    assert v.figures.exit_status == 1


# ---------------------------------------------------------------- end of input, and stickiness


def test_finish_on_an_unfinished_start_is_incomplete_naming_the_phase() -> None:
    r = machine()
    feed_all(r, [weights_begin(T0 + 1), weights_end(T0 + 30)])
    v = r.finish()
    assert (v.verdict, v.phase, v.cause) == ("incomplete", "kv_cache", None)
    assert "kv_cache" in v.message
    assert r.verdict is v


def test_finish_with_no_events_at_all_is_incomplete_in_starting() -> None:
    v = Readiness().finish()
    assert (v.verdict, v.phase) == ("incomplete", "starting")


def test_verdict_is_sticky_but_systemd_exit_lines_add_evidence() -> None:
    r = machine()
    feed_all(r, [weights_begin(T0 + 1), weights_end(T0 + 40), kv_cache(T0 + 41), mamba_cache(T0 + 42),
                 graph(T0 + 43, "begin"), graph(T0 + 53, "end")])
    r.feed(failure(T0 + 56, "max_running_zero", MRZ))
    first = r.verdict
    assert first is not None
    # later milestones, a later failure and the clock change nothing
    assert feed_all(r, [scheduler(T0 + 57), ready(T0 + 58),
                        failure(T0 + 59, "cuda_oom", "torch.OutOfMemoryError: CUDA out of memory.")]) == []
    assert r.tick(T0 + 10_000) is None and r.next_deadline() is None
    assert (r.verdict.verdict, r.verdict.cause, r.verdict.phase) == ("failed", "max_running_zero", "scheduler")
    assert r.phase == "scheduler" and r.figures.max_running_requests == 0
    # systemd's account of the exit that follows is kept as evidence, without changing the verdict
    r.feed(exited(T0 + 60))
    v = r.verdict
    assert (v.verdict, v.cause, v.message) == ("failed", "max_running_zero", MRZ)
    assert "Main process exited, code=exited, status=1/FAILURE" in v.evidence
    assert "Main process exited, code=exited, status=1/FAILURE" in r.evidence
    assert r.finish() is v


def test_a_healthy_verdict_stays_healthy_when_the_unit_later_exits() -> None:
    r = machine(hybrid=False)
    feed_all(r, [make(T0 + i) for i, (make, _) in enumerate(DENSE_START, start=1)])
    assert r.verdict is not None and r.verdict.verdict == "healthy"
    r.feed(exited(T0 + 100, "0/SUCCESS"))  # a stop: systemd's account is evidence, the start was healthy
    assert (r.verdict.verdict, r.verdict.phase) == ("healthy", "ready")


def test_a_log_that_shows_the_server_dying_after_ready_says_so() -> None:
    # a saved log (or a start's journal read later) that goes on past ready: the server's own death in it
    # is the verdict, as `wait` judges a unit that ended since: failed, died_after_ready, the figures kept
    r = machine(hybrid=False)
    feed_all(r, [make(T0 + i) for i, (make, _) in enumerate(DENSE_START, start=1)])
    kv = r.verdict.figures.kv_tokens
    r.feed(failure(T0 + 101, "cuda_oom", "torch.OutOfMemoryError: CUDA out of memory."))
    v = r.verdict
    assert (v.verdict, v.phase, v.cause, v.figures.died_of) == ("failed", "ready", "died_after_ready", "cuda_oom")
    assert v.figures.kv_tokens == kv and "CUDA out of memory" in v.message


# ---------------------------------------------------------------- properties


@st.composite
def start_prefix(draw):
    hybrid = draw(st.booleans())
    seq = HYBRID_START if hybrid else DENSE_START
    n = draw(st.integers(0, len(seq)))
    # gaps well inside every default deadline (the smallest is 300 s), so nothing may time out
    gaps = draw(st.lists(st.floats(0.0, 20.0, allow_nan=False), min_size=n, max_size=n))
    return hybrid, seq[:n], gaps


@settings(max_examples=300, deadline=None)
@given(start_prefix())
def test_any_prefix_of_a_good_start_never_fails_and_finishes_incomplete_or_healthy(case) -> None:
    hybrid, prefix, gaps = case
    r = machine(hybrid=hybrid)
    ts = T0
    for (make, phase), gap in zip(prefix, gaps, strict=True):
        ts += gap
        r.feed(make(ts))
        assert r.phase == phase
        assert r.verdict is None or r.verdict.verdict == "healthy"
    v = r.finish()
    complete = len(prefix) == len(HYBRID_START if hybrid else DENSE_START)
    assert v.verdict == ("healthy" if complete else "incomplete")
    assert v.phase == (prefix[-1][1] if prefix else "starting")
    assert sum(v.phase_seconds.values()) == pytest.approx(ts - T0, abs=0.01)


@st.composite
def shuffled_prefix(draw):
    hybrid = draw(st.booleans())
    seq = [make for make, _ in (HYBRID_START if hybrid else DENSE_START)]
    order = draw(st.permutations(seq))
    n = draw(st.integers(0, len(order)))
    gaps = draw(st.lists(st.floats(0.0, 20.0, allow_nan=False), min_size=n, max_size=n))
    return hybrid, order[:n], gaps


@settings(max_examples=300, deadline=None)
@given(shuffled_prefix())
def test_milestones_in_any_order_never_fail_and_the_phase_never_goes_back(case) -> None:
    hybrid, makes, gaps = case
    order = ["starting", "loading_weights", "kv_cache", "mamba_cache", "cuda_graph", "scheduler", "http", "ready"]
    r = machine(hybrid=hybrid)
    ts, seen = T0, ["starting"]
    for make, gap in zip(makes, gaps, strict=True):
        ts += gap
        for ev in r.feed(make(ts)):
            if isinstance(ev, PhaseChange):
                assert order.index(ev.phase) > order.index(ev.previous)
        seen.append(r.phase)
        assert r.verdict is None or r.verdict.verdict == "healthy"
    assert [order.index(p) for p in seen] == sorted(order.index(p) for p in seen)
    v = r.finish()
    assert v.verdict == ("healthy" if ready in makes else "incomplete")


# ---------------------------------------------------------------- a paste that opens while the server serves


@pytest.mark.parametrize("line", [
    "[2026-04-14 04:46:04 DP5 TP5] Prefill batch, #new-seq: 1, #new-token: 1280, #cached-token: 0, token usage: 0.01",
    "[2025-09-03 17:20:11 TP0] Decode batch. #running-req: 3, #token: 4410, token usage: 0.01, cuda graph: True",
    'INFO:     10.119.49.166:58178 - "POST /v1/completions HTTP/1.1" 200 OK',
])
def test_a_serving_line_moves_a_start_to_http_and_a_crash_after_it_is_judged_there(line: str) -> None:
    r = machine()
    r.feed(weights_begin(T0))
    out = r.saw_line(line, T0 + 5)
    assert entered(out) == ["http"] and r.phase == "http"
    assert r.saw_line(line, T0 + 6) == []  # said once: the phase is there already
    r.feed(failure(T0 + 7, "killed_by_signal", "Fatal Python error: Segmentation fault"))
    r.tick(T0 + 20)
    assert r.verdict is not None and r.verdict.phase == "http"


def test_a_probe_answered_while_loading_is_no_serving_line() -> None:
    r = machine()
    r.feed(weights_begin(T0))
    assert r.saw_line('INFO:     10.0.0.7:41222 - "GET /v1/models HTTP/1.1" 200 OK', T0 + 5) == []
    assert r.phase == "loading_weights"
