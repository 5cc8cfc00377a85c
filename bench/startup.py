#!/usr/bin/env python3
"""CLI start-up against the interpreter's own, wall time, medians of N interleaved runs.

Start-up (the default): `svcdiag --help` and `svcdiag status` vs `python -c pass`, as `python -m
svcdiag` and as the installed `svcdiag` script. Target: ≤ 1.2×. `--help` is printed from
svcdiag/cli/help_manifest.py without importing click; `status` is parsed from the parameters
recorded there and run without click too (svcdiag.cli.fast). On a host with no system bus (this
VM) `status` stops at its one-line error right after reading and checking every config: that
run is its start-up, everything before its first call into systemd.

`--rig` (root; boots the private systemd rig): the whole `svcdiag status` against the bundled
units installed there, one of them (demo-smoke) running, beside `python -c pass` in the same
rig, then where the rest goes, timed step by step inside one process: the start-up above,
pystemd (+ lxml, which pystemd's __init__ imports), cysystemd, the judge and output modules,
the D-Bus and journal reads with the judging, the rendering.

    .venv/bin/python bench/startup.py [RUNS]
    sudo .venv/bin/python bench/startup.py --rig [RUNS]
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = Path(sys.executable).parent / "svcdiag"
#: as an installed svcdiag runs: its bytecode cached (with PYTHONDONTWRITEBYTECODE set, every
#: module edited since its .pyc was written would be compiled again on each run, ~0.1 ms per 100 lines)
ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
TARGET = 1.2
#: the rig's running unit: `status` then reads its journal and judges its start
RUNNING = "demo-smoke"


def wall(cmd: list[str]) -> float:
    t = time.perf_counter()
    subprocess.run(cmd, cwd=ROOT, env=ENV, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
    return time.perf_counter() - t


def interleaved(cmds: dict[str, Any], runs: int, timer: Callable[[Any], float]) -> dict[str, float]:
    """Median wall time of each command, run round by round: a busy machine slows all alike."""
    times: dict[str, list[float]] = {k: [] for k in cmds}
    for _ in range(runs):
        for label, cmd in cmds.items():
            times[label].append(timer(cmd))
    return {k: statistics.median(v) for k, v in times.items()}


def startup(runs: int) -> None:
    base = [sys.executable, "-c", "pass"]
    cmds = {f"python -m svcdiag {a}": [sys.executable, "-m", "svcdiag", a] for a in ("--help", "status")}
    if SCRIPT.exists():
        cmds.update({f"svcdiag (script) {a}": [str(SCRIPT), a] for a in ("--help", "status")})
    for cmd in cmds.values():  # bytecode written, as an installed svcdiag has it
        wall(cmd)
    med = interleaved({"python -c pass": base, **cmds}, runs, wall)
    anchor = med.pop("python -c pass")
    print(f"start-up (no system bus here: `status` ends after reading every config)\n"
          f"python -c pass: {anchor * 1000:.1f} ms (median of {runs}, interleaved with the commands)")
    for label, t in med.items():
        print(f"{label}: {t * 1000:.1f} ms, {t / anchor:.2f}x python -c pass "
              f"({'met' if t / anchor <= TARGET else 'MISSED'} ≤{TARGET}x)")


#: run inside the rig by `--rig`: `status`'s steps one after another in one process, each timed
STEPS = r"""
import json, sys, time
t = [time.perf_counter()]
steps = []
def step(name):
    t.append(time.perf_counter()); steps.append((name, t[-1] - t[-2]))
from svcdiag.cli import fast, plain
parsed = fast.parse(["status"])
assert parsed is not None, "the fast path does not serve `status`: is help_manifest.py current?"
configs = plain.load_many(None, ())
step("start-up: argv, imports, every config read and checked")
import pystemd.dbuslib
step("import pystemd.dbuslib (pystemd's __init__ imports lxml)")
from svcdiag.ops.serve.nodes import Hosts, status
from svcdiag.systemd.dbus import Systemd
hosts = Hosts(None); hosts.get(None)
step("D-Bus: connect")
import cysystemd.reader
step("import cysystemd.reader")
import svcdiag.ops.serve.follow, svcdiag.ops.offline.conclude, svcdiag.output.publish, svcdiag.output.report
step("import the judge, follow and output modules")
rows = status(hosts, configs, plain.units_dir(None))
step(f"D-Bus and journal reads, judging ({len(rows)} units, {sum('phase' in r for r in rows)} with a start)")
text = "".join(svcdiag.output.report.render_status(r) for r in rows)
hosts.close()
step("rendering, closing")
print(json.dumps(steps))
"""


def rig(runs: int) -> int:
    import uuid

    from svcdiag.systemd.rig import Rig, available

    why = available()
    if why:
        print(f"startup --rig: the rig is unavailable: {why}", file=sys.stderr)
        return 2
    with Rig(ROOT, name=f"svcdiag-startup-{uuid.uuid4().hex[:4]}") as r:
        r.run("svcdiag install >/dev/null", timeout=300)
        r.run(f"svcdiag up {RUNNING} --wait-ready >/dev/null", timeout=300)
        r.run("svcdiag status >/dev/null")  # bytecode written, caches warm

        def timed(cmd: str) -> float:
            t = time.perf_counter()
            r.run(cmd, check=False)
            return time.perf_counter() - t

        med = interleaved({"true": "true", "python -c pass": "python -c pass",
                           "svcdiag status": "svcdiag status >/dev/null"}, runs, timed)
        steps: list[list[tuple[str, float]]] = [json.loads(r.run(["python", "-c", STEPS]).stdout)
                                                for _ in range(max(3, runs // 3))]
        rows = r.run("svcdiag status --json").stdout.decode().splitlines()
    floor = med.pop("true")  # nsenter into the rig and a shell: subtracted from each figure
    anchor, whole = med["python -c pass"] - floor, med["svcdiag status"] - floor
    print(f"in the rig ({len(rows)} units installed from units/, {RUNNING} running; median of {runs}, "
          f"nsenter's {floor * 1000:.1f} ms subtracted)")
    print(f"python -c pass: {anchor * 1000:.1f} ms")
    print(f"svcdiag status: {whole * 1000:.1f} ms, {whole / anchor:.2f}x python -c pass")
    print(f"where `status` goes, step by step in one process (medians of {len(steps)}), after the interpreter's own start:")
    for i, (name, _) in enumerate(steps[0]):
        ms = statistics.median(s[i][1] for s in steps) * 1000
        print(f"  {ms:7.1f} ms  {name}")
    return 0


def main() -> int:
    args = sys.argv[1:]
    with_rig = "--rig" in args
    args = [a for a in args if a != "--rig"]
    runs = int(args[0]) if args else 15
    if with_rig:
        return rig(runs)
    startup(runs)
    return 0


if __name__ == "__main__":
    sys.exit(main())
