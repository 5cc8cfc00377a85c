"""`svcdiag replay`: judge a saved log offline, on its own timestamps.

The input may hold several starts (invocation ids, systemd's "Starting …" lines, or a new
`server_args=` line in a plain log); each is judged by a fresh Judge, and the verdict is
for the last one unless one is picked. Only the chosen start's events are kept.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO

from svcdiag.config.service import ServiceConfig
from svcdiag.errors import SvcdiagError
from svcdiag.judge.pipeline import Judge
from svcdiag.judge.verdict import Verdict
from svcdiag.sglang.events import Event
from svcdiag.sglang.grammar import parse_ts
from svcdiag.systemd.journal_formats import detect, plain_chunks, records

#: a plain log's start: SGLang's `server_args=ServerArgs(…)` line, or 0.5.23's `server_args={…}`
SERVER_ARGS_MARK = "] server_args="
TRACEBACK_BYTES = b"Traceback (most recent call last):"
#: bytes per chunk of the plain fast path (tests inject a small one)
CHUNK = 1 << 20
#: a prefixed line's timestamp as LineParser cuts it (text[1:24] after a ".", else text[1:20])
_TS_RE = re.compile(rb"\n\[(2\d{3}-\d\d-\d\d \d\d:\d\d:\d\d(?:\.[^\n]{3})?)")
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
    if path.endswith((".tar.gz", ".tgz")):  # a post-mortem bundle (svcdiag bundle): its journal slice
        from svcdiag.ops.bundle import open_bundle

        slice_ = open_bundle(path)
        if slice_ is not None:
            return path, replay(slice_, path, cfg, invocation)
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


def _plain_line(seg: _Segments, line: str, starts: bool = True) -> None:
    """One line of a plain log, as the reference walks it (`starts`: the chunk may hold a start)."""
    if starts:
        at = line.find(SERVER_ARGS_MARK, 19, 64)
        if at > 0 and line.startswith(("ServerArgs(", "{"), at + len(SERVER_ARGS_MARK)):
            if seg.has_lines:  # a second server_args: the server was started again
                seg.new()
            seg.has_lines = True
    out = seg.judge.line(line)  # type: ignore[union-attr]
    if out:
        seg.emit(out)


def _reference_range(seg: _Segments, data: bytes, a: int, b: int, *, final: bool = False) -> None:
    """The lines data[a:b] (data[b] is their newline, unless `final`) walked by the reference."""
    text = data[a:b].decode("utf-8", "replace")
    if "\r" in text:
        text = text.replace("\r\n", "\n")
        text = text.rstrip("\r") if final else text[:-1] if text.endswith("\r") else text
    starts = SERVER_ARGS_MARK in text
    for line in text.split("\n"):
        _plain_line(seg, line, starts)


def _plain_fast(seg: _Segments, head: bytes, stream: BinaryIO, size: int) -> None:
    """The plain format a chunk at a time, touching only the lines that may matter.

    One compiled pattern (LineParser.interesting_re) finds, at C speed, every line a handler
    might take; the runs of quiet lines between them (decode and prefill batches, access lines,
    warnings) are applied in bulk with `Judge.skip`: counted, the clock moved to the run's last
    timestamp, the last one quoted. A run whose timestamps reach a deadline or a pending
    failure's grace (Readiness.quiet_until), and a chunk with a traceback in it or open across
    it, or a CR or a colour code, are walked line by line by the reference path, so verdicts are identical.
    Memory is one chunk, whatever the length of the input.
    """
    tail = b"\n"  # the newline before the first line, then the newline and the partial line left over
    buf = head
    while True:
        if not buf:
            buf = stream.read(size)
            if not buf:
                break
        data = tail + buf
        buf = b""
        cut = data.rfind(b"\n")
        if cut > 0:
            _fast_lines(seg, data, cut)
        tail = data[cut:]
    if len(tail) > 1:
        _fast_lines(seg, tail, len(tail), final=True)


def _fast_lines(seg: _Segments, data: bytes, end: int, *, final: bool = False) -> None:
    """The lines of data[1:end] (data[0] is a newline, so is data[end] unless `final`)."""
    judge = seg.judge
    assert judge is not None
    if not judge.parser.quiet_ok() or data.find(TRACEBACK_BYTES, 0, end) >= 0 or data.find(b"\r", 0, end) >= 0 \
            or data.find(b"\x1b[", 0, end) >= 0:  # colours: the reference path strips them line by line
        _reference_range(seg, data, 1, end, final=final)
        return
    a = 1  # the start of the quiet run not yet applied
    for m in judge.parser.interesting_re().finditer(data, 0, end):
        s = m.start() + 1
        if s > a and not _skip_run(seg, data, a, s - 1):
            _reference_range(seg, data, a, s - 1)
        e = data.find(b"\n", s, end)
        e = end if e < 0 else e
        _plain_line(seg, data[s:e].decode("utf-8", "replace"))
        a = e + 1
    if a < end and not _skip_run(seg, data, a, end):
        _reference_range(seg, data, a, end, final=final)


def _skip_run(seg: _Segments, data: bytes, a: int, b: int) -> bool:
    """Apply the quiet lines data[a:b] in bulk; False when they must be walked one by one."""
    judge = seg.judge
    assert judge is not None
    if not judge.parser.quiet_ok():
        return False
    n = data.count(b"\n", a, b) + 1
    nl = data.rfind(b"\n", a, b)
    last = data[nl + 1 if nl >= 0 else a:b]
    # the last prefixed line of the run moves the parser's clock (access lines have no time)
    lp = (nl + 1 if nl >= 0 else a) if last[:1] == b"[" else data.rfind(b"\n[", a - 1, b) + 1
    ts_text = None
    if lp > 0:
        eol = data.find(b"\n", lp, b)
        line = data[lp:eol if eol >= 0 else b].decode("utf-8", "replace")
        ts_text = line[1:24 if line[20] == "." else 20]
        try:
            parse_ts(ts_text)
        except ValueError:
            return False  # the reference keeps the clock of the last line that parsed: walk them
    limit = judge.readiness.quiet_until()
    if limit != float("inf") and lp > 0:
        stamps = {t.decode("utf-8", "replace") for t in _TS_RE.findall(data, a - 1, b)}
        try:
            latest = max(parse_ts(t) for t in stamps)
        except ValueError:
            return False
        if latest >= limit - 1e-3:
            return False  # a deadline falls inside the run: the reference times it out on its line
    judge.skip(n, ts_text, last.decode("utf-8", "replace"))
    return True


def replay(stream: BinaryIO, name: str, cfg: ServiceConfig | None = None,
           invocation: str | None = None, *, fast: bool = True, chunk: int | None = None) -> ReplayResult:
    """Judge a saved log. `fast=False` walks a plain log line by line (the reference the fast
    path is tested against); `chunk` overrides the plain fast path's chunk size."""
    head = stream.read(64 * 1024)
    fmt = detect(head)
    seg = _Segments(cfg, invocation)
    if fmt == "plain" and fast:
        seg.new()
        _plain_fast(seg, head, stream, chunk or CHUNK)
    elif fmt == "plain":
        seg.new()
        for text, lines in plain_chunks(head, stream):
            starts = SERVER_ARGS_MARK in text  # asked once per chunk, at C speed
            for line in lines:
                _plain_line(seg, line, starts)
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
