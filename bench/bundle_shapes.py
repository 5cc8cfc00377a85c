#!/usr/bin/env python3
"""Bundles of every bad shape (#40: each answers or is refused within 10 s and 200 MB), timed.

Each is a .tar.gz of ~1-5 MB packed (a compressed MiB repeated: concatenated gzip members are one
stream) whose `journal.export` unpacks to 1 GiB of one pattern, or a million tiny members. Prints,
for `svcdiag replay BUNDLE`, its exit code, CPU and wall seconds, peak RSS (GNU time) and the first
words of its one line. tests/test_inputs_bounded.py asserts the answers; this prints what they cost.
"""

from __future__ import annotations

import gzip
import os
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import scan  # a sibling bench script: `run`, GNU time's peak RSS

GIB = 1 << 30
#: journal.export of 1 GiB of each pattern
SHAPES = {
    "zeros": b"\0",
    "one line, no newline": b"a",
    "MESSAGE= then no newline": None,  # b"MESSAGE=" then x's
    "blank lines": b"\n",
    "short lines": b"a\n",
    "one endless entry (A=b)": b"A=b\n",
    "tiny entries, no message": b"A=b\n\n",
    "tiny messages": b"MESSAGE=x\n\n",
    "field names with no size": b"MESSAGE\n\xff\xff\xff\xff\xff\xff\xff\x7f",
}


def bomb(path: Path, unit: bytes | None, size: int = GIB) -> None:
    head = b""
    if unit is None:
        head, unit = b"MESSAGE=", b"x"
    mib = (unit * ((1 << 20) // len(unit) + 1))[:1 << 20]
    packed = gzip.compress(mib, compresslevel=9)
    h = tarfile.TarInfo("b/journal.export")
    h.size = size
    with path.open("wb") as f:
        f.write(gzip.compress(h.tobuf(format=tarfile.USTAR_FORMAT) + head + mib[:(1 << 20) - len(head)]))
        for _ in range((size >> 20) - 1):
            f.write(packed)
        f.write(gzip.compress(bytes(-size % 512) + bytes(1024)))


def many(path: Path, then_journal: bool) -> None:
    one = tarfile.TarInfo("b/x").tobuf(format=tarfile.GNU_FORMAT)
    tail = b""
    if then_journal:
        j = tarfile.TarInfo("b/journal.export")
        data = b"MESSAGE=hi\n\n"
        j.size = len(data)
        tail = j.tobuf(format=tarfile.GNU_FORMAT) + data + bytes(-len(data) % 512)
    path.write_bytes(gzip.compress(one * 1_000_000 + tail + bytes(1024), compresslevel=1))


def main() -> None:
    print(f"== {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, load {' '.join(f'{x:.2f}' for x in os.getloadavg())}: "
          "svcdiag replay of bundles of bad shapes (1 GiB unpacked, or a million members); target: within 10 s and 200 MB")
    worst_cpu, worst_rss = 0.0, 0
    with tempfile.TemporaryDirectory() as tmp:
        cases = [(name, lambda p, u=u: bomb(p, u)) for name, u in SHAPES.items()]
        cases += [("a million tiny members", lambda p: many(p, False)),
                  ("a million tiny members, then journal.export", lambda p: many(p, True))]
        for name, build in cases:
            path = Path(tmp) / "b.tar.gz"
            build(path)
            t = time.perf_counter()
            cmd = [sys.executable, "-m", "svcdiag", "replay", str(path)]
            with tempfile.NamedTemporaryFile() as rss, tempfile.TemporaryFile() as out:
                p = subprocess.Popen([scan.GNU_TIME, "-f", "%M", "-o", rss.name, *cmd], stdout=out, stderr=out,
                                     env=scan.ENV)
                _, status, usage = os.wait4(p.pid, 0)
                wall = time.perf_counter() - t
                out.seek(0)
                said = out.read().decode(errors="replace").strip().splitlines()
                peak = int((rss.read().decode().strip().splitlines() or ["0"])[-1] or 0)
            cpu = usage.ru_utime + usage.ru_stime
            worst_cpu, worst_rss = max(worst_cpu, cpu), max(worst_rss, peak)
            line = (said[0] if said else "").replace("svcdiag: error: ", "").replace(str(path), "BUNDLE")
            print(f"  {name:<45} {path.stat().st_size / 1e6:5.1f} MB packed: exit {os.waitstatus_to_exitcode(status)}, "
                  f"{cpu:5.2f} s CPU, {wall:5.2f} s wall, peak RSS {scan._mib(peak)}; {line[:90]}", flush=True)
    print(f"worst: {worst_cpu:.2f} s CPU, {worst_rss / 1024:.1f} MiB; target <= 10 s and 200 MB "
          f"{'met' if worst_cpu <= 10 and worst_rss <= 200 * 1024 else 'MISSED'} (CPU: wall time on a shared VM is the load's)")


if __name__ == "__main__":
    main()
