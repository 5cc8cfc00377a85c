#!/usr/bin/env python3
"""Replay throughput, side by side with grep, in one run.

Generates a realistic SGLang serving log: several starts (the bundled smoke start, a restart
of it), each followed by what a serving server prints: `Decode batch.` and `Prefill batch.`
lines with SGLang's real fields, uvicorn access lines (`INFO:     127.0.0.1:… "POST …" 200 OK`),
now and then a warning. Replays it with `svcdiag replay` as plain text at 100k and 1M lines
(10M with --10m), and as `journalctl -o json` and `-o export` at 100k records (1M with --10m),
and runs `grep -E` with the same milestone and failure patterns over the same file. Prints
lines/s of wall time for the whole command (interpreter start-up included), its CPU against
grep's and peak RSS at each size. Targets (plain): ≥ 2M lines/s, ≤ 2× grep, RSS flat in the
length; journal formats: ≥ 1M records/s, ≤ 2× grep.
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
#: as an installed svcdiag runs: its bytecode cached (with PYTHONDONTWRITEBYTECODE set, every
#: module edited since its .pyc was written would be compiled again on each run, ~0.1 ms per 100 lines)
ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
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
    """The same lines as journal entries of one unit, with the fields journald gives a service's
    stdout (a capture from the rig's systemd 252), one invocation id per start and PID 1's
    "Starting"/"Started" entries before each start, in the per-entry order journald's hash gives
    them (journalctl -o export puts the cursor, the two times and the boot id first)."""
    rng = random.Random(7)
    usec = int(T0.timestamp() * 1e6)
    inv = 0
    same = {"_BOOT_ID": "a3b598eca6274fca8fe1a45a192176d4", "_MACHINE_ID": "d3780d53a34c402183c6ecaf2fe2e986",
            "_HOSTNAME": "gpu-node-07", "_TRANSPORT": "stdout", "_UID": "0", "_GID": "0", "_RUNTIME_SCOPE": "system",
            "_STREAM_ID": "38fb110241a64af8b72fce15d1ec8c83", "SYSLOG_IDENTIFIER": "python3", "SYSLOG_FACILITY": "3",
            "PRIORITY": "6", "_PID": "4242", "_COMM": "python3", "_EXE": "/usr/bin/python3.11",
            "_CMDLINE": "/opt/sglang/.venv/bin/python3 -m sglang.launch_server --model-path /dev/shm/Qwen3.6-27B "
                        "--tp 1 --port 30000", "_CAP_EFFECTIVE": "0", "_SYSTEMD_CGROUP": "/system.slice/dflash-smoke.service",
            "_SYSTEMD_UNIT": "dflash-smoke.service", "_SYSTEMD_SLICE": "system.slice"}
    for i, line in enumerate(plain_lines(n)):
        usec += 100_000
        if "] server_args=" in line:
            inv += 1
            yield _journal_order(rng, {"__CURSOR": f"s=e26e;i={i:x};b=a3b5;m={usec:x};t={usec:x};x=5ec5",
                                       "__REALTIME_TIMESTAMP": str(usec), "__MONOTONIC_TIMESTAMP": str(usec - 10**15),
                                       "_BOOT_ID": same["_BOOT_ID"], "_PID": "1", "_SYSTEMD_UNIT": "init.scope",
                                       "UNIT": "dflash-smoke.service", "INVOCATION_ID": f"{inv:032x}", "PRIORITY": "6",
                                       "SYSLOG_IDENTIFIER": "systemd", "MESSAGE": "Started dflash-smoke.service - SGLang."})
        yield _journal_order(rng, {"__CURSOR": f"s=e26e;i={i:x};b=a3b5;m={usec:x};t={usec:x};x=4fb0",
                                   "__REALTIME_TIMESTAMP": str(usec), "__MONOTONIC_TIMESTAMP": str(usec - 10**15),
                                   **same, "_SYSTEMD_INVOCATION_ID": f"{inv:032x}", "MESSAGE": line})


def _journal_order(rng: random.Random, e: dict[str, str]) -> dict[str, str]:
    first = ["__CURSOR", "__REALTIME_TIMESTAMP", "__MONOTONIC_TIMESTAMP", "_BOOT_ID"]
    rest = [k for k in e if k not in first]
    rng.shuffle(rest)
    return {k: e[k] for k in first + rest}


def make(path: Path, n: int, fmt: str) -> None:
    with open(path, "w") as f:
        if fmt == "plain":
            for line in plain_lines(n):
                f.write(line + "\n")
        elif fmt == "json":  # as journalctl 252 prints it: compact, UTF-8 as is, keys in hash order
            rng = random.Random(8)
            for e in journal_entries(n):
                keys = list(e)
                rng.shuffle(keys)
                f.write(json.dumps({k: e[k] for k in keys}, ensure_ascii=False, separators=(",", ":")) + "\n")
        else:
            for e in journal_entries(n):
                f.write("".join(f"{k}={v}\n" for k, v in e.items()) + "\n")


#: --direct: the CLI's imports and the replay use case, without click's command (for a CLI mid-edit)
DIRECT = ("import sys, svcdiag.cli.app; from svcdiag.ops.offline.replay import replay_path; "
          "r = replay_path(sys.argv[1], sys.stdin.buffer)[1]; print(r.describe(), r.verdict.verdict)")


#: GNU time: a child's own peak RSS. wait4's ru_maxrss is not that: Linux carries the parent's
#: peak over exec (this script's, tens of MB after generating a log) into the child's figure
GNU_TIME = "/usr/bin/time"


def run(cmd: list[str], tree: str | None = None) -> tuple[float, float, int | None]:
    """Wall seconds, CPU seconds and peak RSS (KiB; None without GNU time) of one child; `tree`:
    another svcdiag tree's (on PYTHONPATH, and the working directory, which `python -m` puts first)."""
    t = time.perf_counter()
    # a real file, not /dev/null: GNU grep stops at the first match when output is discarded
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err, tempfile.NamedTemporaryFile() as rss:
        timed = [GNU_TIME, "-f", "%M", "-o", rss.name, *cmd] if os.access(GNU_TIME, os.X_OK) else cmd
        proc = subprocess.Popen(timed, stdout=out, stderr=err, cwd=tree or ROOT,
                                env={**ENV, "PYTHONPATH": tree} if tree else ENV)
        _, status, usage = os.wait4(proc.pid, 0)
        err.seek(0)
        problem = err.read().decode(errors="replace")
        peak = rss.read().decode().strip().splitlines()
    wall = time.perf_counter() - t
    code = os.waitstatus_to_exitcode(status)
    if code not in (0, 1) or "Traceback" in problem:
        raise SystemExit(f"{' '.join(cmd[:4])} exited {code}: {problem.strip()[-600:]}")
    return wall, usage.ru_utime + usage.ru_stime, int(peak[-1]) if peak and peak[-1].isdigit() else None


def measure(tmp: str, n: int, fmt: str, runs: int, direct: bool) -> tuple[int, float, float, float, int | None]:
    """Best of `runs` (by wall time) of the whole `svcdiag replay` command and of grep -E on one generated file."""
    log = Path(tmp) / f"{n}.{fmt}"
    make(log, n, fmt)
    size = log.stat().st_size
    cmd = [sys.executable, "-c", DIRECT] if direct else [sys.executable, "-m", "svcdiag", "replay"]
    ours = min((run([*cmd, str(log)]) for _ in range(runs)), key=lambda r: r[0])
    grep = min((run(["grep", "-E", "-c", "|".join(PATTERNS), str(log)]) for _ in range(runs)), key=lambda r: r[1])
    print(f"{fmt:>6} {n:>10,} lines ({size / 1e6:>5.0f} MB): svcdiag replay {ours[0]:5.2f} s wall "
          f"({n / ours[0] / 1e6:.2f} M lines/s), {ours[1]:5.2f} s CPU; grep -E {grep[1]:5.2f} s CPU; "
          f"ratio {ours[1] / grep[1]:.2f}x grep; peak RSS {_mib(ours[2])}", flush=True)
    log.unlink()
    return n, ours[0], ours[1], grep[1], ours[2]


def _mib(kib: int | None) -> str:
    return f"{kib / 1024:.1f} MiB" if kib is not None else "? (no GNU time)"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--10m", dest="big", action="store_true",
                    help="also 10M plain lines (1.4 GB of /tmp) and 1M journal records (~1 GB each), a few minutes")
    ap.add_argument("--runs", type=int, default=3, help="best of N runs (default 3)")
    ap.add_argument("--direct", action="store_true", help="replay through ops.offline.replay after importing the CLI "
                    "(the same work without click's command)")
    args = ap.parse_args()
    sizes = [100_000, 1_000_000] + ([10_000_000] if args.big else [])
    with tempfile.TemporaryDirectory() as tmp:
        plain = [measure(tmp, n, "plain", args.runs if n < 10_000_000 else 1, args.direct) for n in sizes]
        journal = [measure(tmp, n, fmt, args.runs if n < 1_000_000 else 1, args.direct)
                   for fmt in ("json", "export") for n in [100_000] + ([1_000_000] if args.big else [])]
    rss = [r[4] or 0 for r in plain]
    flat = rss[-1] / rss[0] if rss[0] else float("inf")
    print("peak RSS: " + ", ".join(f"{n:,} lines {_mib(r)}" for n, _, _, _, r in plain))
    big = [r for r in plain if r[0] >= 1_000_000]
    speed = all(n / wall >= 2e6 for n, wall, *_ in big)
    ratio = all(cpu / g <= 2 for _, _, cpu, g, _ in big)
    print(f"targets (plain, >= 1M lines): >=2M lines/s wall {'met' if speed else 'MISSED'}; "
          f"<=2x grep CPU {'met' if ratio else 'MISSED'}; flat RSS {'met' if flat < 1.2 else 'MISSED'}")
    jspeed = all(n / wall >= 1e6 for n, wall, *_ in journal)
    jratio = all(cpu / g <= 2 for _, _, cpu, g, _ in journal)
    print(f"aims (json, export): >=1M records/s wall {'met' if jspeed else 'MISSED'}; "
          f"<=2x grep CPU {'met' if jratio else 'MISSED'}")


if __name__ == "__main__":
    main()
