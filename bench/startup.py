#!/usr/bin/env python3
"""CLI start-up against the interpreter's own: `svcdiag --help` and `svcdiag status` vs
`python -c pass`, wall time, median of N runs each. Target: ≤ 1.2×."""

from __future__ import annotations

import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def median_wall(cmd: list[str], runs: int) -> float:
    times = []
    for _ in range(runs):
        t = time.perf_counter()
        subprocess.run(cmd, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def main() -> None:
    runs = int(sys.argv[1]) if len(sys.argv) > 1 else 15
    base = median_wall([sys.executable, "-c", "pass"], runs)
    print(f"python -c pass: {base * 1000:.1f} ms")
    for args in (["--help"], ["status"]):
        t = median_wall([sys.executable, "-m", "svcdiag", *args], runs)
        print(f"svcdiag {' '.join(args)}: {t * 1000:.1f} ms, {t / base:.2f}x python -c pass "
              f"({'met' if t / base <= 1.2 else 'MISSED'} ≤1.2x)")


if __name__ == "__main__":
    main()
