"""How a healthy server's life ended (issue 41 §4, its second class, live and offline): one decision
(svcdiag.judge.ending) on the same text, whoever reads it: `replay`, `wait`, the notify supervisor's serving
watch. An operator's stop is never an incident; a SIGKILL from outside (the OOM killer's, anyone's) keeps the start
healthy with an incident `killed`; a crash is `died_after_ready` with its cause; systemd's watchdog is `wedged`."""

from __future__ import annotations

import io

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from svcdiag.judge.ending import KILLED, STOPPED, WEDGED, AfterReady, decide
from svcdiag.judge.pipeline import Judge
from svcdiag.judge.watch import ServingWatch, WatchPolicy
from svcdiag.ops.offline.replay import replay

from .test_endings import READY_AT, T0, at, start

UNIT = "demo.service"
END = T0.timestamp() + READY_AT + 3600  # an hour of serving
KILL_LINE = f"[{at(READY_AT + 3600)}] Subprocess scheduler_0 (pid=4562) crashed with exit code -9. Triggering SIGQUIT for cleanup..."
SIGQUIT = f"[{at(READY_AT + 3600)}] Received sigquit from a child process. It usually means the child failed."
OOM_SYSTEMD = "A process of this unit has been killed by the OOM killer."
KILLED_9 = "Main process exited, code=killed, status=9/KILL"


def kernel_oom(pid: int) -> str:
    return f"Out of memory: Killed process {pid} (sglang::schedul) total-vm:96000000kB, anon-rss:81000000kB, UID:0"


#: each ending as the journal has it, after a healthy start: ("s", an SGLang line) or ("d", a line of PID 1's)
ENDINGS: dict[str, list[tuple[str, str]]] = {
    "systemctl stop": [("d", f"Stopping {UNIT} - SGLang..."), ("s", KILL_LINE.replace("-9", "-15")), ("s", SIGQUIT),
                       ("d", KILLED_9), ("d", f"Stopped {UNIT} - SGLang.")],
    "OOM killer": [("d", OOM_SYSTEMD), ("s", KILL_LINE), ("s", SIGQUIT), ("d", KILLED_9),
                   ("d", "Failed with result 'oom-kill'.")],
    "kill -9 of the main process": [("d", KILLED_9), ("d", "Failed with result 'signal'.")],
    "a child SIGKILLed": [("s", KILL_LINE), ("s", SIGQUIT), ("d", KILLED_9), ("d", "Failed with result 'signal'.")],
    "a traceback": [("s", f"[{at(READY_AT + 3600)}] Scheduler hit an exception: Traceback (most recent call last):"),
                    ("s", '  File "/sglang/srt/managers/scheduler.py", line 2871, in run_scheduler_process'),
                    ("s", "    scheduler.event_loop_overlap()"),
                    ("s", "RuntimeError: CUDA error: an illegal memory access was encountered"),
                    ("s", SIGQUIT), ("d", KILLED_9), ("d", "Failed with result 'signal'.")],
    "a segfault": [("s", "Fatal Python error: Segmentation fault"),
                   ("d", "Main process exited, code=dumped, status=11/SEGV"), ("d", "Failed with result 'core-dump'.")],
    "the watchdog": [("d", "Watchdog timeout (limit 2s)!"), ("d", "Killing process 4410 (python) with signal SIGABRT."),
                     ("d", "Main process exited, code=dumped, status=6/ABRT"), ("d", "Failed with result 'watchdog'.")],
}
#: (verdict, cause, figures.incident, figures.died_of or the kill's cause) each ending must give
EXPECTED = {
    "systemctl stop": ("healthy", None, None),
    "OOM killer": ("healthy", None, KILLED),
    "kill -9 of the main process": ("healthy", None, KILLED),
    "a child SIGKILLed": ("healthy", None, KILLED),
    "a traceback": ("failed", "died_after_ready", "died_after_ready"),
    "a segfault": ("failed", "died_after_ready", "died_after_ready"),
    "the watchdog": ("failed", "died_after_ready", WEDGED),
}


def judged(lines: list[tuple[str, str]], *, up_to: int | None = None) -> Judge:
    """The journal's order: a healthy start's lines, then the ending's, each to the one pipeline."""
    j = Judge()
    for line in start():
        j.service_line(line)
    assert j.verdict is not None and j.verdict.verdict == "healthy"
    for i, (who, text) in enumerate(lines[:up_to]):
        (j.systemd_line if who == "d" else j.service_line)(text, END + i * 0.01)
    return j


@pytest.mark.parametrize("name", ENDINGS)
def test_each_ending_is_decided_as_the_issue_says(name: str) -> None:
    v = judged(ENDINGS[name]).finish()
    assert (v.verdict, v.cause, v.figures.incident) == EXPECTED[name], v.message
    assert v.figures.kv_tokens == 413340  # the start's figures kept, whatever the end


def test_a_stop_is_never_an_incident_whatever_follows_it() -> None:
    v = judged(ENDINGS["systemctl stop"]).finish()
    assert v.figures.stopped_after_ready_by == "systemd" and "a clean stop" in v.message


def test_a_main_process_ended_by_a_stops_signal_is_stopped() -> None:
    """`systemctl kill -s TERM` (no `Stopping …` line), or a supervisor re-raising the SIGTERM it forwarded; SIGQUIT
    too (the supervisor forwards it as a stop; SGLang's own SIGQUIT ends in its SIGKILL of itself)."""
    for status, by in (("killed, status=15/TERM", "SIGTERM"), ("dumped, status=3/QUIT", "SIGQUIT")):
        v = judged([("d", f"Main process exited, code={status}"), ("d", "Failed with result 'signal'.")]).finish()
        assert (v.verdict, v.figures.incident, v.figures.stopped_after_ready_by) == ("healthy", None, by)


def test_the_oom_killer_is_named_with_its_line_and_the_kernels_line_is_the_killed_pids() -> None:
    v = judged(ENDINGS["OOM killer"]).finish()
    assert (v.figures.incident, v.figures.oom_killer_line) == (KILLED, OOM_SYSTEMD)
    assert "the kernel's OOM killer" in v.message and "post-ready incident" in v.message
    assert v.figures.killed_after_ready == KILL_LINE.split("] ", 1)[1]
    # the kernel's own line, where the journal has it (a `journalctl -b` export): the one for the killed pid
    theirs, mine = kernel_oom(4999), kernel_oom(4562)
    v = judged([("s", theirs), ("s", mine), *ENDINGS["OOM killer"]]).finish()
    assert v.figures.oom_killer_line == mine and mine in v.evidence and theirs not in v.evidence


def test_a_kill_no_oom_killer_owns_is_said_as_such() -> None:
    j = judged(ENDINGS["kill -9 of the main process"])
    v, e = j.finish(), j.readiness.ending
    assert e is not None and (e.kind, e.cause, e.signal) == (KILLED, "killed_by_signal", "KILL")
    assert v.figures.oom_killer_line is None and "the log does not say which" in v.message
    assert KILLED_9 in v.evidence and "systemd: Result=signal" in v.evidence


def test_a_crash_names_its_cause_and_the_self_kill_after_it_is_the_crashs() -> None:
    v = judged(ENDINGS["a traceback"]).finish()
    assert (v.figures.died_of, v.phase) == ("cuda_error", "ready") and "illegal memory access" in v.message
    v = judged(ENDINGS["a segfault"]).finish()
    assert v.figures.died_of == "killed_by_signal" and "Segmentation fault" in v.message


def test_the_watchdog_is_wedged_even_where_a_forwarded_stop_follows_it() -> None:
    """systemd's SIGABRT kills the supervisor; its child then gets SIGTERM (PR_SET_PDEATHSIG) and says so."""
    lines = [*ENDINGS["the watchdog"][:2], ("s", KILL_LINE.replace("-9", "-15")), *ENDINGS["the watchdog"][2:]]
    v = judged(lines).finish()
    assert (v.verdict, v.figures.incident, v.figures.unit_result) == ("failed", WEDGED, "watchdog")
    assert "watchdog killed it" in v.message


def test_an_unasked_exit_0_is_no_incident_and_nothing_said_is_still_serving() -> None:
    assert decide(AfterReady()) is None
    v = judged([("d", "Main process exited, code=exited, status=0/SUCCESS")]).finish()
    assert (v.verdict, v.figures.incident) == ("healthy", None) and "of its own accord" in v.message


@settings(max_examples=60, deadline=None)
@given(st.sampled_from(sorted(ENDINGS)), st.data())
def test_the_supervisor_and_replay_decide_alike(name: str, data: st.DataObject) -> None:
    """The supervisor reads SGLang's lines only, then knows its child's exit status and whether it forwarded a stop;
    `replay` (and `wait`) read the journal, PID 1's lines included. Cut anywhere, the same lines give the same kind."""
    lines = ENDINGS[name]
    cut = data.draw(st.integers(0, len(lines)))
    offline = judged(lines, up_to=cut)
    live = Judge()
    for line in start():
        live.service_line(line)
    for i, (who, text) in enumerate(lines[:cut]):
        if who == "s":
            live.service_line(text, END + i * 0.01)
        elif text.startswith("Stopping "):
            live.stop_asked("SIGTERM", END + i * 0.01)  # what the supervisor knows of a stop: it forwarded one
        elif text.startswith(("Main process exited", OOM_SYSTEMD)):
            live.systemd_line(text, END + i * 0.01)  # its child's exit status; the cgroup's oom_kill count
    off, on = offline.readiness.ending, live.readiness.ending
    if name == "the watchdog":  # the supervisor never sees the watchdog: systemd kills it first (its own incident)
        return
    assert (off.kind if off else None) == (on.kind if on else None), (name, cut, off, on)
    assert offline.finish().verdict == live.finish().verdict
    watch = ServingWatch(WatchPolicy(), ready_ts=0.0)
    inc = watch.ended(END + 1, on, "killed by SIGKILL")
    assert (inc.kind if inc else None) == (on.kind if on is not None and on.kind != STOPPED else None)


@pytest.mark.parametrize("fmt", ["export", "short"])
def test_replay_reports_the_incident_of_a_journal(fmt: str) -> None:
    """Offline: `journalctl -u demo.service -o export` (or the short text) of the OOM-killed start, as `replay` reads it."""
    from .journal_formats import as_export, as_short, entry

    es = [entry(line, T0.timestamp() + i * 0.01) for i, line in enumerate(start())]
    es += [entry(text, END + i * 0.01, pid1=who == "d") for i, (who, text) in enumerate(ENDINGS["OOM killer"])]
    data = as_export(es) if fmt == "export" else as_short(es)
    v = replay(io.BytesIO(data), f"oom.{fmt}").verdict
    assert (v.verdict, v.figures.incident, v.figures.oom_killer_line) == ("healthy", KILLED, OOM_SYSTEMD), v.message
