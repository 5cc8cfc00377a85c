"""Baseline snapshots: what a known-good start looked like, kept as history, compared.

Snapshots are files of their own (one per check, written atomically, never rewritten), so a
crash mid-check cannot damage the history, and a corrupt file is set aside, not lost.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from svcdiag.config.diff import memory_diff
from svcdiag.config.service import ServiceConfig, UnitsDir
from svcdiag.files import read_text, state_dir, write_atomic
from svcdiag.judge.verdict import Verdict
from svcdiag.ops.serve.follow import follow, unit_lock
from svcdiag.ops.serve.start import calibrate, conclude, diagnoser, ensure_started, judge_start, quiet_plan, remember
from svcdiag.output.publish import Publisher
from svcdiag.sglang.failures import Cause, Family, in_family
from svcdiag.sglang.figures import Figures
from svcdiag.sglang.preflight import estimate_candidate
from svcdiag.systemd.dbus import Systemd

KV_DROP = 0.05  # KV tokens down by more than 5 %
SLOWER = 0.50  # start-up time up by more than 50 %
SNAPSHOT_FIGURES = ("kv_tokens", "max_total_num_tokens", "max_running_requests", "context_len", "mamba_slots",
                    "mamba_conv_gb", "mamba_ssm_gb", "mamba_intermediate_ssm_gb", "kv_k_gb", "kv_v_gb", "kv_gb",
                    "weights_gb", "avail_before_load_gb", "mem_fraction_static", "cuda_graph_gb", "startup_s",
                    "sglang_version", "mamba_slots_per_request", "tp_size")




class SnapshotStore:
    def __init__(self, root: Path, name: str):
        self.dir = root / name
        self.problems: list[str] = []

    def history(self) -> list[tuple[Path, dict[str, Any]]]:
        """Readable snapshots, oldest first. Unreadable ones are reported and renamed aside."""
        if not self.dir.is_dir():
            return []
        out = []
        for path in sorted(self.dir.glob("*.json")):
            try:
                data = json.loads(read_text(path))
                if not isinstance(data, dict) or "figures" not in data or "healthy" not in data:
                    raise ValueError("not a svcdiag snapshot")
            except (OSError, ValueError) as e:
                aside = path.with_name(path.name + f".corrupt-{int(time.time())}")
                try:
                    path.rename(aside)
                    self.problems.append(f"snapshot {path} is unreadable ({e}); set aside as {aside.name}")
                except OSError:
                    self.problems.append(f"snapshot {path} is unreadable ({e}) and could not be set aside")
                continue
            out.append((path, data))
        return out

    def last_good(self) -> tuple[Path, dict[str, Any]] | None:
        good = [(p, d) for p, d in self.history() if d.get("healthy")]
        return good[-1] if good else None

    def write(self, snapshot: dict[str, Any]) -> Path:
        stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime(snapshot["ts"]))
        base = f"{stamp}-{(snapshot.get('invocation') or 'none')[:8]}"
        path = self.dir / f"{base}.json"
        n = 1
        while path.exists():  # never overwrite history
            path = self.dir / f"{base}-{n}.json"
            n += 1
        write_atomic(path, json.dumps(snapshot, indent=2, sort_keys=True) + "\n")
        return path


def make_snapshot(cfg: ServiceConfig, v: Verdict, state_before: str) -> dict[str, Any]:
    return {
        "name": cfg.name, "unit": cfg.unit, "config_hash": cfg.config_hash, "invocation": v.invocation,
        "ts": v.ts or time.time(), "healthy": v.verdict == "healthy", "verdict": v.verdict, "cause": v.cause,
        "phase": v.phase, "figures": v.figures.pick(SNAPSHOT_FIGURES),
        "phase_seconds": v.phase_seconds, "state_before": state_before,
    }


def compare(prev: dict[str, Any], cur: dict[str, Any]) -> list[dict[str, Any]]:
    """Drift of this healthy start against the last good one, beyond the thresholds."""
    out: list[dict[str, Any]] = []
    pf, cf = Figures.from_json(prev.get("figures"), "the last good snapshot"), Figures.from_json(cur.get("figures"))
    a, b = pf.kv_tokens, cf.kv_tokens
    if a and b is not None and b < a * (1 - KV_DROP):
        out.append({"what": "kv_tokens", "before": a, "after": b,
                    "message": f"KV cache down {100 * (a - b) / a:.1f} % ({a:,} → {b:,} tokens; threshold {KV_DROP:.0%})"})
    a, b = pf.startup_s, cf.startup_s
    if a and b is not None and b > a * (1 + SLOWER):
        out.append({"what": "startup_s", "before": a, "after": b,
                    "message": f"start-up {100 * (b - a) / a:.0f} % slower ({a:.1f} s → {b:.1f} s; threshold {SLOWER:.0%})"})
    before, after = set(prev.get("phase_seconds", {})), set(cur.get("phase_seconds", {}))
    for phase in sorted(after - before):
        out.append({"what": "phase", "before": None, "after": phase, "message": f"phase {phase} newly appears"})
    for phase in sorted(before - after):
        out.append({"what": "phase", "before": phase, "after": None, "message": f"phase {phase} vanished"})
    for key, a, b in (("mamba_slots", pf.mamba_slots, cf.mamba_slots),
                      ("max_running_requests", pf.max_running_requests, cf.max_running_requests)):
        if a is not None and b is not None and a != b:
            out.append({"what": key, "before": a, "after": b, "message": f"{key} {a} → {b}"})
    return out


#: the failures of SGLang's own sizing: too little memory for what it was asked to hold
_SGLANG_SIZED = in_family(Family.NOT_ENOUGH_MEMORY)
#: which way a key must move to explain a failure, and which causes it can explain
_WORSENS = {
    "max_running_requests": (+1, _SGLANG_SIZED | {Cause.CUDA_OOM}),
    "max_mamba_cache_size": (-1, {Cause.MAX_RUNNING_ZERO, Cause.MAMBA_CACHE_TOO_SMALL}),
    "context_length": (+1, {Cause.MAX_RUNNING_ZERO}),
    "mem_fraction_static": (-1, _SGLANG_SIZED),
    "tp_size": (-1, {Cause.CUDA_OOM, Cause.NOT_ENOUGH_MEMORY, Cause.MAX_RUNNING_ZERO}),
    "cuda_graph_max_bs": (+1, {Cause.CUDA_OOM}),
}


def estimate(snapshot: dict[str, Any], base: ServiceConfig, cand: ServiceConfig) -> dict[str, Any] | None:
    """Preflight: the candidate's KV tokens and request cap by SGLang's formula, from the
    baseline's measured figures (same tp only; across tp sizes the model's split is unknown)."""
    if cand.tp_size != base.tp_size:
        return None
    return estimate_candidate(Figures.from_json(snapshot.get("figures"), "the baseline snapshot"), base, cand)


def explain_candidate(base: ServiceConfig, cand: ServiceConfig, cand_verdict: Verdict | None,
                      snapshot: dict[str, Any] | None, preflight: dict[str, Any] | None = None) -> dict[str, Any]:
    """How CANDIDATE differs and why it fails: from its last verdict; when it never ran, from
    preflight on its own model files, else from the baseline's measured figures."""
    rows = memory_diff(base, cand)
    out: dict[str, Any] = {"candidate": cand.name, "differences": rows}
    cause = None
    if cand_verdict is not None:
        out["source"] = "last verdict"
        out["verdict"] = cand_verdict.verdict
        cause = cand_verdict.cause
    elif preflight is not None:
        out["source"] = "preflight"
        out["preflight"] = preflight
        cause = preflight["cause"]
        out["verdict"] = "failed (predicted)" if cause else "fits (predicted)"
    elif snapshot is not None and (est := estimate(snapshot, base, cand)) is not None:
        out["source"] = "preflight estimate"
        out["estimate"] = est
        cause = est["cause"]
        out["verdict"] = "failed (predicted)" if cause else "fits (predicted)"
    else:
        out["source"] = "none"
        out["verdict"] = None
    out["cause"] = cause
    keys = []
    for r in rows:
        rule = _WORSENS.get(r["key"])
        if rule is None or cause not in rule[1] or r["a"] is None or r["b"] is None:
            continue
        if (r["b"] - r["a"]) * rule[0] > 0:
            keys.append(r["key"])
    out["explaining_keys"] = keys
    if cause and keys:
        change = " with ".join(f"{k} {next(r['a'] for r in rows if r['key'] == k)} → "
                               f"{next(r['b'] for r in rows if r['key'] == k)}" for k in keys)
        out["explanation"] = f"{cand.name} {'failed' if cand_verdict else 'would fail'} with {cause} where " \
                             f"{base.name} is healthy: {change}"
    elif cause:
        out["explanation"] = f"{cand.name} failed with {cause}; no memory-relevant key explains it"
    return out


@dataclass(frozen=True, slots=True)
class CheckOutcome:
    """A baseline-check: the fresh start's verdict, the drift against the last good snapshot,
    and the unit put back as it was. `verdict` is None when the check was interrupted."""

    verdict: Verdict | None
    result: dict[str, Any]
    drift: tuple[dict[str, Any], ...] = ()

    @property
    def holds(self) -> bool:
        return self.verdict is not None and self.verdict.verdict == "healthy" and not self.drift


#: how long a start judged healthy may stay `activating` before its state is reported as it is
SETTLE_S = 10.0


def _settled(sd: Systemd, unit: str) -> Any:
    """A notify unit judged healthy is `activating` until its supervisor's READY=1 reaches PID 1 (sent
    after the supervisor's own HTTP check, which may end after ours): the state it settles in is the
    one to report, not a moment of that race."""
    import select

    sd.watch(unit, lambda: None)
    deadline = time.monotonic() + SETTLE_S
    props = sd.props(unit)
    while props.active_state == "activating" and (left := deadline - time.monotonic()) > 0:
        select.select([sd.fileno()], [], [], min(left, 0.5))
        sd.process()
        props = sd.props(unit)
    return props


def check(sd: Systemd, cfg: ServiceConfig, units: UnitsDir, pub: Publisher, *, candidate: ServiceConfig | None,
          keep_running: bool, state: str | None, timeout: float | None) -> CheckOutcome:
    """Start the baseline afresh, judge it, snapshot it, compare with the last good run, and
    put the unit back the way it was, whatever happens in between. `sd` may be a remote host's
    systemd (over SSH): the start, its journal and the stop are there, the snapshots here."""
    store = SnapshotStore(state_dir(state), cfg.name)
    prev = store.last_good()
    for problem in store.problems:
        pub.note(problem)
    with unit_lock(cfg.name, pub.note):
        before = sd.props(cfg.unit)
        pub.note(f"baseline {cfg.name}: {before.active_state} before the check; a fresh start is judged")
        verdict = None
        try:
            own_plan = quiet_plan(cfg, remote=sd.remote)
            props = ensure_started(sd, cfg, pub.note, restart=True)
            verdict = judge_start(sd, cfg, props, pub, timeout)
        except KeyboardInterrupt:
            pass
        finally:
            if not before.running and not keep_running:
                sd.wait_job(sd.stop(cfg.unit), 90.0)  # the check must not leave it running
            after = sd.props(cfg.unit)
            if verdict is not None and verdict.verdict == "healthy" and after.active_state == "activating":
                after = _settled(sd, cfg.unit)
    if verdict is None:
        pub.note(f"interrupted: {cfg.unit} put back to {after.active_state}; no snapshot written")
        return CheckOutcome(None, {"name": cfg.name, "state_after": after.active_state})
    calibrate(cfg, own_plan, verdict, pub.note, state)
    snapshot = make_snapshot(cfg, verdict, before.active_state)
    snapshot["state_after"] = after.active_state
    drift = compare(prev[1], snapshot) if prev and snapshot["healthy"] else []
    path = store.write(snapshot)
    against = None
    if candidate is not None:
        against = _against(sd, cfg, candidate, snapshot if snapshot["healthy"] else (prev[1] if prev else None))
    verdict = conclude(pub, verdict, diagnoser(cfg, units, sd),  # its own drift below, against the snapshot
                       before=lambda v: remember(cfg, v, pub, "baseline-check", state=state, drift=False))
    for d in drift:
        pub.publish(pub.record("drift", ts=verdict.ts, message=d["message"], data=d))
    healthy = snapshot["healthy"] and not drift
    result = {"name": cfg.name, "healthy": healthy, "drift": drift,
              "compared_with": str(prev[0]) if prev else None, "state_before": before.active_state,
              "state_after": after.active_state, "snapshot": str(path), "against": against}
    summary = (f"baseline {cfg.name} " + ("holds" if healthy else "drifted" if snapshot["healthy"] else "is not healthy")
               + f": {verdict.verdict}, {len(drift)} drift item(s)")
    result["summary"] = summary
    pub.publish(pub.record("baseline_result", ts=verdict.ts, verdict=verdict.verdict, message=summary, data=result))
    return CheckOutcome(verdict, result, tuple(drift))


def _against(sd: Systemd, base: ServiceConfig, cand: ServiceConfig, snapshot: dict[str, Any] | None) -> dict[str, Any]:
    """The candidate's last verdict when it ran, else preflight on its own model files."""
    cprops = sd.props(cand.unit)
    cverdict = None
    if cprops.invocation:
        cverdict = follow(sd, cand, cand.unit, cprops, emit=lambda ev: None, keep_following=False).verdict
    cplan = quiet_plan(cand, remote=sd.remote) if cverdict is None else None
    return explain_candidate(base, cand, cverdict, snapshot, preflight=cplan.to_json() if cplan else None)
