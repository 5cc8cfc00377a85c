#!/usr/bin/env python3
"""CLI start-up against the interpreter's own: `svcdiag --help` and `svcdiag status` vs
`python -c pass`, wall time, median of N runs each, as `python -m svcdiag` and as the installed
`svcdiag` script. Target: ≤ 1.2×.

`--help` is printed from svcdiag/cli/help_manifest.py without importing click while that
manifest is current (`python -m svcdiag.cli.help` rewrites it); `status` imports click, reads
the configs and, on a host with no system bus (this VM), stops there with its one-line error.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = Path(sys.executable).parent / "svcdiag"
#: as an installed svcdiag runs: its bytecode cached (with PYTHONDONTWRITEBYTECODE set, every
#: module edited since its .pyc was written would be compiled again on each run, ~0.1 ms per 100 lines)
ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}


def wall(cmd: list[str]) -> float:
    t = time.perf_counter()
    subprocess.run(cmd, cwd=ROOT, env=ENV, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
    return time.perf_counter() - t


def main() -> None:
    runs = int(sys.argv[1]) if len(sys.argv) > 1 else 15
    base = [sys.executable, "-c", "pass"]
    cmds = {f"python -m svcdiag {a}": [sys.executable, "-m", "svcdiag", a] for a in ("--help", "status")}
    if SCRIPT.exists():
        cmds.update({f"svcdiag (script) {a}": [str(SCRIPT), a] for a in ("--help", "status")})
    # interleaved, round by round: a busy machine slows the anchor and the commands alike
    times: dict[str, list[float]] = {"python -c pass": [], **{k: [] for k in cmds}}
    for _ in range(runs):
        times["python -c pass"].append(wall(base))
        for label, cmd in cmds.items():
            times[label].append(wall(cmd))
    anchor = statistics.median(times["python -c pass"])
    print(f"python -c pass: {anchor * 1000:.1f} ms (median of {runs}, interleaved with the commands)")
    for label in cmds:
        t = statistics.median(times[label])
        print(f"{label}: {t * 1000:.1f} ms, {t / anchor:.2f}x python -c pass "
              f"({'met' if t / anchor <= 1.2 else 'MISSED'} ≤1.2x)")


if __name__ == "__main__":
    main()
