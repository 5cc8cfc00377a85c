#!/usr/bin/env python3
"""Fixed cost of each everyday command against `python -c pass`, side by side in one run.

Each round runs the anchor and every command once, in turn (a busy machine slows them alike);
the figures are medians over the rounds of each child's CPU time (user + system, from wait4:
steadier than wall time on a shared machine) and of its wall time. Targets (CPU): `--version`
≤ 1.5×, `--help` ≤ 1.2×, `list`, `render`, `check`, `preflight` and the replay of a small file
≤ 2.5× `python -c pass`. Children run with their bytecode cached, as an installed svcdiag does.

    .venv/bin/python bench/fixed_cost.py [ROUNDS] [--before DIR]
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


def cost(cmd: list[str], tree: str | None = None) -> tuple[float, float]:
    """CPU seconds and wall seconds of one child; `tree`: another svcdiag tree's (on PYTHONPATH, and
    the working directory, which `python -m` puts first on sys.path)."""
    t = time.perf_counter()
    proc = subprocess.Popen(cmd, cwd=tree or ROOT, env={**ENV, "PYTHONPATH": tree} if tree else ENV,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _, status, usage = os.wait4(proc.pid, 0)
    code = os.waitstatus_to_exitcode(status)
    if code not in (0, 1):
        raise SystemExit(f"{' '.join(cmd[2:])} exited {code}")
    return usage.ru_utime + usage.ru_stime, time.perf_counter() - t


def main() -> None:
    import argparse

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("rounds", nargs="?", type=int, default=15)
    ap.add_argument("--before", metavar="DIR", help="also another svcdiag tree (`git archive REV svcdiag templates | tar -x -C "
                    "DIR`), each command run beside this tree's in every round")
    args = ap.parse_args()
    cmds: dict[str, tuple[list[str], float, str | None]] = {"python -c pass": ([sys.executable, "-c", "pass"], 0.0, None)}
    for label, c, target in COMMANDS:
        cmds[label] = (c, target, None)
        if args.before:
            cmds[f"{label} (before)"] = (c, target, args.before)
    for cmd, _, tree in cmds.values():  # bytecode written
        cost(cmd, tree)
    cpu: dict[str, list[float]] = {k: [] for k in cmds}
    wall: dict[str, list[float]] = {k: [] for k in cmds}
    for _ in range(args.rounds):
        for label, (cmd, _, tree) in cmds.items():
            c, w = cost(cmd, tree)
            cpu[label].append(c)
            wall[label].append(w)
    med = {k: statistics.median(v) for k, v in cpu.items()}
    medw = {k: statistics.median(v) for k, v in wall.items()}
    anchor, anchor_w = med["python -c pass"], medw["python -c pass"]
    print(f"fixed cost, median of {args.rounds} interleaved rounds: python -c pass {anchor * 1000:.1f} ms CPU, "
          f"{anchor_w * 1000:.1f} ms wall")
    missed = []
    for label, (_, target, tree) in list(cmds.items())[1:]:
        ratio = med[label] / anchor
        ok = ratio <= target
        if not ok and tree is None:
            missed.append(label)
        print(f"  {label:<31} {med[label] * 1000:6.1f} ms CPU {ratio:5.2f}x  ({medw[label] * 1000:6.1f} ms wall "
              f"{medw[label] / anchor_w:5.2f}x)" + ("" if tree else f"  target <= {target}x {'met' if ok else 'MISSED'}"))
    print("targets: " + ("all met" if not missed else "MISSED: " + ", ".join(missed)))


if __name__ == "__main__":
    main()
