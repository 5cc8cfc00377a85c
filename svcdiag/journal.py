"""Reading journald (cysystemd): the one place that knows the journal.

`Follower` reads exactly one start of a unit: entries whose `_SYSTEMD_INVOCATION_ID` is
the start's (the server's own lines) or whose `INVOCATION_ID` is (PID 1's lines about it).
No earlier run's line can match, whatever the journal holds.

Latency. journald tells readers about new entries through inotify, but it coalesces
those notifications (a 250 ms timer), so a follower woken only by the journal's fd sees a
line ~150 ms late. While a start is in progress, `JournalHeads` therefore also watches
the active journal files' headers, mmapped read-only: `n_entries` changes the moment
journald appends, and reading it is a memory load, so a 5 ms tick costs next to nothing.
"""

from __future__ import annotations

import glob
import mmap
import os
import struct
from typing import Iterator

from .errors import SvcdiagError
from .sources import Record, record_from_fields

JOURNAL_GLOBS = ("/run/log/journal/*/system.journal", "/var/log/journal/*/system.journal")
N_ENTRIES_OFFSET = 152  # Header.n_entries (systemd's JOURNAL_FILE_FORMAT.md)
SIGNATURE = b"LPKSHHRH"
_U64 = struct.Struct("<Q").unpack_from


class JournalHeads:
    """The active journal files' entry counters, re-found after rotation or a journald restart."""

    def __init__(self) -> None:
        self._maps: dict[str, tuple[int, mmap.mmap]] = {}
        self._last = -1
        self.rescan()

    def rescan(self) -> None:
        current = {p for pattern in JOURNAL_GLOBS for p in glob.glob(pattern)}
        for path in list(self._maps):
            ino, mm = self._maps[path]
            try:
                same = os.stat(path).st_ino == ino
            except OSError:
                same = False
            if path not in current or not same:
                mm.close()
                del self._maps[path]
        self._mms: list[mmap.mmap] = []
        for path in current - set(self._maps):
            try:
                with open(path, "rb") as f:
                    mm = mmap.mmap(f.fileno(), 4096, prot=mmap.PROT_READ)
                    ino = os.fstat(f.fileno()).st_ino
            except (OSError, ValueError):
                continue
            if mm[:8] != SIGNATURE:
                mm.close()
                continue
            self._maps[path] = (ino, mm)
        self._mms = [mm for _, mm in self._maps.values()]

    def changed(self) -> bool:
        """Called every tick of a wait: a few loads from memory, no system call."""
        total = 0
        for mm in self._mms:
            total += _U64(mm, N_ENTRIES_OFFSET)[0]
        if total != self._last:
            self._last = total
            return True
        return False

    def close(self) -> None:
        for _, mm in self._maps.values():
            mm.close()
        self._maps.clear()
        self._mms = []


class Follower:
    """One invocation's entries, in order, read as they arrive."""

    def __init__(self, unit: str, invocation: str):
        from cysystemd.reader import JournalOpenMode, JournalReader, Rule

        self.unit, self.invocation = unit, invocation
        self.reader = JournalReader()
        try:
            self.reader.open(JournalOpenMode.SYSTEM)
        except Exception as e:  # cysystemd raises SystemError with the errno text
            raise SvcdiagError(f"cannot open the system journal: {e}") from None
        self.reader.add_filter(Rule("_SYSTEMD_INVOCATION_ID", invocation) | Rule("INVOCATION_ID", invocation))
        self.reader.seek_head()
        self.heads = JournalHeads()

    def fileno(self) -> int:
        return self.reader.fd

    def on_fd_event(self) -> None:
        """The journal's fd became readable: files may have rotated, or journald restarted."""
        self.reader.process_events()
        self.heads.rescan()

    def read(self) -> Iterator[Record]:
        while True:
            entry = self.reader.next()
            if not entry:
                return
            rec = record_from_fields(entry.data, entry.get_realtime_usec() / 1e6)
            if rec is not None:
                yield rec

    def close(self) -> None:
        self.heads.close()


