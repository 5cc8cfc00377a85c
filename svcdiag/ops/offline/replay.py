"""`svcdiag replay`: judge a saved log offline, on its own timestamps.

The input may hold several starts (invocation ids, systemd's "Starting …" lines, or a new
`server_args=` line in a plain log); each is judged by a fresh Judge, and the verdict is
for the last one unless one is picked. Only the chosen start's events are kept.
"""

from __future__ import annotations

import bisect
import functools
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from svcdiag.errors import SvcdiagError
from svcdiag.judge.pipeline import Judge
from svcdiag.judge.unit_lines import parse_systemd
from svcdiag.judge.verdict import Verdict
from svcdiag.sglang import lazy_re
from svcdiag.sglang.events import Event
from svcdiag.sglang.grammar import parse_ts, prefix_stamp
from svcdiag.systemd.journal_formats import (
    Cut,
    ExportReader,
    LineBound,
    LineMaxExceeded,
    Record,
    detect,
    json_record,
    plain_chunks,
    record_from_fields,
    records,
    text_entries,
)

TYPE_CHECKING = False  # typing costs ~3 ms to import, and no module a replay loads needs it at run time
if TYPE_CHECKING:  # an annotation only: a replay or a publisher without a config imports no config module
    from typing import BinaryIO

    from svcdiag.config.service import ServiceConfig

#: a plain log's start: SGLang's `server_args=ServerArgs(…)` line, or 0.5.23's `server_args={…}`
SERVER_ARGS_MARK = "] server_args="
SERVER_ARGS_BYTES = SERVER_ARGS_MARK.encode()
#: sglang_router.launch_server's first line, before its workers' server_args: a start too
ROUTER_LAUNCH_MARK = " - Launching DP server process 0 on port "
TRACEBACK_BYTES = b"Traceback (most recent call last):"
#: bytes per chunk of the plain fast path (tests inject a small one)
CHUNK = 1 << 20
#: a quiet prefixed line's timestamp as LineParser cuts it (text[1:24] after a ".", else text[1:20]),
#: of the same shape as LineParser.interesting_re's prefix: whether it parses is parse_ts's to say
_TS_RE = lazy_re.compile(rb"\n\[(2[^\n]{18}(?:\.[^\n]{3})?)")  # type: ignore[arg-type]
EXAMPLES_DIR = Path(__file__).resolve().parent.parent.parent / "examples"


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
    """One start found in a replayed log, and its verdict once judged."""

    index: int
    invocation: str | None
    verdict: Verdict | None = None


@dataclass
class ReplayResult:
    """A replay: the starts the log holds, the one judged, its events and the lines cut."""

    format: str
    starts: list[Start]
    chosen: Start
    events: list[Event] = field(default_factory=list)
    cut: Cut = field(default_factory=Cut)  # lines longer than LINE_MAX, cut where they were read

    def describe(self) -> str:
        """Which start of how many, in what format: the note replay prints first."""
        inv = f", invocation {self.chosen.invocation}" if self.chosen.invocation else ""
        cut = f"; {self.cut.note()}" if self.cut.lines else ""
        return f"{self.format} format, start {self.chosen.index} of {len(self.starts)}{inv}{cut}{self._others()}"

    def _others(self) -> str:
        """What the log's other starts came to, so a restart loop's failures are not hidden behind
        its last start (cut while loading again): `; other starts: 2 failed (bad_checkpoint), …`."""
        others = [s for s in self.starts if s is not self.chosen and s.verdict is not None]
        if not others:
            return ""
        counts: dict[str, int] = {}
        for s in others:
            v = s.verdict
            assert v is not None
            key = f"{v.verdict} ({v.cause})" if v.cause else v.verdict
            counts[key] = counts.get(key, 0) + 1
        text = "; other starts: " + ", ".join(f"{n} {k}" for k, n in counts.items())
        failed = [s for s in others if s.verdict is not None and s.verdict.verdict == "failed"]
        if failed and self.verdict.verdict in ("incomplete", "timed_out"):
            last = failed[-1]
            assert last.verdict is not None
            text += (f"; start {last.index} failed: {last.verdict.message[:160]}"
                     f" (--start {last.index} to judge it)")
        return text

    @property
    def verdict(self) -> Verdict:
        assert self.chosen.verdict is not None
        return self.chosen.verdict


class _Segments:
    """Runs one Judge per start and remembers only what the caller asked to see."""

    def __init__(self, cfg: ServiceConfig | None, pick: str | None, pick_start: int | None = None):
        self.cfg, self.pick, self.pick_start = cfg, pick, pick_start
        self.starts: list[Start] = []
        self.kept: dict[int, list[Event]] = {}
        self.judge: Judge | None = None
        self.interesting: dict[bool, re.Pattern[bytes]] = {}
        self.has_lines = False
        self.ended = False  # systemd said this start's process exited or the unit stopped
        self.args_seen = False
        self.recognized = False  # any line of SGLang's or systemd's, in any start
        self.current: str | None = None  # the invocation of the last record that named one
        #: SVCDIAG_PREFILTER: "hyperscan", "python" or "auto" (Hyperscan for chunks of CHUNK // 2 or more, where installed)
        self.prefilter = "python"
        #: lines and records read one by one (the quiet ones skipped in bulk are not), and the most a bundle may
        #: need (WalkLimit): ~16 µs each, a bundle of a million tiny lines that are not quiet would take minutes
        self.walked = 0
        self.walk_max: float = float("inf")
        self.walk_name = ""

    def refuse(self) -> None:
        raise SvcdiagError(f"{self.walk_name}: refused: more than {int(self.walk_max):,} of its journal's lines would be "
                           "read one by one (a start's journal holds far fewer that are not routine); to judge it "
                           "whole anyway, unpack it (tar -xzf) and replay its journal.export")

    def use_hyperscan(self, size: int) -> bool:
        """Whether the fast path finds this chunk's needles with Hyperscan (sglang.prefilter)."""
        if self.prefilter == "auto":
            if size < CHUNK // 2:
                return False  # a small input: not worth Hyperscan's import (~10 ms)
            from svcdiag.sglang import prefilter

            self.prefilter = "hyperscan" if prefilter.available() else "python"
        return self.prefilter == "hyperscan"

    def new(self, invocation: str | None = None) -> None:
        self.close()
        start = Start(len(self.starts) + 1, invocation)
        self.starts.append(start)
        self.judge = Judge(self.cfg, invocation=invocation)
        self.has_lines = False
        self.args_seen = False  # a journal record of this start was SGLang's server_args line
        self.ended = False
        self.events: list[Event] = []
        self.interesting: dict[bool, re.Pattern[bytes]] = {}  # this start's parser's interesting_re, ascii or not
        self._keep_if_wanted(start)

    def _keep_if_wanted(self, start: Start) -> None:
        """Keep this start's events if it is the one asked for (or the latest, by default)."""
        if (self.pick is None and self.pick_start is None) or self._wanted(start):
            self.kept = {start.index: self.events}

    def _wanted(self, start: Start) -> bool:
        """An invocation id (or its prefix) and a start's number are asked apart (--invocation, --start):
        an id beginning with "2" is never taken for start 2."""
        if self.pick_start is not None:
            return start.index == self.pick_start
        return self.pick is not None and start.invocation is not None and start.invocation.startswith(self.pick)

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
                invocation: str | None = None, start: int | None = None) -> tuple[str, ReplayResult]:
    """Judge the file at `path` ('-' for `stdin`); bad paths are one-line errors."""
    if path == "-":
        return "<stdin>", replay(stdin, "<stdin>", cfg, invocation, start=start)
    if path.endswith((".tar.gz", ".tgz")):  # a post-mortem bundle (svcdiag bundle): its journal slice
        from svcdiag.ops.offline.bundle_read import BUNDLE_WALK_MAX, open_bundle

        slice_ = open_bundle(path)
        if slice_ is not None:
            import tarfile
            import zlib

            try:
                return path, replay(slice_, path, cfg, invocation, start=start, walk_max=BUNDLE_WALK_MAX)
            except (OSError, EOFError, zlib.error, tarfile.TarError) as e:  # a bundle cut short, or corrupt
                raise SvcdiagError(f"{path}: cannot read the bundle: {e}") from None
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
            return path, replay(stream, path, cfg, invocation, start=start)
        except OSError as e:
            raise SvcdiagError(f"{path}: cannot read: {e.strerror}") from None


def _starts_server(line: str) -> bool:
    """Whether `line` is SGLang's first line of a start: its `server_args=ServerArgs(…)` or `={…}`."""
    at = line.find(SERVER_ARGS_MARK, 19, 64)
    if at > 0:
        return line.startswith(("ServerArgs(", "{"), at + len(SERVER_ARGS_MARK))
    return line.startswith("[Router (") and ROUTER_LAUNCH_MARK in line


def _plain_line(seg: _Segments, line: str, starts: bool = True) -> None:
    """One line of a plain log, as the reference walks it (`starts`: the chunk may hold a start)."""
    seg.walked += 1
    if seg.walked > seg.walk_max:
        seg.refuse()
    if starts and _starts_server(line):
        if seg.has_lines and not seg.judge.parser.awaits_worker_args():  # type: ignore[union-attr]
            seg.new()  # a second server_args: the server was started again (not a router's next worker)
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
    starts = SERVER_ARGS_MARK in text or ROUTER_LAUNCH_MARK in text
    for line in text.split("\n"):
        _plain_line(seg, line, starts)


def _plain_fast(seg: _Segments, head: bytes, stream: BinaryIO, size: int) -> None:
    """The plain format a chunk at a time, touching only the lines that may matter.

    One compiled pattern (LineParser.interesting_re) finds, at C speed, every line a handler
    might take; the runs of quiet lines between them (decode and prefill batches, access lines,
    warnings) are applied in bulk with `Judge.skip`: counted, the clock moved to the run's last
    timestamp, the last one quoted. A run whose timestamps reach a deadline or a pending
    failure's grace (Readiness.quiet_until) is walked line by line by the reference path, so
    verdicts are identical; so is each line holding a CR, a colour code or a traceback's opening,
    alone, and the lines of an open traceback until it ends (only those: the rest of the chunk
    stays on the fast path).
    Memory is one chunk, whatever the length of the input; a chunk is scanned where it was read
    (only the line cut at its end is copied, into the next one).
    """
    for data, start, end, final in _spans(head, stream, size):
        _fast_lines(seg, data, start, end, final=final)


def _spans(head: bytes, stream: BinaryIO, size: int) -> Iterator[tuple[bytes, int, int, bool]]:
    """The input a chunk at a time as (data, start, end, final): whole lines data[start + 1:end],
    data[start] a newline and data[end] one too unless `final` (the input's unended last line).
    A chunk is handed over where it was read; only the line cut at its end is copied, into the next."""
    tail = b""  # the partial line left over from the previous chunk
    buf = head
    while True:
        if not buf:
            buf = stream.read(size)
            if not buf:
                break
        first = buf.find(b"\n")
        if first < 0:  # no line ends in this chunk: it all belongs to the partial line
            tail += buf
            buf = b""
            continue
        # the line cut at the previous chunk's end, whole now; then this chunk's lines, each after its newline
        yield b"\n" + tail + buf[:first + 1], 0, len(tail) + 1 + first, False
        cut = buf.rfind(b"\n")
        if cut > first:
            yield buf, first, cut, False
        tail = buf[cut + 1:]
        buf = b""
    if tail:
        yield b"\n" + tail, 0, len(tail) + 1, True


#: a line holding any of these goes to the reference alone: a start's (a CI's stamp before SGLang's is one the parser
#: does not read, and the reference splits starts on it all the same), a CR or a colour code (stripped line by line),
#: a traceback's opening (a message that ends in it opens one, whatever its head)
_ALONE = (SERVER_ARGS_BYTES, b"\r", b"\x1b", TRACEBACK_BYTES)


def _fast_lines(seg: _Segments, data: bytes, start: int, end: int, *, final: bool = False) -> None:
    """The lines of data[start + 1:end] (data[start] is a newline, so is data[end] unless `final`).

    Each line holding one of `_ALONE` is walked alone by the reference; the lines between them are
    scanned (`_scan`). The needles are found by Hyperscan in one pass (`_hyperscan_alone`), or each
    searched once per chunk (one byte: memchr), and again only past the line where it was found."""
    ascii_only = data.isascii()
    if seg.use_hyperscan(end - start):
        for at in _hyperscan_alone(data, start, end):
            if at <= start:
                continue  # on a line already walked
            start = _alone_line(seg, data, start, end, at, ascii_only, final=final)
            if start >= end:
                return
        _scan(seg, data, start, end, ascii_only, final=final)
        return
    nxt = [data.find(w, start, end) for w in _ALONE]
    while True:
        for i, at in enumerate(nxt):
            if 0 <= at <= start:  # found in a line already walked: the next one
                nxt[i] = data.find(_ALONE[i], start + 1, end)
        at = min((p for p in nxt if p >= 0), default=-1)
        if at < 0:
            _scan(seg, data, start, end, ascii_only, final=final)
            return
        start = _alone_line(seg, data, start, end, at, ascii_only, final=final)
        if start >= end:
            return


def _hyperscan_alone(data: bytes, start: int, end: int) -> list[int]:
    """A position in each line of data[start:end] that holds one of `_ALONE`, in order (one Hyperscan pass)."""
    from svcdiag.sglang import prefilter

    return prefilter.needles(_ALONE).lines(data, start, end)


def _alone_line(seg: _Segments, data: bytes, start: int, end: int, at: int, ascii_only: bool, *,
                final: bool) -> int:
    """Scan the lines before the one holding data[at], walk that one alone; the newline it ends at (end: the last)."""
    ls = data.rfind(b"\n", start, at)  # data[start] is a newline: ls >= start
    le = data.find(b"\n", at, end)
    le = end if le < 0 else le
    if ls > start:
        _scan(seg, data, start, ls, ascii_only)
    _reference_range(seg, data, ls + 1, le, final=final and le == end)
    return le


def _scan(seg: _Segments, data: bytes, start: int, end: int, ascii_only: bool, *, final: bool = False) -> None:
    """The lines of data[start + 1:end], none holding one of `_ALONE`: the ones a handler might take
    (LineParser.interesting_re) one by one, the quiet runs between them in bulk (`_quiet_run`)."""
    judge = seg.judge
    assert judge is not None
    if not ascii_only:  # the chunk is not ASCII, this stretch may be (a bar's blocks are on a line walked alone): re's
        ascii_only = data[start:end].isascii()  # faster pattern then (~20 % less); the copy costs ~5 % of that
    a = start + 1  # the start of the quiet run not yet applied
    if not judge.parser.quiet_ok():  # a traceback open across the chunk's start: its lines one by one, until it ends
        a = _walk_while_open(seg, data, a, end, final=final)
        if a > end:
            return
    pat = seg.interesting.get(ascii_only)
    if pat is None:  # asked once per start, not per run: quiet's cache sorts the ~60 keys each time it is asked
        pat = seg.interesting[ascii_only] = judge.parser.interesting_re(ascii_only)
    for m in pat.finditer(data, a - 1, end):
        s = m.start() + 1
        if s > a:
            _quiet_run(seg, data, a, s - 1)
        e = data.find(b"\n", s, end)
        e = end if e < 0 else e
        _plain_line(seg, data[s:e].decode("utf-8", "replace"))
        a = e + 1
    if a < end:
        _quiet_run(seg, data, a, end, final=final)


def _walk_while_open(seg: _Segments, data: bytes, a: int, b: int, *, final: bool = False) -> int:
    """Walk the lines of data[a:b] one by one while the parser may not skip quiet lines (a traceback
    is open: quiet lines end or extend it); where the first line not walked begins (b + 1: none)."""
    parser = seg.judge.parser  # type: ignore[union-attr]
    while not parser.quiet_ok():
        e = data.find(b"\n", a, b)
        if e < 0:
            _reference_range(seg, data, a, b, final=final)
            return b + 1
        _reference_range(seg, data, a, e)
        a = e + 1
    return a


def _quiet_run(seg: _Segments, data: bytes, a: int, b: int, *, final: bool = False) -> None:
    """The quiet lines data[a:b]: in bulk (`_skip_run`) once the parser allows it, else by the reference."""
    a = _walk_while_open(seg, data, a, b, final=final)
    if a <= b and not _skip_run(seg, data, a, b):
        _reference_range(seg, data, a, b, final=final)


def _skip_run(seg: _Segments, data: bytes, a: int, b: int) -> bool:
    """Apply the quiet lines data[a:b] in bulk; False when they must be walked one by one."""
    judge = seg.judge
    assert judge is not None
    if not judge.parser.quiet_ok() or judge.serving_in(data, a, b):
        return False
    n = 2 if data.find(b"\n", a, b) >= 0 else 1  # one line or several: all the parser tells apart (LineParser.skip)
    clock = run_clock(data, a, b)
    if clock is None:
        return False  # the reference keeps the clock of the last line that parsed: walk them
    ts_text, last, lp = clock
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


def _up_to_two(data: bytes, key: bytes, a: int, b: int) -> int:
    """How many `key`s data[a:b] holds, 2 for any more: all the parser tells apart of a quiet run's length
    (LineParser.skip). Counting them all costs ~0.08 s per 1M lines (`bytes.count`); this stops at the second."""
    first = data.find(key, a, b)
    if first < 0:
        return 0
    return 1 if data.find(key, first + 1, b) < 0 else 2


def run_clock(data: bytes, a: int, b: int) -> tuple[str | None, bytes, int] | None:
    """What a run of quiet lines data[a:b] (data[a - 1] a newline) leaves the parser: the stamp of its
    last prefixed line (None: no line is prefixed; access lines have no time), its last line, and
    where that prefixed line starts (0: none); None when that stamp does not parse (the reference
    keeps the clock of the last line that parsed: such a run is walked line by line)."""
    nl = data.rfind(b"\n", a, b)
    last = data[nl + 1 if nl >= 0 else a:b]
    lp = (nl + 1 if nl >= 0 else a) if last[:1] == b"[" else data.rfind(b"\n[", a - 1, b) + 1
    ts_text = None
    if lp > 0:
        eol = data.find(b"\n", lp, b)
        line = data[lp:eol if eol >= 0 else b].decode("utf-8", "replace")
        ts_text = line[1:24 if line[20] == "." else 20]
        try:
            parse_ts(ts_text)
        except ValueError:
            return None
    return ts_text, last, lp


@dataclass(frozen=True, slots=True)
class _Shape:
    """Where a journal format keeps what the fast path reads, in its bytes."""

    sep: bytes  # between two records: a newline (json), a blank line (export)
    count_key: bytes  # one per record (the newline before each line; each export entry's MESSAGE)
    walk_re: tuple[re.Pattern[bytes], ...]  # the record a match is in goes to the reference, alone
    invocation_key: bytes
    other_invocation: str  # a pattern of a record naming a start other than {}, its value escaped
    unit_key: bytes
    ts_key: bytes
    ts_re: re.Pattern[bytes]
    same_invocation: str  # the invocation key with the value {} and what ends it, as a literal

    def another_start(self, data: bytes, start: int, end: int, current: str | None) -> int:
        """Where the first record of data[start:end] naming a start other than `current` is (end: none)."""
        if current is None:
            return _at(data.find(self.invocation_key, start, end), end)
        # as many keys as keys naming `current`: none names another (two counts of long literals, ~0.55 of the
        # pattern's search, which steps on each newline); else the pattern says where
        if data.count(self.invocation_key, start, end + 1) == data.count(
                self.same_invocation.format(current).encode(), start, end + 1):
            return end
        return _at(_other_start_re(self.other_invocation, current).search(data, start, end + 1), end)


def _lazy(pattern: bytes) -> re.Pattern[bytes]:
    """A journal format's pattern, compiled on first use (lazy_re): a plain log asks none of them."""
    return lazy_re.compile(pattern)  # type: ignore[arg-type,return-value]


@functools.lru_cache(maxsize=8)
def _other_start_re(pattern: str, current: str) -> re.Pattern[bytes]:
    return re.compile(pattern.format(re.escape(current)).encode())


_SHAPES = {
    # A JSON string may hold no raw `"`, so these keys are keys. \\u, \\n and \\r escapes could spell
    # a handler's key, a newline or a colour code, and PID 1's records (UNIT=, USER_UNIT=) are
    # systemd's: such a record is read alone, by the reference (walk_re). One pattern per
    # question: re has no fast search for an alternation of literals.
    "json": _Shape(b"\n", b"\n", (_lazy(rb"\\[unr]"), _lazy(rb'UNIT"(?<="UNIT")|USER_UNIT"')),
                   b'"_SYSTEMD_INVOCATION_ID"', r'"_SYSTEMD_INVOCATION_ID"\s*:\s*+(?!"{}")',
                   b'"_SYSTEMD_UNIT"', b'"__REALTIME_TIMESTAMP"', _lazy(rb'"__REALTIME_TIMESTAMP"\s*:\s*"(\d+)"'),
                   '"_SYSTEMD_INVOCATION_ID":"{}"'),
    # a text block (ExportReader.text_block) holds no binary field, so each key starts a line
    "export": _Shape(b"\n\n", b"\nMESSAGE=", (_lazy(rb"USER_UNIT=|UNIT=(?<=\nUNIT=)"),),
                     b"\n_SYSTEMD_INVOCATION_ID=", "\n_SYSTEMD_INVOCATION_ID=(?!{}\n)",
                     b"\n_SYSTEMD_UNIT=", b"\n__REALTIME_TIMESTAMP=", _lazy(rb"\n__REALTIME_TIMESTAMP=(\d+)\n"),
                     "\n_SYSTEMD_INVOCATION_ID={}\n"),
}
#: a record holding any of these is read alone by the reference: a CR or a colour code (stripped
#: line by line) or a traceback's opening (its body lines are unprefixed; they are read one by one
#: until it ends)
_WALK_IF = (b"\r", b"\x1b", TRACEBACK_BYTES)
#: export's walk_re and _WALK_IF as literals, for Hyperscan's one pass (`USER_UNIT=|UNIT=(?<=\nUNIT=)`: CPython
#: searches `USER_UNIT=` and `\nUNIT=` at ~0.6 GB/s, their last byte `=` being in every field)
_EXPORT_WALK = (b"USER_UNIT=", b"\nUNIT=", *_WALK_IF)


@dataclass
class _JournalInput:
    """A journal format being read: which, its name for errors, and how far its JSON is known good."""

    fmt: str
    name: str
    lines: int = 0  # JSON lines read record by record (errors name the line, until `checked`)
    checked: bool = False  # a journal JSON record was read: a bad line is skipped from now on


def _journal_fast(seg: _Segments, fmt: str, head: bytes, stream: BinaryIO, name: str, size: int,
                  cut: Cut | None = None) -> None:
    """`-o json` and `-o export` a chunk at a time, decoding only the records that may matter.

    As the plain path, with the MESSAGE field in place of the line: one pattern
    (LineParser.interesting_message_re) finds the records whose message a handler might take, the
    runs of quiet records between them are applied in bulk, the journal's time of the last one the
    clock. A record that could begin another start, is PID 1's or holds a JSON escape that could
    change its meaning, or holds a CR, a colour code or a traceback's opening, is read alone as the
    reference reads it (`_journal_range`), and so are an open traceback's records until it ends;
    export entries with a binary field are read record by record.
    """
    src = _JournalInput(fmt, name, checked=fmt == "export")  # export has no first line to check
    if fmt == "export":
        reader = ExportReader(head, stream, size, cut, line_max=seg.walk_max)
        while True:
            block = reader.text_block()
            if block is not None:
                _journal_range(seg, src, block, 0, len(block) - 2)
                continue
            fields = reader.entry()
            if fields is None:
                break
            rec = record_from_fields(fields)
            if rec is not None:
                _record(seg, rec, fmt)
        return
    for data, start, end, final in _spans(head, stream, size):
        if final:
            _journal_walk(seg, src, data, start + 1, end, final=True)
        else:
            _journal_range(seg, src, data, start, end)


def _journal_walk(seg: _Segments, src: _JournalInput, data: bytes, a: int, b: int, *, final: bool = False) -> None:
    """The records of data[a:b] (data[b] ends the last one, unless `final`), as the reference reads them."""
    if src.fmt == "export":
        for fields in text_entries(data[a - 1:b + 2]):
            rec = record_from_fields(fields)
            if rec is not None:
                _record(seg, rec, src.fmt)
        return
    text = data[a:b].decode("utf-8", "replace")
    if "\r" in text:
        text = text.replace("\r\n", "\n")
        text = text.rstrip("\r") if final else text[:-1] if text.endswith("\r") else text
    for line in text.split("\n"):
        src.lines += 1
        rec, src.checked = json_record(line, src.lines, src.checked, src.name)
        if rec is not None:
            _record(seg, rec, src.fmt)


def _journal_range(seg: _Segments, src: _JournalInput, data: bytes, start: int, end: int) -> None:
    """The records of data[start + 1:end]: data[start] is a newline, data[end:] begins a separator.

    A record the fast path must not take in bulk (PID 1's, one naming another start or, the first
    time, the unit, a JSON escape that could change its meaning) is read alone, as the reference
    reads it; the records between such ones go to `_fast_records`."""
    shape = _SHAPES[src.fmt]
    sep = len(shape.sep)
    found: dict[object, int] = {}  # each question's first answer at or after `start` (end: none)

    def first(key: object, search: Callable[[int], int]) -> int:
        at = found.get(key, -1)
        if at < start:
            at = found[key] = search(start)
        return at

    walk: list[int] | None = None  # Hyperscan's one pass: where walk_re and _WALK_IF match (export only)
    others: dict[str, list[int]] = {}  # and the lines naming a start other than each current one
    if src.fmt == "export" and src.checked and seg.use_hyperscan(end - start):
        from svcdiag.sglang import prefilter

        if seg.current is None:
            walk = prefilter.needles(_EXPORT_WALK).lines(data, start, end)
        else:  # both in one pass: data[end] is the last record's newline, which ends the other start's value
            walk, others[seg.current] = prefilter.needles(
                _EXPORT_WALK, prefilter.other_value(shape.invocation_key, seg.current.encode())).lines_by_kind(
                    data, start, end + 1)

    def another_start(at: int, current: str | None) -> int:
        if walk is None or current is None:
            return shape.another_start(data, at, end, current)
        from svcdiag.sglang import prefilter

        lines = others.get(current)
        if lines is None:
            lines = others[current] = prefilter.needles((), prefilter.other_value(
                shape.invocation_key, current.encode())).lines(data, at, end + 1)
        i = bisect.bisect_left(lines, at + 1)
        return lines[i] - 1 if i < len(lines) else end  # the newline before the key, as the pattern's match

    while start < end:
        rs = start + 1  # the record to read alone: the first, until the input is known journal JSON
        if seg.judge is not None and src.checked:
            current = seg.current
            if walk is not None:
                i = bisect.bisect_left(walk, start)
                marks = [walk[i] if i < len(walk) else end]
            else:
                marks = [first(p, lambda at, p=p: _at(p.search(data, at, end), end)) for p in shape.walk_re]
                marks += [first(w, lambda at, w=w: _at(data.find(w, at, end), end)) for w in _WALK_IF]
            marks.append(first(("start", current), lambda at, c=current: another_start(at, c)))
            if seg.judge.readiness.unit is None:
                marks.append(first("unit", lambda at: _at(data.find(shape.unit_key, at, end), end)))
            special = min(marks)
            if special >= end:
                _fast_records(seg, src, data, start, end)
                return
            rs = max(start + 1, data.rfind(shape.sep, start, special + 1) + sep)
            if rs > start + 1:
                _fast_records(seg, src, data, start, rs - sep)
        e = data.find(shape.sep, rs, end)
        _journal_walk(seg, src, data, rs, end if e < 0 else e)
        if e < 0:
            return
        start = e + sep - 1


def _at(found: re.Match[bytes] | int | None, end: int) -> int:
    """Where a search found something, or `end` when it did not."""
    if isinstance(found, re.Match):
        return found.start()
    return end if found is None or found < 0 else found


def _fast_records(seg: _Segments, src: _JournalInput, data: bytes, start: int, end: int) -> None:
    """Records of one start, none PID 1's: those whose message a handler might take read one by
    one, the quiet runs between them applied in bulk (and read one by one while a traceback is open)."""
    shape = _SHAPES[src.fmt]
    sep = len(shape.sep)
    judge = seg.judge
    assert judge is not None
    a = _walk_records_while_open(seg, src, data, start + 1, end)  # the first record not yet applied
    if a > end:
        return
    pat = judge.parser.interesting_message_re(src.fmt, data.isascii())
    at = a - 1
    while (m := pat.search(data, at, end)) is not None:
        rs = max(a, data.rfind(shape.sep, start, m.start() + 1) + sep)  # the record it is in
        re_ = data.find(shape.sep, m.start() + 1, end)
        re_ = end if re_ < 0 else re_
        if rs > a:
            _quiet_records(seg, src, data, a, rs - sep)
        _journal_walk(seg, src, data, rs, re_)
        a = re_ + sep
        at = re_ + sep - 1
    if a < end:
        _quiet_records(seg, src, data, a, end)


def _walk_records_while_open(seg: _Segments, src: _JournalInput, data: bytes, a: int, b: int) -> int:
    """Read the records of data[a:b] one by one while the parser may not skip quiet ones (a traceback
    is open); where the first record not read begins (past b: none)."""
    shape = _SHAPES[src.fmt]
    while seg.judge is not None and not seg.judge.parser.quiet_ok():
        e = data.find(shape.sep, a, b)
        if e < 0:
            _journal_walk(seg, src, data, a, b)
            return b + len(shape.sep)
        _journal_walk(seg, src, data, a, e)
        a = e + len(shape.sep)
    return a


def _quiet_records(seg: _Segments, src: _JournalInput, data: bytes, a: int, b: int) -> None:
    """The quiet records data[a:b]: in bulk (`_skip_records`) once the parser allows it, else read one by one."""
    if src.fmt == "export" and data.find(b"\nMESSAGE=", a - 1, b) < 0:
        return  # no entry here has a message: the reference makes no record of them (record_from_fields)
    a = _walk_records_while_open(seg, src, data, a, b)
    if a <= b and not _skip_records(seg, _SHAPES[src.fmt], data, a, b):
        _journal_walk(seg, src, data, a, b)


def _skip_records(seg: _Segments, shape: _Shape, data: bytes, a: int, b: int) -> bool:
    """Apply the quiet records data[a:b] in bulk; False when they must be read one by one."""
    judge = seg.judge
    assert judge is not None
    if not judge.parser.quiet_ok() or judge.serving_in(data, a, b):
        return False
    n = _up_to_two(data, shape.count_key, a - 1, b)
    last = _decoded(shape, data, a, b)
    if last is None or last.ts is None:
        return False
    limit = judge.readiness.quiet_until()
    if limit != float("inf"):
        stamps = shape.ts_re.findall(data, a - 1, b + 1)
        records = data.count(shape.sep, a, b) + 1
        if len(stamps) != records or data.count(shape.ts_key, a - 1, b) != records \
                or max(int(t) for t in stamps) / 1e6 >= limit - 1e-3:
            return False  # a record without the journal's time, or a deadline inside the run
    # the parser's clock: the last prefixed message (access lines have no time)
    ts_text = None
    rec: Record | None = last
    e = b
    for _ in range(64):
        if rec is not None and (ts_text := prefix_stamp(rec.text)) is not None:
            break
        if e <= a:
            break
        s = data.rfind(shape.sep, a, e)
        e = a if s < 0 else s
        rec = _decoded(shape, data, a, e) if e > a else None
    else:
        return False
    if ts_text is not None:
        try:
            parse_ts(ts_text)
        except ValueError:
            return False  # the reference keeps the clock of the last line that parsed: walk them
    judge.skip(n, ts_text, last.text, ts=last.ts)
    seg.has_lines = True
    return True


def _decoded(shape: _Shape, data: bytes, a: int, b: int) -> Record | None:
    """The last record of data[a:b], read as the reference reads it: a service's, or None."""
    s = data.rfind(shape.sep, a, b)
    s = a if s < 0 else s + len(shape.sep)
    if shape.sep == b"\n":
        rec, _ = json_record(data[s:b].decode("utf-8", "replace"), 0, True, "")
    else:
        rec = next((record_from_fields(f) for f in text_entries(data[s - 1:b + 2])), None)
    return None if rec is None or rec.systemd else rec


def replay(stream: BinaryIO, name: str, cfg: ServiceConfig | None = None,
           invocation: str | None = None, *, start: int | None = None, fast: bool = True,
           chunk: int | None = None, walk_max: int | None = None) -> ReplayResult:
    """Judge a saved log: its last start, or the one whose invocation id begins with `invocation`,
    or the `start`-th (1-based). `fast=False` reads it line by line, record by record (the reference
    the fast paths are tested against); `chunk` overrides the fast paths' chunk size; past `walk_max` lines read
    one by one (a bundle's bound: ops.offline.bundle_read.BUNDLE_WALK_MAX) the input is refused in one line."""
    head = stream.read(64 * 1024)
    fmt = detect(head)
    cut = Cut()
    if fmt != "export":  # a line is cut to LINE_MAX as it is read (export's reader cuts its own fields)
        bounded = LineBound(stream, head)
        cut, stream = bounded.cut, bounded  # type: ignore[assignment]
        head = bounded.read(64 * 1024)
    seg = _Segments(cfg, invocation, start)
    seg.prefilter = _prefilter_engine()
    if walk_max is not None:
        seg.walk_max, seg.walk_name = walk_max, name
    if fmt == "plain" and fast:
        seg.new()
        _plain_fast(seg, head, stream, chunk or CHUNK)
    elif fmt == "plain":
        seg.new()
        for text, lines in plain_chunks(head, stream):
            starts = SERVER_ARGS_MARK in text or ROUTER_LAUNCH_MARK in text  # asked once per chunk, at C speed
            for line in lines:
                _plain_line(seg, line, starts)
    elif fast and fmt in ("json", "export"):
        try:
            _journal_fast(seg, fmt, head, stream, name, chunk or CHUNK, cut)
        except LineMaxExceeded:
            seg.refuse()
    else:
        for rec in records(fmt, head, stream, name, cut):
            _record(seg, rec, fmt)
    if not seg.starts:
        seg.new()
    seg.close()
    if not seg.recognized and all(s.verdict is None or s.verdict.verdict == "incomplete" for s in seg.starts):
        cut_note = f" ({cut.note()})" if cut.lines else ""
        raise NoStartFound(f"no SGLang start found in {name}: no line of it is one SGLang or systemd prints "
                           f"about a start{cut_note}")
    chosen = _choose(seg, name)
    return ReplayResult(fmt, seg.starts, chosen, seg.kept.get(chosen.index, []), cut)


def _prefilter_engine() -> str:
    """SVCDIAG_PREFILTER's engine for the fast paths (sglang.prefilter; Hyperscan is imported only when named
    or needed); a bad value is a one-line error."""
    from svcdiag.sglang import prefilter

    try:
        return prefilter.asked()
    except prefilter.PrefilterError as e:
        raise SvcdiagError(str(e)) from None


def _record(seg: _Segments, rec: Record, fmt: str) -> None:
    """One record of a journal format (or short, or a container's log), as the reference reads it."""
    seg.walked += 1
    if seg.walked > seg.walk_max:
        seg.refuse()
    if rec.dropped:  # journald's "Suppressed N messages" record: counted on the start it names
        if seg.judge is not None and rec.invocation in (None, seg.current):
            seg.judge.journal_dropped(rec.dropped)
        return
    if rec.invocation and rec.invocation != seg.current:
        seg.current = rec.invocation
        known = next((s for s in seg.starts if s.invocation == seg.current), None)
        if known is None:
            if seg.judge is not None and seg.starts and seg.starts[-1].invocation is None and not seg.has_lines:
                seg.starts[-1].invocation = seg.current  # "Starting" came before the id
                seg.judge.readiness.identify(invocation=seg.current)
                seg._keep_if_wanted(seg.starts[-1])
            else:
                seg.new(seg.current)
    elif rec.invocation is None and rec.systemd and fmt == "short" and (
            rec.text.startswith("Starting ") or (rec.text.startswith("Started ") and _started_anew(seg))):
        seg.new()
    elif rec.invocation is None and not rec.systemd and _starts_server(rec.text):
        # a start no journal field or PID 1's line told: a container restarted (`docker logs`,
        # compose's `restart: always`), `journalctl -t python3`, a wrapper script's loop
        if seg.judge is None or (seg.args_seen and not seg.judge.parser.awaits_worker_args()):
            seg.new()
        seg.args_seen = True
    if seg.judge is None:
        seg.new(rec.invocation)
    assert seg.judge is not None
    if rec.unit:
        seg.judge.readiness.identify(unit=rec.unit)
    if rec.systemd:
        seg.ended = seg.ended or _ends(rec.text)
        out = seg.judge.systemd_line(rec.text, rec.ts)
    else:
        seg.has_lines = True
        out = seg.judge.service_line(rec.text, rec.ts)
    if out:
        seg.emit(out)


def _started_anew(seg: _Segments) -> bool:
    """Whether systemd's "Started …" (with no "Starting …" before it) begins another start. A
    notify unit's comes after its own server said ready (READY=1): that is the same start."""
    if seg.judge is None:  # the log's first line (cut after "Starting …"): the start begins below
        return False
    return seg.has_lines and (seg.ended or seg.judge.readiness.phase != "ready")


def _ends(text: str) -> bool:
    ev = parse_systemd(text)
    return ev is not None and ev.state in ("exited", "stopping", "stopped", "result")


def _choose(seg: _Segments, name: str) -> Start:
    if seg.pick is None and seg.pick_start is None:
        return seg.starts[-1]
    for s in seg.starts:
        if seg._wanted(s):
            return s
    asked = f"--start {seg.pick_start}" if seg.pick_start is not None else f"--invocation {seg.pick!r}"
    listed = ", ".join(f"{s.index}" + (f" ({s.invocation})" if s.invocation else "") for s in seg.starts)
    raise SvcdiagError(f"{name}: no start matches {asked}; starts in the input: {listed}")
