#!/usr/bin/env python3
"""Fixed cost of each everyday command against `python -c pass`, side by side in one run.

Each round runs the anchor and every command once, in turn (a busy machine slows them alike);
the figures are medians over the rounds of each child's CPU time (user + system, from wait4:
steadier than wall time on a shared machine) and of its wall time. Targets (CPU): `--version`
≤ 1.5×, `--help` ≤ 1.2×, `list`, `render`, `check`, `preflight` and the replay of a small file
≤ 2.5× `python -c pass`. Children run with their bytecode cached, as an installed svcdiag does.

    .venv/bin/python bench/fixed_cost.py [ROUNDS]
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
SV = [sys.executable, "-m", "svcdiag", "--units", str(ROOT / "units")]
#: (label, argv, target ratio)
COMMANDS = [
    ("--version", [sys.executable, "-m", "svcdiag", "--version"], 1.5),
    ("--help", [sys.executable, "-m", "svcdiag", "--help"], 1.2),
    ("list", [*SV, "list"], 2.5),
    ("render demo-smoke", [*SV, "render", "demo-smoke"], 2.5),
    ("check demo-smoke", [*SV, "check", "demo-smoke"], 2.5),
    ("preflight demo-smoke", [*SV, "preflight", "demo-smoke", "--kv-bytes-per-token", "65536", "--weights-gb", "50",
                              "--gpu-memory", "80"], 2.5),
    ("replay (40-line log)", [*SV, "replay", "--example", "dflash-smoke"], 2.5),
]


def cost(cmd: list[str]) -> tuple[float, float]:
    """CPU seconds and wall seconds of one child."""
    t = time.perf_counter()
    proc = subprocess.Popen(cmd, cwd=ROOT, env=ENV, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _, status, usage = os.wait4(proc.pid, 0)
    code = os.waitstatus_to_exitcode(status)
    if code not in (0, 1):
        raise SystemExit(f"{' '.join(cmd[2:])} exited {code}")
    return usage.ru_utime + usage.ru_stime, time.perf_counter() - t


def main() -> None:
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 15
    cmds = {"python -c pass": ([sys.executable, "-c", "pass"], 0.0), **{k: (c, t) for k, c, t in COMMANDS}}
    for cmd, _ in cmds.values():  # bytecode written
        cost(cmd)
    cpu: dict[str, list[float]] = {k: [] for k in cmds}
    wall: dict[str, list[float]] = {k: [] for k in cmds}
    for _ in range(rounds):
        for label, (cmd, _) in cmds.items():
            c, w = cost(cmd)
            cpu[label].append(c)
            wall[label].append(w)
    med = {k: statistics.median(v) for k, v in cpu.items()}
    medw = {k: statistics.median(v) for k, v in wall.items()}
    anchor, anchor_w = med["python -c pass"], medw["python -c pass"]
    print(f"fixed cost, median of {rounds} interleaved rounds: python -c pass {anchor * 1000:.1f} ms CPU, "
          f"{anchor_w * 1000:.1f} ms wall")
    missed = []
    for label, (_, target) in list(cmds.items())[1:]:
        ratio = med[label] / anchor
        ok = ratio <= target
        if not ok:
            missed.append(label)
        print(f"  {label:<22} {med[label] * 1000:6.1f} ms CPU {ratio:5.2f}x  ({medw[label] * 1000:6.1f} ms wall "
              f"{medw[label] / anchor_w:5.2f}x)  target <= {target}x {'met' if ok else 'MISSED'}")
    print("targets: " + ("all met" if not missed else "MISSED: " + ", ".join(missed)))


if __name__ == "__main__":
    main()
