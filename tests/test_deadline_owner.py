"""A notify unit's phase deadlines are its supervisor's (svcdiag.ops.serve.deadline_owner, #30 item 2): a
journal reader whose journal lost milestones never times the start out in a phase the supervisor
has left, and a reader with no supervisor keeps its own deadlines."""

from __future__ import annotations

import math
from pathlib import Path
from types import SimpleNamespace

import pytest

from svcdiag.config.service import PHASES, UnitsDir
from svcdiag.judge.pipeline import Judge
from svcdiag.ops.serve.deadline_owner import SUPERVISOR_DEADLINE_GRACE, next_deadline, own_deadline, tick
from svcdiag.ops.serve.follow import _supervisors_failure
from svcdiag.ops.serve.status_line import status_phase
from svcdiag.ops.serve.supervise import Supervisor
from svcdiag.systemd.notify import Notifier

from .conftest import EXAMPLES, UNITS

T0 = 1_800_000_000.0
LOAD_BEGIN = "[2026-12-02 18:40:00] Load weight begin. avail mem=94.50 GB"
IN_GRAPHS = "cuda graph 3 s · capturing CUDA graphs"
SUPERVISOR_TIMED_OUT = ("timed_out: no progress in phase cuda_graph for 600 s (deadline 600 s); last line: "
                        "'Capture target verify CUDA graph begin.'")


@pytest.mark.parametrize(("status", "dropped", "after"), [
    ("loading weights 12 s · loading weights, 94.50 GB free", False, SUPERVISOR_DEADLINE_GRACE),  # the same phase
    ("starting dflash-smoke", False, SUPERVISOR_DEADLINE_GRACE),  # it names none: no sign the journal lacks lines
    (IN_GRAPHS, False, math.inf),  # the supervisor is past the journal's phase: its milestones were dropped
    ("loading weights 12 s", True, math.inf),  # journald said it dropped lines
    (SUPERVISOR_TIMED_OUT, False, 0.0),  # the supervisor has given its verdict: nothing left to wait for
    ("failed [cuda_oom]: CUDA out of memory", True, 0.0),
])
def test_when_the_readers_own_deadline_may_stand(status: str, dropped: bool, after: float) -> None:
    assert own_deadline(100.0, "loading_weights", status, dropped=dropped) == 100.0 + after


@pytest.mark.parametrize("log", sorted(EXAMPLES.glob("*.log")), ids=lambda p: p.stem)
def test_every_status_the_supervisor_sends_names_its_own_phase(log: Path) -> None:
    sent: list[str] = []
    sup = Supervisor(UnitsDir(UNITS, "t").load("dflash-smoke"), ["true"], notifier=Notifier(send=sent.append),
                     environ={}, clock=lambda: T0)
    named = 0
    for line in log.read_text().splitlines():
        before = len(sent)
        sup._judge(line.encode() + b"\n")
        for status in (m.split("\n")[0].removeprefix("STATUS=") for m in sent[before:] if m.startswith("STATUS=")):
            phase = status_phase(status)
            v = sup.judge.verdict
            if v is None or v.verdict == "healthy":
                assert phase == sup.judge.readiness.phase, (line, status)
                named += 1
            elif phase is not None:  # a failure's message names its phase, or none
                assert phase == v.phase, status
    assert named >= 3


def test_status_phase_reads_the_supervisors_verdicts() -> None:
    assert status_phase(SUPERVISOR_TIMED_OUT) == "cuda_graph"
    assert status_phase("ready · KV 94,126 tokens · max_running 4 · HTTP agrees") == "ready"
    assert status_phase("failed [http_unreachable]: the log says ready, but http://127.0.0.1:1 did not answer") is None
    assert status_phase("stopped: the server exited (status 0) after it was ready") is None
    assert {status_phase(f"{p.replace('_', ' ')} 0 s") for p in PHASES} == set(PHASES)


def _hung_in_the_load() -> tuple[Judge, float]:
    """A reader whose journal stops in the weight load (30 s deadline): the deadline's time."""
    j = Judge(SimpleNamespace(timeout={**dict.fromkeys(PHASES, 300.0), "loading_weights": 30.0, "jit_compile": 0.0},
                              hybrid=None, unit="p1.service"), start_ts=T0)
    j.service_line(LOAD_BEGIN, T0 + 1)
    assert j.readiness.phase == "loading_weights"
    return j, T0 + 31


def test_a_reader_with_no_supervisor_keeps_its_own_deadline() -> None:
    j, due = _hung_in_the_load()
    assert next_deadline(j, supervised=False, status="") == due
    assert [v.verdict for v in tick(j, due, supervised=False, status="")] == ["timed_out"]


def test_a_supervisor_judging_the_same_phase_gets_a_grace_then_the_readers_deadline_stands() -> None:
    j, due = _hung_in_the_load()
    status = "loading weights 29 s · loading weights, 94.50 GB free"
    assert next_deadline(j, supervised=True, status=status) == due
    assert tick(j, due + 1, supervised=True, status=status) == [] and j.verdict is None
    assert next_deadline(j, supervised=True, status=status) == due + SUPERVISOR_DEADLINE_GRACE
    out = tick(j, due + SUPERVISOR_DEADLINE_GRACE, supervised=True, status=status)
    assert [(v.verdict, v.phase, v.ts) for v in out] == [("timed_out", "loading_weights", due + 1)]  # as it was then


def test_a_journal_missing_milestones_waits_for_the_supervisors_timed_out_and_takes_its_phase() -> None:
    j, due = _hung_in_the_load()
    for now in (due, due + 60, due + 3600):  # no deadline of the reader's own while the supervisor is ahead
        assert tick(j, now, supervised=True, status=IN_GRAPHS) == [] and j.verdict is None
    assert next_deadline(j, supervised=True, status=IN_GRAPHS) is None  # woken by D-Bus only
    assert [v.verdict for v in tick(j, due + 3601, supervised=True, status=SUPERVISOR_TIMED_OUT)] == ["timed_out"]
    _supervisors_failure(j, SimpleNamespace(status_text=SUPERVISOR_TIMED_OUT))
    v = j.verdict
    assert v is not None and (v.verdict, v.phase, v.cause, v.figures.verdict_source) == \
        ("timed_out", "cuda_graph", None, "supervisor")
    assert "journald dropped" in v.message and v.evidence[-1] == f"STATUS={SUPERVISOR_TIMED_OUT}"


def test_the_whole_starts_deadline_is_the_readers_own_even_while_the_supervisor_runs() -> None:
    j = Judge(None, unit="p1.service", start_ts=T0, total_timeout=10.0)
    j.service_line(LOAD_BEGIN, T0 + 1)
    assert next_deadline(j, supervised=True, status=IN_GRAPHS) == T0 + 10
    assert [v.verdict for v in tick(j, T0 + 10, supervised=True, status=IN_GRAPHS)] == ["timed_out"]


def test_the_supervisors_stop_at_its_deadline_is_not_a_crash_where_the_journal_lacks_the_phase() -> None:
    # the journal's verdict is the server's exit (status 3, the supervisor's own) before the reader's deadline
    j, _ = _hung_in_the_load()
    j.systemd_line("p1.service: Main process exited, code=exited, status=3/NOTIMPLEMENTED", T0 + 20)
    assert j.verdict is not None and j.verdict.cause == "exited"
    _supervisors_failure(j, SimpleNamespace(status_text=SUPERVISOR_TIMED_OUT))
    assert (j.verdict.verdict, j.verdict.phase, j.verdict.cause) == ("timed_out", "cuda_graph", None)
