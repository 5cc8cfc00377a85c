"""Stop, status and logs: what a running (or stopped) unit is doing, read from systemd and
its journal, without starting anything.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from svcdiag.errors import SvcdiagError

if TYPE_CHECKING:  # the judge and following are imported when a unit has a start to judge (`status`)
    from svcdiag.config.service import ServiceConfig, UnitsDir
    from svcdiag.sglang.events import Event
    from svcdiag.systemd.dbus import Systemd, UnitProps
    from svcdiag.systemd.journal_formats import Record

STOP_TIMEOUT = 90.0


def down(sd: Systemd, configs: list[ServiceConfig]) -> list[dict[str, Any]]:
    """Stop every unit at once, then wait for each job: one slow unit does not delay the others' stop."""
    rows = []
    jobs = {}
    for cfg in configs:
        before = sd.props(cfg.unit)
        if before.active_state in ("inactive", "failed") and not before.job:
            jobs[cfg.name] = None  # systemd may have unloaded it: StopUnit would say "not loaded"
        else:
            jobs[cfg.name] = sd.stop(cfg.unit)
        rows.append({"event": "down", "name": cfg.name, "unit": cfg.unit, "state_before": before.active_state})
    for cfg, row in zip(configs, rows, strict=True):
        job = jobs[cfg.name]
        row["job"] = "nothing to stop" if job is None else sd.wait_job(job, STOP_TIMEOUT)
        after = sd.props(cfg.unit)
        row["state_after"] = after.active_state
        row["stopped"] = not after.running
    return rows


def status(sd: Systemd, configs: list[ServiceConfig], units: UnitsDir, *, published: bool = True) -> list[dict[str, Any]]:
    """State, phase, figures and verdict of each unit's current start. A notify unit serving after a
    healthy start shows the verdict its supervisor published (`published_verdicts`); any other start is
    judged from its journal, from its first line (`published=False`: every start is)."""
    published = published and sd.remote is None  # over SSH each Get is a round trip: GetAll, and the journal judged
    states = sd.states([cfg.unit for cfg in configs], brief=published)
    said = published_verdicts(sd, configs, states) if published else {}
    rows = []
    for cfg, listed in zip(configs, states, strict=True):
        props = listed
        row: dict[str, Any] = {"event": "status", "name": cfg.name, "unit": cfg.unit,
                               "active_state": props.active_state, "sub_state": props.sub_state,
                               # systemd's word on how the unit ended ("watchdog", "timeout", "signal"):
                               # a start judged healthy can still have been killed since
                               "result": props.result or None, "invocation": props.invocation or None}
        record = said.get(cfg.unit)
        if record is not None:  # the supervisor's own verdict: what judging its lines again would say
            figures = record.get("figures") or {}
            row.update(phase=record.get("phase"), kv_tokens=figures.get("kv_tokens"),
                       max_running_requests=figures.get("max_running_requests"), verdict=record)
            if props.active_enter_ts:
                row["uptime_s"] = round(time.time() - props.active_enter_ts, 1)
            _watch(row, props.status_text)
        elif props.invocation and props.load_state != "not-found":
            from svcdiag.ops.offline.conclude import diagnoser

            if published:  # the brief props a listing reads: following the start needs them all
                props = sd.props(cfg.unit)
            from svcdiag.ops.serve.follow import follow
            from svcdiag.output.publish import verdict_record

            res = follow(sd, cfg, cfg.unit, props, emit=lambda ev: None, keep_following=False)
            r = res.judge.readiness
            v = res.verdict
            if v is not None and v.verdict != "healthy":
                v = v.with_(diagnosis=diagnoser(cfg, units, sd)(v))
            row.update(phase=r.phase, kv_tokens=r.figures.kv_tokens,
                       max_running_requests=r.figures.max_running_requests,
                       verdict=verdict_record(v, cfg.name).to_json() if v else None)
            if props.running and props.active_enter_ts:
                row["uptime_s"] = round(time.time() - props.active_enter_ts, 1)
            if v is not None and v.verdict == "healthy" and props.running and cfg.readiness == "notify":
                _watch(row, props.status_text)
        rows.append(row)
    return rows


def _watch(row: dict[str, Any], status_text: str) -> None:
    from svcdiag.ops.serve.status_line import watch_word

    said = watch_word(status_text)
    if said is not None:  # after ready, the supervisor's serving watch (docs/live.md#the-serving-watch)
        row["watch"] = {"state": said[0], "status": said[1]}


#: what the serving watch may say for a start's published verdict to stand: a server that died after
#: ready (its log's fatal line, which the journal's judge reads too) is judged from its lines again
STILL_SERVING = (None, "serving", "busy", "wedged")


def published_verdicts(sd: Systemd, configs: list[ServiceConfig], states: list[UnitProps]) -> dict[str, dict[str, Any]]:
    """By unit: the healthy verdict record its supervisor published for the current start
    (svcdiag.systemd.journal.publish_verdict), for each notify unit on this host that is running it
    with systemd's STATUS= still saying ready, unless journald says it dropped lines of the unit (a verdict
    read from the journal counts them). Reading it costs two indexed journal seeks; judging the
    start again (`follow`) reads each of its lines through the judge. Only on this host (the
    journal read here)."""
    from svcdiag.ops.serve.status_line import watch_word

    candidates = {}
    for cfg, props in zip(configs, states, strict=True):
        if (cfg.readiness == "notify" and props.invocation and props.load_state != "not-found" and props.running
                and props.status_text.startswith("ready")):
            word = watch_word(props.status_text)
            if (word[0] if word else None) in STILL_SERVING:
                candidates[props.invocation] = cfg.unit
    if not candidates:
        return {}
    from svcdiag.systemd.journal import published_verdicts as read

    try:
        found = read(candidates)
    except SvcdiagError:  # the journal cannot be read here: judging will say why
        return {}
    return {candidates[inv]: rec for inv, rec in found.items()
            if rec.get("verdict") == "healthy" and rec.get("unit") == candidates[inv]}


def logs(sd: Systemd, cfg: ServiceConfig, *, on_record: Callable[[Record], None],
         on_event: Callable[[Event], None] | None = None, keep_following: bool = False) -> None:
    """The current start's journal, record by record (systemd's lines about it included)."""
    from svcdiag.ops.serve.follow import follow

    props = sd.props(cfg.unit)
    if not props.invocation:
        raise SvcdiagError(f"{cfg.unit} has no current start: {props.why_no_invocation}; "
                           f"`journalctl -u {cfg.unit}` has its earlier starts' lines")
    follow(sd, cfg, cfg.unit, props, emit=on_event or (lambda ev: None), keep_following=keep_following,
           on_record=on_record, until_verdict=False)
