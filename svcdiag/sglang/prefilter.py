"""Replay's pre-filter: where, in a chunk, the strings that send a line or a record the slow way are, all
found in one pass by Hyperscan (the `hyperscan` wheel: a dependency on Linux x86-64 and aarch64, `svcdiag[fast]` elsewhere).

The fast paths ask each chunk for a few strings (a CR, a colour code, a traceback's opening, a start's
`] server_args=`; in a journal, PID 1's fields and escapes); CPython searches each in its own pass, a
multi-byte one at ~3 GB/s. Hyperscan finds them all in one pass over the chunk. The quiet test itself
(quiet.interesting_re) stays re's: it is a negative lookahead at each newline, which Hyperscan cannot
express; spelled as its positive complement (the lines not prefix-shaped, and the prefixed ones whose
message begins with a key) it was measured slower than re (every line of a log is a candidate of the
prefix's part): see docs/benchmarks.md.

`SVCDIAG_PREFILTER` picks the engine: `hyperscan`, `python` (CPython's searches, as where the wheel is
missing), or unset/`auto` (Hyperscan where it imports, for inputs past a chunk: its import is ~10 ms).
"""

from __future__ import annotations

import functools
import os
import re
from collections.abc import Sequence

TYPE_CHECKING = False  # typing costs ~3 ms to import, and no module a replay loads needs it at run time
if TYPE_CHECKING:
    from typing import Any

ENV = "SVCDIAG_PREFILTER"
ENGINES = ("hyperscan", "python")


class PrefilterError(ValueError):
    """SVCDIAG_PREFILTER names an engine that is unknown or not installed."""


def asked() -> str:
    """What SVCDIAG_PREFILTER asks for: hyperscan, python or auto (an unknown name is refused in one line)."""
    value = os.environ.get(ENV, "").strip().lower() or "auto"
    if value not in (*ENGINES, "auto"):
        raise PrefilterError(f"{ENV}={value!r}: expected hyperscan, python or auto")
    if value == "hyperscan" and _hyperscan() is None:
        raise PrefilterError(f"{ENV}=hyperscan: the hyperscan wheel is not installed, or its library does not run on "
                             "this CPU (pip install hyperscan)")
    return value


def available() -> bool:
    """Whether the hyperscan wheel imports here."""
    return _hyperscan() is not None


_HS: list[Any] = []


def _hyperscan() -> Any:
    """The hyperscan module, or None where it is not installed, its library does not load, or it does not run on this
    CPU (a dependency wherever its wheel installs: one database compiled, ~0.5 ms, says whether the CPU has what its
    library needs, ArchitectureError else)."""
    if not _HS:
        try:
            import hyperscan
        except ImportError:
            _HS.append(None)
            return None
        try:
            db = hyperscan.Database(mode=hyperscan.HS_MODE_BLOCK)
            db.compile(expressions=[b"\\r"], ids=[0], elements=1, flags=[0])
            hyperscan.Scratch(db)
        except hyperscan.error:  # ArchitectureError: a CPU without the instructions its library needs
            _HS.append(None)
        else:
            _HS.append(hyperscan)
    return _HS[0]


class Needles:
    """Patterns (literal strings, or `other_value`'s) each found everywhere in a chunk in one Hyperscan pass."""

    def __init__(self, patterns: Sequence[bytes], extra: bytes | None = None) -> None:
        hs = _hyperscan()
        assert hs is not None, "Needles needs the hyperscan wheel (prefilter.available())"
        self.db = hs.Database(mode=hs.HS_MODE_BLOCK)
        pats = list(patterns) + ([extra] if extra is not None else [])
        self.extra_id = len(patterns) if extra is not None else -1  # lines_by_kind tells its matches apart
        self.db.compile(expressions=pats, ids=list(range(len(pats))), elements=len(pats), flags=[0] * len(pats))
        self.scratch = hs.Scratch(self.db)

    def lines(self, data: bytes, start: int, end: int) -> list[int]:
        """The first byte of each line of data[start:end] (data[start] a newline) where a pattern matches, in order.
        A match of a line's own newline (other_value's) is that line's."""
        found: list[int] = []
        add = found.append

        def hit(_id: int, _from: int, to: int, _flags: int, _ctx: object) -> None:
            add(to)

        self.db.scan(memoryview(data)[start:end], match_event_handler=hit, scratch=self.scratch)
        return _line_starts(data, start, found)

    def lines_by_kind(self, data: bytes, start: int, end: int) -> tuple[list[int], list[int]]:
        """`lines`, for the patterns and for the extra one apart, in one pass."""
        found: tuple[list[int], list[int]] = ([], [])
        words, extra = found[0].append, found[1].append
        x = self.extra_id

        def hit(i: int, _from: int, to: int, _flags: int, _ctx: object) -> None:
            (extra if i == x else words)(to)

        self.db.scan(memoryview(data)[start:end], match_event_handler=hit, scratch=self.scratch)
        return _line_starts(data, start, found[0]), _line_starts(data, start, found[1])


def _line_starts(data: bytes, start: int, ends: list[int]) -> list[int]:
    """The first byte of the line of each match ending at `ends` (offsets from `start`), once a line, in order."""
    if len(ends) > 1:
        ends.sort()  # matches come in the order they end, almost always
    out: list[int] = []
    for to in ends:
        line = data.rfind(b"\n", 0, start + to - 1) + 1
        if not out or out[-1] != line:
            out.append(line)
    return out


_BY_PATTERNS: dict[tuple[tuple[bytes, ...], bytes | None], Needles] = {}


def needles(words: Sequence[bytes], extra: bytes | None = None) -> Needles:
    """The lines holding any of these strings (none holding a newline but at its start), and those `extra`'s pattern
    (other_value's) matches, compiled once (~0.4 ms; a log of many starts compiles each start's once)."""
    key = (tuple(words), extra)
    n = _BY_PATTERNS.get(key)
    if n is None:
        assert all(words) and not any(b"\n" in w[1:] for w in words), "a needle is one line's"
        if len(_BY_PATTERNS) > 64:
            _BY_PATTERNS.clear()
        n = _BY_PATTERNS[key] = Needles([re.escape(w) for w in words], extra)
    return n


@functools.lru_cache(maxsize=64)
def other_value(key: bytes, value: bytes) -> bytes:
    """A pattern of the lines `key` begins (it starts with a newline) whose value is not `value` up to its newline:
    export's `\\n_SYSTEMD_INVOCATION_ID=(?!VALUE\\n)`, spelled positively (Hyperscan has no lookahead)."""
    rest = value + b"\n"
    pat = b""
    for i in range(len(rest) - 1, -1, -1):
        c = re.escape(rest[i:i + 1])
        pat = b"(?:[^" + c + b"]" + (b"|" + c + pat if pat else b"") + b")"
    return re.escape(key) + pat
