"""The readiness state machine: events in, a verdict out, as early as the evidence allows.

Pure: time is whatever the caller says it is (the log's own timestamps in replay, the
wall clock in the live path), so both paths reach the same verdict on the same lines.
Deadlines are evaluated on that clock.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from svcdiag.config.phases import DEFAULT_TIMEOUTS, PHASES
from svcdiag.judge.ending import AfterReady, Ending, after, decide, kernel_line, settle
from svcdiag.judge.progress import ProgressTracker
from svcdiag.judge.verdict import PhaseChange, UnitState, Verdict
from svcdiag.sglang.causes import UNNAMED, Cause
from svcdiag.sglang.events import (
    DEATH,
    ROOT,
    SUSPECT,
    CudaGraph,
    Event,
    Failure,
    HiCacheStorage,
    HostPool,
    KernelPrecompile,
    KVBelowContext,
    KVCache,
    MambaCache,
    MaxRunningLimited,
    PoolEnd,
    PortMoved,
    ProcessesGone,
    ProgressBar,
    Ready,
    Recovered,
    SchedulerInfo,
    ServerArgs,
    SlidingWindowPool,
    StartupTimings,
    StopRequested,
    UnifiedMemoryPool,
    Uvicorn,
    WeightsBegin,
    WeightsEnd,
)
from svcdiag.sglang.figures import Figures
from svcdiag.sglang.grammar import tp_rank
from svcdiag.sglang.traceback import SET_UP_PHASES

TYPE_CHECKING = False  # typing costs ~3 ms to import, and no module a replay loads needs it at run time
if TYPE_CHECKING:
    from typing import Any

_INDEX = {p: i for i, p in enumerate(PHASES)}
#: a line of a server that serves (quiet: no event of the grammar's): a batch the scheduler ran (`Prefill batch,
#: #new-seq: 1, …`, `Decode batch. …`) or a generation uvicorn answered (`"POST /v1/completions HTTP/1.1" 200 OK`);
#: not a GET (a probe's `/v1/models` or `/health` may be answered while a release that listens early still loads)
SERVING_RE = re.compile(r'\b(?:Decode|Prefill) batch[.,]|"POST /\S* HTTP/[\d.]+" 200\b')
MAX_EVIDENCE = 12
#: how long a consequence (`Rank 0 scheduler is dead`) waits for its cause to be printed,
#: and a suspect (a bare traceback) for SGLang to say it retries or to go on, before either is the verdict
DEATH_GRACE = 3.0
SUSPECT_GRACE = 30.0
#: (the phase a failure's frames say, the phase the log had reached): the scheduler's summary line moves a start to
#: http, yet the scheduler's set-up goes on after it (PD's transfer engine): a failure raised there failed in scheduler
_SET_UP_AFTER_SUMMARY = ("scheduler", "http")


@dataclass(frozen=True, slots=True)
class Deadline:
    """`limit` seconds from `since`, on whatever clock the caller keeps (the log's or the wall's)."""

    limit: float
    since: float

    @property
    def at(self) -> float:
        return self.since + self.limit

    def expired(self, now: float) -> bool:
        return now - self.since >= self.limit


@dataclass(frozen=True, slots=True)
class _Overrun:
    """A phase's deadline passed at a line's time `at`: the timed_out that would have been then."""

    phase: str
    limit: float
    at: float
    stalled: float
    last_line: str | None
    message: str


class Readiness:
    def __init__(self, timeouts: dict[str, float] | None = None, *, hybrid: bool | None = None,
                 start_ts: float | None = None, total_timeout: float | None = None,
                 unit: str | None = None, invocation: str | None = None, quote_events: bool = True):
        self.timeouts = {**DEFAULT_TIMEOUTS, **(timeouts or {})}
        self.hybrid = hybrid
        self.unit, self.invocation = unit, invocation
        self.total_timeout = total_timeout
        self.phase = "starting"
        self.figures = Figures()
        #: the speculative draft's load has begun: the KV and pool lines from here on are the draft's
        self._drafting = False
        self.phase_seconds: dict[str, float] = {}
        self.evidence: list[str] = []
        self.verdict: Verdict | None = None
        self.last_line: str | None = None
        #: quote each event's line as the last one seen; a Judge, which sees every line, says saw_line() instead
        self.quote_events = quote_events
        self.last_ts: float | None = None
        self.started: float | None = None
        self._deadline: Deadline | None = None
        self._total: Deadline | None = None
        self._seen: set[str] = set()
        self._oom_killed = False
        #: server_args says: speculative decoding on (a second weight load is the draft's), torch.compile on
        self._speculative: bool | None = None
        self._torch_compile = False
        self._lowest_rank: int | None = None
        #: a root cause SGLang may still recover from, and a death whose cause may still be said
        self._suspect: Failure | None = None
        self._death: Failure | None = None
        #: the death line a failed verdict was concluded on when it named no cause (`Rank 0 scheduler is dead` alone,
        #: its grace run out): the launcher's `Exit code: N` after it still says how the process ended
        self._unnamed_death: Failure | None = None
        self.degraded: list[dict[str, Any]] = []
        #: a healthy verdict, kept as it was while what the log says after it decides how the server's life ended
        self._healthy: Verdict | None = None
        #: after ready: what the log said of the end (judge.ending), and what that means (None: still serving)
        self._after = AfterReady()
        self.ending: Ending | None = None
        #: a failure raised in the start's own set-up came after a ready line: the start failed, nothing after counts
        self._set_up_failed = False
        #: before 0.5.23, the full and the sliding-window pools' tokens, announced before their unnamed KV lines
        self._sliding_window: tuple[int | None, int | None] = (None, None)
        #: the resource tracker's notice that every process of the server has ended, with no word of why
        self._gone: ProcessesGone | None = None
        #: a phase deadline passed on a line's time rather than the clock's: the timed_out it would have
        #: been then, held until a milestone later in the same input ends the phase (then `overran`), a
        #: failure says more, or the clock (a live tick, the end of input) concludes it as it was
        self._overrun: _Overrun | None = None
        #: phases that ended after their deadline, as the log shows: phase → its deadline (s)
        self.overran: dict[str, float] = {}
        #: progress within each phase (tqdm's bars): shown, never a milestone, never a deadline's reprieve
        self.progress = ProgressTracker()
        if start_ts is not None:
            self._start(start_ts)

    # ------------------------------------------------------------ what the caller tells it

    def identify(self, *, unit: str | None = None, invocation: str | None = None) -> None:
        """Name the start once the input says which it is (a journal's fields come after its first line)."""
        if unit is not None and self.unit is None:
            self.unit = unit
        if invocation is not None:
            self.invocation = invocation

    def serving_unseen(self) -> bool:
        """Whether a serving line (SERVING_RE) would still move the phase: a quiet run that holds one is walked."""
        return self.verdict is None and self.phase not in ("http", "ready")

    def saw_line(self, text: str, ts: float | None = None) -> list[Event]:
        """Any line, milestone or not: a stall's verdict quotes the last one; before http, a serving line moves the
        phase there (its PhaseChange returned); after a healthy verdict, the kernel's OOM killer's line is kept
        whatever the grammar makes of it (judge.ending names the killed pid's)."""
        if text and self.verdict is None:
            self.last_line = text
            if self.phase not in ("http", "ready") and ("batch" in text or '" 200' in text) \
                    and SERVING_RE.search(text) is not None:
                # the event loop runs: the set-up is done, however little of it the log shows (a paste that opens
                # while the server serves); a crash after it is in phase http, never the set-up's `starting`
                return self._advance("http", ts if ts is not None else self.last_ts)
        elif text and ("Killed process" in text or "oom-kill:" in text) and self._healthy_start() is not None:
            self._settle(kernel_line(self._after, text))
        return []

    # ------------------------------------------------------------ clock

    def _start(self, ts: float) -> None:
        self.started = ts
        self.last_ts = ts
        self._deadline = Deadline(self.timeouts[self.phase], ts)
        if self.total_timeout is not None:
            self._total = Deadline(self.total_timeout, ts)

    def tick(self, now: float, *, evidence: bool = False) -> Verdict | None:
        """Declare timed_out if `now` is past the current phase's deadline (or the total one);
        conclude a pending failure whose grace has run out. With `evidence` (`now` is a line's or an
        event's time, read from a log that may go on: a replay, a start's backlog), a phase deadline
        passed only marks the phase overrun: the log may show it ending after all, as a slow first
        start's kernel compile does; the clock (a live tick, the end of the input) times it out."""
        if self.verdict is not None:
            return None
        if self._death is not None and self._death.ts is not None and now - self._death.ts >= DEATH_GRACE:
            self._fail_pending(now)
            return self.verdict
        if self._suspect is not None and self._suspect.ts is not None and now - self._suspect.ts >= SUSPECT_GRACE:
            self._fail_pending(now)
            return self.verdict
        if self._deadline is None:
            return None
        if self._overrun is not None and not evidence:
            self._time_out(self._overrun)
            return self.verdict
        for deadline, what in ((self._deadline, f"phase {self.phase}"), (self._total, "the whole start")):
            if deadline is not None and deadline.expired(now):
                stalled = now - self._deadline.since
                last = f"; last line: {self.last_line!r}" if self.last_line else ""
                held = _Overrun(self.phase, deadline.limit, now, stalled, self.last_line,
                                f"no progress in {what} for {stalled:.0f} s (deadline {deadline.limit:.0f} s){last}")
                if evidence and deadline is self._deadline:
                    self._overrun = self._overrun or held
                    continue
                self._time_out(self._overrun or held)
                return self.verdict
        return None

    def _time_out(self, o: _Overrun) -> None:
        """timed_out as it was when the deadline passed: its time, its last line."""
        self.last_line = o.last_line
        self._conclude("timed_out", None, o.message, o.at, stalled_s=o.stalled)

    def set_figures(self, **figures: Any) -> None:
        """Figures known from outside the log's events (the release its line shapes suggest, journald's drops)."""
        self.figures = self.figures.replace(**figures)

    @property
    def overrun(self) -> bool:
        """The current phase's deadline has passed, on a line's clock (tick with `evidence`)."""
        return self._overrun is not None

    @property
    def phase_since(self) -> float | None:
        """When (on the caller's clock) the current phase began."""
        return self._deadline.since if self._deadline is not None else None

    @property
    def phase_deadline(self) -> float | None:
        """When (on the caller's clock) the current phase's deadline passes."""
        return self._deadline.at if self._deadline is not None else None

    @property
    def total_deadline(self) -> float | None:
        """When the whole start's deadline (`total_timeout`) passes, if it has one."""
        return self._total.at if self._total is not None else None

    def next_deadline(self) -> float | None:
        """When (on the caller's clock) the machine would time out without further lines."""
        if self.verdict is not None or self._deadline is None:
            return None
        ends = [self._deadline.at]
        if self._total is not None:
            ends.append(self._total.at)
        return min(ends)

    def quiet_until(self) -> float:
        """The earliest clock time at which `tick` could change anything (inf: none). A caller that
        skips lines whose timestamps all fall before it may skip their ticks too (replay's fast path)."""
        if self.verdict is not None:
            return float("inf")
        ends = [float("inf")]
        if self._death is not None and self._death.ts is not None:
            ends.append(self._death.ts + DEATH_GRACE)
        if self._suspect is not None and self._suspect.ts is not None:
            ends.append(self._suspect.ts + SUSPECT_GRACE)
        if self._deadline is not None:
            if self._overrun is None:  # overrun: only the clock or a milestone can end it, not a quiet line
                ends.append(self._deadline.at)
            if self._total is not None:
                ends.append(self._total.at)
        return min(ends)

    # ------------------------------------------------------------ events

    def feed(self, ev: Event) -> list[Event]:
        """Process one event; return what the operator's stream should show for it."""
        if self.verdict is not None:
            return self._after_verdict(ev)
        ts = ev.ts
        out: list[Event] = []
        if ts is not None:
            if self.started is None:
                self._start(ts)
            timed_out = self.tick(ts, evidence=True)
            if timed_out is not None:  # (the line that ended a death's grace may be its exit code: _late_exit)
                return [timed_out, *self._after_verdict(ev)] if self._unnamed_death is not None else [timed_out]
            self.last_ts = max(ts, self.last_ts or ts)
        if self.quote_events and ev.line and not isinstance(ev, UnitState):
            self.last_line = ev.line
        if isinstance(ev, ProgressBar):
            return [self.progress.feed(self.phase, ev)]
        rank = tp_rank(ev.ranks)
        if rank is not None and (self._lowest_rank is None or rank < self._lowest_rank):
            self._lowest_rank = rank
        primary = rank is None or rank == self._lowest_rank
        handler = getattr(self, f"_on_{type(ev).__name__}", None)
        if handler is not None and (primary or isinstance(ev, Failure)):
            out += handler(ev) or []
        news = primary if not isinstance(ev, Failure) else ev.role == ROOT  # pending ones speak in the verdict
        if news and not (isinstance(ev, UnitState) and self.verdict):
            out.insert(0, ev)  # a failure on any rank is the operator's news
        if self.verdict is not None:
            out.append(self.verdict)
        return out

    @property
    def after_ready(self) -> AfterReady:
        """What the log has said so far of how a healthy server's life ended (empty while it serves, or before ready)."""
        return self._after

    def _after_verdict(self, ev: Event) -> list[Event]:
        """An event after the verdict. A failed start's: systemd's account of its end is evidence. A healthy one's:
        what it says of how the server's life ended is folded into the facts (judge.ending.after), and the verdict is
        the one decision (judge.ending.decide) every path takes, live or offline; a failure raised in the start's own
        set-up (its frames say so) is a failed start in that phase instead, whatever ready line (another worker's)
        came before it."""
        assert self.verdict is not None
        healthy = self._healthy_start()
        if healthy is None:
            if self._late_exit(ev):
                return [ev]
            if isinstance(ev, UnitState) and ev.state in ("exited", "result", "oom") and ev.line:
                self._add_evidence(ev.line)
                self.verdict = self.verdict.with_(evidence=tuple(self.evidence))
            return []
        facts = self._after
        if isinstance(ev, Failure) and ev.role == ROOT and ev.raised_in in SET_UP_PHASES and facts.stop is None \
                and facts.kill is None:
            self._set_up_failed = True
            self.verdict = healthy.with_(verdict="failed", phase=ev.raised_in, cause=ev.cause, ts=ev.ts or healthy.ts,
                                         message=ev.message, detail=ev.detail, captures=ev.captures,
                                         evidence=(*healthy.evidence, *ev.evidence[:4]))
            return [ev]
        if not self._settle(after(facts, ev)):
            return []
        return [ev] if isinstance(ev, Failure) and ev in (self._after.kill, self._after.death) else []

    def _healthy_start(self) -> Verdict | None:
        """The healthy verdict whose server's end is being decided; None before one, for a failed start, or once a
        failure in the start's own set-up came after its ready line."""
        if self._healthy is None and self.verdict is not None and self.verdict.verdict == "healthy" \
                and not self._set_up_failed:
            self._healthy = self.verdict
        return None if self._set_up_failed else self._healthy

    def _settle(self, facts: AfterReady) -> bool:
        """New facts after ready: decided again, the verdict settled from the healthy one. False: nothing new."""
        if facts is self._after:
            return False
        assert self._healthy is not None
        self._after = facts
        self.ending = decide(facts)
        self.verdict = settle(self._healthy, self.ending)
        return True

    def _advance(self, target: str, ts: float | None) -> list[Event]:
        if _INDEX[target] <= _INDEX[self.phase]:
            return []
        now = ts if ts is not None else self.last_ts
        prev = self.phase
        self._suspect = None  # the start went on: what looked like a cause was not fatal
        spent = None
        if now is not None and self._deadline is not None:
            spent = round(now - self._deadline.since, 3)
            self.phase_seconds[prev] = spent
        if self._overrun is not None:  # it did end: slow, not stuck
            self.overran[prev] = self._overrun.limit
            self._overrun = None
        self.phase = target
        if now is not None:
            self._deadline = Deadline(self.timeouts.get(target, 0.0) if target != "ready" else 0.0, now)
            if target == "cuda_graph" and self._torch_compile:  # --enable-torch-compile compiles while it captures
                self._allow("precompile_extra_s", "precompile", self.timeouts["jit_compile"])
        ev = PhaseChange(ts=now, phase=target, previous=prev, previous_s=spent)
        return [ev]

    def _after_pools(self) -> str:
        if "kv" not in self._seen:
            return "kv_cache"
        if self.hybrid and "mamba" not in self._seen:
            return "mamba_cache"
        return "cuda_graph"

    def _on_ServerArgs(self, ev: ServerArgs) -> list[Event]:
        given = {"mem_fraction_static": ev.mem_fraction_static, "tp_size": ev.tp_size,
                 "requested_max_running_requests": ev.max_running_requests,
                 "requested_max_mamba_cache_size": ev.max_mamba_cache_size,
                 "context_length": ev.context_length, "node_rank": ev.node_rank,
                 "model_path": ev.model_path, "draft_model_path": ev.speculative_draft_model_path,
                 "nnodes": ev.nnodes, "speculative_algorithm": ev.speculative_algorithm}
        self.set_figures(**{k: v for k, v in given.items() if v is not None})
        if ev.context_length is not None and self.figures.context_len is None:
            self.set_figures(context_len=ev.context_length)
        if ev.max_mamba_cache_size is not None and self.hybrid is None:
            self.hybrid = True
        self._speculative = ev.speculative_algorithm is not None
        self._torch_compile = bool(ev.enable_torch_compile)
        return []

    def _on_WeightsBegin(self, ev: WeightsBegin) -> list[Event]:
        if "weights_begin" in self._seen:
            if "weights_end" in self._seen and self._speculative is not False:  # not a router's next worker
                self.set_figures(draft_avail_before_load_gb=ev.avail_gb)
                self._drafting = True
                # the draft's load and its graphs come in this phase (scheduler): they get what a load and a capture do
                self._allow("draft_extra_s", "draft", self.timeouts["loading_weights"] + self.timeouts["cuda_graph"])
            return []
        self._seen.add("weights_begin")
        if ev.avail_gb >= 0:
            self.set_figures(avail_before_load_gb=ev.avail_gb)
        return self._advance("loading_weights", ev.ts)

    def _on_WeightsEnd(self, ev: WeightsEnd) -> list[Event]:
        if "weights_end" in self._seen:
            if self._speculative is not False:
                self.set_figures(draft_weights_gb=ev.mem_usage_gb, draft_model_type=ev.model_type)
            return []
        self._seen.add("weights_end")
        self._seen.add("weights_begin")
        self.set_figures(weights_gb=ev.mem_usage_gb, avail_after_load_gb=ev.avail_gb, model_type=ev.model_type)
        before = self.figures.avail_before_load_gb
        if ev.mem_usage_gb is None and ev.avail_gb is not None and before is not None and before >= ev.avail_gb:
            self.set_figures(weights_gb=round(before - ev.avail_gb, 2))  # ≤ 0.4.2 says no `mem usage=`: what the load took
        if ev.elapsed_s is not None:
            self.set_figures(weight_load_s=ev.elapsed_s)
        return self._advance(self._after_pools(), ev.ts)

    def _on_KVCache(self, ev: KVCache) -> list[Event]:
        if ev.upper_bound:
            self.set_figures(kv_tokens_upper_bound=ev.tokens)
            return []
        if ev.draft or ("kv" in self._seen and self._drafting):
            # 0.5.23 names the draft's pool; before, its line looks like the target's, after the draft's weights
            self.set_figures(draft_kv_tokens=ev.tokens)
            if ev.k_gb is not None or ev.kv_gb is not None:  # K + V, or MLA's one `KV size:`
                self.set_figures(draft_kv_gb=round(ev.kv_gb if ev.k_gb is None else ev.k_gb + (ev.v_gb or 0.0), 2))
            return []
        full, swa = self._sliding_window
        if ev.label == "SWA" or (swa is not None and ev.tokens == swa and ev.tokens != full):
            self.set_figures(swa_kv_tokens=ev.tokens)  # the sliding-window layers' pool, named or (before 0.5.23) announced
            return []
        pool = {"kv_tokens": ev.tokens, "kv_k_gb": ev.k_gb, "kv_v_gb": ev.v_gb, "kv_gb": ev.kv_gb, "kv_dtype": ev.dtype}
        self.set_figures(**{k: v for k, v in pool.items() if v is not None})
        self._add_evidence(ev.line)
        self._seen.add("kv")
        return self._advance(self._after_pools(), ev.ts) if "weights_end" in self._seen else []

    def _on_KernelPrecompile(self, ev: KernelPrecompile) -> list[Event]:
        """SGLang's word that this phase compiles for minutes: its deadline grows by `jit_compile`,
        once a phase (DeepGEMM says it again for every kernel shape, AITER for every module)."""
        if self._allow("precompile_extra_s", "precompile", self.timeouts["jit_compile"]):
            self._add_evidence(ev.line)
        return []

    def _allow(self, figure: str, why: str, extra: float) -> bool:
        """The current phase's deadline grows by `extra`, once a phase for each `why`; `figures.<figure>`
        says which phase got how much (phase → seconds)."""
        key = f"{why}:{self.phase}"
        if key in self._seen or self._deadline is None:
            return False
        self._seen.add(key)
        self._deadline = Deadline(self._deadline.limit + extra, self._deadline.since)
        self.set_figures(**{figure: {**(getattr(self.figures, figure) or {}), self.phase: extra}})
        return True

    def _on_MambaCache(self, ev: MambaCache) -> list[Event]:
        self.hybrid = True
        self._seen.add("mamba")
        self.set_figures(mamba_slots=ev.slots, mamba_conv_gb=ev.conv_gb, mamba_ssm_gb=ev.ssm_gb)
        if ev.intermediate_ssm_gb is not None:
            self.set_figures(mamba_intermediate_ssm_gb=ev.intermediate_ssm_gb, mamba_intermediate_conv_gb=ev.intermediate_conv_gb)
        self._add_evidence(ev.line)
        return self._advance(self._after_pools(), ev.ts) if "weights_end" in self._seen else []

    def _on_PoolEnd(self, ev: PoolEnd) -> list[Event]:
        if self._drafting:  # the draft's pools, after the target's
            self.set_figures(draft_pool_end_avail_gb=ev.avail_gb)
            return []
        self.set_figures(pool_end_avail_gb=ev.avail_gb)
        return self._advance("cuda_graph", ev.ts)

    def _on_MaxRunningLimited(self, ev: MaxRunningLimited) -> list[Event]:
        self.set_figures(max_running_capped_to=ev.value, max_running_capped_by=ev.by)
        if ev.slots_per_req is not None:
            self.set_figures(mamba_slots_per_request=ev.slots_per_req)
        self._add_evidence(ev.line)
        requested = ev.requested or self.figures.requested_max_running_requests
        if requested is None or ev.value < requested:
            self._degrade("max_running_reduced", f"max_running_requests lowered to {ev.value}"
                          + (f" from the {requested} requested" if requested else "") + f" (by {ev.by})",
                          {"max_running_requests": ev.value, "requested": requested, "by": ev.by})
        return []

    def _on_KVBelowContext(self, ev: KVBelowContext) -> list[Event]:
        if self.figures.kv_tokens is None:
            self.set_figures(kv_tokens=ev.tokens)
        self._add_evidence(ev.line)
        self._degrade("kv_below_context", f"the KV pool holds {ev.tokens:,} tokens, fewer than one "
                      f"{ev.context_length:,}-token request: long requests will be refused or truncated",
                      {"kv_tokens": ev.tokens, "context_length": ev.context_length})
        return []

    def _on_StartupTimings(self, ev: StartupTimings) -> list[Event]:
        self.set_figures(sglang_phase_seconds=dict(ev.seconds))
        return []

    def _on_UnifiedMemoryPool(self, ev: UnifiedMemoryPool) -> list[Event]:
        self._seen.update(("kv", "mamba"))
        self.set_figures(unified_memory_pool_gb=ev.total_gb)
        self._degrade("unified_memory", "--enable-unified-memory: KV tokens and Mamba slots are split at run time, "
                      "not fixed at start; the figures are capacities, not allocations", {"total_gb": ev.total_gb})
        return self._advance(self._after_pools(), ev.ts) if "weights_end" in self._seen else []

    def _on_StopRequested(self, ev: StopRequested) -> list[Event]:
        self._stopped_before_ready(ev, f"the server was stopped ({ev.by}) in phase {self.phase}, before it was ready")
        return []

    def _on_ProcessesGone(self, ev: ProcessesGone) -> list[Event]:
        """Every process of the server has ended; a cause said before or after it (a death, a traceback) still wins."""
        self._gone = self._gone or ev
        self._add_evidence(ev.line)
        return []

    def _stopped_before_ready(self, ev: Event, message: str) -> None:
        """Stopped from outside before ready: `stopped`, or, when a phase's deadline had passed with no progress,
        timed_out in it (the operator gave up on a stuck start)."""
        self._add_evidence(ev.line)
        if self._overrun is not None:
            o = self._overrun
            if ev.ts is not None and self._deadline is not None:
                self.set_figures(stopped_after_s=round(ev.ts - self._deadline.since, 3))
            self._time_out(_Overrun(o.phase, o.limit, o.at, o.stalled, o.last_line, f"{o.message}; then {message}"))
            return
        self._conclude("failed", Cause.STOPPED, message, ev.ts)

    def _on_Recovered(self, ev: Recovered) -> list[Event]:
        self._suspect = None  # SGLang retries: the traceback before this was not fatal
        return []

    def systemd_timed_out(self, ts: float) -> Verdict | None:
        """systemd's own start timeout (TimeoutStartSec=, 90 s unless set) ended the start before any
        deadline of ours: a timed-out start, on systemd's clock rather than ours."""
        if self.verdict is not None:
            return None
        since = self.phase_since if self.phase_since is not None else ts
        total = ts - self.started if self.started is not None else ts - since
        self.set_figures(systemd_timeout_s=round(total, 3))
        self._conclude("timed_out", None, f"systemd's start timeout (TimeoutStartSec=) ended the start after "
                       f"{total:.0f} s, {ts - since:.0f} s into phase {self.phase}, before svcdiag's deadline for it", ts,
                       stalled_s=ts - since)
        return self.verdict

    def _degrade(self, reason: str, message: str, figures: dict[str, Any]) -> None:
        if not any(d["reason"] == reason for d in self.degraded):
            self.degraded.append({"reason": reason, "message": message, "figures": figures})

    def _on_CudaGraph(self, ev: CudaGraph) -> list[Event]:
        if not ev.name.startswith("target"):
            # the speculative draft's graphs come after the target's are captured (its weights, pool and graphs in
            # what the target left): a log that opens at them, pasted from there, had reached the scheduler's set-up
            return self._advance("scheduler", ev.ts) if ev.stage == "begin" else []
        if ev.name == "target piecewise" and ev.stage == "begin" and self.phase == "scheduler":
            # after the decode graphs' end (0.5.x): compiling and capturing again, as long as a capture (audit R14)
            if self._allow("precompile_extra_s", "piecewise", self.timeouts["cuda_graph"]):
                self._add_evidence(ev.line)
            return []
        if ev.stage == "begin":
            if ev.avail_gb is not None and self.figures.cuda_graph_avail_before_gb is None:
                self.set_figures(cuda_graph_avail_before_gb=ev.avail_gb)
            return self._advance("cuda_graph", ev.ts)
        if ev.mem_usage_gb is not None:
            self.set_figures(cuda_graph_gb=round((self.figures.cuda_graph_gb or 0.0) + ev.mem_usage_gb, 2))
        if (self.figures.node_rank or 0) >= 1:  # a worker node: no summary, no HTTP; its log says it is up
            out = self._advance("ready", ev.ts)
            self._conclude("healthy", None, f"worker node {self.figures.node_rank}: its schedulers are up "
                           "(node 0 serves the API; this node answers only /health on its --port)", ev.ts)
            return out
        return self._advance("scheduler", ev.ts)

    def _on_SchedulerInfo(self, ev: SchedulerInfo) -> list[Event]:
        self.set_figures(max_total_num_tokens=ev.max_total_num_tokens, max_running_requests=ev.max_running_requests)
        if self.figures.kv_tokens is None:  # older releases say the pool only here
            self.set_figures(kv_tokens=ev.max_total_num_tokens)
        summary = {"context_len": ev.context_len, "available_gpu_mem_gb": ev.available_gpu_mem_gb,
                   "chunked_prefill_size": ev.chunked_prefill_size}
        self.set_figures(**{k: v for k, v in summary.items() if v is not None})
        self._add_evidence(ev.line)
        return self._advance("http", ev.ts)

    def _on_SlidingWindowPool(self, ev: SlidingWindowPool) -> list[Event]:
        self._sliding_window = (ev.full_tokens, ev.swa_tokens)
        return []

    def _on_HostPool(self, ev: HostPool) -> list[Event]:
        """The hierarchical cache's host pool (per rank, counted once): pinning hundreds of GB takes minutes,
        in the phase after the summary; that phase gets what allocating a pool does (timeouts.kv_cache). It is built
        after the graphs are captured: a paste that opens at it had reached the scheduler's set-up at least."""
        self.set_figures(hicache_host_gb=ev.gb)
        out = self._advance("scheduler", ev.ts)
        self._allow("pool_extra_s", "host_pool", self.timeouts["kv_cache"])
        return out

    def _on_HiCacheStorage(self, ev: HiCacheStorage) -> list[Event]:
        """HiCache's storage backend (the Mooncake store, …) is set up after the host pool: a paste that opens
        there (its peer refusing the store's transfers, the traceback cut) had reached the scheduler's set-up."""
        return self._advance("scheduler", ev.ts)

    def _on_PortMoved(self, ev: PortMoved) -> list[Event]:
        self.set_figures(port=ev.port)
        self._degrade("port_moved", f"port {ev.requested} was taken, so SGLang listens on {ev.port} instead: a "
                      f"client or health check of {ev.requested} reaches whatever holds it",
                      {"requested_port": ev.requested, "port": ev.port})
        return []

    def _on_Uvicorn(self, ev: Uvicorn) -> list[Event]:
        return self._advance("http", ev.ts)

    def _on_Ready(self, ev: Ready) -> list[Event]:
        out = self._advance("ready", ev.ts)
        self._add_evidence(ev.line)
        said = "its warmup request was answered (this release prints no ready line)" if "POST /generate" in ev.line \
            else "the server is fired up and ready to roll"
        self._conclude("healthy", None, said, ev.ts)
        return out

    def _on_Failure(self, ev: Failure) -> list[Event]:
        """A failure whose frames say a later phase than the lines before it did (a log cut at its top) had
        reached that phase; then it is weighed."""
        moved: list[Event] = []
        if ev.raised_in:
            suspect = self._suspect
            moved = self._advance(ev.raised_in, ev.ts)
            self._suspect = suspect  # (it is no milestone: what looked like a cause still may be one)
        self._weigh(ev)
        return moved

    def _weigh(self, ev: Failure) -> None:
        """Root cause before consequence: a death waits (briefly) for its cause, a suspect for
        its confirmation; the first root line names the failure."""
        if ev.role == SUSPECT:
            if self._suspect is None:
                self._suspect = ev
            if self._death is not None:
                self._fail_pending(ev.ts)
            return
        if ev.role == DEATH:
            if self._death is None or (self._death.cause == Cause.EXCEPTION and ev.cause != Cause.EXCEPTION):
                if self._death is not None:  # `Exit code: -9` says more than `Rank 0 scheduler is dead`
                    for line in self._death.evidence:
                        self._add_evidence(line)
                self._death = ev
            if self._suspect is not None:
                self._fail_pending(ev.ts)
            return
        self._fail(ev, ev.ts, also=self._death)

    def _fail(self, root: Failure, ts: float | None, also: Failure | None = None) -> None:
        for line in root.evidence:
            self._add_evidence(line)
        if also is not None:
            for line in also.evidence:
                self._add_evidence(line)
        if root.cause == Cause.MAX_RUNNING_ZERO:
            self.set_figures(max_running_requests=0)
        self._conclude("failed", root.cause, root.message, ts, signal=root.signal or (also.signal if also else None),
                       status=root.status, detail=root.detail, captures=root.captures)
        if self.verdict is not None and (root.raised_in, self.verdict.phase) == _SET_UP_AFTER_SUMMARY:
            # its frames name the scheduler's own set-up (init_disaggregation), which the scheduler's summary line,
            # printed earlier in that same set-up, had moved past
            self.verdict = self.verdict.with_(phase=root.raised_in)

    def _fail_pending(self, ts: float | None, exit_ev: Failure | None = None) -> None:
        """The start is over: the suspect is the cause if there is one, else what the death line says."""
        root = self._suspect or self._death or exit_ev
        assert root is not None
        also = self._death if root is not self._death else None
        self._suspect = self._death = None
        self._unnamed_death = root if root.role == DEATH and root.cause == UNNAMED else None
        self._fail(root, ts, also=also)

    def _late_exit(self, ev: Event) -> bool:
        """A death line that names how the process ended (`Exit code: -9`), printed after the grace that concluded
        the start on `Rank 0 scheduler is dead` alone: the launcher joins the dead process before it prints its exit
        code, which takes tens of seconds on a host thrashing for memory. It says what the death line could not."""
        d, v = self._unnamed_death, self.verdict
        if d is None or v is None or not isinstance(ev, Failure) or ev.role != DEATH or ev.cause == UNNAMED \
                or v.cause != d.cause:
            return False
        self._unnamed_death = None
        figures = v.figures.replace(signal=ev.signal) if ev.signal else v.figures
        if ev.status is not None:
            figures = figures.replace(exit_status=ev.status)
        self.verdict = v.with_(cause=ev.cause, message=ev.message, figures=figures,
                               evidence=(*v.evidence, *(x for x in ev.evidence if x not in v.evidence)))
        return True

    def _on_UnitState(self, ev: UnitState) -> list[Event]:
        if ev.state == "oom":
            self._oom_killed = True
            self._add_evidence(ev.line)
            return []
        if ev.state == "exited" and (self._suspect is not None or self._death is not None):
            self._fail_pending(ev.ts)  # the process died: what the log said last is why
            self._add_evidence(ev.line)
            return []
        if ev.state == "exited":
            self._add_evidence(ev.line)
            status = ev.status or ""
            if ev.code in ("killed", "dumped"):
                sig = ev.signal or ""
                how = "killed by the kernel's OOM killer" if self._oom_killed else f"killed by SIG{sig}"
                core = " (core dumped)" if ev.code == "dumped" else ""
                self._conclude("failed", Cause.HOST_OOM if self._oom_killed else Cause.KILLED_BY_SIGNAL,
                               f"main process {how}{core} in phase {self.phase}", ev.ts, signal=sig)
            else:
                code = status.split("/")[0]
                self._conclude("failed", Cause.EXITED, f"main process exited with status {status} in phase {self.phase} "
                               "before the server was ready", ev.ts, status=int(code) if code.isdigit() else None)
            return []
        if ev.state in ("stopping", "stopped"):
            self._stopped_before_ready(ev, f"the unit was stopped in phase {self.phase}, before it was ready")
        if ev.state == "result" and ev.line:
            self._add_evidence(ev.line)
        return []

    def _died_silently(self, gone: ProcessesGone) -> None:
        """Gone with no cause said and no deadline passed: killed from outside, with nothing to say by whom."""
        self._conclude("failed", Cause.DIED_SILENTLY, f"the server's processes ended in phase {self.phase} without a word of "
                       "their own (no traceback, no exit line; only Python's shutdown notice): something killed them "
                       "from outside, most often the kernel's OOM killer", gone.ts)

    # ------------------------------------------------------------ verdicts

    def _add_evidence(self, line: str | None) -> None:
        if line and line not in self.evidence and len(self.evidence) < MAX_EVIDENCE:
            self.evidence.append(line)

    def conclude_from_outside(self, verdict: str, cause: str | None, message: str, ts: float | None) -> Verdict:
        """A verdict the log itself cannot give (the connection that read it died, a supervisor's READY=1 the
        journal lost): concluded as the log's own would be (phase, figures, evidence), unless one already was."""
        if self.verdict is None:
            self._conclude(verdict, cause, message, ts)
        assert self.verdict is not None
        return self.verdict

    def _conclude(self, verdict: str, cause: str | None, message: str, ts: float | None, *,
                  stalled_s: float | None = None, signal: str | None = None, status: int | None = None,
                  detail: str = "", captures: dict[str, str] | None = None) -> None:
        now = ts if ts is not None else self.last_ts
        seconds = dict(self.phase_seconds)
        if now is not None and self._deadline is not None and self.phase != "ready":
            seconds[self.phase] = round(now - self._deadline.since, 3)
        figures = self.figures
        if signal:
            figures = figures.replace(signal=signal)
        if status is not None:
            figures = figures.replace(exit_status=status)
        if now is not None and self.started is not None:
            figures = figures.replace(startup_s=round(now - self.started, 3))
        if verdict == "healthy" and self.overran:
            figures = figures.replace(overran_deadlines_s=dict(self.overran))
            message += "; " + "; ".join(
                f"phase {p} took {seconds.get(p, 0):.0f} s, past its {limit:.0f} s deadline (a live wait calls that "
                f"timed_out and a notify unit is stopped there: raise timeouts.{p})" for p, limit in self.overran.items())
        evidence = list(self.evidence)
        if verdict == "timed_out" and self.last_line and self.last_line not in evidence:
            evidence.append(self.last_line)
        self.verdict = Verdict(ts=now, verdict=verdict, phase=self.phase, cause=cause, message=message,
                               detail=detail, captures=captures or {}, figures=figures, evidence=tuple(evidence),
                               phase_seconds=seconds,
                               last_line=self.last_line, stalled_s=round(stalled_s, 3) if stalled_s else None,
                               unit=self.unit, invocation=self.invocation,
                               degraded=tuple(self.degraded) if verdict == "healthy" else ())

    def finish(self) -> Verdict:
        """End of input: timed out if the last timestamp is past a deadline, else incomplete."""
        if self.verdict is None and self._overrun is not None and (self._suspect or self._death):
            self._fail_pending(self.last_ts)  # it died after its deadline: the death says more than the deadline
        if self.verdict is None and self._gone is not None and not (self._suspect or self._death):
            if self._overrun is not None:  # stuck past its deadline, then gone: stopped from outside, or killed
                self._stopped_before_ready(self._gone, "its processes ended without a word of their own")
            else:
                self._died_silently(self._gone)
        if self.verdict is None and self.last_ts is not None:
            self.tick(self.last_ts)
        if self.verdict is None and (self._suspect is not None or self._death is not None):
            self._fail_pending(self.last_ts)  # the log ends on a fatal line: that is its verdict
        if self.verdict is None:
            since = ""
            if self.last_ts is not None and self._deadline is not None:
                since = f" after {self.last_ts - self._deadline.since:.0f} s in it"
            self._conclude("incomplete", None, f"the log ends in phase {self.phase}{since}, before a verdict",
                           self.last_ts)
        assert self.verdict is not None
        return self.verdict
