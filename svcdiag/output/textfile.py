"""The latest readiness state of each unit as a Prometheus textfile (node_exporter's
textfile collector), written atomically.

Several svcdiag processes (a campaign's TP1, TP4 and TP8 starts) share one file, so each
update is read-merge-write under a lock. The file carries its own state: one
`# svcdiag_state {json}` comment per unit, which the exposition format ignores and the
next writer reads back, so no second file is needed.
"""

from __future__ import annotations

import fcntl
import json
import os
from pathlib import Path
from typing import Any

from svcdiag.config.service import PHASES
from svcdiag.errors import SvcdiagError
from svcdiag.files import open_lock, read_text, write_atomic
from svcdiag.output.schema import ReadinessEvent
from svcdiag.sglang.failures import Cause
from svcdiag.sglang.figures import Figures

VERDICTS = ("pending", "healthy", "failed", "timed_out", "incomplete")
STATE_MARK = "# svcdiag_state "
#: figure → (metric, help); sizes in SGLang's GB (GiB) become bytes, Prometheus's base unit
GAUGES = {
    "kv_tokens": ("svcdiag_kv_tokens", "Tokens in the KV cache SGLang allocated."),
    "max_total_num_tokens": ("svcdiag_max_total_num_tokens", "SGLang's max_total_num_tokens."),
    "max_running_requests": ("svcdiag_max_running_requests", "The request cap SGLang derived."),
    "context_len": ("svcdiag_context_len", "The context length the server runs with."),
    "mamba_slots": ("svcdiag_mamba_slots", "Slots in the Mamba state cache."),
    "weights_gb": ("svcdiag_weights_bytes", "GPU memory the weights took (rank 0)."),
    "startup_s": ("svcdiag_startup_seconds", "Seconds from start to the verdict."),
}
_UPDATES_ON = {"phase_entered", "failure", "verdict", "incident"}
#: the serving watch's states (svcdiag.judge.watch), after a healthy verdict
WATCH_STATES = ("serving", "busy", "wedged", "dead")
INCIDENTS = ("wedged", Cause.DIED_AFTER_READY)
_FIGURE_MILESTONES = {"kv_cache", "weights_end", "mamba_cache", "scheduler"}


def _label(value: Any) -> str:
    return str(value).replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _labels(**kw: Any) -> str:
    return "{" + ",".join(f'{k}="{_label(v)}"' for k, v in kw.items() if v is not None) + "}"


def render(states: dict[str, dict[str, Any]], *, marks: bool = True) -> str:
    """The exposition text for every unit's state (sorted, so a rewrite with no change is byte-identical);
    `marks`: with the `# svcdiag_state` lines the next writer reads back (a textfile, not /metrics)."""
    out: list[str] = []

    def family(name: str, kind: str, help_: str, rows: list[tuple[str, float]]) -> None:
        if rows:
            out.extend([f"# HELP {name} {help_}", f"# TYPE {name} {kind}"])
            out.extend(f"{name}{labels} {value}" for labels, value in rows)

    units = sorted(states)
    base = {u: {"unit": u, "config": states[u].get("config")} for u in units}
    family("svcdiag_start_info", "gauge", "The start being judged: its invocation, phase, verdict and cause.",
           [(_labels(**base[u], invocation=states[u].get("invocation"), phase=states[u].get("phase"),
                     verdict=states[u].get("verdict"), cause=states[u].get("cause") or ""), 1) for u in units])
    family("svcdiag_phase", "gauge", "1 for the phase the start is in, 0 for the others.",
           [(_labels(**base[u], phase=p), int(states[u].get("phase") == p)) for u in units for p in PHASES])
    family("svcdiag_verdict", "gauge", "1 for the start's verdict (pending until there is one).",
           [(_labels(**base[u], verdict=v), int(states[u].get("verdict") == v)) for u in units for v in VERDICTS])
    family("svcdiag_healthy", "gauge", "1 when the current start was judged healthy.",
           [(_labels(**base[u]), int(states[u].get("verdict") == "healthy")) for u in units])
    for key, metric, help_ in (("started", "svcdiag_start_timestamp_seconds", "When the start began (Unix time)."),
                               ("phase_since", "svcdiag_phase_entered_timestamp_seconds",
                                "When the start entered its current phase."),
                               ("updated", "svcdiag_last_event_timestamp_seconds", "The time of the last event.")):
        family(metric, "gauge", help_,
               [(_labels(**base[u]), round(states[u][key], 3)) for u in units if states[u].get(key) is not None])
    family("svcdiag_phase_duration_seconds", "gauge", "Seconds the start spent in each phase it left.",
           [(_labels(**base[u], phase=p), s) for u in units for p, s in (states[u].get("phase_seconds") or {}).items()])
    for figure, (metric, help_) in GAUGES.items():
        scale = 2**30 if metric.endswith("_bytes") else 1
        values = {u: (states[u].get("figures") or {}).get(figure) for u in units}
        family(metric, "gauge", help_, [(_labels(**base[u]), round(v * scale) if scale != 1 else v)
                                        for u, v in values.items() if isinstance(v, (int, float))])
    _after_ready(family, states, units, base)
    if marks:
        out.extend(STATE_MARK + json.dumps(states[u], sort_keys=True, separators=(",", ":")) for u in units)
    return "\n".join(out) + "\n"


def _after_ready(family: Any, states: dict[str, dict[str, Any]], units: list[str], base: dict[str, Any]) -> None:
    """The serving watch's families (docs/live.md#metrics): its state, incidents, restarts, /health."""
    watched = [u for u in units if states[u].get("watch")]
    family("svcdiag_watch_state", "gauge", "After a healthy start, 1 for what the serving watch says, 0 for the others.",
           [(_labels(**base[u], state=w), int(states[u]["watch"] == w)) for u in watched for w in WATCH_STATES])
    family("svcdiag_incidents_total", "counter", "Post-ready incidents of the current start, by kind.",
           [(_labels(**base[u], kind=k), (states[u].get("incidents") or {}).get(k, 0))
            for u in units if states[u].get("verdict") == "healthy" or states[u].get("incidents") for k in INCIDENTS])
    family("svcdiag_restarts_total", "counter", "Restarts after a post-ready incident that svcdiag has seen.",
           [(_labels(**base[u]), states[u]["restarts"]) for u in units if states[u].get("restarts") is not None])
    family("svcdiag_health_checks_total", "counter", "SGLang /health requests the serving watch made.",
           [(_labels(**base[u]), states[u]["health_checks"]) for u in watched if "health_checks" in states[u]])
    family("svcdiag_health_failures_total", "counter", "SGLang /health requests that failed (not 200, or no answer).",
           [(_labels(**base[u]), states[u]["health_failures"]) for u in watched if "health_failures" in states[u]])
    family("svcdiag_health_latency_seconds", "gauge", "Seconds the latest answered /health took.",
           [(_labels(**base[u]), round(states[u]["health_latency_s"], 4)) for u in watched
            if isinstance(states[u].get("health_latency_s"), (int, float))])


def read_states(text: str) -> dict[str, dict[str, Any]]:
    states: dict[str, dict[str, Any]] = {}
    for line in text.splitlines():
        if line.startswith(STATE_MARK):
            try:
                state = json.loads(line[len(STATE_MARK):])
            except ValueError:
                continue  # a hand-edited line: that unit's state is rebuilt on its next event
            if isinstance(state, dict) and state.get("unit"):
                states[state["unit"]] = state
    return states


def apply(state: dict[str, Any] | None, rec: ReadinessEvent) -> dict[str, Any]:
    """A unit's state after one record. A record of a new invocation starts the state afresh."""
    if state is None or state.get("invocation") != rec.invocation:
        # a start after one systemd restarted (its incident acted on) counts as a restart of the unit
        acted = state is not None and state.get("acted")
        restarts = (state or {}).get("restarts")
        restarts = (restarts or 0) + 1 if acted else restarts
        state = {"restarts": restarts} if restarts is not None else {}
        state |= {"unit": rec.unit, "config": rec.config, "invocation": rec.invocation, "phase": "starting",
                 "verdict": "pending", "cause": None, "started": rec.ts, "phase_since": rec.ts, "figures": {},
                 "phase_seconds": {}}
    state = dict(state, figures=dict(state.get("figures") or {}), updated=rec.ts or state.get("updated"))
    if rec.phase:
        state["phase"] = rec.phase
    if rec.event == "phase_entered":
        state["phase_since"] = rec.ts
        if rec.data.get("previous_s") is not None:
            state["phase_seconds"] = {**state.get("phase_seconds", {}), rec.data["previous"]: rec.data["previous_s"]}
    elif rec.event == "milestone":
        for key in GAUGES:
            alias = {"kv_tokens": "tokens", "weights_gb": "mem_usage_gb", "mamba_slots": "slots"}.get(key, key)
            if rec.milestone in _FIGURE_MILESTONES and alias in rec.figures:
                if rec.milestone == "kv_cache" and (rec.figures.get("draft") or rec.figures.get("upper_bound")):
                    continue
                state["figures"][key] = rec.figures[alias]
    elif rec.event == "failure":
        state["cause"] = rec.cause
    elif rec.event == "incident":
        kind = rec.data.get("kind") or rec.verdict
        state["incidents"] = {**(state.get("incidents") or {}), kind: (state.get("incidents") or {}).get(kind, 0) + 1}
        state["watch"] = "wedged" if kind == "wedged" else "dead"
        if rec.data.get("action"):
            state["acted"] = True
    elif rec.event == "verdict":
        state.update(verdict=rec.verdict, cause=rec.cause, phase_seconds=rec.data.get("phase_seconds") or {})
        state["figures"].update(Figures.from_json(rec.figures, f"{rec.unit}'s verdict record").pick(tuple(GAUGES)))
    return state


def check_textfile(path: str) -> str:
    """A bad path is refused before anything is started, not after a 2-minute wait."""
    Textfile(path)
    return path


class Textfile:
    """A sink: every record that changes a unit's state rewrites the file."""

    def __init__(self, path: str | Path):
        self.path = Path(path)
        if self.path.suffix != ".prom":
            raise SvcdiagError(f"--textfile {self.path}: node_exporter's textfile collector reads only *.prom files")
        if not self.path.parent.is_dir():
            raise SvcdiagError(f"--textfile {self.path}: no such directory {self.path.parent}")

    def publish(self, rec: ReadinessEvent) -> None:
        if not rec.unit or not (rec.event in _UPDATES_ON or rec.milestone in _FIGURE_MILESTONES):
            return
        self.update(rec)

    def update(self, rec: ReadinessEvent) -> None:
        lock = open_lock(self.path.with_name(f".{self.path.name}.lock"))  # a planted symlink is refused
        try:
            fcntl.flock(lock, fcntl.LOCK_EX)
            try:
                states = read_states(read_text(self.path))
            except FileNotFoundError:
                states = {}
            except (OSError, UnicodeDecodeError) as e:
                raise SvcdiagError(f"--textfile {self.path}: cannot read: {e}") from None
            states[rec.unit] = apply(states.get(rec.unit), rec)  # type: ignore[index]
            write_atomic(self.path, render(states), mode=0o644)  # node_exporter reads it; it holds no secret
        finally:
            os.close(lock)
