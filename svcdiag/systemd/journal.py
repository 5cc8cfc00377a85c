"""journald (cysystemd): the one place that knows the journal, read and written.

`Follower` reads exactly one start of a unit: entries whose `_SYSTEMD_INVOCATION_ID` is
the start's (the server's own lines) or whose `INVOCATION_ID` is (PID 1's lines about it), and
journald's record of the start's lines its rate limit dropped (`dropped` records).
No earlier run's line can match, whatever the journal holds.

Latency. journald tells readers about new entries through inotify, but it coalesces
those notifications (a 250 ms timer), so a follower woken only by the journal's fd sees a
line ~150 ms late. While a start is in progress, `JournalHeads` therefore also watches
the active journal files' headers, mmapped read-only: `n_entries` changes the moment
journald appends, and reading it is a memory load: a tick costs only its wakeup (~0.1 ms
of CPU on a VM; the schedule, which follows the silence, is in svcdiag.ops.serve.follow).
"""

from __future__ import annotations

import glob
import json
import mmap
import os
import re
import select
import struct
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

from svcdiag.errors import SvcdiagError

TYPE_CHECKING = False
if TYPE_CHECKING:  # imported where used: `status` reading a published verdict needs neither
    from svcdiag.output.schema import ReadinessEvent
    from svcdiag.systemd.journal_formats import Record

JOURNAL_GLOBS = ("/run/log/journal/*/system.journal", "/var/log/journal/*/system.journal")
N_ENTRIES_OFFSET = 152  # Header.n_entries (systemd's JOURNAL_FILE_FORMAT.md)
SIGNATURE = b"LPKSHHRH"
OPEN_RETRY_S = 2.0
_U64 = struct.Struct("<Q").unpack_from


class JournalHeads:
    """The active journal files' entry counters, re-found after rotation or a journald restart."""

    #: `changed()` sees new entries (a follower may tick on it while a line is expected)
    watchable = True

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


#: where journald keeps the system journal: volatile (Storage=volatile, before the flush), persistent
JOURNAL_DIRS = (Path("/run/log/journal"), Path("/var/log/journal"))


def no_access(dirs: tuple[Path, ...] = JOURNAL_DIRS) -> str | None:
    """Why this user cannot read the system journal, or None. Not root, not in systemd-journal (or adm,
    wheel): the journal opens, but holds nothing of any service, and a start would look as if it had
    not begun. Said in one line, with the way to get access."""
    if os.geteuid() == 0:
        return None
    machines = []
    for d in dirs:
        try:
            machines += [p for p in d.iterdir() if p.is_dir()]
        except OSError:
            continue
    if not machines or any(os.access(f, os.R_OK) for m in machines if os.access(m, os.R_OK | os.X_OK)
                           for f in m.glob("system*.journal")):
        return None
    return (f"cannot read the system journal ({machines[0]}: permission denied), where the servers' lines are: "
            "join the systemd-journal group (`sudo usermod -aG systemd-journal $USER`, then log in again) or run "
            "as root")


def no_journal() -> str | None:
    """Why there is no journal here to read, or None: no journal file under JOURNAL_DIRS (no journald,
    or a container without one). Read, it would hold nothing, and a command would print nothing."""
    for d in JOURNAL_DIRS:
        try:  # a machine's folder there is a journal, even one this user may not read (no_access says that)
            if any(p.is_dir() or p.name.endswith(".journal") for p in d.iterdir()):
                return None
        except OSError:
            continue
    return (f"no journal on this host: no journal file in {' or '.join(map(str, JOURNAL_DIRS))} "
            "(is systemd-journald running here? With --host, another host's)")


def open_journal(reader_cls: Any, mode: Any) -> Any:
    """Open the journal, retrying for a moment: journald restarting or rotating files is transient.
    A user who may not read it gets one line saying so (no_access), never an empty journal."""
    from svcdiag.systemd.retry import briefly

    if why := no_access():
        raise SvcdiagError(why)

    def attempt() -> Any:
        reader = reader_cls()
        reader.open(mode)
        return reader

    try:
        return briefly(attempt, OPEN_RETRY_S)
    except Exception as e:  # cysystemd raises SystemError with the errno text
        raise SvcdiagError(f"cannot open the system journal: {e}") from None


def start_rule(rule: Any, unit: str, invocation: str) -> Any:
    """The matches of one start's entries: its own lines, PID 1's about it, and journald's record of the
    unit's lines it dropped (JOURNAL_DROPPED; Follower.read keeps this start's). `rule`: cysystemd's Rule."""
    return rule("_SYSTEMD_INVOCATION_ID", invocation) | rule("INVOCATION_ID", invocation) | rule("OBJECT_SYSTEMD_UNIT", unit)


class Follower:
    """One invocation's entries, in order, read as they arrive."""

    def __init__(self, unit: str, invocation: str):
        from cysystemd.reader import JournalOpenMode, JournalReader, Rule

        self.unit, self.invocation = unit, invocation
        self.reader = open_journal(JournalReader, JournalOpenMode.SYSTEM)
        self.reader.add_filter(start_rule(Rule, unit, invocation))
        self.reader.seek_head()
        self.heads = JournalHeads()

    def fileno(self) -> int:
        return self.reader.fd

    def on_fd_event(self) -> None:
        """The journal's fd became readable: files may have rotated, or journald restarted."""
        self.reader.process_events()
        self.heads.rescan()

    def read(self) -> Iterator[Record]:
        from svcdiag.systemd.journal_formats import record_from_fields

        while True:
            entry = self.reader.next()
            if not entry:
                return
            rec = record_from_fields(entry.data, entry.get_realtime_usec() / 1e6)
            if rec is None:
                continue
            if rec.dropped:
                if rec.invocation in (None, self.invocation):  # not an earlier start's
                    yield rec
            elif self.invocation in (entry.data.get("_SYSTEMD_INVOCATION_ID"), entry.data.get("INVOCATION_ID")):
                yield rec  # (not another record about the unit that only OBJECT_SYSTEMD_UNIT matched)

    def close(self) -> None:
        self.heads.close()




# ---------------------------------------------------------------- a supervisor's published verdict

#: the field of the one entry a notify unit's supervisor writes once it has judged its start healthy
#: (publish_verdict): `status` and `top` read that verdict instead of judging the start's lines again
PUBLISHED = "SVCDIAG_PUBLISHED"
#: journal_formats.JOURNAL_DROPPED's copy (tests/test_journal_dropped.py): reading a published verdict needs
#: none of that module (its regexes and dataclasses, ~5 ms of `status`)
JOURNAL_DROPPED = "a596d6fe7bfa4994828e72309e95d61e"


def dropped_for(data: Mapping[str, Any], invocation: str) -> bool:
    """Whether a JOURNAL_DROPPED record may be about `invocation`'s lines: it names that start, or none
    (some systemd releases write the id as "==ID")."""
    return (data.get("OBJECT_SYSTEMD_INVOCATION_ID") or "").lstrip("=") in ("", invocation)


def publish_verdict(record: dict[str, Any]) -> bool:
    """Write a start's healthy verdict record (verdict_record(...).to_json()) where `status` finds it:
    an entry of the unit's own (the supervisor runs in its cgroup, so journald stamps it with the
    start's `_SYSTEMD_INVOCATION_ID`, a field no client can set), not an event `svcdiag events` shows
    (no SVCDIAG_EVENT: `up` writes the start's verdict event). False where the journal is not there."""
    from cysystemd.journal import send

    fields = {"MESSAGE": "svcdiag supervise: start judged healthy (its verdict, for svcdiag status)",
              "SYSLOG_IDENTIFIER": "svcdiag", "PRIORITY": "6", PUBLISHED: "verdict",
              "SVCDIAG_JSON": json.dumps(record, ensure_ascii=False, default=str, separators=(",", ":"))}
    return send(**fields) >= 0


def published_verdicts(starts: Mapping[str, str]) -> dict[str, dict[str, Any]]:
    """The verdict record each start's own supervisor published (publish_verdict), by invocation, for
    `starts` (invocation → unit). A start is left out where its supervisor published none, and where
    journald says it dropped lines of the unit that may be this start's (its "Suppressed N messages"
    record): the supervisor read them all, but the verdict a reader of the journal shows counts them
    (`journal_dropped_lines`), so such a start is judged from its lines. One reader, two indexed
    seeks in all (every start's matches at once; the journal's size does not matter)."""
    from cysystemd.reader import JournalOpenMode, JournalReader, Rule

    out: dict[str, dict[str, Any]] = {}
    if not starts:
        return out
    reader = open_journal(JournalReader, JournalOpenMode.SYSTEM)

    def entries(field: str, values: Iterable[str], also: Any) -> Iterator[Any]:
        """Entries whose `field` is any of `values`, and that match `also` (journald ORs matches of one field)."""
        rule = None
        for value in values:
            rule = Rule(field, value) if rule is None else rule | Rule(field, value)
        reader.clear_filter()
        reader.add_filter(rule & also)
        reader.seek_head()  # (cysystemd's previous() after seek_tail finds nothing)
        while entry := reader.next():
            yield entry

    for entry in entries("_SYSTEMD_INVOCATION_ID", starts, Rule(PUBLISHED, "verdict")):
        invocation = entry.data.get("_SYSTEMD_INVOCATION_ID")
        if invocation not in starts or entry.data.get(PUBLISHED) != "verdict":
            continue
        try:
            record = json.loads(entry.data.get("SVCDIAG_JSON") or "")
        except ValueError:
            continue
        if isinstance(record, dict) and record.get("invocation") == invocation:
            out[invocation] = record  # the newest, where there are several
    if not out:
        return out
    by_unit = {starts[inv]: inv for inv in out}
    for e in entries("OBJECT_SYSTEMD_UNIT", by_unit, Rule("MESSAGE_ID", JOURNAL_DROPPED)):
        invocation = by_unit.get(e.data.get("OBJECT_SYSTEMD_UNIT"))
        if invocation in out and e.data.get("MESSAGE_ID") == JOURNAL_DROPPED and dropped_for(e.data, invocation):
            del out[invocation]
    return out


# ---------------------------------------------------------------- a supervisor's published milestones

#: the current start of a unit, as PID 1 exports it for journald (a symlink whose target is the
#: invocation id): read without D-Bus, so `logs --milestones` of a published start needs no pystemd
UNIT_INVOCATIONS = Path("/run/systemd/units")


def current_invocation(unit: str) -> str | None:
    """The unit's current invocation id from PID 1's /run/systemd/units/invocation:UNIT, or None (not
    loaded, or not a system manager's unit here): the same id D-Bus's InvocationID says."""
    try:
        target = os.readlink(UNIT_INVOCATIONS / f"invocation:{unit}")
    except (OSError, ValueError):
        return None
    inv = os.path.basename(target)
    return inv if re.fullmatch(r"[0-9a-f]{32}", inv) else None


def judged_with(cfg: Any) -> dict[str, Any]:
    """What of a config the judge of a start's lines reads (its deadlines, hybrid, readiness), as JSON keeps
    it: published milestones stand only for the config they were judged with (an edited deadline may judge
    the same lines otherwise)."""
    return json.loads(json.dumps({"timeout": cfg.timeout, "hybrid": cfg.hybrid, "readiness": cfg.readiness}))


def publish_milestones(invocation: str, cfg: Any, records: list[dict[str, Any]], judged: int) -> bool:
    """Write the records `logs --milestones` prints for a start (its journal judged as `logs` judges it,
    svcdiag.ops.serve.milestones), and how many of the start's entries that judged (`judged`, every one
    before this entry), as an entry of the unit's own (SVCDIAG_PUBLISHED=milestones; journald stamps
    `_SYSTEMD_INVOCATION_ID`). False where the journal is not there."""
    from cysystemd.journal import send

    body = {"invocation": invocation, "unit": cfg.unit, "config": cfg.name, "judged_with": judged_with(cfg),
            "judged": judged, "records": records}
    fields = {"MESSAGE": "svcdiag supervise: start's milestones as the journal holds them (for svcdiag logs)",
              "SYSLOG_IDENTIFIER": "svcdiag", "PRIORITY": "6", PUBLISHED: "milestones",
              "SVCDIAG_JSON": json.dumps(body, ensure_ascii=False, default=str, separators=(",", ":"))}
    return send(**fields) >= 0


def published_milestones(cfg: Any) -> list[dict[str, Any]] | None:
    """The records its supervisor published for the current start of `cfg`'s unit (publish_milestones),
    when they are what judging the start's journal now would print: the entry is the start's own and its
    last, every entry before it was judged (their count: those Follower.read yields), with this config's
    deadlines, and journald dropped none of its lines. None otherwise (no current start here, nothing published, a line since,
    the journal unreadable): the caller judges the lines. One reader over the start's ~40 entries; no
    D-Bus, no judge, nor journal_formats (its regexes and dataclasses)."""
    unit = cfg.unit
    invocation = current_invocation(unit)
    if invocation is None:
        return None
    from cysystemd.reader import JournalOpenMode, JournalReader, Rule

    try:
        reader = open_journal(JournalReader, JournalOpenMode.SYSTEM)
    except SvcdiagError:
        return None
    reader.add_filter(start_rule(Rule, unit, invocation))
    reader.seek_head()
    judged, last = -1, None
    while entry := reader.next():
        data = entry.data
        if data.get("MESSAGE_ID") == JOURNAL_DROPPED:
            if dropped_for(data, invocation):
                return None
            continue
        # what Follower.read yields: an entry with a MESSAGE (record_from_fields), this start's by its fields
        if data.get("MESSAGE") not in (None, []) and invocation in (data.get("_SYSTEMD_INVOCATION_ID"),
                                                                     data.get("INVOCATION_ID")):
            judged, last = judged + 1, data
    if last is None or last.get(PUBLISHED) != "milestones" or last.get("_SYSTEMD_INVOCATION_ID") != invocation:
        return None
    try:
        body = json.loads(last.get("SVCDIAG_JSON") or "")
    except ValueError:
        return None
    if (not isinstance(body, dict) or body.get("invocation") != invocation or body.get("unit") != unit
            or body.get("config") != cfg.name or body.get("judged") != judged
            or body.get("judged_with") != judged_with(cfg) or not isinstance(body.get("records"), list)):
        return None
    return body["records"]


# ---------------------------------------------------------------- svcdiag's own records


class JournalSink:
    """Writes each record to the journal (sd_journal_sendv via cysystemd), so `svcdiag events`
    and plain `journalctl SVCDIAG_EVENT=verdict` see it. A record another observer of the
    same start already wrote (`wait` after `up`) is not written twice."""

    def __init__(self, warn: Callable[[str], None], *, also: frozenset[str] = frozenset()):
        from cysystemd.journal import send

        self._send, self._warn = send, warn
        from svcdiag.output.schema import JOURNALED

        self._events = JOURNALED | also  # `also`: what schema.ON_REQUEST holds, when the command asked for it
        self._seen: set[tuple] = set()
        self._loaded: set[tuple[str | None, str | None]] = set()
        self._failed = False

    def _load(self, unit: str | None, invocation: str | None) -> None:
        if (unit, invocation) in self._loaded or invocation is None:
            return
        self._loaded.add((unit, invocation))
        try:
            reader = EventReader(invocation=invocation)
        except SvcdiagError:
            return
        self._seen.update(rec.key() for rec in reader.read())

    def publish(self, rec: ReadinessEvent) -> None:
        if rec.event not in self._events or self._failed:
            return
        self._load(rec.unit, rec.invocation)
        key = rec.key()
        if key in self._seen:
            return
        self._seen.add(key)
        rc = self._send(**rec.journal_fields())
        if rc < 0:  # journald is not there (a container without it): the other destinations still work
            self._failed = True
            self._warn(f"cannot write events to the journal: {os.strerror(-rc)}; `svcdiag events` will not see them")


def parse_since(text: str, now: float | None = None) -> float:
    """journalctl's --since forms that operators type: 'YYYY-MM-DD[ HH:MM[:SS]]', 'HH:MM[:SS]' (today),
    'today', 'yesterday', '-10min' / '10 min ago' (s, min, h, d), '@UNIX'."""
    now = time.time() if now is None else now
    t = text.strip().lower()
    m = re.fullmatch(r"-?\s*(\d+(?:\.\d+)?)\s*(s|sec|second|seconds|m|min|minute|minutes|h|hour|hours|d|day|days)"
                     r"(\s+ago)?", t)
    if m and (t.startswith("-") or m.group(3)):
        unit = m.group(2)[0] if not m.group(2).startswith("mi") else "m"
        return now - float(m.group(1)) * {"s": 1, "m": 60, "h": 3600, "d": 86400}[unit]
    if t.startswith("@"):
        try:
            return float(t[1:])
        except ValueError:
            pass
    midnight = time.mktime((*time.localtime(now)[:3], 0, 0, 0, 0, 0, -1))
    if t in ("today", "yesterday", "now"):
        return {"today": midnight, "yesterday": midnight - 86400, "now": now}[t]
    for fmt in ("%Y-%m-%d %H:%M:%S", "%Y-%m-%d %H:%M", "%Y-%m-%d", "%Y-%m-%dT%H:%M:%S", "%H:%M:%S", "%H:%M"):
        try:
            parsed = time.strptime(text.strip(), fmt)
        except ValueError:
            continue
        if fmt.startswith("%H"):
            return midnight + parsed.tm_hour * 3600 + parsed.tm_min * 60 + parsed.tm_sec
        return time.mktime(parsed)
    raise SvcdiagError(f"--since {text!r}: not a time (try '2026-12-02 19:30', '19:30', 'today', '-10min' or '@UNIX')")


class EventReader:
    """svcdiag's records in the journal, oldest first, each once; then, following, new ones."""

    def __init__(self, *, units: Iterable[str] = (), since: float | None = None, invocation: str | None = None,
                 event: str | None = None, verdict: str | None = None):
        """`event`, `verdict`: only records of that kind (SVCDIAG_EVENT), with that verdict (SVCDIAG_VERDICT):
        matched by the journal's index, so the others are never read."""
        from cysystemd.reader import JournalOpenMode, JournalReader, Rule

        # a config name or its unit: "dflash-smoke" and "dflash-smoke.service" both match
        self.units = set(units) | {u + ".service" for u in units if not u.endswith(".service")}
        self.reader = open_journal(JournalReader, JournalOpenMode.SYSTEM)
        from svcdiag.output.schema import SCHEMA_VERSION

        rule = Rule("SVCDIAG_SCHEMA", str(SCHEMA_VERSION))
        if invocation:
            rule = rule & Rule("SVCDIAG_INVOCATION", invocation)
        if event:
            rule = rule & Rule("SVCDIAG_EVENT", event)
        if verdict:
            rule = rule & Rule("SVCDIAG_VERDICT", verdict)
        self.reader.add_filter(rule)
        if since is not None:
            self.reader.seek_realtime_usec(int(since * 1e6))
        else:
            self.reader.seek_head()
        self._seen: set[tuple] = set()

    def fileno(self) -> int:
        return self.reader.fd

    def read(self) -> Iterator[ReadinessEvent]:
        from svcdiag.output.schema import ReadinessEvent

        while True:
            entry = self.reader.next()
            if not entry:
                return
            rec = ReadinessEvent.from_journal_fields(entry.data)
            if rec is None or (self.units and rec.unit not in self.units and rec.config not in self.units):
                continue
            key = rec.key()
            if key in self._seen:
                continue
            self._seen.add(key)
            yield rec

    def wait(self, timeout: float) -> None:
        """Until the journal may have more (or `timeout`)."""
        select.select([self.reader.fd], [], [], timeout)
        self.reader.process_events()

    def copy_to(self, publish: Callable[[ReadinessEvent], None], *, follow: bool) -> None:
        """Every record so far to `publish`; following, new ones as they come, until interrupted."""
        while True:
            for rec in self.read():
                publish(rec)
            if not follow:
                return
            self.wait(1.0)
