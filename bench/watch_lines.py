#!/usr/bin/env python3
"""What the serving watch costs per line after ready (#42), side by side in one run.

Before #42 the supervisor passed a ready server's output through unjudged; now every line after
ready also goes to the watch (a batch is progress) and the judge (a fatal line). This feeds the
same decode-batch lines through one Supervisor's line cutter with the watch off (as before) and
on, and prints µs a line and the ratio. SGLang prints a decode batch line every 40 decode steps
per DP rank (`--decode-log-interval`), i.e. a few to a few hundred lines a second.
Run: python bench/watch_lines.py [--lines N]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from svcdiag.config.service import find_units_dir  # noqa: E402
from svcdiag.judge.watch import ServingWatch  # noqa: E402
from svcdiag.ops.serve.supervise import Supervisor  # noqa: E402
from svcdiag.systemd.notify import Notifier  # noqa: E402

LINE = ("[2026-12-06 10:00:00 TP0] Decode batch. #running-req: 64, #token: 90000, token usage: 0.93, cuda graph: True, "
        "gen throughput (token/s): 2400.00, #queue-req: 212,\n")


def ready_supervisor(watch: bool) -> Supervisor:
    cfg = find_units_dir(str(ROOT / "units")).load("dflash-smoke")
    sup = Supervisor(cfg, ["true"], notifier=Notifier(send=lambda _line: None), environ={})
    for line in (ROOT / "svcdiag" / "examples" / "dflash-smoke.log").read_text().splitlines():
        sup._feed(line)
    sup.verdict = sup.judge.verdict
    if watch:
        sup.watch = ServingWatch(sup.policy, time.time())  # no health thread: the lines alone are measured
    return sup


def per_line(sup: Supervisor, chunk: bytes, n: int) -> float:
    t0 = time.perf_counter()
    sup._lines(chunk)
    return (time.perf_counter() - t0) / n * 1e6


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--lines", type=int, default=50_000)
    n = ap.parse_args().lines
    chunk = (LINE * n).encode()
    off, on = ready_supervisor(False), ready_supervisor(True)
    rounds = [(per_line(off, chunk, n), per_line(on, chunk, n)) for _ in range(3)]
    best_off, best_on = min(r[0] for r in rounds), min(r[1] for r in rounds)
    print(f"{n:,} decode batch lines after ready, best of 3")
    print(f"  cut, not watched:       {best_off:6.2f} µs a line (before #42 a ready server's bytes were not even cut)")
    print(f"  watch on:               {best_on:6.2f} µs a line  ({best_on / best_off:.1f}× the cutter alone)")
    print(f"  at 1,000 lines/s the watch costs {best_on * 1000 / 1e6 * 100:.2f} % of a core")
    return 0


if __name__ == "__main__":
    sys.exit(main())
