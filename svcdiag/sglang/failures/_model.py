"""The registry's vocabulary: the cause ids, their families, what a row holds, and `said` for a row's words."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from svcdiag.sglang import lazy_re
from svcdiag.sglang.causes import FAMILY, Cause, Family, Place, in_family  # noqa: F401  (the registry's vocabulary)

#: where a row's `line` names its cause unless the row says otherwise: everywhere a line is classified
EVERYWHERE: frozenset[Place] = frozenset(Place) - {Place.FRAME}


#: the roles a failure may have in a start (events.ROOT, SUSPECT, DEATH: the registry imports nothing of events)
EVENTS = ("root", "suspect", "death")


@dataclass(frozen=True, slots=True)
class Own:
    """A line of its own that names a row's cause at one place only (argparse's last word, a PD server's failed
    warmup): the failure it is, as data, so that the grammar builds it without naming the cause."""

    place: Place
    pattern: re.Pattern[str] | None = None  # matched at the line's (or the message's) start; None: the row's `line`
    #: the failure's message: a template over the match's groups (`{0}`) and the line (`{line}`); "" is the line
    says: str = ""
    event: str = "root"  # the failure's role in the start (events.ROOT, SUSPECT, DEATH)
    signal: str | None = None  # the signal it says ended the process (Slurm's OOM killer: KILL)
    #: the line's words may name a cause of their own first (classify at the place), this row's only if they do not
    deferred: bool = False

    def __post_init__(self) -> None:
        if self.event not in EVENTS:
            raise ValueError(f"an own line's event is one of {', '.join(EVENTS)}, not {self.event!r}")


@dataclass(frozen=True, slots=True)
class Raised:
    """A frame the exception was raised under that names a row's cause when no line does (Place.FRAME): a KeyError
    raised in a model's load_weights is a checkpoint tensor the model class lacks."""

    frame: re.Pattern[str] | None  # one of the frames (`File "…", line N, in f`, stripped); None: any frames
    window: int = 0  # among the last N frames only (0: all)
    final: re.Pattern[str] | None = None  # and the final line says this (searched)
    raising: bool = False  # the last frame, and only when the traceback has its final line (a cut one has none)


class Role(StrEnum):
    ROOT = "root"  # the failure itself
    CONSEQUENCE = "consequence"  # a process ended because of something said elsewhere


#: the words a row's sentences need beyond what its patterns captured and the verdict says (a default for a capture
#: that may be missing, a name looked up): a function of those words, so the sentences stay in the family's .toml
Words = Callable[[Mapping[str, str]], Mapping[str, str]]


@dataclass(frozen=True, slots=True)
class FailureClass:
    """One cause, or one of its sub-cases (`detail`), with everything known about it."""

    cause: Cause
    detail: str = ""
    #: where the row stands: rows are tried in ascending priority (classify's `line`s, a cause's sub-cases, the
    #: cause table's order), whatever module files them; no two rows share one
    priority: int = 0
    line: re.Pattern[str] | None = None  # an exception's final line or a lone fatal line: names the cause
    said: re.Pattern[str] | None = None  # the failure's message and evidence: picks the sub-case
    read: tuple[re.Pattern[str], ...] = ()  # more of what a picked sub-case captures (each first match's groups)
    #: the places where `line` names the cause (a position-dependent class is tagged with its places only)
    where: frozenset[Place] = EVERYWHERE
    #: lines of their own that name this cause only at their place (an argparse line, a launcher's, a PD server's):
    #: not classify's, since their words name the cause only there
    alone: tuple[Own, ...] = ()
    raised: tuple[Raised, ...] = ()  # frames that name the cause when no line does (Place.FRAME)
    #: its own words go on after its final line (NCCL's `Last error:`, and its `NCCL WARN` said before it): a traceback
    #: it ends stays open for them, and its message keeps them
    reads_on: bool = False
    #: words in its message that make it another failure's consequence (NCCL's `remote process exited`: it waits for
    #: the dead rank's own cause)
    consequence: re.Pattern[str] | None = None
    role: Role = Role.ROOT
    #: the SGLang releases whose words these are, by hand, where the catalogues cannot say ("<= 0.4.3"); a row whose
    #: words are all SGLang's has its range in message_catalogue/releases.json (message_catalogue.row_releases)
    releases: str = ""
    words: Words | None = None
    fixes: tuple[tuple[Mapping[str, Any], str], ...] = ()  # (settings, why), formatted as the explanation is
    #: one line: a cause's row says what the cause is; a sub-case's is an example of the words it is picked by. The
    #: long text (a cause's evidence, a row's explanation) is the family's .toml (`prose`), shown in docs/causes.md
    doc: str = ""


def said(pattern: str) -> re.Pattern[str]:
    """A sub-case's words, looked for in the failure's message and evidence (one line each)."""
    return lazy_re.compile(pattern, re.M)
