"""Offline inputs, detected from their first bytes: a plain log (as printed, or `journalctl
-o cat`), journalctl's short output, `-o json`, or `-o export`. All become records.

Streaming and bounded: a file of a million lines is read in chunks, never held whole;
invalid UTF-8 is replaced. A line (an export field) longer than LINE_MAX is cut to its first
LINE_MAX bytes where it is read (`LineBound`, `ExportReader`), and the cut is counted: memory
stays flat and the answer comes at read speed whatever the input's shape (a GB of zeros, no newline).
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterator
from dataclasses import dataclass

from svcdiag.errors import SvcdiagError
from svcdiag.sglang import lazy_re

try:  # the C type itself: Python 3.11's datetime.py defines each of its classes in Python before it takes
    from _datetime import datetime  # _datetime's in their place (~1.3 ms, with math), and a replay reads time
except ImportError:  # a Python without it
    from datetime import datetime

TYPE_CHECKING = False  # typing costs ~3 ms to import, and no module a replay loads needs it at run time
if TYPE_CHECKING:
    from typing import BinaryIO

CHUNK = 1 << 20
#: the longest line (or export field) read whole; the rest of a longer one is skipped and counted.
#: SGLang's longest real line is its `server_args=` of a few KB, journald splits lines at 48 KiB
#: (its LineMax=), so no line a start prints comes near it.
LINE_MAX = 64 * 1024
#: journalctl's short outputs: `short`/`short-precise` (`May 23 09:44:49[.123456]`), `short-iso`,
#: `short-full` (`Tue 2025-08-12 14:30:55 UTC`, its zone name ignored) and `short-unix` (`1723473055.123456`)
SHORT_RE = lazy_re.compile(  # lazy, as CONTAINER_RE, RAY_REPEATED_RE and UNIT_PREFIX_RE: a plain log needs none
    r"^(?:(?P<mon>[A-Z][a-z]{2}) (?P<day>[ \d]\d) (?P<hms>\d\d:\d\d:\d\d(?:\.\d+)?)"
    r"|(?P<iso>\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:[.,]\d+)?(?:[+-]\d\d:?\d\d)?)"
    r"|[A-Z][a-z]{2} (?P<full>\d{4}-\d\d-\d\d \d\d:\d\d:\d\d(?:\.\d+)?) [A-Za-z][\w+/-]*"
    r"|(?P<unix>1\d{9}\.\d{6}))"
    r" (?P<host>\S+) (?P<ident>[^\s\[:]+)(?:\[(?P<pid>\d+)\])?: (?P<msg>.*)$", re.S)
MONTHS = {m: i for i, m in enumerate(("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"), 1)}
#: what a runtime or wrapper puts before each line SGLang printed: compose's `service-1  | ` (podman-compose's
#: `[service]     | `, audit R13), an RFC 3339
#: UTC stamp (kubectl, docker -t; in brackets: Jenkins' timestamper; with a tracing subscriber's level and target
#: after it, `…Z  INFO model_runner.load_model: `: NVIDIA Dynamo's SGLang workers), Ray's `(Actor pid=N, ip=…) ` (SkyPilot's
#: `(worker1, rank=1, pid=N, ip=…) `; behind one space as a paste may indent it, audit R12a), a
#: launcher's logging.Formatter (`2025-03-07 23:50:27,531 - __main__ - INFO - `, FastChat's `… | ERROR | stderr | `),
#: `kubectl logs --prefix` (`[pod/sglang-0/server] `), Slurm's `srun --label` (`0: `); Google Cloud Logging's
#: console puts the severity before the stamp (`ERROR 2025-04-05T00:01:19.509514570Z `); a Markdown quote's `> ` (a
#: reply that quoted another's paste: the rest keeps its indentation)
CONTAINER_RE = lazy_re.compile(
    r"^(?:>(?: |$)|(?:[\w.-]+|\[[\w.-]+\])\s*\| ?|(?:(?:DEFAULT|DEBUG|INFO|NOTICE|WARNING|ERROR|CRITICAL|ALERT|EMERGENCY) )?"
    r"\[?(?P<stamp>\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?Z)\]?(?: +(?:TRACE|DEBUG|INFO|WARN|ERROR) +(?:[A-Za-z_]\w*\.)+\w+:)? "
    r"|\[pod/[\w.-]+/[\w.-]+\] |\d{1,4}: "
    r"| ?(?:\x1b\[[\d;]*m)?\((?:[\w.:-]+,? )?(?:rank=\d+, )?pid=\d+(?:, ip=[\d.]+)?\)(?:\x1b\[[\d;]*m)? ?"
    r"|\d{4}-\d\d-\d\d \d\d:\d\d:\d\d(?:,\d{3} - [\w.<>-]+ - [A-Z]+ - | \| [A-Z]+ \| [\w.<>-]+ \| ))")
#: Ray's note that it folded the same line of several workers into one
RAY_REPEATED_RE = lazy_re.compile(r" \[repeated \d+x across cluster\]$")
#: a colour code at a line's start or right after a runtime's prefix (`docker compose logs` on a
#: terminal colours each service's `sglang-1  |`): taken out before the prefix is matched
LEAD_COLOUR_RE = lazy_re.compile(r"^(?:\x1b\[[\d;]*m)+")
UNIT_PREFIX_RE = lazy_re.compile(r"^([\w:.\\@-]+\.(?:service|scope)): (.*)$", re.S)


#: journald's own record that its rate limit dropped lines of a unit: MESSAGE "Suppressed N messages from
#: UNIT", N_DROPPED=N, OBJECT_SYSTEMD_UNIT and OBJECT_SYSTEMD_INVOCATION_ID the unit's (its sender is
#: systemd-journald.service; sd-messages.h SD_MESSAGE_JOURNAL_DROPPED). journald writes it with the
#: unit's first line after the rate-limit window, so it may come late, or never.
JOURNAL_DROPPED = "a596d6fe7bfa4994828e72309e95d61e"


@dataclass(frozen=True, slots=True)
class Record:
    """One line of a journal or log, whoever wrote it, with its time, invocation and unit."""

    text: str
    ts: float | None = None
    systemd: bool = False  # PID 1's line about the unit, not the server's
    invocation: str | None = None
    unit: str | None = None
    dropped: int = 0  # journald's JOURNAL_DROPPED record: how many of the unit's lines it did not keep


@dataclass
class Cut:
    """What the reading boundary cut: lines longer than LINE_MAX, and the bytes of them skipped."""

    lines: int = 0
    skipped: int = 0

    def note(self) -> str:
        """'' when nothing was cut, else how much, for the output's first note."""
        if not self.lines:
            return ""
        s = "s" if self.lines != 1 else ""
        return (f"{self.lines:,} line{s} longer than {LINE_MAX:,} bytes cut to that length "
                f"({self.skipped:,} bytes skipped)")


class LineBound:
    """A binary stream whose lines are at most `limit` bytes: the rest of a longer line is read and
    dropped (counted in `cut`), never held. Checking a chunk costs O(len/limit) bounded searches,
    so the common case (no long line) stays at memchr speed; `prefix` is handed out first."""

    def __init__(self, stream: BinaryIO, prefix: bytes = b"", limit: int = LINE_MAX):
        self.stream, self.prefix, self.limit = stream, prefix, limit
        self.run = 0  # bytes of the current (unended) line already handed out
        self.skipping = False  # inside a cut line: drop up to its newline
        self.cut = Cut()

    def read(self, size: int = CHUNK) -> bytes:
        """Up to about `size` bytes; b"" only at the end of the input."""
        while True:
            if self.prefix:
                data, self.prefix = self.prefix, b""
            else:
                data = self.stream.read(size)
                if not data:
                    return b""
            out = self._bound(data)
            if out:
                return out

    def _bound(self, data: bytes) -> bytes:
        out: list[bytes] = []
        pos, n = 0, len(data)
        while pos < n:
            if self.skipping:
                nl = data.find(b"\n", pos)
                if nl < 0:
                    self.cut.skipped += n - pos
                    break
                self.cut.skipped += nl - pos
                self.skipping, self.run, pos = False, 0, nl
            at = overlong(data, pos, len(data), self.run, self.limit)
            if at < 0:
                out.append(data[pos:] if pos else data)
                nl = data.rfind(b"\n", pos)
                self.run = n - nl - 1 if nl >= 0 else self.run + n - pos
                break
            out.append(data[pos:at])
            self.cut.lines += 1
            self.skipping, pos = True, at
        return out[0] if len(out) == 1 else b"".join(out)



def overlong(data: bytes | bytearray, pos: int, end: int, run: int = 0, limit: int = LINE_MAX) -> int:
    """Where in data[pos:end] a line first passes `limit` bytes (its first byte over), or -1; `run`:
    bytes of data[pos]'s line before it. Each step jumps to the last newline within a line's reach:
    O(len/limit) searches at memchr speed, never one per line."""
    c, r = pos, run
    while True:
        lim = c + limit - r  # data[lim] must be a newline (or past the end) for this line to fit
        if lim >= end:
            return -1
        e = data.rfind(b"\n", c, lim + 1)
        if e < 0:
            return lim
        c, r = e + 1, 0


def detect(head: bytes) -> str:
    text = head.decode("utf-8", "replace").lstrip("\ufeff")
    first = next((ln for ln in text.splitlines() if ln.strip()), "")
    if first.lstrip().startswith("{"):
        return "json"
    if not _sglang_dated(first) and re.match(r"^(__CURSOR|__REALTIME_TIMESTAMP|_?[A-Z][A-Z0-9_]*)=", first) and re.search(
            r"^(?:__REALTIME_TIMESTAMP|MESSAGE|_SYSTEMD_UNIT|__CURSOR)[=\n]", text, re.M):
        return "export"
    if first.startswith("-- ") or (not _sglang_dated(first) and SHORT_RE.match(first)):
        return "short"
    lines = [ln for ln in text.splitlines()[:40] if ln.strip()]
    if _margin(lines):
        return "indented"
    if lines and sum(1 for ln in lines if _container_line(_uncoloured(ln))) >= 0.5 * len(lines):
        return "container"
    return "plain"


def _sglang_dated(line: str) -> bool:
    """Whether `line` opens with SGLang's dated prefix (`[2026-05-23 09:42:05`): no such line matches SHORT_RE
    (whose lines open with a letter or a digit) or CONTAINER_RE (a `[` there opens a name without a space before
    its `]`, or an RFC 3339 stamp with its `T`) or opens an export (a field's name), so a plain log is told without
    compiling either (~1 ms each)."""
    return line.startswith("[20") and line[11:12] == " " and "]" not in line[:11]


def _container_line(line: str) -> bool:
    """Whether `line` (its colour codes taken out) opens with a runtime's or a wrapper's prefix (CONTAINER_RE)."""
    return not _sglang_dated(line) and CONTAINER_RE.match(line) is not None


#: a paste indented as one block (a notebook's output rendered to Markdown, a code block in a list, audit R14):
#: the margin before its first line, which is SGLang's dated one
MARGIN_RE = lazy_re.compile(r"^( {2,8}|\t)\[20\d\d-\d\d-\d\d ")


def _margin(lines: list[str]) -> str:
    """The margin the whole paste is indented by (its first line is SGLang's, and most lines share it), or ''."""
    m = MARGIN_RE.match(lines[0]) if lines and lines[0][:1] in (" ", "\t") else None
    if m is None:
        return ""
    margin = m.group(1)
    return margin if sum(ln.startswith(margin) for ln in lines) >= 0.8 * len(lines) else ""


def _uncoloured(line: str) -> str:
    """`line` without the colour codes it opens with (and a reset right after a prefix's `|`)."""
    if line[:1] == "\x1b":
        line = LEAD_COLOUR_RE.sub("", line)
    bar = line.find("|\x1b[")
    if 0 < bar < 64:
        end = line.find("m", bar)
        line = line[:bar + 1] + line[end + 1:]
    return line


def records(fmt: str, head: bytes, stream: BinaryIO, name: str, cut: Cut | None = None) -> Iterator[Record]:
    """Records of a stream whose first bytes (`head`, already read) said it is `fmt`; `cut` counts the
    export fields cut to LINE_MAX (the other formats are cut by a LineBound stream)."""
    if fmt == "export":
        return _export(head, stream, name, cut)
    reader = {"plain": _plain, "short": _short, "json": _json, "export": _export, "container": _container,
              "indented": _indented}[fmt]
    return reader(head, stream, name)


def _lines(head: bytes, stream: BinaryIO) -> Iterator[str]:
    """Decoded lines, CRLF already made LF: a truncated last line is still a line."""
    for _, lines in plain_chunks(head, stream):
        yield from lines


def unwrap(line: str) -> str:
    """`line` as SGLang printed it, without the prefixes a runtime or wrapper put before it."""
    text = line
    for _ in range(3):  # wrappers nest: compose's service prefix before Ray's actor prefix, say
        if text.startswith("\x1b"):
            text = _uncoloured(text)
        m = CONTAINER_RE.match(text)
        if m is None:
            break
        text = text[m.end():]
    return RAY_REPEATED_RE.sub("", text) if text.endswith("cluster]") else text


def _container(head: bytes, stream: BinaryIO, name: str) -> Iterator[Record]:
    """`docker compose logs` (`sglang-1  | …`) or `kubectl logs --timestamps` / `docker logs -t`
    (`2025-03-14T10:22:31.123456789Z …`): the line as SGLang printed it, on SGLang's own clock
    (the runtime's UTC stamp would mix two clocks in one start).

    A log console's copy may list the newest line first (Cloud Logging's does): when the runtime's
    stamps only go down, the lines are read in the order they were printed, which takes holding them
    all (such a copy is a screenful or a download, not a journal)."""
    lines = _lines(head, stream)
    first = list(itertools.islice(lines, NEWEST_FIRST_LINES))
    if _newest_first(first):
        whole = first + list(lines)
        whole.reverse()
        lines = iter(whole)
    else:
        lines = itertools.chain(first, lines)
    for line in lines:
        yield Record(unwrap(line))


#: the lines a container log's order is told from
NEWEST_FIRST_LINES = 400


def _newest_first(lines: list[str]) -> bool:
    """Whether the runtime's stamps on these lines only go down (at least once, never up)."""
    stamps = [m["stamp"] for ln in lines if (m := CONTAINER_RE.match(_uncoloured(ln))) is not None and m["stamp"]]
    down = up = 0
    for a, b in itertools.pairwise(stamps):
        if len(a) == len(b):  # one fraction width: the strings sort as the times do
            down += a > b
            up += a < b
    return down > 0 and up == 0


def _indented(head: bytes, stream: BinaryIO, name: str) -> Iterator[Record]:
    """A plain log indented as one block: each line without the margin (deeper indentation, a traceback's, kept)."""
    margin = _margin([ln for ln in head.decode("utf-8", "replace").lstrip("\ufeff").splitlines()[:40] if ln.strip()])
    cut = len(margin)
    for line in _lines(head, stream):
        yield Record(line[cut:] if line.startswith(margin) else line)


def _plain(head: bytes, stream: BinaryIO, name: str) -> Iterator[Record]:
    for line in _lines(head, stream):
        yield Record(line)


def plain_chunks(head: bytes, stream: BinaryIO) -> Iterator[tuple[str, list[str]]]:
    """The plain format a chunk at a time, as (text, lines), with no Record per line:
    replay's hot path, which can ask a question of a whole chunk at C speed first."""
    rest = b""
    buf = head
    while True:
        if not buf:
            buf = stream.read(CHUNK)
            if not buf:
                break
        data = rest + buf
        buf = b""
        cut = data.rfind(b"\n")
        if cut < 0:
            rest = data
            continue
        rest = data[cut + 1:]
        text = data[:cut].decode("utf-8", "replace")
        if "\r" in text:  # CRLF: the chunk's last line too, whose newline is not in `text`
            text = text.replace("\r\n", "\n")
            if text.endswith("\r"):
                text = text[:-1]
        yield text, text.split("\n")
    if rest:
        text = rest.decode("utf-8", "replace").rstrip("\r")
        yield text, [text]


def _short_ts(m: re.Match[str], year: int) -> float | None:
    try:
        if m.group("iso"):
            return datetime.fromisoformat(m.group("iso").replace(",", ".")).timestamp()
        if m.group("full"):
            return datetime.fromisoformat(m.group("full")).timestamp()
        if m.group("unix"):
            return float(m.group("unix"))
        hms = m.group("hms")
        base = datetime(year, MONTHS[m.group("mon")], int(m.group("day")))
        h, mi, s = hms.split(":")
        return base.timestamp() + int(h) * 3600 + int(mi) * 60 + float(s)
    except (ValueError, KeyError):
        return None


def _short(head: bytes, stream: BinaryIO, name: str) -> Iterator[Record]:
    year = datetime.now().year
    for line in _lines(head, stream):
        if not line or line.startswith("-- "):
            continue
        m = SHORT_RE.match(line)
        if m is None:  # a continuation the journal printed on its own line
            yield Record(line)
            continue
        ts = _short_ts(m, year)
        msg = m.group("msg")
        if m.group("ident") == "systemd":  # PID 1, or a user's manager (`systemctl --user`)
            um = UNIT_PREFIX_RE.match(msg)
            yield Record(um.group(2) if um else msg, ts, systemd=True, unit=um.group(1) if um else None)
        else:  # a unit whose ExecStart runs SGLang under a wrapper (Ray, compose, a CI's stamps) logs its prefix too
            yield Record(unwrap(msg), ts)


def _field(v: object) -> str | None:
    if v is None:
        return None
    if isinstance(v, str):
        return v
    if isinstance(v, list):
        if v and all(isinstance(x, int) for x in v):
            return bytes(x & 0xFF for x in v).decode("utf-8", "replace")
        return _field(v[0]) if v else None
    return str(v)


def record_from_fields(fields: dict[str, object], ts: float | None = None) -> Record | None:
    """A journal entry (json, export or a live reader's fields) as a record."""
    msg = _field(fields.get("MESSAGE"))
    if msg is None:
        return None
    rt = _field(fields.get("__REALTIME_TIMESTAMP"))
    if ts is None and rt and rt.isdigit():
        ts = int(rt) / 1e6
    own_unit = _field(fields.get("_SYSTEMD_UNIT"))
    if _field(fields.get("MESSAGE_ID")) == JOURNAL_DROPPED:
        n = _field(fields.get("N_DROPPED")) or ""
        m = re.search(r"Suppressed (\d+) messages", msg)
        count = int(n) if n.isdigit() else int(m.group(1)) if m else 1
        # some releases write the field as OBJECT_SYSTEMD_INVOCATION_ID==ID (a doubled '=')
        inv = (_field(fields.get("OBJECT_SYSTEMD_INVOCATION_ID")) or "").lstrip("=") or None
        return Record(msg, ts, invocation=inv, unit=_field(fields.get("OBJECT_SYSTEMD_UNIT")), dropped=max(count, 1))
    about = _field(fields.get("UNIT")) or _field(fields.get("USER_UNIT"))
    is_pid1 = about is not None and (own_unit in (None, "init.scope") or _field(fields.get("_PID")) == "1")
    if is_pid1:
        inv = _field(fields.get("INVOCATION_ID")) or _field(fields.get("USER_INVOCATION_ID"))
        um = UNIT_PREFIX_RE.match(msg)
        return Record(um.group(2) if um else msg, ts, systemd=True, invocation=inv, unit=about)
    return Record(unwrap(msg.rstrip("\n")), ts, invocation=_field(fields.get("_SYSTEMD_INVOCATION_ID")),
                  unit=own_unit)


def _loads(text: str) -> object:
    """json.loads, json imported on the first JSON line (~1.5 ms that a plain log does not pay)."""
    global _loads  # noqa: PLW0603 -- the import once, then json's own function, called at its own cost
    import json

    _loads = json.loads
    return _loads(text)


def json_record(line: str, n: int, checked: bool, name: str) -> tuple[Record | None, bool]:
    """Line `n` of `-o json`: its record (None: blank, or no journal entry), and whether the input
    is now known to be journal JSON; until then a line that is not is a one-line error."""
    if not line.strip():
        return None, checked
    try:
        obj = _loads(line)
    except (ValueError, RecursionError) as e:  # RecursionError: nested deeper than Python's stack (no journal's)
        if not checked:
            deep = ", nested too deep to be a journal entry" if isinstance(e, RecursionError) else ""
            raise SvcdiagError(f"{name}: line {n}: starts like JSON but is not valid JSON{deep}") from None
        return None, checked
    if not isinstance(obj, dict) or not ("MESSAGE" in obj or "__REALTIME_TIMESTAMP" in obj):
        if not checked:
            raise SvcdiagError(f"{name}: line {n}: JSON, but not journal JSON (no MESSAGE or "
                               "__REALTIME_TIMESTAMP field); expected `journalctl -o json` output")
        return None, checked
    return record_from_fields(obj), True


def _json(head: bytes, stream: BinaryIO, name: str) -> Iterator[Record]:
    checked = False
    for n, line in enumerate(_lines(head, stream), 1):
        rec, checked = json_record(line, n, checked, name)
        if rec is not None:
            yield rec


def _export(head: bytes, stream: BinaryIO, name: str, cut: Cut | None = None) -> Iterator[Record]:
    for fields in export_entries(head, stream, cut):
        rec = record_from_fields(fields)
        if rec is not None:
            yield rec


def export_entries(head: bytes, stream: BinaryIO, cut: Cut | None = None) -> Iterator[dict[str, object]]:
    """journalctl -o export: KEY=value lines, or KEY\\n + 64-bit LE size + bytes; blank line ends an entry.
    Each entry's fields as it completes (a pipe is read as it fills: a remote `--follow` streams)."""
    reader = ExportReader(head, stream, cut=cut)
    while (fields := reader.entry()) is not None:
        yield fields


class LineMaxExceeded(SvcdiagError):
    """ExportReader.entry read more lines than its line_max allows."""


class ExportReader:
    """`-o export` an entry at a time (`entry`), or, for replay's fast path, as blocks of whole
    entries holding no binary field (`text_block`), which `text_entries` reads the same way."""

    def __init__(self, head: bytes, stream: BinaryIO, block: int = CHUNK, cut: Cut | None = None,
                 line_max: float = float("inf")):
        self.block = block  # text_block's size, about (tests use a small one)
        #: the most lines `entry` may read, all entries together (a bundle's bound: a GiB of tiny lines that are
        #: no entry's, `A=b` or a field's name with no size after it, is a loop of a billion turns): LineMaxExceeded
        self.line_max = line_max
        self.lines = 0
        self.buf = bytearray(head)
        self.pos = 0
        self.eof = False
        self.stream = stream
        self.cut = cut if cut is not None else Cut()  # fields longer than LINE_MAX, cut to it as they were read

    def _drop(self, n: int) -> int:
        """Skip the next `n` bytes after self.pos (buffered or not); how many were there."""
        have = min(n, len(self.buf) - self.pos)
        del self.buf[self.pos:self.pos + have]
        while have < n and not self.eof:
            chunk = self.stream.read(min(CHUNK, n - have))
            if not chunk:
                self.eof = True
            have += len(chunk)
        return have

    def _long_line(self, start: int) -> int:
        """The line at `start` is longer than LINE_MAX: keep its first LINE_MAX bytes, drop the
        rest up to its newline (read and thrown away, never held); where that newline now is, or -1."""
        keep = start + LINE_MAX
        self.cut.lines += 1
        while True:
            nl = self.buf.find(b"\n", keep)
            if nl >= 0:
                self.cut.skipped += nl - keep
                del self.buf[keep:nl]
                return keep
            self.cut.skipped += len(self.buf) - keep
            del self.buf[keep:]
            if self.eof:
                return -1
            chunk = self.stream.read(CHUNK)
            if not chunk:
                self.eof = True
            self.buf.extend(chunk)

    def _fill(self, n: int) -> bool:
        """Read until the buffer holds `n` bytes (or the stream ends)."""
        while len(self.buf) < n and not self.eof:
            chunk = self.stream.read(CHUNK)
            if not chunk:
                self.eof = True
            self.buf.extend(chunk)
        return len(self.buf) >= n

    def _compact(self) -> None:
        del self.buf[:self.pos]
        self.pos = 0

    def entry(self) -> dict[str, object] | None:
        """The next entry's fields; None at the end of the input."""
        buf = self.buf
        fields: dict[str, object] = {}
        while True:
            nl = buf.find(b"\n", self.pos, self.pos + LINE_MAX + 1)
            while nl < 0 and not self.eof and len(buf) - self.pos <= LINE_MAX:
                self._compact()
                self._fill(len(buf) + 1)  # one read: a pipe (a remote `journalctl --follow`) hands over what it has
                nl = buf.find(b"\n", self.pos, self.pos + LINE_MAX + 1)
            if nl < 0 and len(buf) - self.pos > LINE_MAX:
                nl = self._long_line(self.pos)
            if nl < 0:
                break
            line = bytes(buf[self.pos:nl])
            self.pos = nl + 1
            self.lines += 1
            if self.lines > self.line_max:
                raise LineMaxExceeded(f"more than {int(self.line_max):,} lines read one by one")
            if not line:
                if fields:
                    return fields
                continue
            eq = line.find(b"=")
            if eq >= 0:
                fields[line[:eq].decode("ascii", "replace")] = line[eq + 1:].decode("utf-8", "replace")
                continue
            # binary field: 8-byte little-endian length, the data, then a newline
            self._compact()
            if not self._fill(8):
                break
            size = int.from_bytes(buf[:8], "little")
            if size > 64 << 20:  # no size: the line was neither KEY=value nor a field's name; skip it
                continue
            keep = min(size, LINE_MAX)
            if not self._fill(8 + keep):
                break
            fields[line.decode("ascii", "replace")] = bytes(buf[8:8 + keep]).decode("utf-8", "replace")
            self.pos = 8 + keep
            if keep < size:  # a field longer than any line a start prints: the rest skipped, not held
                self.cut.lines += 1
                self.cut.skipped += self._drop(size - keep)
            if not self._fill(self.pos + 1):
                break
            self.pos += 1  # the field's newline
            if self.pos > CHUNK:
                self._compact()
        self.pos = len(buf)
        return fields or None

    def text_block(self) -> bytes | None:
        """The whole entries ahead, up to about a chunk, when none of them holds a binary field
        (no NUL byte from here to 8 bytes past their end: a field's 8-byte size always has one),
        as one block that starts with a newline and ends with each entry's blank line; None when
        the next entry is for `entry`."""
        if len(self.buf) - self.pos < self.block and not self.eof:
            keep = self.pos - 1 if self.pos and self.buf[self.pos - 1] == 10 else self.pos  # the newline before pos
            del self.buf[:keep]
            self.pos -= keep
            chunk = self.stream.read(self.block)
            if not chunk:
                self.eof = True
            self.buf.extend(chunk)
        buf = self.buf
        nul = buf.find(b"\0", self.pos)
        limit = len(buf) if nul < 0 else nul
        cut = buf.rfind(b"\n\n", self.pos, limit - 8)
        if cut >= 0 and (long := overlong(buf, self.pos, cut)) >= 0:  # a field for entry() to cut: the entries before it
            cut = buf.rfind(b"\n\n", self.pos, long)
        if cut < 0:
            return None
        with memoryview(buf) as view:  # one copy: a bytearray's slice is one, and bytes() of it another
            if self.pos and buf[self.pos - 1] == 10:  # the previous entry's blank line: the block's first newline
                block = bytes(view[self.pos - 1:cut + 2])
            else:
                block = b"\n" + view[self.pos:cut + 2]
        self.pos = cut + 2
        return block


def text_entries(block: bytes) -> Iterator[dict[str, object]]:
    """The entries of an `ExportReader.text_block`, each as `ExportReader.entry` reads it."""
    for text in block.split(b"\n\n"):
        fields: dict[str, object] = {}
        for line in text.split(b"\n"):
            eq = line.find(b"=")
            if eq >= 0:  # else: neither KEY=value nor a field's name with a size after it; entry() skips it too
                fields[line[:eq].decode("ascii", "replace")] = line[eq + 1:].decode("utf-8", "replace")
        if fields:
            yield fields
