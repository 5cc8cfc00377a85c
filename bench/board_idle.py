#!/usr/bin/env python3
"""`svcdiag top`'s CPU while nothing happens, on the private rig.

Every demo config of the units folder is on the board; two have run (one healthy and
still serving, one failed), the rest are not installed. The board runs full-screen on a
pseudo-terminal; its process's user+system CPU time is read from /proc over a window in
which no unit changes. Target: ≤ 0.5 % of a core (it wakes on D-Bus or journal events,
else every 30 s). Run as root: python bench/board_idle.py [--seconds S]
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from svcdiag.systemd.rig import Rig  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=30)
    args = ap.parse_args()
    units = ROOT / ".rig-tmp" / f"bench-board-{uuid.uuid4().hex[:6]}"
    shutil.copytree(ROOT / "units", units)
    sv = ["svcdiag", "--units", str(units)]
    try:
        with Rig(ROOT, name="svcdiag-bench-board") as rig:
            rig.run([*sv, "up", "demo-smoke", "--wait-ready"], check=False)
            rig.run([*sv, "up", "demo-segfault", "--wait-ready"], check=False)
            board = rig.popen(["python", "tests/rig/pty_keys.py", "--after", str(args.seconds + 6), "--keys", "q", "--",
                               *sv, "top"], stdout=subprocess.DEVNULL)
            time.sleep(3)  # drawn, and idle
            pid = rig.run(f"pgrep -f '[b]in/svcdiag --units {units} top'").stdout.decode().split()[0]
            tick = int(rig.run("getconf CLK_TCK").stdout)

            def cpu() -> float:
                fields = rig.run(f"cat /proc/{pid}/stat").stdout.decode().rsplit(")", 1)[1].split()
                return (int(fields[11]) + int(fields[12])) / tick

            c0, t0 = cpu(), time.monotonic()
            time.sleep(args.seconds)
            c1, t1 = cpu(), time.monotonic()
            rc = board.wait(timeout=30)
            rig.run([*sv, "down", "demo-smoke", "demo-segfault"], check=False)
    finally:
        shutil.rmtree(units, ignore_errors=True)
    pct = 100 * (c1 - c0) / (t1 - t0)
    print(f"svcdiag top, idle: {pct:.2f} % of a core over {t1 - t0:.0f} s ({c1 - c0:.2f} s of CPU); `q` exit status {rc}")
    ok = pct <= 0.5 and rc == 0
    print("target (≤ 0.5 % of a core, q exits 0): " + ("met" if ok else "NOT met"))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
