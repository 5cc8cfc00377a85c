"""The supervisor judges a read of output as `replay`'s fast path does (quiet runs applied at once):
it must come to what judging every line one by one comes to, on every fixture and on fixtures
spliced with serving lines and noise, read in pieces of any size."""

from __future__ import annotations

import os
from datetime import datetime, timedelta
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from svcdiag.config.service import UnitsDir
from svcdiag.ops.serve.supervise import Supervisor
from svcdiag.systemd.notify import Notifier

from .test_replay_fast import LOGS, STAMP, noise, serving_line

ROOT = Path(__file__).resolve().parent.parent
CFG = UnitsDir(ROOT / "units", "units").load("dflash-smoke")


class LineByLine(Supervisor):
    """The reference: every whole line fed to the judge on its own."""

    def _whole(self, data: bytes, start: int, end: int) -> None:
        self._each(data, start + 1, end)


def judged(cls: type[Supervisor], data: bytes, reads: list[int], step: float) -> tuple[object, ...]:
    """What a supervisor said and concluded, fed `data` in reads of the given sizes (cycled), its clock
    moving `step` seconds a read."""
    said: list[str] = []
    now = [1_780_000_000.0]
    sup = cls(CFG, ["true"], notifier=Notifier(send=said.append), environ={}, clock=lambda: now[0])
    at, i = 0, 0
    while at < len(data):
        n = reads[i % len(reads)]
        sup._judge(data[at:at + n])
        sup._on_time(now[0])
        at, i = at + n, i + 1
        now[0] += step
    sup._flush_partial()
    v = sup.judge.verdict
    os.close(sup._wake_r)
    os.close(sup._wake_w)
    return (v.to_json() if v else None, said, sup.judge.parser.sglang_lines, sup.judge.readiness.last_line)


@pytest.mark.parametrize("path", LOGS, ids=lambda p: p.name)
def test_bulk_judging_matches_line_by_line_on_every_fixture(path: Path) -> None:
    data = path.read_bytes()
    for reads, step in (([1 << 18], 0.0), ([97, 4096, 13], 0.5)):
        assert judged(Supervisor, data, reads, step) == judged(LineByLine, data, reads, step)


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(LOGS), st.lists(st.tuples(st.integers(0, 400), st.integers(0, 7), st.integers(0, 300)),
                                       max_size=6),
       st.lists(st.integers(1, 20000), min_size=1, max_size=5), st.sampled_from([0.0, 0.01, 1.0, 30.0]))
def test_bulk_judging_matches_line_by_line_on_spliced_logs(path: Path, splices, reads: list[int], step: float) -> None:
    lines = path.read_text().splitlines()
    for where, kind, count in splices:
        at = min(where, len(lines))
        before = [m.group(1) for ln in lines[:at] if (m := STAMP.match(ln))]
        base = datetime.fromisoformat(before[-1]) if before else datetime(2026, 5, 23, 9, 42)
        extra = noise(base.strftime("%Y-%m-%d %H:%M:%S"), kind) if kind < 7 else []
        lines[at:at] = extra + [serving_line((base + timedelta(seconds=i)).strftime("%Y-%m-%d %H:%M:%S"), at + i)
                                for i in range(count)]
    data = ("\n".join(lines) + "\n").encode()
    assert judged(Supervisor, data, reads, step) == judged(LineByLine, data, reads, step)
