"""`svcdiag replay`: judge a saved log offline, on its own timestamps.

The input may hold several starts (invocation ids, systemd's "Starting …" lines, or a new
`server_args=` line in a plain log); each is judged by a fresh Judge, and the verdict is
for the last one unless one is picked. Only the chosen start's events are kept.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO

from svcdiag.config.service import ServiceConfig
from svcdiag.errors import SvcdiagError
from svcdiag.judge.pipeline import Judge
from svcdiag.judge.verdict import Verdict
from svcdiag.sglang.events import Event
from svcdiag.systemd.journal_formats import detect, plain_chunks, records

SERVER_ARGS_MARK = "] server_args=ServerArgs("
EXAMPLES_DIR = Path(__file__).resolve().parent.parent / "examples"


def example_names() -> list[str]:
    return sorted(p.stem for p in EXAMPLES_DIR.iterdir())


def source(path: str | None, example: str | None) -> str:
    """The path to read: PATH, or a bundled example's, never both."""
    if example and path:
        raise SvcdiagError("give a PATH or --example, not both")
    if example:
        return str(example_path(example))
    if not path:
        raise SvcdiagError("replay needs a PATH ('-' for stdin) or --example NAME")
    return path


def example_path(name: str) -> Path:
    """A bundled example log by name (the file stem)."""
    found = [p for p in EXAMPLES_DIR.iterdir() if name in (p.stem, p.name)]
    if not found:
        from svcdiag.config.service import did_you_mean

        stems = sorted(p.stem for p in EXAMPLES_DIR.iterdir())
        raise SvcdiagError(f"no bundled example {name!r}{did_you_mean(name, stems)}; "
                           f"known: {', '.join(stems)}")
    return found[0]


@dataclass
class Start:
    index: int
    invocation: str | None
    verdict: Verdict | None = None


@dataclass
class ReplayResult:
    format: str
    starts: list[Start]
    chosen: Start
    events: list[Event] = field(default_factory=list)

    def describe(self) -> str:
        """Which start of how many, in what format: the note replay prints first."""
        inv = f", invocation {self.chosen.invocation}" if self.chosen.invocation else ""
        return f"{self.format} format, start {self.chosen.index} of {len(self.starts)}{inv}"

    @property
    def verdict(self) -> Verdict:
        assert self.chosen.verdict is not None
        return self.chosen.verdict


class _Segments:
    """Runs one Judge per start and remembers only what the caller asked to see."""

    def __init__(self, cfg: ServiceConfig | None, pick: str | None):
        self.cfg, self.pick = cfg, pick
        self.starts: list[Start] = []
        self.kept: dict[int, list[Event]] = {}
        self.judge: Judge | None = None
        self.has_lines = False
        self.recognized = False  # any line of SGLang's or systemd's, in any start

    def new(self, invocation: str | None = None) -> None:
        self.close()
        start = Start(len(self.starts) + 1, invocation)
        self.starts.append(start)
        self.judge = Judge(self.cfg, invocation=invocation)
        self.has_lines = False
        self.events: list[Event] = []
        self._keep_if_wanted(start)

    def _keep_if_wanted(self, start: Start) -> None:
        """Keep this start's events if it is the one asked for (or the latest, by default)."""
        if self.pick is None or self._wanted(start):
            self.kept = {start.index: self.events}

    def _wanted(self, start: Start) -> bool:
        if self.pick is None:
            return False
        if start.invocation and start.invocation.startswith(self.pick):
            return True
        return self.pick.isdigit() and int(self.pick) == start.index

    def close(self) -> None:
        if self.judge is not None and self.judge.parser.sglang_lines:
            self.recognized = True  # SGLang's own lines, even with no milestone among them
        if self.judge is not None and self.starts:
            self.starts[-1].verdict = self.judge.finish()
            self.judge = None

    def emit(self, events: list[Event]) -> None:
        if events:
            self.recognized = True
            self.events.extend(events)


class NoStartFound(SvcdiagError):
    """The input holds nothing SGLang or systemd would print about a start: say so, not 'incomplete'."""

    exit_code = 4


def replay_path(path: str, stdin: BinaryIO, cfg: ServiceConfig | None = None,
                invocation: str | None = None) -> tuple[str, ReplayResult]:
    """Judge the file at `path` ('-' for `stdin`); bad paths are one-line errors."""
    if path == "-":
        return "<stdin>", replay(stdin, "<stdin>", cfg, invocation)
    try:
        stream = open(path, "rb")  # noqa: SIM115 -- closed below, after the errors are told apart
    except FileNotFoundError:
        raise SvcdiagError(f"{path}: no such file") from None
    except IsADirectoryError:
        raise SvcdiagError(f"{path}: is a directory") from None
    except OSError as e:
        raise SvcdiagError(f"{path}: cannot read: {e.strerror}") from None
    with stream:
        try:
            return path, replay(stream, path, cfg, invocation)
        except OSError as e:
            raise SvcdiagError(f"{path}: cannot read: {e.strerror}") from None


def replay(stream: BinaryIO, name: str, cfg: ServiceConfig | None = None,
           invocation: str | None = None) -> ReplayResult:
    head = stream.read(64 * 1024)
    fmt = detect(head)
    seg = _Segments(cfg, invocation)
    if fmt == "plain":
        seg.new()
        for chunk, lines in plain_chunks(head, stream):
            starts = SERVER_ARGS_MARK in chunk  # asked once per chunk, at C speed
            for line in lines:
                if starts and line.find(SERVER_ARGS_MARK, 19, 64) > 0:
                    if seg.has_lines:  # a second server_args: the server was started again
                        seg.new()
                    seg.has_lines = True
                out = seg.judge.line(line)  # type: ignore[union-attr]
                if out:
                    seg.emit(out)
    else:
        current: str | None = None
        for rec in records(fmt, head, stream, name):
            if rec.invocation and rec.invocation != current:
                current = rec.invocation
                known = next((s for s in seg.starts if s.invocation == current), None)
                if known is None:
                    if seg.judge is not None and seg.starts and seg.starts[-1].invocation is None and not seg.has_lines:
                        seg.starts[-1].invocation = current  # "Starting" came before the id
                        seg.judge.readiness.identify(invocation=current)
                        seg._keep_if_wanted(seg.starts[-1])
                    else:
                        seg.new(current)
            elif rec.invocation is None and rec.systemd and fmt == "short" and (
                    rec.text.startswith("Starting ") or (rec.text.startswith("Started ") and seg.has_lines)):
                seg.new()
            if seg.judge is None:
                seg.new(rec.invocation)
            assert seg.judge is not None
            if rec.unit:
                seg.judge.readiness.identify(unit=rec.unit)
            if rec.systemd:
                out = seg.judge.systemd_line(rec.text, rec.ts)
            else:
                seg.has_lines = True
                out = seg.judge.service_line(rec.text, rec.ts)
            if out:
                seg.emit(out)
    if not seg.starts:
        seg.new()
    seg.close()
    if not seg.recognized and all(s.verdict is None or s.verdict.verdict == "incomplete" for s in seg.starts):
        raise NoStartFound(f"no SGLang start found in {name}: no line of it is one SGLang or systemd prints "
                           "about a start")
    chosen = _choose(seg, invocation, name)
    return ReplayResult(fmt, seg.starts, chosen, seg.kept.get(chosen.index, []))


def _choose(seg: _Segments, pick: str | None, name: str) -> Start:
    if pick is None:
        return seg.starts[-1]
    for s in seg.starts:
        if seg._wanted(s):
            return s
    listed = ", ".join(f"{s.index}" + (f" ({s.invocation})" if s.invocation else "") for s in seg.starts)
    raise SvcdiagError(f"{name}: no start matches --invocation {pick!r}; starts in the input: {listed}")
