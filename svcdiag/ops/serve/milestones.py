"""A serving notify start's milestones, judged once from its journal by its own supervisor and published
there, so that `svcdiag logs NAME --milestones` prints them without importing the judge (#40).

After READY=1 the supervisor judges its start's journal exactly as `logs --milestones` does (`follow`, one
look, the same Publisher records), once systemd's `Started` line is in it, and writes the records with the
count of entries judged (svcdiag.systemd.journal.publish_milestones). `logs` takes them while that entry is
the start's last and nothing was dropped (svcdiag.systemd.journal.published_milestones); any later line
(a request's, a stop's) and it judges the lines as before. tests/rig/test_rig_logs_published.py checks that
both print the same bytes.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from svcdiag.config.service import ServiceConfig
    from svcdiag.systemd.dbus import Systemd

#: how long after READY=1 the supervisor waits for systemd's `Started` line before it gives up publishing
STARTED_WAIT_S = 5.0
STARTED_EVERY_S = 0.2  # each look judges the start again (~10 to 20 ms): at most 25 looks


class _Collect:
    """A sink that keeps each record `logs --milestones` may print (progress records it never prints)."""

    def __init__(self) -> None:
        self.records: list[dict[str, Any]] = []

    def publish(self, rec: Any) -> None:
        if rec.event != "progress":
            self.records.append(rec.to_json())


def judge_journal(sd: Systemd, cfg: ServiceConfig) -> tuple[list[dict[str, Any]], int, bool, Any] | None:
    """The records `logs --milestones` would print now for the unit's current start, how many of the
    start's entries were judged, whether systemd's `Started` line (it follows READY=1) was among them, and
    the judge; None when the unit has no start."""
    from svcdiag.ops.serve.follow import follow
    from svcdiag.output.publish import Publisher

    props = sd.props(cfg.unit)
    if not props.invocation:
        return None
    sink = _Collect()
    pub = Publisher([sink], config=cfg.name, unit=cfg.unit)  # as plain.publisher(..., live=False) makes it
    judged, started = 0, False

    def on_record(rec: Any) -> None:
        nonlocal judged, started
        judged += 1
        started = started or (rec.systemd and rec.text.startswith("Started "))

    res = follow(sd, cfg, cfg.unit, props, emit=pub.event, keep_following=False, on_record=on_record,
                 until_verdict=False)
    return sink.records, judged, started, res.judge


def publish(cfg: ServiceConfig, invocation: str) -> bool:
    """In the supervisor, after READY=1: judge the start's journal once systemd's `Started` line is in it,
    and publish what `logs --milestones` prints. False where it was not published (no healthy verdict in the
    journal, lines dropped, no `Started` line within STARTED_WAIT_S)."""
    from svcdiag.systemd.dbus import Systemd
    from svcdiag.systemd.journal import publish_milestones

    deadline = time.monotonic() + STARTED_WAIT_S
    with Systemd.connect() as sd:
        while True:
            got = judge_journal(sd, cfg)
            if got is None:
                return False
            records, judged, started, judge = got
            v = judge.verdict
            if judge.dropped or judge.readiness.invocation != invocation or v is None or v.verdict != "healthy":
                return False
            if started:
                return publish_milestones(invocation, cfg, records, judged)
            if time.monotonic() >= deadline:
                return False
            time.sleep(STARTED_EVERY_S)
