#!/usr/bin/env python3
"""Replay throughput, side by side with grep, in one run.

Generates an SGLang-shaped log (a start by the stand-in, then decode batch lines) of 100k
and 1M lines, replays each with `svcdiag replay` and runs `grep -E` with the same
milestone and failure patterns over the same file. Prints lines/s, the ratio to grep,
and peak RSS at 100k vs 1M lines. Targets: ≥ 1M lines/s on one core, ≤ 3× grep, RSS
flat in the log's length.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PATTERNS = [
    "Load weight (begin|end)", "KV Cache is allocated", "Mamba Cache is allocated", "Memory pool end",
    "max_total_num_tokens=", "Capture .*(CUDA|cuda) graph", "fired up and ready to roll", "Uvicorn running",
    "server_args=ServerArgs", "Traceback \\(most recent call last\\)", "max_running_request is zero",
    "Not enough memory", "CUDA out of memory", "Errno 98", "Received sigquit", "scheduler died",
    "Fatal Python error", "NCCL error", "^[A-Za-z_.]*(Error|Exception)",
]


def make_log(path: Path, lines: int) -> None:
    args = [sys.executable, "-m", "svcdiag.sim", "healthy-hybrid-dflash", "--virtual-clock", "2026-05-23T09:42:00",
            "--no-http", "--tp-size", "1", "--max-mamba-cache-size", "24", "--context-length", "32768",
            "--max-running-requests", "4", "--speculative-algorithm", "DFLASH", "--decode-lines", str(lines - 40)]
    with open(path, "w") as f:
        subprocess.run(args, stdout=f, check=True, cwd=ROOT)


def run(cmd: list[str]) -> tuple[float, float, int]:
    """Wall seconds, CPU seconds and peak RSS (KiB) of one child."""
    t = time.perf_counter()
    # a real file, not /dev/null: GNU grep stops at the first match when output is discarded
    with tempfile.TemporaryFile() as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.DEVNULL, cwd=ROOT)
        _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t
    code = os.waitstatus_to_exitcode(status)
    if code not in (0, 1):
        raise SystemExit(f"{cmd[:3]} exited {code}")
    return wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        results = {}
        for n in (100_000, 1_000_000):
            log = Path(tmp) / f"{n}.log"
            make_log(log, n)
            real = sum(1 for _ in open(log, "rb"))
            size = log.stat().st_size
            ours = min((run([sys.executable, "-m", "svcdiag", "replay", str(log)]) for _ in range(3)), key=lambda r: r[1])
            grep = min((run(["grep", "-E", "-c", "|".join(PATTERNS), str(log)]) for _ in range(3)), key=lambda r: r[1])
            results[n] = (real, size, ours, grep)
            print(f"{real:>9,} lines ({size / 1e6:.0f} MB): svcdiag replay {ours[1]:.2f} s CPU "
                  f"({real / ours[1] / 1e6:.2f} M lines/s), grep -E {grep[1]:.2f} s CPU; "
                  f"ratio {ours[1] / grep[1]:.2f}x grep; peak RSS {ours[2] / 1024:.1f} MiB")
        rss_small, rss_big = results[100_000][2][2], results[1_000_000][2][2]
        print(f"RSS 1M / 100k lines: {rss_big / rss_small:.2f}x ({rss_small / 1024:.1f} → {rss_big / 1024:.1f} MiB)")
        real, _, ours, grep = results[1_000_000]
        print(f"targets: ≥1M lines/s {'met' if real / ours[1] >= 1e6 else 'MISSED'}; "
              f"≤3x grep {'met' if ours[1] / grep[1] <= 3 else 'MISSED'}; "
              f"flat RSS {'met' if rss_big / rss_small < 1.2 else 'MISSED'}")


if __name__ == "__main__":
    main()
