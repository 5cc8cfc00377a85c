"""What the rig tests share: running svcdiag inside the rig, reading its JSON lines, writing
variant configs, and waiting for a start to reach a phase (instead of sleeping)."""

from __future__ import annotations

import json
import os
import select
import subprocess
import time
import uuid
from pathlib import Path

from ..ports import next_port  # every rig test module takes its ports from here (tests/ports.py)


def sv(rig, units: Path, *args: str, timeout: float = 120):
    return rig.run(["svcdiag", "--units", str(units), *args], check=False, timeout=timeout)


def json_lines(proc) -> list[dict]:
    return [json.loads(line) for line in proc.stdout.decode().splitlines() if line.startswith("{")]


def verdict_of(proc) -> dict:
    lines = json_lines(proc)
    assert lines and lines[-1]["event"] == "verdict", proc.stdout.decode() + proc.stderr.decode()
    return lines[-1]


def config(units: Path, name: str, base: str, **fields) -> str:
    fields.setdefault("port", next_port())
    body = [f'extends = "{base}"'] + [f"{k} = {json.dumps(v)}" for k, v in fields.items() if not isinstance(v, dict)]
    for table, values in ((k, v) for k, v in fields.items() if isinstance(v, dict)):
        body += [f"[{table}]"] + [f"{k} = {json.dumps(v)}" for k, v in values.items()]
    (units / f"{name}.toml").write_text("\n".join(body) + "\n")
    return name


def unit_name(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:6]}"


def synced(rig) -> None:
    """`journalctl --sync`: journald has stored every entry sent before this (a loaded journald may still hold
    the last records of an `up` that has exited; journalctl and `svcdiag events` read only what it stored)."""
    rig.run(["journalctl", "--sync"])


def journal(rig, *matches: str, sync: bool = True) -> list[dict]:
    """`journalctl -o json MATCH...` inside the rig, one dict per entry (after `synced`, unless told not to)."""
    if sync:
        synced(rig)
    out = rig.run(["journalctl", "--no-pager", "-o", "json", *matches]).stdout.decode()
    return [json.loads(line) for line in out.splitlines() if line.strip()]


def published(rig, kind: str, invocation: str, timeout: float = 60.0) -> dict:
    """The entry a start's supervisor publishes after READY=1 (SVCDIAG_PUBLISHED=`kind`: verdict, milestones),
    once there: it is written off the supervisor's loop, and `up` may have returned before it was even sent.
    `--all`: journalctl's JSON leaves a field over 4 KiB out otherwise."""
    deadline = time.monotonic() + timeout
    while True:
        entries = journal(rig, "--all", f"SVCDIAG_PUBLISHED={kind}", f"_SYSTEMD_INVOCATION_ID={invocation}")
        if entries or time.monotonic() > deadline:
            assert len(entries) == 1, entries
            return entries[0]
        time.sleep(0.1)


# ---------------------------------------------------------------- waiting on the start itself

POLL_S = 0.05


def wait_for_phase(source, unit: str, phase: str, *, timeout: float = 30.0, since: float | None = None) -> bytes:
    """Block until the start of `unit` (a config or unit name) has entered `phase`, as svcdiag
    itself says so in a `phase_entered` record; fail the test with what was seen if it has
    not within `timeout` seconds.

    `source` is either
    - a Popen of `svcdiag ... up/wait --json` with stdout=PIPE: its stdout is read (without
      blocking, and without leaving anything in Python's buffers) until the record arrives.
      The bytes read are returned: prepend them to what `communicate()` gives later;
    - the rig: the journal is polled for the record (`SVCDIAG_EVENT=phase_entered`), written
      by any svcdiag process judging the start, with or without --json. With `since` (a Unix
      time taken before the start was asked for), records of earlier starts are ignored.
      Returns b"".
    """
    unit = unit if unit.endswith(".service") else f"{unit}.service"
    deadline = time.monotonic() + timeout
    if isinstance(source, subprocess.Popen):
        return _wait_on_stdout(source, unit, phase, deadline, timeout)
    seen: list[str] = []
    while True:
        recs = [json.loads(e["SVCDIAG_JSON"]) | {"_at": int(e["__REALTIME_TIMESTAMP"]) / 1e6}
                for e in journal(source, "SVCDIAG_EVENT=phase_entered", f"SVCDIAG_UNIT={unit}", sync=False)]
        recs = [r for r in recs if since is None or r["_at"] >= since]
        if any(r["phase"] == phase for r in recs):
            return b""
        seen = [r["phase"] for r in recs]
        if time.monotonic() > deadline:
            raise AssertionError(f"{unit} did not enter phase {phase} within {timeout:.0f} s "
                                 f"(the journal's phase_entered records of this start: {seen})")
        time.sleep(POLL_S)


def _wait_on_stdout(proc: subprocess.Popen, unit: str, phase: str, deadline: float, timeout: float) -> bytes:
    assert proc.stdout is not None, "wait_for_phase needs the process's stdout=subprocess.PIPE"
    fd = proc.stdout.fileno()
    got = b""
    while True:
        for line in got.split(b"\n")[:-1]:  # complete lines only
            if not line.startswith(b"{"):
                continue
            rec = json.loads(line)
            if rec.get("event") == "phase_entered" and rec.get("phase") == phase and rec.get("unit") in (unit, None):
                return got
        left = deadline - time.monotonic()
        if left <= 0:
            raise AssertionError(f"{unit} did not enter phase {phase} within {timeout:.0f} s; "
                                 f"its stdout so far:\n{got.decode(errors='replace')}")
        ready, _, _ = select.select([fd], [], [], min(left, 1.0))
        if not ready:
            continue
        chunk = os.read(fd, 65536)
        if not chunk:
            err = proc.stderr.read().decode(errors="replace") if proc.stderr else ""
            raise AssertionError(f"{unit}: the process ended (exit {proc.wait()}) before phase {phase} was entered; "
                                 f"stdout:\n{got.decode(errors='replace')}\nstderr:\n{err}")
        got += chunk
