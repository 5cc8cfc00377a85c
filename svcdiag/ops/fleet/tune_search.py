"""`tune`'s search, pure: from the starts made so far, the next candidate or the stop.

The target is R requests of C tokens each served at once: a healthy start whose logged
max_running_requests ≥ R, KV pool ≥ R × C tokens and context ≥ C. The capacity keys that
make it so are fixed by the target (max_running_requests = R, context_length = C, R × slots
per request Mamba slots); the one key that binds is then mem_fraction_static, searched by
bisection, steered by the memory model (preflight's prior until a start has logged its
figures, those figures after). `step()` holds no state: the same starts give the same next
step, which is what makes a run resumable.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from svcdiag.ops.fleet.tune_model import MAX_MEM_FRACTION, Capacity, Costs, capacity, down_to, from_figures, up_to
from svcdiag.sglang.failures import Cause, Family, in_family
from svcdiag.sglang.figures import Figures

#: the keys that decide capacity, as the config spells them
CAPACITY_KEYS = ("mem_fraction_static", "max_mamba_cache_size", "max_running_requests", "context_length",
                 "cuda_graph_max_bs", "chunked_prefill_size", "speculative.num_draft_tokens")
#: speculative decoding's draft tokens (DFlash's block size): each running request keeps a state per
#: draft token, but fewer change what is benchmarked, so only `--allow` lets the search lower them
DRAFT_KEY = "speculative.num_draft_tokens"
#: failures more or less static memory can change; any other cause stops the search
TOO_LITTLE = in_family(Family.NOT_ENOUGH_MEMORY) | {"kv_below_context"}  # and a start degraded below its context
TOO_MUCH = frozenset({Cause.CUDA_OOM})
#: how far the prior may be off, as a share of the static memory: a proof from it alone needs more
PRIOR_SLACK = 0.05
MIN_CHUNKED_PREFILL = 2048
STEP = 0.01


#: the figures a start's row keeps: what the search reads, and what the evidence table shows
TRIAL_FIGURES = ("kv_tokens", "kv_gb", "kv_k_gb", "kv_v_gb", "draft_kv_gb", "mamba_slots", "mamba_conv_gb",
                 "mamba_ssm_gb", "mamba_intermediate_ssm_gb", "mamba_intermediate_conv_gb", "mamba_slots_per_request",
                 "avail_before_load_gb", "weights_gb", "cuda_graph_gb", "draft_weights_gb", "max_running_requests",
                 "context_len", "available_gpu_mem_gb", "startup_s")


@dataclass(frozen=True, slots=True)
class Target:
    """What the tuner aims at: so many requests of so long a context at once."""

    requests: int
    context: int

    def __str__(self) -> str:
        return f"{self.requests} × {self.context:,}"

    def met_by(self, f: Figures) -> bool:
        """Whether a start's figures serve it: R at once, each of C tokens, all in the KV pool."""
        ctx = f.context_len or self.context
        return ((f.max_running_requests or 0) >= self.requests and ctx >= self.context
                and (f.kv_tokens or 0) >= self.requests * self.context)


@dataclass(frozen=True, slots=True)
class Problem:
    """The search's inputs: the config's capacity keys, the target, the model's kind and what is known of its costs."""

    base: dict[str, Any]  # the config's capacity keys (None: unset)
    target: Target
    speculative: bool
    hybrid: bool
    prior: Costs | None = None  # preflight's; else what the config says, its costs unknown (Costs.known)
    keep: frozenset[str] = frozenset()
    allow: frozenset[str] = frozenset()  # keys held unless allowed: DRAFT_KEY
    max_starts: int | None = None
    budget_s: float | None = None


@dataclass(frozen=True, slots=True)
class Trial:
    """One real start: the settings, what it was judged, and the figures it logged."""

    settings: dict[str, Any]
    verdict: str
    cause: str | None
    figures: Figures
    seconds: float = 0.0
    why: str = ""
    history_id: int | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.figures, Figures):  # a test's literal
            object.__setattr__(self, "figures", Figures.from_json(self.figures, "a trial"))

    def to_json(self) -> dict[str, Any]:
        # TRIAL_FIGURES' order first: the order tune's state and --json always had
        figures = {**self.figures.pick(TRIAL_FIGURES), **self.figures.to_json()}
        return {"settings": self.settings, "verdict": self.verdict, "cause": self.cause, "figures": figures,
                "seconds": round(self.seconds, 1), "why": self.why, "history_id": self.history_id}

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> Trial:
        return cls(dict(d["settings"]), d["verdict"], d.get("cause"), Figures.from_json(d.get("figures"), "a tune trial"),
                   float(d.get("seconds") or 0), d.get("why", ""), d.get("history_id"))


@dataclass(frozen=True, slots=True)
class Start:
    """The next trial to run: its settings and why they were chosen."""

    settings: dict[str, Any]
    why: str
    predicted: Capacity | None = None


@dataclass(frozen=True, slots=True)
class Stop:
    """The search is over: why, its best trial, and settings to fall back on."""

    status: str  # met | impossible | budget | stuck
    message: str
    best: Trial | None = None
    fallbacks: tuple[dict[str, Any], ...] = field(default=())


def meets(t: Trial, target: Target) -> bool:
    return t.verdict == "healthy" and target.met_by(t.figures)


def costs_after(p: Problem, trials: list[Trial]) -> Costs | None:
    """The prior, with every start's logged figures replacing the estimates they measure; None
    while the KV cell is not known."""
    c = p.prior
    for t in trials:
        if c is not None:
            c = from_figures(t.figures, t.settings, c)
    return c if c is not None and c.known else None


def spr_of(p: Problem, c: Costs | None) -> int:
    if c is not None:
        return c.slots_per_req
    return p.prior.slots_per_req if p.prior is not None else (5 if p.speculative else 3)


def _fixed(p: Problem, c: Costs | None) -> dict[str, Any] | str:
    """The settings the target decides (the rest as the config has them), or why a kept key forbids it."""
    s = {k: p.base.get(k) for k in CAPACITY_KEYS}
    if p.speculative and s[DRAFT_KEY] is None:
        known = c or p.prior
        s[DRAFT_KEY] = known.sizing.num_draft_tokens if known is not None else None  # the release's default
    r, ctx = p.target.requests, p.target.context
    want = {"max_running_requests": r, "context_length": ctx}
    if p.hybrid or (c is not None and c.slot_gb is not None):
        want["max_mamba_cache_size"] = r * spr_of(p, c)
    for key, value in want.items():
        if key not in p.keep:
            s[key] = value
            continue
        have = s[key]
        short = have is not None and (have < value if key != "context_length" else have != value)
        if short:
            return f"{key} is kept at {have}, and {p.target} needs {value}"
    return s


def _at(s: dict[str, Any], target: Target, spr: int) -> dict[str, Any]:
    """`s` for another target: its requests, their Mamba slots and context."""
    out = {**s, "max_running_requests": target.requests, "context_length": target.context}
    if s.get("max_mamba_cache_size") is not None:
        out["max_mamba_cache_size"] = target.requests * spr
    return out


def _fits(c: Costs, s: dict[str, Any], fraction: float, target: Target) -> Capacity | None:
    cap = capacity(c, fraction=fraction, mamba_slots=s["max_mamba_cache_size"], context=target.context,
                   requested=s["max_running_requests"], draft_tokens=s.get(DRAFT_KEY))
    ok = cap.failure is None and cap.max_running >= target.requests and cap.kv_tokens >= target.requests * target.context
    return cap if ok else None


def least_fraction(c: Costs, s: dict[str, Any], target: Target, ceiling: float = MAX_MEM_FRACTION) -> float | None:
    """The smallest mem_fraction_static (in 0.01s, ≤ ceiling) the model says serves the target."""
    f = STEP
    while f <= ceiling + 1e-9:
        if _fits(c, s, f, target) is not None:
            return f
        f = round(f + STEP, 2)
    return None


def shortfall_gb(c: Costs, s: dict[str, Any], target: Target, ceiling: float) -> float | None:
    """How much more static memory than `ceiling` leaves the target needs (None: no amount serves it)."""
    lo, hi = ceiling, 4.0
    if _fits(c, s, hi, target) is None:
        return None
    for _ in range(40):
        mid = (lo + hi) / 2
        lo, hi = (lo, mid) if _fits(c, s, mid, target) is not None else (mid, hi)
    return max(0.0, (hi - ceiling) * c.free_gb)


def impossibility(c: Costs, s: dict[str, Any], target: Target, ceiling: float,
                  why_ceiling: str = "") -> tuple[str, tuple[dict[str, Any], ...]]:
    """The sentence that says why no fraction up to `ceiling` serves the target, and what would."""
    spr = c.slots_per_req
    what = "KV cache and Mamba state" if c.slot_gb else "KV"
    short = shortfall_gb(c, s, target, ceiling)
    lo, hi = 0, target.requests - 1  # the most requests of this context that fit
    while lo < hi:
        mid = (lo + hi + 1) // 2
        t = Target(mid, target.context)
        lo, hi = (mid, hi) if _fits(c, _at(s, t, spr), ceiling, t) is not None else (lo, mid - 1)
    most = lo
    lo, hi = 0, target.context // 1024 - (1 if target.context % 1024 == 0 else 0)  # the longest context, in 1,024s
    while lo < hi:
        mid = (lo + hi + 1) // 2
        t = Target(target.requests, mid * 1024)
        lo, hi = (mid, hi) if _fits(c, _at(s, t, spr), ceiling, t) is not None else (lo, mid - 1)
    ctx = lo * 1024
    alts: list[str] = [f"at most {most} at this context" if most else "not one request at this context"]
    fallbacks: list[dict[str, Any]] = []
    if most:
        fallbacks.append({"max_running": most, "context": target.context})
    if ctx:
        alts.append(f"or {target.requests} at {ctx:,}")
        fallbacks.append({"max_running": target.requests, "context": ctx})
    how = f"needs {short:.1f} GB more {what} than" if short is not None else "is not served by any more memory than"
    return (f"{target} {how} {ceiling:.2f} of the card leaves{why_ceiling}: {', '.join(alts)}",
            tuple(fallbacks))


def _ceiling(trials: list[Trial], s: dict[str, Any]) -> tuple[float, str]:
    """The highest fraction to try with these settings: 0.95, or below the lowest that ran out of memory."""
    ceiling, why = MAX_MEM_FRACTION, ""
    for t in trials:
        if t.cause in TOO_MUCH and _same_shape(t.settings, s):
            f = round(t.settings["mem_fraction_static"] - STEP, 2)
            if f < ceiling:
                ceiling, why = f, f" ({t.settings['mem_fraction_static']:.2f} ran out of memory)"
    return ceiling, why


def _same_shape(a: dict[str, Any], b: dict[str, Any]) -> bool:
    return all(a.get(k) == b.get(k) for k in CAPACITY_KEYS if k != "mem_fraction_static")


def _steer(p: Problem, s: dict[str, Any]) -> tuple[dict[str, Any], str] | None:
    """After an out-of-memory at graph capture leaves no fraction that serves: less of what the
    reserve holds (fewer CUDA-graph batch sizes, then smaller prefill chunks), never more static memory."""
    bs, r = s.get("cuda_graph_max_bs"), p.target.requests
    if "cuda_graph_max_bs" not in p.keep and (bs is None or bs > r):
        return {**s, "cuda_graph_max_bs": r}, f"cuda_graph_max_bs {bs or 'auto'} → {r}: fewer CUDA graphs to capture"
    chunk = s.get("chunked_prefill_size")
    if "chunked_prefill_size" not in p.keep and chunk and chunk > MIN_CHUNKED_PREFILL:
        half = max(MIN_CHUNKED_PREFILL, chunk // 2)
        return {**s, "chunked_prefill_size": half}, f"chunked_prefill_size {chunk} → {half}: smaller activations"
    return None


def best_of(trials: list[Trial], target: Target) -> Trial | None:
    """The met start with the most headroom (the least static memory), else the one that served most."""
    met = [t for t in trials if meets(t, target)]
    if met:
        return min(met, key=lambda t: (t.settings["mem_fraction_static"], -(t.figures.kv_tokens or 0)))
    healthy = [t for t in trials if t.verdict == "healthy"]
    return max(healthy, key=lambda t: (t.figures.max_running_requests or 0, t.figures.kv_tokens or 0),
               default=None)


def step(p: Problem, trials: list[Trial], elapsed_s: float = 0.0) -> Start | Stop:
    """The next start, or why to stop; every Stop carries the best start so far.

    In order: the settings the target fixes, a failure memory cannot change, the settings steered
    past an out-of-memory, the fractions the starts proved short and served, the fraction the costs
    ask for, a bisection where they disagree, the budget, a candidate already started."""
    c = costs_after(p, trials)
    best = best_of(trials, p.target)
    s = _fixed(p, c)
    if isinstance(s, str):
        return Stop("impossible", s, best)
    stuck = _not_memory(trials)
    if stuck is not None:
        return Stop("stuck", stuck, best)
    shape = _steered(p, trials, c, s)
    s, ceiling = shape.settings, shape.ceiling
    hi, lo = _bracket(trials, s, p.target)
    if hi is not None and lo is not None and hi - lo <= STEP + 1e-9:
        return Stop("met", f"{p.target} served at mem_fraction_static {hi:.2f}, and {lo:.2f} does not: "
                           "the most headroom there is", best)
    aim = _aim(p, c, shape, hi, lo, best)
    if isinstance(aim, Stop):
        return aim
    need, measuring = aim
    f = _next_fraction(need, lo, hi, ceiling)
    stop = _no_fraction_left(p, c, shape, f, hi, lo, best)
    if stop is None:
        stop = _over_budget(p, trials, elapsed_s, best)
    if stop is not None:
        return stop
    cand = {**s, "mem_fraction_static": round(f, 2)}
    if any(t.settings == cand for t in trials):
        return Stop("stuck", f"the next candidate was already started (mem_fraction_static {f:.2f})", best)
    predicted = _fits(c, s, f, p.target) if c is not None else None
    return Start(cand, _why(p, c, f, need, hi, lo, ceiling, measuring) + shape.note, predicted)


@dataclass(frozen=True, slots=True)
class _Shape:
    """The settings the next start keeps beside its fraction, the most static memory it may have (and
    why, when the starts lowered it), and what steering changed, said after the candidate's reason."""

    settings: dict[str, Any]
    ceiling: float
    why_ceiling: str
    note: str


def _not_memory(trials: list[Trial]) -> str | None:
    """Why to stop when a start failed for a cause no memory setting changes (the search cannot fix it)."""
    for t in trials:
        if t.verdict != "healthy" and t.cause not in TOO_LITTLE | TOO_MUCH:
            return (f"a start failed for a reason memory settings do not change "
                    f"({t.verdict}: {t.cause or 'no cause'}); fix that first")
    return None


def _steered(p: Problem, trials: list[Trial], c: Costs | None, s: dict[str, Any]) -> _Shape:
    """`s` moved on past out-of-memory starts, then to fewer draft tokens where `--allow` lets it and the
    model says none serves otherwise."""
    s, ceiling, why_ceiling = _past_oom(p, trials, c, s)
    note = ""
    if c is not None and DRAFT_KEY in p.allow and least_fraction(c, s, p.target, ceiling) is None:
        fewer = _fewer_draft_tokens(c, s, p.target, ceiling)
        if fewer is not None:
            note = f" ({DRAFT_KEY} {s[DRAFT_KEY]} → {fewer[DRAFT_KEY]}: the most that leave room for {p.target})"
            s = fewer
            ceiling, why_ceiling = _ceiling(trials, s)
    return _Shape(s, ceiling, why_ceiling, note + _oom_note(p, trials, s))


def _past_oom(p: Problem, trials: list[Trial], c: Costs | None,
              s: dict[str, Any]) -> tuple[dict[str, Any], float, str]:
    """An out-of-memory start's settings moved on to less reserve (_steer), as often as the ceiling it
    left allows no fraction that serves by measured costs; with that ceiling and why."""
    while True:
        ceiling, why_ceiling = _ceiling(trials, s)
        if c is None or c.source != "measured" or least_fraction(c, s, p.target, ceiling) is not None:
            break
        if ceiling >= MAX_MEM_FRACTION:
            break
        steered = _steer(p, s)
        if steered is None:
            break
        s, _ = steered
    return s, ceiling, why_ceiling


def _oom_note(p: Problem, trials: list[Trial], s: dict[str, Any]) -> str:
    """After running out of memory: which graph and prefill settings the steering changed, for the reason."""
    if not any(t.cause in TOO_MUCH for t in trials):
        return ""
    first = {k: p.base.get(k) for k in ("cuda_graph_max_bs", "chunked_prefill_size")}
    changed = [f"{k} {first[k] or 'auto'} → {s[k]}" for k in first if s.get(k) != first[k]]
    return f" ({', '.join(changed)} after running out of memory)" if changed else ""


def _bracket(trials: list[Trial], s: dict[str, Any], target: Target) -> tuple[float | None, float | None]:
    """What the starts of this shape proved: the least fraction that served (hi), the most that fell short (lo)."""
    mine = [t for t in trials if _same_shape(t.settings, s)]
    met = [t.settings["mem_fraction_static"] for t in mine if meets(t, target)]
    short = [t.settings["mem_fraction_static"] for t in mine
             if (t.verdict == "healthy" and not meets(t, target)) or t.cause in TOO_LITTLE]
    return (min(met) if met else None), (max(short) if short else None)


def _aim(p: Problem, c: Costs | None, shape: _Shape, hi: float | None, lo: float | None,
         best: Trial | None) -> tuple[float, str] | Stop:
    """The fraction the costs ask for, and what a start there measures (empty: nothing, it is the answer);
    or the stop when the costs prove the target out of reach, or served already at the least that serves."""
    s, ceiling = shape.settings, shape.ceiling
    if c is None:
        if lo is None and hi is None:
            return (s["mem_fraction_static"] or MAX_MEM_FRACTION,
                    "the config's own mem_fraction_static: no estimate yet, this start measures the costs")
        return ceiling, "the most static memory there is: the last start logged too little to size from"
    measuring = ""
    need = least_fraction(c, s, p.target, ceiling)
    if need is None:
        proof, fallbacks = impossibility(c, s, p.target, ceiling, shape.why_ceiling)
        if c.source == "measured" or _clearly_short(c, s, p.target, ceiling):
            return Stop("impossible", proof if c.source == "measured" else f"{proof} (the memory model's "
                        "estimate, by more than its margin)", best, fallbacks)
        need = ceiling  # the prior is close enough to be wrong: one start measures
        measuring = f"the most static memory there is: the memory model's {proof.split(':')[0]}, within its margin"
    if hi is not None and need >= hi and c.source == "measured":
        return Stop("met", f"{p.target} served at mem_fraction_static {hi:.2f}; the measured costs say no "
                           "less serves it", best)
    return need, measuring


def _next_fraction(need: float, lo: float | None, hi: float | None, ceiling: float) -> float:
    """`need`, unless the starts proved it wrong (outside lo..hi): then bisect what they proved; always
    above lo by a STEP and at most the ceiling."""
    low = lo if lo is not None else 0.0
    high = hi if hi is not None else ceiling + STEP
    f = need
    if not low < f < high:  # the model disagrees with a start: bisect what the starts proved
        f = up_to((low + high) / 2) if lo is not None and hi is not None else (
            round(low + STEP, 2) if lo is not None else down_to(high - STEP))
    return min(max(f, round(low + STEP, 2)), ceiling)


def _no_fraction_left(p: Problem, c: Costs | None, shape: _Shape, f: float, hi: float | None, lo: float | None,
                      best: Trial | None) -> Stop | None:
    """The stop when `f` is no fraction the starts left untried: served at hi already, or short at lo
    with no more static memory to give (the proof, with the fallbacks that would serve)."""
    if hi is not None and f >= hi:
        return Stop("met", f"{p.target} served at mem_fraction_static {hi:.2f}, and no fraction below it is "
                           "left to try", best)
    if lo is not None and f <= lo:
        if c is None:
            return Stop("impossible", f"{p.target} is not served at {lo:.2f}, and no more static memory is "
                                      f"left to try{shape.why_ceiling}", best)
        proof, fallbacks = impossibility(c, shape.settings, p.target, shape.ceiling, shape.why_ceiling)
        return Stop("impossible", proof, best, fallbacks)
    return None


def _over_budget(p: Problem, trials: list[Trial], elapsed_s: float, best: Trial | None) -> Stop | None:
    """The stop when --max-starts is spent, or the next start (as long as the mean so far) would overrun the budget."""
    if p.max_starts is not None and len(trials) >= p.max_starts:
        return Stop("budget", f"--max-starts {p.max_starts} spent", best)
    mean = sum(t.seconds for t in trials) / len(trials) if trials else 0.0
    if p.budget_s is not None and trials and elapsed_s + mean > p.budget_s:
        return Stop("budget", f"the budget ({p.budget_s / 60:.0f} min) would run out during the next start", best)
    return None


def _why(p: Problem, c: Costs | None, f: float, need: float, hi: float | None, lo: float | None, ceiling: float,
         measuring: str) -> str:
    """The candidate's reason, as tune prints it: what it measures, else the costs' answer, else a bisection."""
    src = "no estimate yet" if c is None else ("measured costs" if c.source == "measured" else "the memory model")
    below = f"{lo:.2f} (short)" if lo is not None else "nothing started short"
    above = f"{hi:.2f} (served)" if hi is not None else f"{ceiling:.2f} (the ceiling)"
    return measuring or (f"the least static memory that serves {p.target} by {src}" if f == need
                         else f"bisecting between {below} and {above}: {src} and the starts disagree")


def _fewer_draft_tokens(c: Costs, s: dict[str, Any], target: Target, ceiling: float) -> dict[str, Any] | None:
    """The most draft tokens below the current that the model says serve the target, else None."""
    d = s.get(DRAFT_KEY) or 0
    for fewer in range(d - 1, 0, -1):
        cand = {**s, DRAFT_KEY: fewer}
        if least_fraction(c, cand, target, ceiling) is not None:
            return cand
    return None


def _clearly_short(c: Costs, s: dict[str, Any], target: Target, ceiling: float) -> bool:
    """The prior's proof: short by more than the model's margin, a share of all the static memory."""
    short = shortfall_gb(c, s, target, ceiling)
    return short is None or short > PRIOR_SLACK * c.free_gb * ceiling


def grid_starts(p: Problem) -> int:
    """Starts a hand search would spend: every mem_fraction_static from the config's to 0.95 by 0.01."""
    first = p.base.get("mem_fraction_static") or 0.5
    return max(1, round((MAX_MEM_FRACTION - first) / STEP) + 1)
