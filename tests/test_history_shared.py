"""One history for root and group svcdiag's operators (#30 item 3, docs/polkit.md): a shared store's
files are the group's to write; a store a user may only read is read-only; one they may not use
at all is one warning. The other users are real ones (setpriv to `nobody`), no systemd needed."""

from __future__ import annotations

import grp
import json
import os
import shutil
import stat
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from svcdiag.files import SHARED_DIR, shared
from svcdiag.ops.host import history as h
from svcdiag.ops.host.setup import Setup

from .conftest import ROOT, UNITS
from .test_history import verdict
from .test_setup import FakeHost, configs

NOBODY = 65534

#: what one start of another user does with the store: judge (load_usual), record, then list it
CHILD = """
import json, sys, time
from pathlib import Path
from svcdiag.config.service import UnitsDir
from svcdiag.errors import SvcdiagError
from svcdiag.judge.verdict import Verdict
from svcdiag.ops.host import history as h
state, units, inv = sys.argv[1:4]
cfg = UnitsDir(Path(units), "t").load("demo-smoke")
v = Verdict(ts=time.time(), verdict="healthy", phase="ready", cause=None, message="ready",
            figures={"startup_s": 30.0}, phase_seconds={"loading_weights": 10.0}, unit="x.service", invocation=inv)
said = []
u = h.load_usual(cfg, None, state, warn=said.append)
row, why = h.record_start(cfg, v, "up", state=state)
try:
    rows = [r["invocation"] for r in h.read_rows(state)]
except SvcdiagError as e:
    rows = str(e)
print(json.dumps({"healthy": u.healthy, "warnings": said, "row": row, "why": why, "rows": rows}))
"""


def _free_gid() -> int:
    taken = {g.gr_gid for g in grp.getgrall()}
    return next(g for g in range(61000, 62000) if g not in taken and g != NOBODY)


needs_users = pytest.mark.skipif(os.geteuid() != 0 or shutil.which("setpriv") is None,
                                reason="needs root and setpriv (another user is a real one)")


@pytest.fixture
def base() -> Iterator[Path]:
    """A folder every user may pass through (pytest's tmp_path is root's 0700)."""
    d = Path(tempfile.mkdtemp(prefix="svcdiag-shared-"))
    d.chmod(0o711)
    yield d
    shutil.rmtree(d)


def _store(base: Path, gid: int, mode: int = SHARED_DIR) -> Path:
    state = base / "state"
    state.mkdir()
    os.chown(state, 0, gid)
    state.chmod(mode)  # after chown, which clears setgid
    return state


def _as_nobody(state: Path, inv: str, groups: tuple[int, ...] = ()) -> dict:
    who = ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}"]
    who += [f"--groups={','.join(map(str, groups))}"] if groups else ["--clear-groups"]
    p = subprocess.run([*who, sys.executable, "-c", CHILD, str(state), str(UNITS), inv], capture_output=True,
                       text=True, cwd=ROOT, env={**os.environ, "HOME": "/nonexistent"}, timeout=60)
    assert p.returncode == 0 and "Traceback" not in p.stderr, p.stderr
    return json.loads(p.stdout)


def _record_as_root(state: Path, inv: str) -> None:
    cfg = configs(UNITS, ("demo-smoke",))[0]
    v = verdict(10.0)
    assert h.record_start(cfg, v.with_(invocation=inv), "up", state=str(state))[1] is None


@needs_users
def test_a_shared_store_is_one_history_for_root_and_the_groups_operators(base: Path) -> None:
    gid = _free_gid()
    state = _store(base, gid)
    old = os.umask(0o077)  # a strict umask does not make the store root's alone
    try:
        _record_as_root(state, "root-1")
    finally:
        os.umask(old)
    op = _as_nobody(state, "op-1", (gid,))
    assert op["warnings"] == [] and op["why"] is None and op["healthy"] == 1, op
    assert op["rows"] == ["root-1", "op-1"]  # the operator sees root's start, and theirs is recorded
    assert [r["invocation"] for r in h.read_rows(str(state))] == ["root-1", "op-1"]  # root sees the operator's
    for f in state.iterdir():  # the database, -wal and -shm alike, whoever made them
        st = f.stat()
        assert (stat.S_IMODE(st.st_mode), st.st_gid) == (0o660, gid), f
    assert h.integrity(state / h.DB_NAME) == "ok"


@needs_users
def test_a_store_the_user_may_only_read_is_shown_not_written(base: Path) -> None:
    gid = _free_gid()
    state = _store(base, gid)
    _record_as_root(state, "root-1")
    state.chmod(0o2750)
    for f in state.iterdir():
        f.chmod(0o640)
    op = _as_nobody(state, "op-1", (gid,))
    assert op["rows"] == ["root-1"] and op["healthy"] == 1, op  # history shown, with root's start
    assert op["row"] is None and len(op["warnings"]) == 1 and op["why"] == op["warnings"][0], op  # one line, twice
    assert "is read-only to you" in op["why"] and "\n" not in op["why"]
    assert [r["invocation"] for r in h.read_rows(str(state))] == ["root-1"]


@needs_users
def test_a_user_outside_the_group_gets_one_warning_and_the_way_in(base: Path) -> None:
    state = _store(base, _free_gid())
    _record_as_root(state, "root-1")
    op = _as_nobody(state, "op-1")
    assert op["healthy"] == 0 and op["row"] is None and len(op["warnings"]) == 1, op
    for said in (op["warnings"][0], op["why"], op["rows"]):
        assert said.startswith(f"history: cannot use {state}/history.sqlite3 (Permission denied)"), said
        assert "join group svcdiag" in said and "--state-dir" in said and "\n" not in said


def test_a_private_store_stays_private() -> None:
    with tempfile.TemporaryDirectory() as d:
        state = Path(d) / "state"
        _record_as_root(state, "root-1")
        assert not shared(state) and stat.S_IMODE(state.stat().st_mode) == 0o700
        assert {stat.S_IMODE(f.stat().st_mode) for f in state.iterdir()} == {0o600}


def test_setup_shares_a_store_an_earlier_root_start_made_private(tmp_path: Path) -> None:
    state = tmp_path / "var/lib/svcdiag"
    _record_as_root(state, "root-1")  # 0700, files 0600: what `up` as root left before setup
    host = FakeHost()
    steps = Setup(configs(), dry_run=False, **host.kw(tmp_path)).run_all()
    step = next(s for s in steps if s.what.startswith(f"directory {state} "))
    assert step.status == "done" and "history.sqlite3" in step.detail, step
    assert stat.S_IMODE(state.stat().st_mode) == 0o2770 and shared(state)
    assert {stat.S_IMODE(f.stat().st_mode) for f in state.iterdir()} == {0o660}
    again = Setup(configs(), dry_run=False, **host.kw(tmp_path)).run_all()
    assert next(s for s in again if s.what.startswith(f"directory {state} ")).status == "present"
