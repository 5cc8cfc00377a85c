"""The STATUS= line a notify unit's supervisor sends systemd, and which log line it announces.

`systemctl status` shows it to the operator; `up` on a notify unit learns from its change that
a line is on its way to the journal. Both sides judge the same lines with the same Judge, so a
follower can tell from the news at the line's end whether it has read the line announced.
"""

from __future__ import annotations

from svcdiag.config.service import PHASES
from svcdiag.sglang import lazy_re
from svcdiag.systemd.notify import STATUS_MAX, one_line

TYPE_CHECKING = False
if TYPE_CHECKING:  # `status` of a healthy start reads watch_word without the judge, the events or the report
    from collections.abc import Iterable

    from svcdiag.judge.pipeline import Judge
    from svcdiag.judge.verdict import Verdict
    from svcdiag.sglang.events import Event

SEP = " · "
#: STATUS= of a failed start, as the supervisor says it (verdict_status)
FAILED_STATUS = lazy_re.compile(r"(failed|timed_out)(?: \[([a-z_]+)\])?: ")
#: status_text's first part ("loading weights 12 s"), and the phase a verdict's message names
_IN_PROGRESS = lazy_re.compile(r"([a-z ]+?) -?\d+ s(?:$| · )")
_IN_PHASE = lazy_re.compile(r"\bin phase ([a-z_]+)")
_PHASE_WORDS = {p.replace("_", " "): p for p in PHASES}


def news(events: Iterable[Event]) -> str | None:
    """What a line's events add to STATUS= (the last one worth a line; a new phase shows as the
    line's first part instead), or None: the line leaves the news as it was."""
    from svcdiag.judge.verdict import PhaseChange, Verdict
    from svcdiag.output.report import describe

    said = None
    for ev in events:
        if not isinstance(ev, (PhaseChange, Verdict)):
            said = describe(ev) or said
    return said


def status_text(judge: Judge, news: str | None, now: float, phase_since: float | None) -> str:
    """One line for `systemctl status`: the phase and its time so far, the figures known, the news."""
    r = judge.readiness
    since = phase_since if phase_since is not None else r.started
    parts = [f"{r.phase.replace('_', ' ')} {now - since:.0f} s" if since is not None else r.phase]
    f = r.figures
    if f.kv_tokens:
        parts.append(f"KV {f.kv_tokens:,} tokens")
    if f.max_running_requests is not None and r.phase in ("http", "ready"):
        parts.append(f"max_running {f.max_running_requests}")
    if news:
        parts.append(news)
    return fit(parts)


def fit(parts: list[str]) -> str:
    """`parts` as one STATUS= line (systemd.notify.one_line) whose last part, the news a follower
    matches (`tells`), is never cut away: what stands before it is cut instead, or, for news too
    long to share the line, the news alone is shown, cut."""
    *head, last = [" ".join(p.split()) for p in parts] or [""]
    whole = one_line(SEP.join([*head, last]))
    if len(SEP.join([*head, last])) <= STATUS_MAX or not head:  # not cut (news of its own may end in "…")
        return whole
    room = STATUS_MAX - len(SEP) - len(last) - 1  # what is left of the head, before its "…"
    if room < 1:
        return one_line(last)
    return SEP.join(head)[:room] + "…" + SEP + last


def verdict_status(v: Verdict) -> str:
    if v.verdict == "healthy":
        f = v.figures
        kv = f"{SEP}KV {f.kv_tokens:,} tokens" if f.kv_tokens else ""
        mr = f"{SEP}max_running {f.max_running_requests}" if f.max_running_requests is not None else ""
        return f"ready{kv}{mr}{SEP}HTTP agrees"
    cause = f" [{v.cause}]" if v.cause else ""
    return f"{v.verdict}{cause}: {v.message}"


def tells(status: str, said: str | None) -> bool:
    """Whether STATUS= `status` (as systemd holds it: one line, maybe cut) ends with the news
    `said`, i.e. announces no line after the one that said it. With no news known, it may."""
    if said is None:
        return True
    said = one_line(said)
    if status.endswith(said):
        return True
    cut = status.endswith("…") and status[:-1].rsplit(SEP, 1)[-1]
    return bool(cut) and said.startswith(cut)


#: the serving watch's word in a supervisor's STATUS= after ready (svcdiag.judge.watch.ServingWatch.status)
_WATCH = lazy_re.compile(r"(?:^|· )(serving|busy|wedged|died_after_ready|killed)\b")


def watch_word(status: str) -> tuple[str, str] | None:
    """What the serving watch says in STATUS= `status` after ready: (serving | busy | wedged |
    died_after_ready | killed, its words), or None where it says nothing (a start, a journal-mode unit)."""
    m = _WATCH.search(status or "")
    if m is None or (m.start() > 0 and not status.startswith("ready")):
        return None
    return m.group(1), status[m.start(1):]


def status_phase(status: str) -> str | None:
    """The phase STATUS= `status` puts the start in: status_text's, `ready` once judged ready, the
    phase a failed start's message names; None where it names none (`starting NAME`, an HTTP
    failure). A follower whose journal is in another phase lacks lines the supervisor read."""
    if status.startswith("ready"):
        return "ready"
    m = FAILED_STATUS.match(status)
    if m is not None:
        named = _IN_PHASE.search(status, m.end())
        return named.group(1) if named is not None and named.group(1) in PHASES else None
    m = _IN_PROGRESS.match(status)
    return _PHASE_WORDS.get(m.group(1)) if m is not None else None
