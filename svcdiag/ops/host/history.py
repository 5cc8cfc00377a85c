"""Start-up history: every judged start, one row each, in an embedded SQLite database.

`STATE_DIR/history.sqlite3`, in WAL mode: readers never block the writer, one writer at a
time (`BEGIN IMMEDIATE`, a 30 s busy timeout), one transaction per row, so a kill at any
moment leaves the database as it was before the row or with the whole row
(`PRAGMA integrity_check` passes). Also: what the last healthy starts of a config took per
phase (slow_phase, learned deadlines, ETAs, `--advise`) and the campaign's own table.

Shared by design: in `svcdiag setup`'s store (group `svcdiag`, setgid, 2770) the database is
the group's to write, so root's starts and its operators' are one history; a store a user may
read but not write is read (history shown, the start not recorded); one they cannot use at all
is one warning line (docs/polkit.md).
"""

from __future__ import annotations

import dataclasses
import errno
import json
import math
import os
import socket
import sqlite3
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from svcdiag.config.service import DEFAULT_TIMEOUTS, PHASE_TIMEOUTS, ServiceConfig
from svcdiag.errors import SvcdiagError
from svcdiag.files import PRIVATE_FILE, SHARED_FILE, SHARED_GROUP, UnsafePath, check_existing, private_dir, shared, state_dir
from svcdiag.judge.verdict import Verdict
from svcdiag.sglang.figures import Figures

DB_NAME = "history.sqlite3"
#: the files SQLite makes beside the database, by name
COMPANIONS = ("-wal", "-shm", "-journal")
#: healthy starts needed before history speaks (slow_phase, ETA, learned deadlines, --advise)
MIN_HEALTHY = 3
#: how many of the latest healthy starts count
WINDOW = 20
#: a phase is slow past SLOW_FACTOR × its p90 (and at least SLOW_MIN_S seconds in)
SLOW_FACTOR = 1.5
SLOW_MIN_S = 5.0
#: a learned deadline: LEARNED_FACTOR × p99, never below LEARNED_FLOOR_S
LEARNED_FACTOR = 2.0
LEARNED_FLOOR_S = 30.0
BUSY_TIMEOUT_MS = 30_000

_SCHEMA = """
CREATE TABLE IF NOT EXISTS starts (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    ts REAL NOT NULL,
    host TEXT,
    unit TEXT,
    config TEXT NOT NULL,
    config_hash TEXT,
    invocation TEXT,
    command TEXT,
    mode TEXT,
    sglang_version TEXT,
    verdict TEXT NOT NULL,
    cause TEXT,
    phase TEXT,
    startup_s REAL,
    phase_seconds TEXT NOT NULL DEFAULT '{}',
    sglang_phase_seconds TEXT NOT NULL DEFAULT '{}',
    figures TEXT NOT NULL DEFAULT '{}',
    degraded TEXT NOT NULL DEFAULT '[]',
    diagnosis TEXT,
    campaign TEXT
);
CREATE INDEX IF NOT EXISTS starts_config_ts ON starts (config, ts);
CREATE TABLE IF NOT EXISTS campaign_runs (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    campaign TEXT NOT NULL,
    phase TEXT NOT NULL,
    config TEXT NOT NULL,
    config_hash TEXT NOT NULL,
    status TEXT NOT NULL,
    started REAL,
    ended REAL,
    start_id INTEGER,
    result TEXT NOT NULL DEFAULT '{}'
);
CREATE TABLE IF NOT EXISTS incidents (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    config TEXT NOT NULL,
    invocation TEXT,
    ts REAL NOT NULL,
    since REAL,
    kind TEXT NOT NULL,
    cause TEXT,
    message TEXT,
    evidence TEXT NOT NULL DEFAULT '[]',
    action TEXT
);
CREATE INDEX IF NOT EXISTS incidents_config ON incidents (config, invocation);
CREATE INDEX IF NOT EXISTS campaign_runs_key ON campaign_runs (campaign, config, config_hash);
"""
_JSON_COLUMNS = ("phase_seconds", "sglang_phase_seconds", "figures", "degraded", "diagnosis")


def db_path(state: str | None = None) -> Path:
    return state_dir(state) / DB_NAME


class History:
    """The database; open it for one command, close it after (`with History(path) as h:`)."""

    def __init__(self, path: Path, *, read_only: bool = False):
        self.path, self.read_only = path, read_only
        if read_only:
            self.db = _open_read_only(path)
            self.db.row_factory = sqlite3.Row
            return
        private_dir(path.parent)
        # SQLite opens -wal and -shm itself, by name (with O_NOFOLLOW: a symlink fails, unexplained);
        # a planted symlink or hard link at any of the four names is refused here, naming it
        check_existing(path, names=COMPANIONS)
        _create(path)
        self.db = sqlite3.connect(str(path), timeout=BUSY_TIMEOUT_MS / 1000, isolation_level=None)
        self.db.row_factory = sqlite3.Row
        self.db.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
        self.db.execute("PRAGMA journal_mode = WAL")
        self.db.execute("PRAGMA synchronous = FULL")
        self.db.executescript(_SCHEMA)

    def __enter__(self) -> History:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self.db.close()

    @contextmanager
    def write(self) -> Iterator[sqlite3.Connection]:
        """One writer at a time, one transaction: all of it or none of it."""
        self.db.execute("BEGIN IMMEDIATE")
        try:
            yield self.db
        except BaseException:
            self.db.execute("ROLLBACK")
            raise
        self.db.execute("COMMIT")

    # ------------------------------------------------------------ starts

    def record(self, row: dict[str, Any]) -> int:
        """Insert one start; a start already recorded with this verdict (two observers of one
        invocation: `up` and a `wait` in another terminal) is kept once, its id returned."""
        cols = [k for k in row if k != "id"]
        values = [json.dumps(row[k], default=str) if k in _JSON_COLUMNS and row[k] is not None else row[k] for k in cols]
        with self.write() as db:
            if row.get("invocation"):
                same = db.execute("SELECT id FROM starts WHERE config = ? AND invocation = ? AND verdict = ?",
                                  (row["config"], row["invocation"], row["verdict"])).fetchone()
                if same is not None:
                    return int(same[0])
            cur = db.execute(f"INSERT INTO starts ({', '.join(cols)}) VALUES ({', '.join('?' * len(cols))})", values)
        return int(cur.lastrowid or 0)

    def rows(self, config: str | None = None, *, since: float | None = None, limit: int | None = None) -> list[dict[str, Any]]:
        """Starts, oldest first."""
        where, args = [], []
        if config:
            where.append("config = ?")
            args.append(config)
        if since is not None:
            where.append("ts >= ?")
            args.append(since)
        sql = "SELECT * FROM starts" + (f" WHERE {' AND '.join(where)}" if where else "") + " ORDER BY ts DESC, id DESC"
        if limit:
            sql += f" LIMIT {int(limit)}"
        return self._with_incidents([_row(r) for r in reversed(self.db.execute(sql, args).fetchall())])

    def incident(self, config: str, invocation: str | None, incident: dict[str, Any], action: str | None) -> None:
        """A post-ready incident of a start (svcdiag.judge.watch: wedged, died_after_ready) and what was done."""
        with self.write() as db:
            db.execute("INSERT INTO incidents (config, invocation, ts, since, kind, cause, message, evidence, action) "
                       "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                       (config, invocation, incident["ts"], incident.get("since"), incident["kind"],
                        incident.get("cause"), incident.get("message"), json.dumps(incident.get("evidence", [])),
                        action))

    def _with_incidents(self, rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """Each start with its post-ready incidents; a start that follows one whose incident systemd acted on
        (a restart) says so: `restarted_after`, the incident's kind."""
        before: dict[str, dict[str, Any]] = {}
        try:
            self.db.execute("SELECT 1 FROM incidents LIMIT 1")
        except sqlite3.OperationalError:  # a store written before incidents, read-only to this user
            return rows
        for r in rows:
            found = self.db.execute("SELECT ts, since, kind, cause, message, evidence, action FROM incidents WHERE "
                                    "config = ? AND invocation = ? ORDER BY ts, id",
                                    (r["config"], r.get("invocation"))).fetchall() if r.get("invocation") else []
            r["incidents"] = [{**dict(i), "evidence": json.loads(i["evidence"] or "[]")} for i in found]
            prev = before.get(r["config"])
            acted = [i for i in (prev or {}).get("incidents", []) if i.get("action")]
            if acted and prev is not None and prev.get("invocation") != r.get("invocation"):
                r["restarted_after"] = acted[-1]["kind"]
            before[r["config"]] = r
        return rows

    def healthy(self, config: str, sglang_version: str | None = None, window: int = WINDOW) -> list[dict[str, Any]]:
        """The latest healthy starts of a config (of one SGLang release when given), oldest first."""
        sql = "SELECT * FROM starts WHERE config = ? AND verdict = 'healthy'"
        args: list[Any] = [config]
        if sglang_version:
            sql += " AND sglang_version = ?"
            args.append(sglang_version)
        sql += f" ORDER BY ts DESC, id DESC LIMIT {int(window)}"
        return [_row(r) for r in reversed(self.db.execute(sql, args).fetchall())]

    # ------------------------------------------------------------ campaigns

    def campaign_record(self, row: dict[str, Any]) -> None:
        with self.write() as db:
            db.execute("INSERT INTO campaign_runs (campaign, phase, config, config_hash, status, started, ended, start_id, result) "
                       "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                       (row["campaign"], row["phase"], row["config"], row["config_hash"], row["status"], row.get("started"),
                        row.get("ended"), row.get("start_id"), json.dumps(row.get("result", {}), default=str)))

    def campaign_done(self, campaign: str, config: str, config_hash: str) -> dict[str, Any] | None:
        """The last recorded run of this config (same hash) in the campaign, unless it was not run."""
        r = self.db.execute("SELECT * FROM campaign_runs WHERE campaign = ? AND config = ? AND config_hash = ? "
                            "AND status NOT IN ('not_run', 'interrupted') ORDER BY id DESC LIMIT 1",
                            (campaign, config, config_hash)).fetchone()
        if r is None:
            return None
        out = dict(r)
        out["result"] = json.loads(out["result"] or "{}")
        return out


def _create(path: Path) -> None:
    """The database file, made before SQLite makes it: 0600, or 0660 in a shared store (files.shared:
    setgid, so its group is the folder's), whatever the umask. SQLite gives -wal and -shm the same mode
    (and, run as root, the same owner), so every member of the group can write all three."""
    mode = SHARED_FILE if shared(path.parent) else PRIVATE_FILE
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, mode)
    except FileExistsError:
        return
    try:
        os.fchmod(fd, mode)
    finally:
        os.close(fd)


def _open_read_only(path: Path) -> sqlite3.Connection:
    """A store this user may read but not write: read as it is. WAL needs its -shm writable or there;
    where neither is so (the last writer closed it, the folder is not ours), the file alone is read
    (immutable: after a clean close it holds every row)."""
    uri = f"file:{path}?mode=ro"
    try:
        db = sqlite3.connect(uri, uri=True, timeout=BUSY_TIMEOUT_MS / 1000)
        db.execute("SELECT count(*) FROM starts").fetchone()
        return db
    except sqlite3.OperationalError:
        db = sqlite3.connect(f"{uri}&immutable=1", uri=True)
        db.execute("SELECT count(*) FROM starts").fetchone()
        return db


def writable(path: Path) -> bool:
    """Whether this user may write the store at `path` (the database, its -wal and -shm, the folder
    SQLite makes them in); a store that does not exist yet: whether it may be made."""
    folder = path.parent
    if not folder.exists():
        return True  # private_dir makes it (or says why not)
    if not os.access(folder, os.W_OK | os.X_OK):
        return False
    return all(os.access(f, os.R_OK | os.W_OK) for f in (path, Path(f"{path}-wal"), Path(f"{path}-shm")) if f.exists())


def _row(r: sqlite3.Row) -> dict[str, Any]:
    out = dict(r)
    for k in _JSON_COLUMNS:
        if out.get(k) is not None:
            out[k] = json.loads(out[k])
    return out


def integrity(path: Path) -> str:
    db = sqlite3.connect(str(path))
    try:
        return str(db.execute("PRAGMA integrity_check").fetchone()[0])
    finally:
        db.close()


# ---------------------------------------------------------------- a start's row


def start_row(cfg: ServiceConfig, v: Verdict, command: str, *, campaign: str | None = None) -> dict[str, Any]:
    f = v.figures
    return {
        "ts": v.ts or time.time(), "host": socket.gethostname(), "unit": v.unit or cfg.unit, "config": cfg.name,
        "config_hash": cfg.config_hash, "invocation": v.invocation, "command": command,
        "mode": getattr(cfg, "readiness", None) or "live", "sglang_version": f.sglang_version,
        "verdict": v.verdict, "cause": v.cause, "phase": v.phase, "startup_s": f.startup_s,
        "phase_seconds": dict(v.phase_seconds), "sglang_phase_seconds": f.sglang_phase_seconds or {},
        "figures": f.replace(sglang_phase_seconds=None).to_json(),
        "degraded": [d.get("reason") for d in v.degraded], "diagnosis": v.diagnosis, "campaign": campaign,
    }


#: what a start does without its history
WITHOUT = "this start is judged without the recorded starts and is not recorded"


#: how a user who cannot use the shared store gets to use it, or keeps one of their own
OWN = "or keep a store of your own (--state-dir, or SVCDIAG_STATE_DIR=~/.local/state/svcdiag)"
JOIN = (f"join group {SHARED_GROUP} (`sudo usermod -aG {SHARED_GROUP} $USER`, then log in again; `svcdiag setup` "
        f"shares the store with it), {OWN}")


def cause(path: Path, e: BaseException) -> tuple[str, str]:
    """(what went wrong, what to do) for a store that failed: only a permission is the group's to
    fix; a full disk, a corrupt file or a planted name each say their own remedy."""
    text = " ".join(str(e).split())
    low = text.lower()
    if isinstance(e, UnsafePath):  # a planted symlink, a hard link, a folder: nothing was written through it
        return text, OWN  # its message ends "remove it"
    if (isinstance(e, OSError) and e.errno == errno.ENOSPC) or "disk is full" in low or _full(path.parent):
        return "the disk is full", f"free space on the file system holding {path.parent} (df -h {path.parent})"
    if isinstance(e, sqlite3.DatabaseError) and ("not a database" in low or "malformed" in low or "corrupt" in low):
        return (f"the file is corrupt ({text})", f"move it aside (mv {path} {path}.corrupt; `sqlite3 {path}.corrupt "
                ".recover` may save its rows): the next start makes a new one")
    if isinstance(e, PermissionError) or "readonly database" in low or "unable to open database" in low \
            or (isinstance(e, OSError) and e.errno in (errno.EACCES, errno.EPERM, errno.EROFS)):
        why = e.strerror if isinstance(e, OSError) and e.strerror else text
        return why, JOIN
    return (e.strerror if isinstance(e, OSError) and e.strerror else text), f"check {path}"


def _full(folder: Path) -> bool:
    """Whether the file system holding `folder` has no room left (SQLite says only "disk I/O error"
    when a write to its -wal or -shm meets ENOSPC)."""
    try:
        st = os.statvfs(folder)
    except OSError:
        return False
    return st.f_bavail * st.f_frsize < FULL_BELOW_BYTES or (st.f_files > 0 and st.f_favail == 0)


#: less room than this on the store's file system is a full disk (a row with its WAL frame is ~8 KB)
FULL_BELOW_BYTES = 64 * 1024


def unusable(path: Path, e: BaseException, consequence: str = WITHOUT) -> str:
    """A store this user cannot read or write (root's 0700 /var/lib/svcdiag, a full disk, a corrupt
    file), in one line that says the real cause."""
    why, todo = cause(path, e)
    return f"history: cannot use {path} ({why}){': ' + consequence if consequence else ''}; {todo}"


def read_only(path: Path) -> str:
    """A store this user may read but not write, in one line: the same words wherever it is met, so
    that a start warns once (start.once)."""
    return (f"history: {path} is read-only to you: this start is judged with the recorded starts but is not "
            f"recorded; {JOIN}")


def record_incident(config: str, invocation: str | None, incident: dict[str, Any], action: str | None, *,
                    state: str | None = None) -> str | None:
    """Record one post-ready incident: None, or why not (never an exception)."""
    path = db_path(state)
    try:
        if path.exists() and not writable(path):
            return read_only(path)
        with History(path) as h:
            h.incident(config, invocation, incident, action)
        return None
    except (OSError, sqlite3.Error) as e:
        return unusable(path, e, "the incident is not recorded")


def record_start(cfg: ServiceConfig, v: Verdict, command: str, *, state: str | None = None,
                 campaign: str | None = None) -> tuple[int | None, str | None]:
    """Record one judged start: (row id, None), or (None, why not) — never an exception."""
    path = db_path(state)
    try:
        if path.exists() and not writable(path):
            return None, read_only(path)
        with History(path) as h:
            return h.record(start_row(cfg, v, command, campaign=campaign)), None
    except (OSError, sqlite3.Error, UnsafePath) as e:
        return None, unusable(path, e)


# ---------------------------------------------------------------- what the history says


def percentile(values: list[float], q: float) -> float:
    """Linear interpolation between closest ranks (numpy's default)."""
    s = sorted(values)
    if not s:
        raise ValueError("no values")
    k = (len(s) - 1) * q / 100
    lo, hi = math.floor(k), math.ceil(k)
    return s[lo] + (s[hi] - s[lo]) * (k - lo)


@dataclass(frozen=True, slots=True)
class PhaseStats:
    """A phase's past durations, by percentile: what `usual` and the deadlines are checked against."""

    phase: str
    n: int
    p50: float
    p90: float
    p99: float
    max: float

    @property
    def slow_after(self) -> float:
        return max(SLOW_FACTOR * self.p90, SLOW_MIN_S)

    @property
    def learned_deadline(self) -> float:
        return max(math.ceil(LEARNED_FACTOR * self.p99), LEARNED_FLOOR_S)


@dataclass(frozen=True, slots=True)
class Usual:
    """What the latest healthy starts of one config (and SGLang release) took."""

    config: str
    sglang_version: str | None
    healthy: int
    phases: dict[str, PhaseStats]
    startup: PhaseStats | None
    last_healthy: dict[str, Any] | None

    @property
    def enough(self) -> bool:
        return self.healthy >= MIN_HEALTHY


def _stats(name: str, values: list[float]) -> PhaseStats:
    return PhaseStats(name, len(values), percentile(values, 50), percentile(values, 90), percentile(values, 99), max(values))


def usual(rows: list[dict[str, Any]], config: str, sglang_version: str | None) -> Usual:
    per: dict[str, list[float]] = {}
    totals: list[float] = []
    for r in rows:
        for phase, s in (r.get("phase_seconds") or {}).items():
            per.setdefault(phase, []).append(float(s))
        if r.get("startup_s") is not None:
            totals.append(float(r["startup_s"]))
    return Usual(config, sglang_version, len(rows), {p: _stats(p, v) for p, v in per.items()},
                 _stats("startup", totals) if totals else None, rows[-1] if rows else None)


def read_rows(state: str | None, config: str | None = None, *, since: float | None = None) -> list[dict[str, Any]]:
    """Every recorded start (`svcdiag history`); a store that cannot be read is one line (SvcdiagError)."""
    path = db_path(state)
    try:
        if not path.exists():
            return []
        with _reader(path) as (h, _):
            return h.rows(config, since=since)
    except (OSError, sqlite3.Error, UnsafePath) as e:
        raise SvcdiagError(unusable(path, e, "")) from None


@contextmanager
def _reader(path: Path) -> Iterator[tuple[History, bool]]:
    """The store opened to read: as a writer where this user may write (WAL recovery, the schema),
    else, or where that fails for want of space, read-only. (History, opened read-only)."""
    ro = not writable(path)
    if not ro:
        try:
            h = History(path)
        except (OSError, sqlite3.OperationalError) as e:
            if cause(path, e)[0] != "the disk is full":
                raise
            ro = True  # a full disk: what was recorded is still there to read
    if ro:
        h = History(path, read_only=True)
    try:
        yield h, ro
    finally:
        h.close()


def load_usual(cfg: ServiceConfig, sglang_version: str | None, state: str | None = None,
               warn: Callable[[str], None] | None = None, *, strict: bool = False) -> Usual:
    """The config's usual start (empty when there is no database or it cannot be read: `warn` hears
    why; `strict`: a store that cannot be read is SvcdiagError, never "0 recorded starts")."""
    path = db_path(state)
    try:
        if not path.exists():  # PermissionError where the folder is another user's 0700
            return usual([], cfg.name, sglang_version)
        with _reader(path) as (h, ro):
            out = usual(h.healthy(cfg.name, sglang_version), cfg.name, sglang_version)
        if ro and warn is not None and not writable(path):
            warn(read_only(path))
        return out
    except (OSError, sqlite3.Error, UnsafePath) as e:
        if strict:
            raise SvcdiagError(unusable(path, e, "")) from None
        if warn is not None:
            warn(unusable(path, e))
        return usual([], cfg.name, sglang_version)


def configured(cfg: ServiceConfig, phase: str) -> bool:
    """Whether the config sets this phase's deadline (a value other than the generic default)."""
    return cfg.timeout.get(phase) != DEFAULT_TIMEOUTS.get(phase)


def learned_timeouts(cfg: ServiceConfig, u: Usual) -> dict[str, float]:
    """Phases without a configured deadline get LEARNED_FACTOR × their p99 once history is enough."""
    if not u.enough:
        return {}
    return {p: u.phases[p].learned_deadline for p in PHASE_TIMEOUTS if p in u.phases and not configured(cfg, p)}


def with_learned(cfg: ServiceConfig, u: Usual) -> ServiceConfig:
    learned = learned_timeouts(cfg, u)
    if not learned:
        return cfg
    return dataclasses.replace(cfg, timeouts=tuple({**cfg.timeout, **learned}.items()))


def drift(u: Usual, v: Verdict) -> list[dict[str, Any]]:
    """KV tokens or max_running_requests unlike the config's last healthy start."""
    if u.last_healthy is None or v.verdict != "healthy":
        return []
    before = Figures.from_json(u.last_healthy.get("figures"), f"the history of {u.config}")
    out = []
    now = v.figures
    for key, a, b in (("kv_tokens", before.kv_tokens, now.kv_tokens),
                      ("max_running_requests", before.max_running_requests, now.max_running_requests)):
        if a is not None and b is not None and a != b:
            out.append({"what": key, "before": a, "after": b,
                        "message": f"{key} {a:,} → {b:,} (the last healthy start of {u.config}, "
                                   f"invocation {u.last_healthy.get('invocation') or '?'})"})
    return out


def advise(cfg: ServiceConfig, u: Usual, period_s: int = 10) -> dict[str, Any]:
    """Deadlines the measured starts need: per phase, TimeoutStartSec, a Kubernetes startupProbe."""
    phases = []
    for p in PHASE_TIMEOUTS:
        st = u.phases.get(p)
        row: dict[str, Any] = {"phase": p, "configured": cfg.timeout[p] if configured(cfg, p) else None}
        if st is not None:
            row.update(n=st.n, p50=round(st.p50, 2), p90=round(st.p90, 2), p99=round(st.p99, 2), max=round(st.max, 2),
                       advised=st.learned_deadline)
        phases.append(row)
    out: dict[str, Any] = {"config": cfg.name, "sglang_version": u.sglang_version, "healthy_starts": u.healthy,
                           "enough": u.enough, "min_healthy": MIN_HEALTHY, "phases": phases,
                           # what a supervisor would enforce: configured, else learned, else the default
                           "deadlines": with_learned(cfg, u).timeout, "port": cfg.port}
    if u.startup is not None:
        total = max(math.ceil(LEARNED_FACTOR * u.startup.p99), LEARNED_FLOOR_S)
        threshold = math.ceil(total / period_s)
        out["startup"] = {"n": u.startup.n, "p50": round(u.startup.p50, 2), "p99": round(u.startup.p99, 2),
                          "max": round(u.startup.max, 2)}
        out["timeout_start_sec"] = total
        # /health answers only after ≥ 1 s (SGLang checks generation first): a 1 s timeout fails a healthy server
        out["startup_probe"] = {"httpGet": {"path": "/health", "port": cfg.port}, "periodSeconds": period_s,
                                "failureThreshold": threshold, "timeoutSeconds": 2, "budget_s": threshold * period_s}
    return out


class PhaseWatch:
    """The live side of history, for one start: learned deadlines (its `cfg`), and on each
    tick of the follower a `slow_phase` event once a phase runs past SLOW_FACTOR × its p90."""

    def __init__(self, cfg: ServiceConfig, u: Usual, pub: Any):
        self.usual, self.pub = u, pub
        self.phase: str | None = None
        self.since: float | None = None
        self.flagged: set[str] = set()
        learned = learned_timeouts(cfg, u)
        said = ", ".join(f"{p} {s:.0f} s" for p, s in learned.items())
        if cfg.readiness == "notify":
            # its supervisor enforces the configured deadlines: a reader with shorter ones would call
            # timed_out a start that goes on (and may serve); history advises, the config decides
            self.cfg = cfg
            if learned:
                pub.note(f"history advises deadlines (2 × p99 of the last {u.healthy} healthy starts): {said}; "
                         f"this notify unit's supervisor enforces its configured ones (set them under [timeout])")
        else:
            self.cfg = with_learned(cfg, u)
            if learned:
                pub.note(f"learned deadlines (2 × p99 of the last {u.healthy} healthy starts): {said}")

    def tick(self, phase: str, now: float) -> tuple[float | None, float | None]:
        """(when this phase began, its usual seconds): for the live line's ETA."""
        if phase != self.phase:
            self.phase, self.since = phase, now
        st = self.usual.phases.get(phase) if self.usual.enough else None
        if st is None or self.since is None:
            return self.since, None
        took = now - self.since
        if phase not in self.flagged and took > st.slow_after:
            self.flagged.add(phase)
            label = phase.replace("_", " ")
            self.pub.publish(self.pub.record(
                "slow_phase", ts=now, phase=phase,
                message=f"{label} {took:.0f} s, usually {st.p50:.0f} s (p90 {st.p90:.1f} s of {st.n} healthy starts)",
                data={"seconds": round(took, 2), "usual_s": round(st.p50, 2), "p90_s": round(st.p90, 2),
                      "threshold_s": round(st.slow_after, 2), "healthy_starts": st.n}))
        return self.since, st.p50

    def due(self) -> float | None:
        """When the current phase turns slow, if it has not yet said so: a follower that keeps no
        timer (a notify unit's) wakes then, so a silent hang is called slow before its deadline."""
        st = self.usual.phases.get(self.phase) if self.usual.enough and self.phase else None
        if st is None or self.since is None or self.phase in self.flagged:
            return None
        return self.since + st.slow_after + 0.01
