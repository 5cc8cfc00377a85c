#!/usr/bin/env python3
"""What cutting lines at 64 KiB (journal_formats.LineBound, issue 39) costs replay, side by side in one run.

Replays the same plain log (the bundled smoke start, then serving chatter: decode batches and access
lines) with LineBound as replay uses it and with a pass-through in its place, alternating, and prints
the CPU seconds of each and their ratio. The check is O(len / 64 KiB) bounded searches a chunk, so the
ratio should stay near 1.
"""

from __future__ import annotations

import io
import sys
import time
from pathlib import Path

from svcdiag.ops.offline import replay as replay_mod
from svcdiag.systemd.journal_formats import LineBound

ROOT = Path(__file__).resolve().parent.parent


class PassThrough(LineBound):
    def _bound(self, data: bytes) -> bytes:
        return data


def log(mb: int) -> bytes:
    start = (ROOT / "svcdiag" / "examples" / "dflash-smoke.log").read_bytes()
    chatter = b"".join(
        b"[2026-05-23 09:43:%02d TP0] Decode batch. #running-req: 3, #token: 4096, token usage: 0.01, "
        b"gen throughput (token/s): 210.55, #queue-req: 0\n" % (i % 60) +
        b'INFO:     127.0.0.1:5%04d - "POST /generate HTTP/1.1" 200 OK\n' % i for i in range(2000))
    return start + chatter * (mb * (1 << 20) // len(chatter))


def cpu(data: bytes, bound: type[LineBound]) -> float:
    replay_mod.LineBound = bound  # type: ignore[misc]
    t = time.process_time()
    replay_mod.replay(io.BytesIO(data), "bench")
    return time.process_time() - t


def main() -> None:
    mb = int(sys.argv[1]) if len(sys.argv) > 1 else 100
    data = log(mb)
    with_, without = [], []
    for _ in range(3):
        with_.append(cpu(data, LineBound))
        without.append(cpu(data, PassThrough))
    a, b = min(with_), min(without)
    print(f"{len(data) / 1e6:.0f} MB plain log, best of 3 CPU s: with LineBound {a:.2f}, pass-through {b:.2f}, "
          f"ratio {a / b:.3f}")


if __name__ == "__main__":
    main()
