"""`svcdiag tune`: find the settings that serve a target, proving each with a real start.

The search is `tune_search.step` (pure); this module gives it its prior (preflight), makes
each start it asks for the way `up --wait-ready` does (flag check, GPU hygiene, install,
start, the same judge, history under the run's id), stops the unit after each, keeps the run
in a file so `--resume` continues it, and writes the best config as one that `extends` the
original.
"""

from __future__ import annotations

import json
import re
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from svcdiag.config.diff import config_diff
from svcdiag.config.service import ServiceConfig, UnitsDir
from svcdiag.errors import SvcdiagError
from svcdiag.files import read_text, state_dir, write_atomic
from svcdiag.ops.fleet.tune_model import blank, from_inputs
from svcdiag.ops.fleet.tune_search import (
    CAPACITY_KEYS,
    DRAFT_KEY,
    TRIAL_FIGURES,
    Problem,
    Start,
    Stop,
    Target,
    Trial,
    grid_starts,
    meets,
    step,
)
from svcdiag.ops.host import gpu_hygiene
from svcdiag.ops.host.check import check, require_ok
from svcdiag.ops.serve.follow import unit_lock
from svcdiag.ops.serve.start import ensure_started, flag_check, quiet_plan, wait_verdict
from svcdiag.output.publish import Publisher
from svcdiag.sglang.figures import Figures
from svcdiag.systemd.dbus import Systemd

TARGET_KEYS = {"max_running": "requests", "max_running_requests": "requests", "context": "context",
               "context_length": "context"}
STOP_TIMEOUT_S = 90.0


def parse_target(items: tuple[str, ...] | list[str], cfg: ServiceConfig) -> Target:
    """`--target max_running=8 [--target context=32768]`; the context defaults to the config's."""
    got: dict[str, int] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or key.strip() not in TARGET_KEYS or not value.strip().isdigit() or int(value) < 1:
            raise SvcdiagError(f"--target {item!r}: expected max_running=N or context=N (N a positive integer)")
        what = TARGET_KEYS[key.strip()]
        if what in got:  # one of each: a second would silently win
            name = "max_running" if what == "requests" else "context"
            raise SvcdiagError(f"--target {name} given twice ({name}={got[what]} and {item}); give each once")
        got[what] = int(value)
    if "requests" not in got:
        raise SvcdiagError("--target max_running=N is required: the requests to serve at once")
    ctx = got.get("context") or cfg.context_length
    if ctx is None:
        raise SvcdiagError(f"{cfg.path}: no context_length; say the context to serve with --target context=N")
    return Target(got["requests"], ctx)


def parse_keep(items: tuple[str, ...] | list[str], option: str = "--keep") -> frozenset[str]:
    known = CAPACITY_KEYS if option == "--keep" else (DRAFT_KEY,)
    for k in items:
        if k not in known:
            raise SvcdiagError(f"{option} {k!r}: not a key tune may {'hold' if option == '--keep' else 'change'}; "
                               f"one of {', '.join(known)}")
    return frozenset(items)


def parse_budget(text: str | None) -> float | None:
    """`45m`, `1h30m`, `90s`, or plain minutes."""
    if text is None:
        return None
    t = text.strip().lower()
    parts = re.fullmatch(r"(?:(\d+)h)?(?:(\d+)m)?(?:(\d+)s)?", t)
    if re.fullmatch(r"\d+(\.\d+)?", t):
        seconds = float(t) * 60
    elif t and parts is not None:
        h, m, s = (int(x or 0) for x in parts.groups())
        seconds = float(h * 3600 + m * 60 + s)
    else:
        raise SvcdiagError(f"--budget {text!r}: expected a duration such as 45m, 1h30m or 600s")
    if seconds <= 0:
        raise SvcdiagError(f"--budget {text!r}: must be more than zero")
    return seconds


def check_context(cfg: ServiceConfig, target: Target, remote: Any = None) -> None:
    """The target's context against the model's longest (config.json's max_position_embeddings), before any
    start: SGLang refuses a longer context_length, and the stand-in would run it. When the model's files
    cannot be read, a context above the config's own context_length is refused too: nothing here can say
    the model takes it."""
    from svcdiag.ops.host.preflight import LOCAL, RemoteFiles, locate_model
    from svcdiag.sglang.modelinfo import ModelInfoError, public_shape, read_shape

    files = LOCAL if remote is None else RemoteFiles(remote)
    longest, source = None, ""
    try:
        where, _ = locate_model(cfg, files, remote)
        longest, source = read_shape(where, files).max_position_embeddings, f"{where}/config.json"
    except (ModelInfoError, SvcdiagError):
        shape = public_shape(cfg.model_path)
        if shape is not None:
            longest, source = shape.max_position_embeddings, "the model's public config.json"
    if longest is not None and target.context > longest:
        raise SvcdiagError(f"--target context={target.context}: longer than the model's longest context, "
                           f"{longest:,} (max_position_embeddings, {source}); SGLang refuses a longer context_length")
    if longest is None and cfg.context_length is not None and target.context > cfg.context_length:
        raise SvcdiagError(f"--target context={target.context}: longer than {cfg.name}'s context_length "
                           f"({cfg.context_length:,}), and the model's longest context cannot be read here (its config.json's "
                           "max_position_embeddings); raise context_length in the config, or tune where the model files are")


def require_sglang(cfg: ServiceConfig) -> None:
    """The flag check as `svcdiag check` makes it: an interpreter here that cannot import sglang is refused
    before any unit is started (each candidate would fail at once, and be counted as a start)."""
    require_ok(check(cfg, require_sglang=True))


def base_settings(cfg: ServiceConfig) -> dict[str, Any]:
    out = {k: getattr(cfg, k) for k in CAPACITY_KEYS if k != DRAFT_KEY}
    out[DRAFT_KEY] = cfg.speculative.num_draft_tokens if cfg.speculative else None
    return out


def tuned_name(cfg: ServiceConfig) -> str:
    return f"{cfg.name}-tuned"


def render_tuned(cfg: ServiceConfig, settings: dict[str, Any], header: str) -> str:
    """The config that `extends` the original with only the settings that differ from it."""
    base = base_settings(cfg)
    lines = [f"# {line}" for line in header.splitlines()]
    lines += [f'extends = "{cfg.name}"', f'description = "{cfg.name}, tuned by svcdiag tune"']
    for key in CAPACITY_KEYS:
        value = settings.get(key)
        if key != DRAFT_KEY and value is not None and value != base.get(key):
            lines.append(f"{key} = {value!r}" if not isinstance(value, float) else f"{key} = {value:.2f}")
    draft = settings.get(DRAFT_KEY)
    if draft is not None and draft != base.get(DRAFT_KEY) and cfg.speculative is not None:
        lines += ["", "[speculative]", f"num_draft_tokens = {draft}"]  # merged into the original's table
    return "\n".join(lines) + "\n"


@dataclass
class Run:
    """The run's file (state dir, tune/NAME.json): its id, target and starts, rewritten after each start."""

    path: Path
    run_id: str
    config: str
    target: Target
    keep: frozenset[str]
    trials: list[Trial] = field(default_factory=list)
    elapsed_s: float = 0.0
    status: str = "running"

    def save(self) -> None:
        data = {"run_id": self.run_id, "config": self.config, "status": self.status,
                "target": {"max_running": self.target.requests, "context": self.target.context},
                "keep": sorted(self.keep), "elapsed_s": round(self.elapsed_s, 1),
                "trials": [t.to_json() for t in self.trials]}
        write_atomic(self.path, json.dumps(data, indent=2) + "\n")

    @classmethod
    def open(cls, state: str | None, cfg: ServiceConfig, target: Target, keep: frozenset[str], resume: bool) -> Run:
        path = state_dir(state) / "tune" / f"{cfg.name}.json"
        if not resume:
            stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
            return cls(path, f"tune-{cfg.name}-{stamp}-{secrets.token_hex(2)}", cfg.name, target, keep)
        try:
            d = json.loads(read_text(path))
        except FileNotFoundError:
            raise SvcdiagError(f"--resume: no tune run of {cfg.name} to resume ({path} is missing)") from None
        except (OSError, ValueError) as e:
            raise SvcdiagError(f"--resume: {path} is unreadable ({e})") from None
        was = Target(d["target"]["max_running"], d["target"]["context"])
        if was != target:
            raise SvcdiagError(f"--resume: {path} is a run for {was}, not {target}; drop --resume to start afresh")
        return cls(path, d["run_id"], cfg.name, target, keep, [Trial.from_json(t) for t in d["trials"]],
                   float(d.get("elapsed_s") or 0))


def earlier(state: str | None, units: UnitsDir, cfg: ServiceConfig, target: Target) -> ServiceConfig | None:
    """The tuned config an earlier run of the same target met, when its file is still there (a
    campaign run again does not search again)."""
    path = state_dir(state) / "tune" / f"{cfg.name}.json"
    try:
        d = json.loads(read_text(path))
        was = Target(d["target"]["max_running"], d["target"]["context"])
    except (OSError, ValueError, KeyError, TypeError):
        return None
    if d.get("status") != "met" or was != target or not units.file(tuned_name(cfg)).exists():
        return None
    return units.load(tuned_name(cfg))


@dataclass(frozen=True, slots=True)
class TuneResult:
    """A tuning run: whether the target was met, the trials that said so, and what to set."""

    run_id: str
    config: str
    target: Target
    status: str  # met | impossible | budget | stuck | interrupted
    message: str
    trials: tuple[Trial, ...]
    best: Trial | None
    grid_starts: int
    prior: dict[str, Any] | None
    written: str | None = None
    diff: tuple[dict[str, Any], ...] = ()
    fallbacks: tuple[dict[str, Any], ...] = ()

    @property
    def starts(self) -> int:
        return len(self.trials)

    def to_json(self) -> dict[str, Any]:
        return {"event": "tune_result", "run_id": self.run_id, "config": self.config,
                "target": {"max_running": self.target.requests, "context": self.target.context},
                "status": self.status, "message": self.message, "starts": self.starts,
                "grid_starts": self.grid_starts, "prior": self.prior,
                "best": self.best.to_json() if self.best else None, "written": self.written,
                "diff": list(self.diff), "fallbacks": list(self.fallbacks),
                "trials": [t.to_json() for t in self.trials]}


def _trial(d: Start, outcome: Any, seconds: float) -> Trial:
    v = outcome.verdict
    if v is None:
        return Trial(d.settings, "interrupted", None, Figures(), seconds, d.why)
    figures = v.figures.only(TRIAL_FIGURES)
    return Trial(d.settings, v.verdict, v.cause, figures, seconds, d.why, outcome.history_id)


def _write(units: UnitsDir, cfg: ServiceConfig, settings: dict[str, Any], header: str) -> ServiceConfig:
    path = units.file(tuned_name(cfg))
    write_atomic(path, render_tuned(cfg, settings, header), mode=0o644)
    return units.load(tuned_name(cfg))


def tune(sd: Systemd, cfg: ServiceConfig, units: UnitsDir, pub: Publisher, *, target: Target,
         keep: frozenset[str] = frozenset(), allow: frozenset[str] = frozenset(), budget_s: float | None = None,
         max_starts: int | None = None,
         write: Path | None = None, baseline: bool = False, resume: bool = False, gpu_memory: float | None = None,
         timeout: float | None = None, state: str | None = None,
         should_stop: Callable[[], bool] = lambda: False) -> TuneResult:
    """Search, start, judge, narrow; write the best config and return the evidence. `should_stop`:
    another thread's Ctrl-C (a campaign's), seen between starts and after each verdict."""
    if cfg.multinode:
        raise SvcdiagError(f"{cfg.name}: tune searches one node's settings; a multi-node config is not supported")
    run = Run.open(state, cfg, target, keep, resume)  # --resume of another target: refused before anything else
    check_context(cfg, target, sd.remote)
    if sd.props(cfg.unit).running:
        raise SvcdiagError(f"{cfg.unit} is running on the GPUs tune would start on; stop it first: "
                           f"svcdiag down {cfg.name}")
    if sd.remote is None:
        require_sglang(cfg)
    earlier_met = _met_file(units, cfg)
    if baseline:
        _verify_baseline(sd, units, pub, timeout, state)
    plan_ = quiet_plan(cfg, gpu_memory, remote=sd.remote)
    inputs = plan_.inputs if plan_ is not None else None
    prior = from_inputs(cfg, inputs) if inputs is not None else blank(cfg)
    if inputs is None:
        pub.note("no prior: preflight cannot read this config's model files or GPU; the first start measures")
    problem = Problem(base_settings(cfg), target, speculative=cfg.speculative is not None,
                      hybrid=cfg.hybrid or prior.slot_gb is not None, prior=prior, keep=keep, allow=allow,
                      max_starts=max_starts, budget_s=budget_s)
    if not resume and _unfinished(run.path):
        pub.note(f"{run.path} held an unfinished run of {cfg.name}; this run replaces it (--resume continues one)")
    if resume:
        pub.note(f"resuming {run.run_id}: {len(run.trials)} start(s) already made")
    pub.note(f"tune {run.run_id}: {target} on {cfg.name}; a 0.01 grid of mem_fraction_static would take "
             f"{grid_starts(problem)} starts")
    header = f"Written by `svcdiag tune {cfg.name}` (run {run.run_id}), for {target}."
    try:
        decision = _search(sd, cfg, units, pub, problem, run, header, timeout, should_stop)
    except KeyboardInterrupt:  # between starts: each start is saved, and its unit stopped, as it ends
        decision = None
    if decision is None:
        run.status = "interrupted"
        run.save()
        _restore(units, cfg, earlier_met)
        return _result(cfg, run, problem, "interrupted", f"interrupted; `svcdiag tune {cfg.name} --target "
                       f"max_running={target.requests} --target context={target.context} --resume` continues",
                       None, None, ())
    run.status = decision.status
    run.save()
    written, diff = None, ()
    serves = decision.best is not None and meets(decision.best, target)
    message = decision.message
    if decision.status == "impossible" and not decision.fallbacks and run.trials \
            and all(t.figures.kv_tokens is None for t in run.trials):
        # every start died before logging its pools (max_running=1000: the Mamba state alone did not fit),
        # so nothing measured says what would serve: say how to learn it, not nothing
        own = cfg.max_running_requests
        message += ("; no start logged its memory pools, so nothing measured says what would serve instead: try a "
                    "smaller --target max_running" + (f" (the config's own is {own})" if own else "")
                    + ", or give preflight the model's files (its config.json) for a prior")
    if decision.best is not None and not serves and earlier_met is not None:
        # a run that serves nothing never replaces a file that served (a later short run destroyed it)
        _restore(units, cfg, earlier_met)
        message += (f"; {units.file(tuned_name(cfg))} kept as it was (an earlier run's settings, which met its "
                    "target): this run's best does not serve its target")
        if write is not None:
            write_atomic(write, render_tuned(cfg, decision.best.settings, f"{header}\n{decision.status}: {message}"),
                         mode=0o644)
            written = str(write)
        return _result(cfg, run, problem, decision.status, message, decision.best, written, (), decision.fallbacks)
    if decision.best is not None:
        head = f"{header}\n{decision.status}: {decision.message}" + (
            "" if decision.status == "met" else f"\nThe best start so far serves {target}; the search stopped "
            "before narrowing its headroom." if serves else f"\nThe best start so far: it does not serve {target}.")
        if decision.status != "met" and serves:
            message += f"; the best start serves {target} (written)"
        tuned = _write(units, cfg, decision.best.settings, head)
        written = str(tuned.path)
        if write is not None:
            write_atomic(write, render_tuned(cfg, decision.best.settings, head), mode=0o644)
            written = str(write)
        diff = tuple(r for r in config_diff(cfg, tuned) if r["key"] != "description")
    elif earlier_met is not None:
        _restore(units, cfg, earlier_met)
    elif units.file(tuned_name(cfg)).exists() and run.trials:
        units.file(tuned_name(cfg)).unlink()  # candidates only: nothing served
    return _result(cfg, run, problem, decision.status, message, decision.best, written, diff,
                   decision.fallbacks)


#: the line render_tuned's header gives a file whose run met its target
_MET_LINE = "# met: "


def _met_file(units: UnitsDir, cfg: ServiceConfig) -> str | None:
    """NAME-tuned.toml's text when an earlier run wrote it having met its target (candidates overwrite
    the file while a run searches: what to put back when this run serves nothing), else None."""
    try:
        text = units.file(tuned_name(cfg)).read_text(encoding="utf-8")
    except OSError:
        return None
    return text if any(line.startswith(_MET_LINE) for line in text.splitlines()) else None


def _restore(units: UnitsDir, cfg: ServiceConfig, text: str | None) -> None:
    if text is not None:
        write_atomic(units.file(tuned_name(cfg)), text, mode=0o644)


def _unfinished(path: Path) -> bool:
    try:
        return json.loads(read_text(path)).get("status") in ("running", "interrupted")
    except (OSError, ValueError, AttributeError):
        return False


def _result(cfg: ServiceConfig, run: Run, p: Problem, status: str, message: str, best: Trial | None,
            written: str | None, diff: tuple[dict[str, Any], ...], fallbacks: tuple[dict[str, Any], ...] = ()
            ) -> TuneResult:
    return TuneResult(run.run_id, cfg.name, run.target, status, message, tuple(run.trials), best, grid_starts(p),
                      p.prior.to_json() if p.prior and p.prior.known else None, written, diff, fallbacks)


def _search(sd: Systemd, cfg: ServiceConfig, units: UnitsDir, pub: Publisher, problem: Problem, run: Run,
            header: str, timeout: float | None, should_stop: Callable[[], bool]) -> Stop | None:
    """Start what `step` asks for until it stops; None when interrupted (the unit it started is stopped)."""
    while True:
        if should_stop():
            return None
        d = step(problem, run.trials, run.elapsed_s)
        if isinstance(d, Stop):
            return d
        n = len(run.trials) + 1
        cand = _write(units, cfg, d.settings, f"{header}\nCandidate {n}: {d.why}.")
        shown = ", ".join(f"{k} {d.settings[k]}" for k in CAPACITY_KEYS if d.settings.get(k) is not None)
        pub.note(f"start {n}: {shown} ({d.why})")
        began = time.monotonic()
        started = False
        try:
            with unit_lock(cand.name, pub.note):
                gpu_hygiene.gate(cand, pub.note, force=False, remote=sd.remote)
                sglang = flag_check(cand, pub.note)
                props = ensure_started(sd, cand, pub.note, restart=True, sglang=sglang)
                started = True
                outcome = wait_verdict(sd, cand, units, props, pub, timeout, None, started=True, sglang=sglang,
                                       command="tune", campaign=run.run_id, left_running=False)
        except KeyboardInterrupt:
            outcome = None
        finally:
            if started or sd.props(cand.unit).running:
                sd.wait_job(sd.stop(cand.unit), STOP_TIMEOUT_S)  # tune leaves no unit of its own running
        run.elapsed_s += time.monotonic() - began
        if outcome is None or outcome.interrupted or should_stop():
            pub.note(f"interrupted: {cand.unit} stopped; start {n} is not counted")
            return None
        trial = _trial(d, outcome, time.monotonic() - began)
        run.trials.append(trial)
        run.save()


def _verify_baseline(sd: Systemd, units: UnitsDir, pub: Publisher, timeout: float | None, state: str | None) -> None:
    """`--baseline`: the known-good baseline re-verified first; a drifted host is no place to tune."""
    from svcdiag.ops.fleet.baseline import check

    base = units.baseline()
    outcome = check(sd, base, units, pub, candidate=None, keep_running=False, state=state, timeout=timeout)
    if not outcome.holds:
        raise SvcdiagError(f"--baseline: {base.name} did not hold ({outcome.result.get('summary', 'interrupted')}); "
                           "tune refuses to search on a host whose baseline drifted")
