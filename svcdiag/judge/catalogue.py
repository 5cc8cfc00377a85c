"""Which cause svcdiag gives each fatal message a release can print at start-up.

The message catalogue (svcdiag.sglang.message_catalogue) lists what SGLang raises, asserts
or logs before dying while it starts. Each is judged here as it would reach the journal (a
raise as the final line of the scheduler's traceback, in a frame of the function that raised
it; a fatal log line followed by the scheduler's death) by the same pipeline replay uses.
A message is classed when the verdict names a specific cause rather than the generic
`exception`, `exited` or `killed_by_signal`; the coverage per release is what
scripts/sglang-message-catalogue prints and docs/replay.md shows.
"""

from __future__ import annotations

from dataclasses import dataclass

from svcdiag.judge.pipeline import Judge
from svcdiag.sglang.failures import Cause
from svcdiag.sglang.grammar import classify
from svcdiag.sglang.message_catalogue import Catalogue, Message, generic

#: the causes that say only that something failed, not what
GENERIC_CAUSES = frozenset({Cause.EXCEPTION, Cause.EXITED, Cause.KILLED_BY_SIGNAL})
#: files whose raises end the launching process itself (flag checks, the launcher), not a scheduler
LAUNCH_SIDE = ("launch_server.py", "cli/", "srt/server_args", "srt/arg_groups/", "srt/entrypoints/http_server.py")
_SITE = "/usr/local/lib/python3.12/dist-packages/sglang/"
_START = "[2026-01-01 00:00:00] server_args=ServerArgs(model_path='/models/m', tp_size=1)"


def minimal_log(m: Message) -> list[str]:
    """The fewest lines a start that dies of `m` prints, in SGLang's shapes."""
    text = m.render()
    if m.kind in ("raise", "assert"):
        final = f"{m.exc or 'AssertionError'}: {text}"
        frame = [f'  File "{_SITE}{m.file}", line 100, in {m.fn}', "    raise" if m.kind == "raise" else "    assert"]
        if m.file.startswith(LAUNCH_SIDE):
            return [_START, "Traceback (most recent call last):",
                    f'  File "{_SITE}launch_server.py", line 10, in <module>', *frame, *final.split("\n")]
        return [_START, "[2026-01-01 00:00:05] Scheduler hit an exception: Traceback (most recent call last):",
                f'  File "{_SITE}srt/managers/scheduler.py", line 3000, in run_scheduler_process', *frame,
                *final.split("\n"), "",
                "[2026-01-01 00:00:06] Received sigquit from a child process. It usually means the child failed."]
    lines = text.split("\n")
    return [_START, f"[2026-01-01 00:00:05] {lines[0]}", *lines[1:],
            "[2026-01-01 00:00:06] Rank 0 scheduler died during initialization (exit code: 1)"]


def judged_cause(m: Message) -> str | None:
    """The specific cause svcdiag gives a start that dies of `m`; None when only a generic one."""
    cause = classify(m.render())
    if cause is not None:
        return cause
    j = Judge()
    for line in minimal_log(m):
        j.line(line)
    v = j.finish()
    return v.cause if v.verdict == "failed" and v.cause not in GENERIC_CAUSES else None


@dataclass(frozen=True, slots=True)
class Coverage:
    """How much of a release's catalogue of start-up fatal messages a cause reads, and what none does."""

    version: str
    total: int  # start-up fatal messages in the catalogue
    classed: int  # those a cause reads
    generic: int  # those named in generic.json
    unclassed: tuple[Message, ...]  # neither


def coverage(cat: Catalogue) -> Coverage:
    names = generic()
    classed = 0
    left: list[Message] = []
    named = 0
    for m in cat.startup_fatal():
        if judged_cause(m) is not None:
            classed += 1
        elif m.name in names:
            named += 1
        else:
            left.append(m)
    return Coverage(cat.version, len(cat.startup_fatal()), classed, named, tuple(left))
