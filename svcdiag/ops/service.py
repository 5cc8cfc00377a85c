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
    from svcdiag.systemd.dbus import Systemd
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


def status(sd: Systemd, configs: list[ServiceConfig], units: UnitsDir) -> list[dict[str, Any]]:
    """State, phase, figures and verdict of each unit's current start."""
    rows = []
    for cfg, props in zip(configs, sd.states([cfg.unit for cfg in configs]), strict=True):
        row: dict[str, Any] = {"event": "status", "name": cfg.name, "unit": cfg.unit,
                               "active_state": props.active_state, "sub_state": props.sub_state,
                               # systemd's word on how the unit ended ("watchdog", "timeout", "signal"):
                               # a start judged healthy can still have been killed since
                               "result": props.result or None, "invocation": props.invocation or None}
        if props.invocation and props.load_state != "not-found":
            from svcdiag.ops.conclude import diagnoser
            from svcdiag.ops.follow import follow
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
                from svcdiag.ops.status_line import watch_word

                said = watch_word(props.status_text)
                if said is not None:  # after ready, the supervisor's serving watch (docs/live.md#the-serving-watch)
                    row["watch"] = {"state": said[0], "status": said[1]}
        rows.append(row)
    return rows


def logs(sd: Systemd, cfg: ServiceConfig, *, on_record: Callable[[Record], None],
         on_event: Callable[[Event], None] | None = None, keep_following: bool = False) -> None:
    """The current start's journal, record by record (systemd's lines about it included)."""
    from svcdiag.ops.follow import follow

    props = sd.props(cfg.unit)
    if not props.invocation:
        raise SvcdiagError(f"{cfg.unit} has no current start: {props.why_no_invocation}; "
                           f"`journalctl -u {cfg.unit}` has its earlier starts' lines")
    follow(sd, cfg, cfg.unit, props, emit=on_event or (lambda ev: None), keep_following=keep_following,
           on_record=on_record, until_verdict=False)
