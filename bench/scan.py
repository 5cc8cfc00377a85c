#!/usr/bin/env python3
"""Replay throughput, side by side with grep, in one run.

Generates a realistic SGLang serving log: several starts (the bundled smoke start, a restart
of it), each followed by what a serving server prints: `Decode batch.` and `Prefill batch.`
lines with SGLang's real fields, uvicorn access lines (`INFO:     127.0.0.1:… "POST …" 200 OK`),
now and then a warning. Replays it with `svcdiag replay` as plain text at 100k and 1M lines
(10M with --10m), and as `journalctl -o json` and `-o export` at 100k lines, and runs
`grep -E` with the same milestone and failure patterns over the same file. Prints lines/s
(CPU time of the whole process, interpreter start-up included), the ratio to grep's CPU and
peak RSS at each size. Targets (plain): ≥ 2M lines/s, ≤ 2× grep, RSS flat in the length.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PATTERNS = [
    "Load weight (begin|end)", "KV Cache is allocated", "Mamba Cache is allocated", "Memory pool end",
    "max_total_num_tokens=", "Capture .*(CUDA|cuda) graph", "fired up and ready to roll", "Uvicorn running",
    "server_args=(ServerArgs|\\{)", "Traceback \\(most recent call last\\)", "max_running_request is zero",
    "Not enough memory", "CUDA out of memory", "Errno 98", "Received sigquit", "scheduler died",
    "Fatal Python error", "NCCL error", "^[A-Za-z_.]*(Error|Exception)",
]
START = (ROOT / "svcdiag" / "examples" / "dflash-smoke.log").read_text().splitlines()
T0 = datetime(2026, 5, 23, 9, 43, 12)


def serving(rng: random.Random, n: int, t: datetime) -> tuple[list[str], datetime]:
    """n lines of a serving server, ten a second: 70 % decode, 15 % prefill, access lines, rare warnings."""
    out = []
    for i in range(n):
        if i % 10 == 0:
            t += timedelta(seconds=1)
            ts = t.strftime("%Y-%m-%d %H:%M:%S")
        k = rng.random()
        if k < 0.70:
            out.append(f"[{ts} TP0] Decode batch. #running-req: {rng.randint(1, 64)}, #token: {rng.randint(100, 90000)}, "
                       f"token usage: 0.{rng.randint(1, 99):02d}, cuda graph: True, gen throughput (token/s): "
                       f"{rng.uniform(50, 3000):.2f}, #queue-req: {rng.randint(0, 9)}, ")
        elif k < 0.85:
            out.append(f"[{ts} TP0] Prefill batch. #new-seq: {rng.randint(1, 8)}, #new-token: {rng.randint(1, 8192)}, "
                       f"#cached-token: {rng.randint(0, 8192)}, token usage: 0.{rng.randint(1, 99):02d}, "
                       f"#running-req: {rng.randint(0, 64)}, #queue-req: {rng.randint(0, 9)}, ")
        elif k < 0.999:
            out.append(f'INFO:     127.0.0.1:{rng.randint(30000, 65000)} - "POST /generate HTTP/1.1" 200 OK')
        else:
            out.append(f"[{ts} TP0] WARNING: The request 'x{i}' took longer than 60 s to schedule")
    return out, t


def plain_lines(n: int):
    """Three starts of the same server (restarts), the serving lines split between them."""
    rng = random.Random(19)
    t = T0
    per = (n - 3 * len(START)) // 3
    for k in range(3):
        shift = t - datetime(2026, 5, 23, 9, 42, 5)
        for line in START:  # the start's own lines, moved to this start's time
            if line.startswith("[2"):
                ts = datetime.fromisoformat(line[1:20]) + shift
                yield f"[{ts:%Y-%m-%d %H:%M:%S}{line[20:]}"
            else:
                yield line
        t += timedelta(seconds=70)
        left = per if k < 2 else n - 3 * len(START) - 2 * per
        while left > 0:
            chunk, t = serving(rng, min(left, 100_000), t)
            left -= len(chunk)
            yield from chunk


def journal_entries(n: int):
    """The same lines as journal entries of one unit, one invocation id per start."""
    usec = int(T0.timestamp() * 1e6)
    inv = 0
    for line in plain_lines(n):
        if "] server_args=" in line:
            inv += 1
        usec += 100_000
        yield {"__REALTIME_TIMESTAMP": str(usec), "_SYSTEMD_UNIT": "dflash-smoke.service", "PRIORITY": "6",
               "_SYSTEMD_INVOCATION_ID": f"{inv:032x}", "SYSLOG_IDENTIFIER": "python3", "MESSAGE": line}


def make(path: Path, n: int, fmt: str) -> None:
    with open(path, "w") as f:
        if fmt == "plain":
            for line in plain_lines(n):
                f.write(line + "\n")
        elif fmt == "json":
            for e in journal_entries(n):
                f.write(json.dumps(e) + "\n")
        else:
            for e in journal_entries(n):
                f.write("".join(f"{k}={v}\n" for k, v in e.items()) + "\n")


#: --direct: the CLI's imports and the replay use case, without click's command (for a CLI mid-edit)
DIRECT = ("import sys, svcdiag.cli; from svcdiag.ops.replay import replay_path; "
          "r = replay_path(sys.argv[1], sys.stdin.buffer)[1]; print(r.describe(), r.verdict.verdict)")


def run(cmd: list[str]) -> tuple[float, float, int]:
    """Wall seconds, CPU seconds and peak RSS (KiB) of one child."""
    t = time.perf_counter()
    # a real file, not /dev/null: GNU grep stops at the first match when output is discarded
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        proc = subprocess.Popen(cmd, stdout=out, stderr=err, cwd=ROOT)
        _, status, usage = os.wait4(proc.pid, 0)
        err.seek(0)
        problem = err.read().decode(errors="replace")
    wall = time.perf_counter() - t
    code = os.waitstatus_to_exitcode(status)
    if code not in (0, 1) or "Traceback" in problem:
        raise SystemExit(f"{' '.join(cmd[:4])} exited {code}: {problem.strip()[-600:]}")
    return wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss


def measure(tmp: str, n: int, fmt: str, runs: int, direct: bool) -> tuple[int, float, float, int]:
    log = Path(tmp) / f"{n}.{fmt}"
    make(log, n, fmt)
    size = log.stat().st_size
    cmd = [sys.executable, "-c", DIRECT] if direct else [sys.executable, "-m", "svcdiag", "replay"]
    ours = min((run([*cmd, str(log)]) for _ in range(runs)), key=lambda r: r[1])
    grep = min((run(["grep", "-E", "-c", "|".join(PATTERNS), str(log)]) for _ in range(runs)), key=lambda r: r[1])
    print(f"{fmt:>6} {n:>10,} lines ({size / 1e6:>5.0f} MB): svcdiag replay {ours[1]:6.2f} s CPU "
          f"({n / ours[1] / 1e6:.2f} M lines/s), grep -E {grep[1]:5.2f} s CPU; "
          f"ratio {ours[1] / grep[1]:.2f}x grep; peak RSS {ours[2] / 1024:.1f} MiB", flush=True)
    log.unlink()
    return n, ours[1], grep[1], ours[2]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--10m", dest="big", action="store_true", help="also 10M lines (1.4 GB of /tmp, ~1 min)")
    ap.add_argument("--runs", type=int, default=3, help="best of N runs (default 3)")
    ap.add_argument("--direct", action="store_true", help="replay through ops.replay after importing the CLI "
                    "(the same work without click's command)")
    args = ap.parse_args()
    sizes = [100_000, 1_000_000] + ([10_000_000] if args.big else [])
    with tempfile.TemporaryDirectory() as tmp:
        plain = [measure(tmp, n, "plain", args.runs if n < 10_000_000 else 1, args.direct) for n in sizes]
        for fmt in ("json", "export"):
            measure(tmp, 100_000, fmt, args.runs, args.direct)
    rss = [r[3] for r in plain]
    # 100k lines is below the allocator's warm-up (glibc keeps ~two chunks' worth of freed buffers):
    # flat means the same from 1M lines on
    flat = rss[-1] / rss[1]
    print("peak RSS: " + ", ".join(f"{n:,} lines {r / 1024:.1f} MiB" for (n, *_), r in zip(plain, rss, strict=True)))
    big = [r for r in plain if r[0] >= 1_000_000]
    speed = all(n / cpu >= 2e6 for n, cpu, _, _ in big)
    ratio = all(cpu / g <= 2 for _, cpu, g, _ in big)
    print(f"targets (plain, ≥ 1M lines): ≥2M lines/s {'met' if speed else 'MISSED'}; "
          f"≤2x grep {'met' if ratio else 'MISSED'}; flat RSS from 1M lines {'met' if flat < 1.2 else 'MISSED'}")


if __name__ == "__main__":
    main()
