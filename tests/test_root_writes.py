"""No root write through a name a group member planted (issue 39, docs/security.md#what-root-writes).

A member of group `svcdiag` may write the shared store (2770) and whatever folder they made in it.
For every file root writes there: a planted symlink is refused in one line naming it and the file
it points to is left as it was; a planted hard link is never written through (refused where the
file is appended to, replaced where it is rewritten); a file owned by another user is refused.
Ownership needs root (the suite runs as root; the rig's tests too): a member is an unused uid.
"""

from __future__ import annotations

import json
import os
import sqlite3
import stat
from pathlib import Path
from types import SimpleNamespace

import pytest

from svcdiag import files
from svcdiag.config.service import UnitsDir
from svcdiag.errors import SvcdiagError
from svcdiag.judge.verdict import Verdict
from svcdiag.ops.fleet.tune import Run, Target
from svcdiag.ops.host import history
from svcdiag.ops.host.preflight import Calibration
from svcdiag.ops.serve.start import calibrate
from svcdiag.output.schema import ReadinessEvent
from svcdiag.output.textfile import Textfile

from .conftest import UNITS

MEMBER = 4242  # no such user here: a member of group svcdiag who is not root
root_only = pytest.mark.skipif(os.geteuid() != 0, reason="ownership and a member's uid need root")

VICTIM = "root's file: unchanged\n"


@pytest.fixture
def store(tmp_path: Path) -> Path:
    """`svcdiag setup`'s shared store: setgid, group-writable, root's."""
    d = tmp_path / "var-lib-svcdiag"
    d.mkdir()
    os.chmod(d, files.SHARED_DIR)
    return d


@pytest.fixture
def victim(tmp_path: Path) -> Path:
    """The file a member wants root to write (/etc/victim, /etc/shadow)."""
    v = tmp_path / "etc-victim"
    v.write_text(VICTIM)
    return v


def member_folder(store: Path, name: str) -> Path:
    """A folder a member made in the store (theirs, as `mkdir` as alice leaves it)."""
    d = store / name
    d.mkdir()
    if os.geteuid() == 0:
        os.chown(d, MEMBER, -1)
    return d


def cfg():
    return UnitsDir(UNITS, "t").load("demo-smoke")


def verdict() -> Verdict:
    return Verdict(verdict="healthy", phase="ready", cause=None, message="", figures={"kv_tokens": 1000},
                   invocation="a" * 32)


def record_calibration(store: Path) -> None:
    Calibration(store).record(cfg(), SimpleNamespace(kv_tokens=1100, verdict="ok"), verdict())


# ---------------------------------------------------------------- appended: calibration.jsonl


def test_the_issues_attack_a_members_symlink_as_calibration_is_refused(store: Path, victim: Path) -> None:
    """As alice: mkdir STORE/demo-smoke; ln -s /etc/victim STORE/demo-smoke/calibration.jsonl. Root's
    next judged start appended a JSON line to /etc/victim; now it is one line naming the link."""
    link = member_folder(store, "demo-smoke") / "calibration.jsonl"
    link.symlink_to(victim)
    with pytest.raises(files.UnsafePath) as e:
        record_calibration(store)
    assert str(link) in str(e.value) and "symbolic link" in str(e.value) and "\n" not in str(e.value)
    assert victim.read_text() == VICTIM
    said: list[str] = []  # up: the verdict stands, the calibration is not recorded, and the note says why
    plan = SimpleNamespace(inputs=object(), prediction=SimpleNamespace(kv_tokens=1100, verdict="ok"))
    calibrate(cfg(), plan, verdict(), said.append, state=str(store))  # type: ignore[arg-type]
    assert len(said) == 1 and str(link) in said[0] and victim.read_text() == VICTIM


def test_a_hard_linked_calibration_file_is_refused(store: Path, victim: Path) -> None:
    d = member_folder(store, "demo-smoke")
    os.link(victim, d / "calibration.jsonl")
    with pytest.raises(files.UnsafePath, match=r"calibration.jsonl: has 2 hard links"):
        record_calibration(store)
    assert victim.read_text() == VICTIM


@root_only
def test_a_calibration_file_of_another_user_in_roots_folder_is_refused(tmp_path: Path) -> None:
    d = tmp_path / "private" / "demo-smoke"
    d.mkdir(parents=True)
    (d / "calibration.jsonl").write_text("")
    os.chown(d / "calibration.jsonl", MEMBER, MEMBER)
    with pytest.raises(files.UnsafePath, match=r"owned by uid 4242"):
        record_calibration(tmp_path / "private")
    assert (d / "calibration.jsonl").read_text() == ""


def test_a_fifo_as_calibration_file_is_refused_without_blocking(store: Path) -> None:
    d = member_folder(store, "demo-smoke")
    os.mkfifo(d / "calibration.jsonl")
    with pytest.raises(files.UnsafePath, match="not a regular file"):
        record_calibration(store)


@root_only
def test_a_members_own_calibration_file_in_their_own_folder_is_appended_to(store: Path) -> None:
    """What the shared store is for: an operator's start made the folder and file; root's start adds its row."""
    d = member_folder(store, "demo-smoke")
    (d / "calibration.jsonl").write_text("")
    os.chown(d / "calibration.jsonl", MEMBER, MEMBER)
    record_calibration(store)
    assert json.loads((d / "calibration.jsonl").read_text())["logged_kv_tokens"] == 1000


def test_a_symlinked_config_folder_a_member_planted_is_refused(store: Path, tmp_path: Path) -> None:
    """ln -s /etc STORE/demo-smoke: the folder on the way is a link someone else could have made."""
    elsewhere = tmp_path / "etc"
    elsewhere.mkdir()
    link = store / "demo-smoke"
    link.symlink_to(elsewhere)
    if os.geteuid() == 0:
        os.chown(link, MEMBER, -1, follow_symlinks=False)
    with pytest.raises(files.UnsafePath, match="a symbolic link someone else could have made"):
        record_calibration(store)
    assert list(elsewhere.iterdir()) == []


def test_roots_own_symlinked_state_dir_is_followed(tmp_path: Path) -> None:
    """/var/lib/svcdiag -> /data/svcdiag, made by the admin in a folder only root writes: followed."""
    real = tmp_path / "data"
    real.mkdir()
    parent = tmp_path / "var-lib"
    parent.mkdir(mode=0o755)
    (parent / "svcdiag").symlink_to(real)
    record_calibration(parent / "svcdiag")
    assert (real / "demo-smoke" / "calibration.jsonl").read_text().count("\n") == 1


# ---------------------------------------------------------------- the history database and SQLite's companions


@pytest.mark.parametrize("suffix", ["", "-wal", "-shm", "-journal"])
def test_a_symlink_at_the_history_database_or_its_companions_is_refused(store: Path, victim: Path, suffix: str) -> None:
    path = store / history.DB_NAME
    link = Path(f"{path}{suffix}")
    link.symlink_to(victim)
    row_id, why = history.record_start(cfg(), verdict(), "up", state=str(store))
    assert row_id is None and why is not None and str(link) in why and "symbolic link" in why
    assert "join group" not in why and "\n" not in why
    assert victim.read_text() == VICTIM


@pytest.mark.parametrize("suffix", ["", "-wal", "-shm"])
def test_a_hard_link_at_the_history_database_or_its_companions_is_refused(store: Path, victim: Path, suffix: str) -> None:
    path = store / history.DB_NAME
    if suffix:
        with history.History(path) as h:  # a database there already, in WAL mode
            h.record(history.start_row(cfg(), verdict(), "up"))
        Path(f"{path}{suffix}").unlink(missing_ok=True)
    os.link(victim, f"{path}{suffix}")
    row_id, why = history.record_start(cfg(), verdict(), "up", state=str(store))
    assert row_id is None and why is not None and f"{path}{suffix}: has 2 hard links" in why
    assert victim.read_text() == VICTIM


@root_only
def test_a_history_database_of_another_user_outside_a_shared_store_is_refused(tmp_path: Path) -> None:
    d = tmp_path / "private"
    d.mkdir(mode=0o700)
    with history.History(d / history.DB_NAME):
        pass
    os.chown(d / history.DB_NAME, MEMBER, MEMBER)
    row_id, why = history.record_start(cfg(), verdict(), "up", state=str(d))
    assert row_id is None and why is not None and "owned by uid 4242" in why


@root_only
def test_a_members_history_in_the_shared_store_is_roots_to_write_too(store: Path) -> None:
    """An operator's start made the database (theirs, the store's group, 0660): root's start is recorded in it."""
    with history.History(store / history.DB_NAME):
        pass
    for name in os.listdir(store):
        os.chown(store / name, MEMBER, os.stat(store).st_gid)
    row_id, why = history.record_start(cfg(), verdict(), "up", state=str(store))
    assert why is None and row_id


# ---------------------------------------------------------------- rewritten: write_atomic's callers


def write_tune_state(path: Path) -> None:
    Run(path, "tune-x", "demo-smoke", Target(8, 4096), frozenset()).save()


def write_textfile(path: Path) -> None:
    Textfile(path).update(ReadinessEvent(event="phase_entered", ts=1.0, unit="x.service", config="x",
                                         invocation="a" * 32, phase="starting"))


def write_bundle(path: Path) -> None:
    from svcdiag.ops.offline.bundle import _write_tar

    _write_tar(path, "top", {"MANIFEST.json": b"{}"})


def write_unit(path: Path) -> None:
    from svcdiag.systemd.install import install_units

    c = cfg()
    assert path.name == c.unit
    install_units([c], path.parent, reload=False, force=True)  # --force: the name is not one svcdiag wrote


def write_version_cache(path: Path) -> None:
    from svcdiag.ops.host import sglang_version

    py = path.parent / "python"
    py.write_text("#!/bin/sh\necho 0.5.22\n")
    py.chmod(0o755)
    sglang_version.probe(str(py), state=str(path.parent))


def write_new_config(path: Path) -> None:
    from svcdiag.ops.host.adopt import new_config

    new_config(path.stem, UnitsDir(path.parent, "t"), model="/m", force=True)  # `svcdiag new NAME --force`


def write_campaign_results(path: Path) -> None:
    files.write_atomic(path, "| config |\n", mode=0o644)  # what Runner._results and the chart write


REWRITTEN = {
    "tune state (STATE/tune/NAME.json)": (write_tune_state, "tune.json"),
    "Prometheus textfile (--textfile)": (write_textfile, "svcdiag.prom"),
    "bundle (--out)": (write_bundle, "b.tar.gz"),
    "unit file (/etc/systemd/system)": (write_unit, "demo-smoke.service"),
    "sglang-versions cache (STATE/sglang-versions.json)": (write_version_cache, "sglang-versions.json"),
    "campaign results (results.md/csv/json, the chart)": (write_campaign_results, "results.md"),
    "a config in the units folder (new, import, tune)": (write_new_config, "fresh.toml"),
}


@pytest.fixture(params=sorted(REWRITTEN))
def rewritten(request: pytest.FixtureRequest):
    return REWRITTEN[request.param]


def test_a_symlink_where_root_rewrites_a_file_is_refused(store: Path, victim: Path, rewritten) -> None:
    write, name = rewritten
    from svcdiag.ops.host import sglang_version

    if write is write_version_cache:
        name = sglang_version.CACHE_FILE
    link = store / name
    link.symlink_to(victim)
    with pytest.raises(files.UnsafePath) as e:
        write(link)
    assert str(link) in str(e.value) and "symbolic link" in str(e.value)
    assert victim.read_text() == VICTIM and link.is_symlink()


def test_a_hard_link_where_root_rewrites_a_file_is_replaced_not_written_through(store: Path, victim: Path,
                                                                             rewritten) -> None:
    write, name = rewritten
    from svcdiag.ops.host import sglang_version

    if write is write_version_cache:
        name = sglang_version.CACHE_FILE
    target = store / name
    os.link(victim, target)
    write(target)
    assert victim.read_text() == VICTIM
    assert os.stat(target).st_nlink == 1 and not os.path.samefile(target, victim)


def test_the_textfiles_lock_file_is_no_planted_symlink(store: Path, tmp_path: Path) -> None:
    """The lock beside the textfile was opened O_CREAT through a link: root made any file it named."""
    dangling = tmp_path / "etc-made-by-root"
    (store / ".svcdiag.prom.lock").symlink_to(dangling)
    with pytest.raises(files.UnsafePath, match=r"\.svcdiag\.prom\.lock: a symbolic link"):
        write_textfile(store / "svcdiag.prom")
    assert not dangling.exists() and not (store / "svcdiag.prom").exists()


def test_the_unit_lock_is_no_planted_symlink(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from svcdiag.ops.serve import follow

    locks = tmp_path / "run-svcdiag"
    locks.mkdir(mode=0o777)
    monkeypatch.setattr(follow, "LOCK_DIR", locks)
    (locks / "x.lock").symlink_to(tmp_path / "etc-made-by-root")
    with pytest.raises(SvcdiagError, match=r"x\.lock: a symbolic link"), follow.unit_lock("x", lambda _: None):
        pass
    assert not (tmp_path / "etc-made-by-root").exists()


def test_write_atomic_is_one_temp_file_made_in_the_folder_and_renamed(tmp_path: Path) -> None:
    """Nothing left beside the file, mode as asked whatever the umask, folders made as asked."""
    old = os.umask(0o077)
    try:
        files.write_atomic(tmp_path / "a" / "b" / "unit.service", "x\n", mode=0o644)
    finally:
        os.umask(old)
    assert os.listdir(tmp_path / "a" / "b") == ["unit.service"]
    assert stat.S_IMODE(os.stat(tmp_path / "a" / "b" / "unit.service").st_mode) == 0o644
    assert stat.S_IMODE(os.stat(tmp_path / "a").st_mode) == 0o755


def test_the_history_database_is_not_followed_by_sqlite_either(store: Path, victim: Path) -> None:
    """Belt and braces: SQLite opens -wal and -shm with O_NOFOLLOW itself; what was refused above
    is refused before SQLite's "unable to open database file", and the victim is no database."""
    Path(f"{store / history.DB_NAME}-wal").symlink_to(victim)
    with pytest.raises(files.UnsafePath):
        history.History(store / history.DB_NAME)
    with pytest.raises(sqlite3.DatabaseError):
        sqlite3.connect(victim).execute("SELECT * FROM starts").fetchall()


def test_setup_never_chmods_through_a_members_symlink_in_the_store(tmp_path: Path, victim: Path) -> None:
    """setup makes the history group-writable (chown, chmod 660): through a planted
    history.sqlite3-wal -> /etc/shadow it would have handed the group /etc/shadow."""
    from svcdiag.ops.host.setup import Setup

    from .test_setup import FakeHost, configs

    store = tmp_path / "var/lib/svcdiag"
    store.mkdir(parents=True)
    os.chmod(victim, 0o600)
    (store / f"{history.DB_NAME}-wal").symlink_to(victim)
    steps = Setup(configs(), dry_run=False, **FakeHost().kw(tmp_path)).run_all()
    step = next(s for s in steps if s.what.startswith(f"directory {store} "))
    assert step.status == "failed" and f"{history.DB_NAME}-wal: a symbolic link" in step.detail, step
    assert stat.S_IMODE(victim.stat().st_mode) == 0o600 and victim.read_text() == VICTIM


def test_a_fifo_planted_where_root_reads_its_state_back_never_hangs(store: Path) -> None:
    """A member's FIFO as the version cache, a snapshot, a calibration file, a tune run: each read
    is of regular files only (files.read_regular), so root's check, baseline-check, preflight
    --calibration and tune go on instead of blocking forever on the FIFO."""
    import signal

    from svcdiag.ops.fleet.baseline import SnapshotStore
    from svcdiag.ops.fleet.tune import _unfinished
    from svcdiag.ops.host import sglang_version

    os.mkfifo(store / sglang_version.CACHE_FILE)
    d = member_folder(store, "demo-smoke")
    os.mkfifo(d / "20260101T000000Z-aaaaaaaa.json")
    os.mkfifo(d / "calibration.jsonl")
    (store / "tune").mkdir()
    os.mkfifo(store / "tune" / "demo-smoke.json")

    def hung(*_):
        raise AssertionError("blocked on a FIFO")

    old = signal.signal(signal.SIGALRM, hung)
    signal.alarm(20)
    try:
        assert sglang_version._read_cache(store / sglang_version.CACHE_FILE) == {}
        snaps = SnapshotStore(store, "demo-smoke")
        assert snaps.history() == [] and "a FIFO, not a regular file" in snaps.problems[0]
        assert Calibration(store).rows() == []
        assert _unfinished(store / "tune" / "demo-smoke.json") is False
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)
