"""History on a full disk and with a corrupt file (issue 39): the real cause, never "join group
svcdiag", and `history --advise` never "0 recorded starts" when it could not read them."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from svcdiag.config.service import find_units_dir
from svcdiag.judge.verdict import Verdict
from svcdiag.ops.host import history as h

from .conftest import ROOT, UNITS, assert_one_line_error


def verdict(inv: str) -> Verdict:
    return Verdict(ts=time.time(), verdict="healthy", phase="ready", cause=None, message="ready",
                   figures={"kv_tokens": 1000, "startup_s": 60.0}, unit="x.service", invocation=inv,
                   phase_seconds={"starting": 5.0, "loading_weights": 40.0, "kv_cache": 1.0})


def test_a_corrupt_history_file_is_named_as_corrupt_everywhere(cli, tmp_path: Path) -> None:
    cfg = find_units_dir(str(UNITS)).load("demo-smoke")
    (tmp_path / h.DB_NAME).write_bytes(b"this is not an SQLite database, it is junk\n" * 200)
    row, why = h.record_start(cfg, verdict("a" * 32), "up", state=str(tmp_path))
    assert row is None and why is not None and "\n" not in why
    assert "corrupt" in why and f"mv {tmp_path}/{h.DB_NAME}" in why and "join group" not in why, why
    for argv in (["history"], ["history", "demo-smoke", "--advise"]):
        r = cli(*argv, "--state-dir", str(tmp_path))
        assert_one_line_error(r, "corrupt", str(tmp_path / h.DB_NAME))
        assert "join group" not in r.output and "0 recorded" not in r.output and "healthy_starts" not in r.output


SCRIPT = r"""
import json, os, sys, time
from click.testing import CliRunner
from svcdiag.cli import main
from svcdiag.config.service import find_units_dir
from svcdiag.judge.verdict import Verdict
from svcdiag.ops.host import history as h

state, units = sys.argv[1], sys.argv[2]
cfg = find_units_dir(units).load("demo-smoke")
def v(i):
    return Verdict(ts=time.time(), verdict="healthy", phase="ready", cause=None, message="ready",
                   figures={"kv_tokens": 1000, "startup_s": 60.0}, unit="x.service", invocation=f"inv{i}",
                   phase_seconds={"starting": 5.0, "loading_weights": 40.0 + i, "kv_cache": 1.0})
for i in range(3):
    assert h.record_start(cfg, v(i), "up", state=state)[1] is None
fd = os.open(os.path.join(state, "fill"), os.O_WRONLY | os.O_CREAT)  # the disk fills up
try:
    while True:
        os.write(fd, b"\0" * 4096)
except OSError:
    pass
os.close(fd)
row, why = h.record_start(cfg, v(9), "up", state=state)
advise = CliRunner().invoke(main, ["--units", units, "history", "demo-smoke", "--advise", "--state-dir", state, "--json"])
listing = CliRunner().invoke(main, ["--units", units, "history", "--state-dir", state, "--json"])
print(json.dumps({"row": row, "why": why, "advise": [advise.exit_code, advise.output],
                  "history": [listing.exit_code, listing.output]}))
"""


@pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("unshare"), reason="a tmpfs of its own needs root")
def test_a_full_disk_is_said_and_advise_still_reads_what_was_recorded(tmp_path: Path) -> None:
    """A real full disk: a 256 KiB tmpfs in a mount namespace of the test's own, filled."""
    state = tmp_path / "state"
    state.mkdir()
    r = subprocess.run(["unshare", "--mount", "--propagation", "private", "sh", "-c",
                        f'mount -t tmpfs -o size=256k tmpfs "{state}" && exec "$0" -c "$1" "{state}" "{UNITS}"',
                        sys.executable, SCRIPT], capture_output=True, text=True, timeout=120, cwd=ROOT, check=False)
    if r.returncode != 0 and "mount" in r.stderr and "permission" in r.stderr.lower():
        pytest.skip(f"no tmpfs here: {r.stderr.strip()}")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout.splitlines()[-1])
    assert out["row"] is None and "the disk is full" in out["why"] and f"df -h {state}" in out["why"], out
    assert "join group" not in out["why"] and "\n" not in out["why"]
    code, text = out["advise"]
    assert code == 0, text
    assert json.loads(text)["healthy_starts"] == 3  # what was recorded, read on the full disk: not 0
    code, text = out["history"]
    assert code == 0 and [json.loads(ln)["invocation"] for ln in text.splitlines()] == ["inv0", "inv1", "inv2"]


def test_a_full_disk_at_the_sqlite_boundary_is_said(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Without root: SQLite's own SQLITE_FULL, injected where SQLite raises it, and the OSError a
    full disk gives the file's creation."""
    cfg = find_units_dir(str(UNITS)).load("demo-smoke")
    real_record = h.History.record

    def full(self, row):
        raise h.sqlite3.OperationalError("database or disk is full")

    monkeypatch.setattr(h.History, "record", full)
    row, why = h.record_start(cfg, verdict("a" * 32), "up", state=str(tmp_path))
    assert row is None and why is not None and "the disk is full" in why and "join group" not in why, why
    monkeypatch.setattr(h.History, "record", real_record)
    real_open = os.open

    def enospc(path, flags, *a, **kw):
        if str(path).endswith(h.DB_NAME) and flags & os.O_CREAT:
            raise OSError(28, os.strerror(28), str(path))
        return real_open(path, flags, *a, **kw)

    monkeypatch.setattr(h.os, "open", enospc)
    row, why = h.record_start(cfg, verdict("b" * 32), "up", state=str(tmp_path / "other"))
    assert row is None and why is not None and "the disk is full" in why and "join group" not in why, why
