#!/usr/bin/env python3
"""Replay of real, noisy serving logs side by side with `grep -E -c` of the same patterns, in one run.

Three mixes of the serving log of bench/scan.py (decode and prefill batches, access lines, rare
warnings), each at 1M lines (and 10M with --10m, 50M with --50m: ~7 GB of /tmp and several minutes a
mix on a 2-core VM):

- clean: a start every 333k lines, nothing else;
- noisy: also a tqdm bar every 50k lines (CUDA graph capture's, its updates glued by `\\r` on one
  line, as a terminal capture or a pipe keeps them) and a traceback every 100k (`Error in request:`
  then the traceback as SGLang's OpenAI server logs a rejected request, then uvicorn's 400);
- heavy: a bar every 2k lines, a traceback every 5k.

And the noisy mix as `journalctl -o export`, 1M records (~0.9 GB: an export record is ~1 KB), the plain
rows' million; at 100k records (`--export-records 100000`) the command's start-up (~45 ms of imports
above the interpreter) is a fifth of grep's whole run, and the row measures that, not the reading. Figures: the whole `svcdiag replay FILE` command's CPU (interpreter start-up included)
against grep's CPU on the same file, best of --runs, with each pre-filter engine (SVCDIAG_PREFILTER: hyperscan where
installed, python) side by side, and peak RSS (GNU time). Targets: plain
≤ 1.0× grep at every size and mix, RSS flat in the length; export ≤ 1.2× grep.
"""

from __future__ import annotations

import argparse
import os
import random
import sys
import tempfile
from collections.abc import Iterator
from datetime import datetime, timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import scan  # a sibling bench script: its serving lines, grep's patterns, `run`

#: (bar every N lines, traceback every N lines); a start every 333k lines in all three
MIXES = {"clean": (0, 0), "noisy": (50_000, 100_000), "heavy": (2_000, 5_000)}
START_EVERY = 333_000
BAR = "\r".join(f"Capturing batches (bs={160 - 8 * i} avail_mem=12.{31 - i:02d} GB): {100 * i // 20:3d}%|"
                f"{'█' * (i // 2):<10}| {i}/20 [00:{i:02d}<00:{20 - i:02d},  1.2it/s]" for i in range(21))
TRACEBACK = """Error in request: The input ({n} tokens) is longer than the model's context length (40960 tokens).
Traceback (most recent call last):
  File "/usr/local/lib/python3.12/dist-packages/sglang/srt/entrypoints/openai/serving_base.py", line 42, in handle_request
    return await self._handle_non_streaming_request(
                 ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^
  File "/usr/local/lib/python3.12/dist-packages/sglang/srt/entrypoints/openai/serving_chat.py", line 520, in _handle_non_streaming_request
    ret = await self.tokenizer_manager.generate_request(
  File "/usr/local/lib/python3.12/dist-packages/sglang/srt/managers/tokenizer_manager.py", line 498, in _validate_one_request
    raise ValueError(
ValueError: The input ({n} tokens) is longer than the model's context length (40960 tokens)."""


def noisy_lines(n: int, bar_every: int, tb_every: int, *, starts: bool = True) -> Iterator[str]:
    """n lines: a start every START_EVERY lines (`starts`), serving lines between, a bar and a traceback now and then."""
    rng = random.Random(23)
    t = scan.T0
    i = 0
    while i < n:
        shift = t - datetime(2026, 5, 23, 9, 42, 5)
        for line in scan.START if starts else ():
            yield (f"[{datetime.fromisoformat(line[1:20]) + shift:%Y-%m-%d %H:%M:%S}{line[20:]}"
                   if line.startswith("[2") else line)
        i += len(scan.START) if starts else 0
        t += timedelta(seconds=70)
        left = min(START_EVERY, n - i)
        while left > 0:
            lines, t = scan.serving(rng, min(left, 10_000), t)
            for line in lines:
                i += 1
                left -= 1
                yield line
                if bar_every and i % bar_every == 0:
                    yield BAR
                if tb_every and i % tb_every == 0:
                    stamp = f"[{t:%Y-%m-%d %H:%M:%S}] "
                    yield stamp + TRACEBACK.format(n=40960 + i % 1000)
                    yield f'{stamp}INFO:     10.20.0.7:{30000 + i % 30000} - "POST /v1/chat/completions HTTP/1.1" 400 Bad Request'


def make(path: Path, n: int, mix: str, fmt: str = "plain", *, starts: bool = True) -> None:
    bar_every, tb_every = MIXES[mix]
    lines = noisy_lines(n, bar_every, tb_every, starts=starts)
    with open(path, "w") as f:
        if fmt == "plain":
            buf = []
            for line in lines:
                buf.append(line)
                if len(buf) >= 100_000:
                    f.write("\n".join(buf) + "\n")
                    buf = []
            if buf:
                f.write("\n".join(buf) + "\n")
        else:
            write_export(f, lines)


#: the fields journald gives a service's stdout, as bench/scan.py's records carry them (~1 KB a record)
SAME = "".join(f"{k}={v}\n" for k, v in {
    "_BOOT_ID": "a3b598eca6274fca8fe1a45a192176d4", "_MACHINE_ID": "d3780d53a34c402183c6ecaf2fe2e986",
    "_HOSTNAME": "gpu-node-07", "_TRANSPORT": "stdout", "_UID": "0", "_GID": "0", "_RUNTIME_SCOPE": "system",
    "_STREAM_ID": "38fb110241a64af8b72fce15d1ec8c83", "SYSLOG_IDENTIFIER": "python3", "SYSLOG_FACILITY": "3",
    "PRIORITY": "6", "_PID": "4242", "_COMM": "python3", "_EXE": "/usr/bin/python3.11",
    "_CMDLINE": "/opt/sglang/.venv/bin/python3 -m sglang.launch_server --model-path /dev/shm/Qwen3.6-27B --tp 1",
    "_CAP_EFFECTIVE": "0", "_SYSTEMD_CGROUP": "/system.slice/bench.service", "_SYSTEMD_UNIT": "bench.service",
    "_SYSTEMD_SLICE": "system.slice"}.items())


def write_export(f, lines: Iterator[str]) -> None:
    """One record a line, as journald keeps them; a message with a CR (a bar) is a binary field, as
    journalctl writes a field that is not printable."""
    usec = int(scan.T0.timestamp() * 1e6)
    for k, line in enumerate(part for text in lines for part in text.split("\n")):
        usec += 100_000
        head = (f"__CURSOR=s=e26e;i={k:x};b=a3b5;m={usec:x};t={usec:x};x=4fb0\n__REALTIME_TIMESTAMP={usec}\n"
                f"__MONOTONIC_TIMESTAMP={usec - 10**15}\n{SAME}_SYSTEMD_INVOCATION_ID={1 + k // START_EVERY:032x}\n")
        if "\r" in line:
            data = line.encode()
            f.buffer.write(head.encode() + b"MESSAGE\n" + len(data).to_bytes(8, "little") + data + b"\n\n")
        else:
            f.buffer.write(f"{head}MESSAGE={line}\n\n".encode())


def engines() -> list[str]:
    """The pre-filter engines to run (SVCDIAG_PREFILTER): Hyperscan where its wheel imports, and CPython's searches."""
    from svcdiag.sglang import prefilter

    return ["hyperscan", "python"] if prefilter.available() else ["python"]


def measure(tmp: str, n: int, mix: str, fmt: str, runs: int, before: str | None = None) -> dict[str, tuple[float, float, int | None]]:
    """Best of `runs` CPU of `svcdiag replay` with each engine (and the tree `before`, with its default), and of grep,
    round by round; prints the row and returns each one's (ratio, CPU s, peak RSS KiB)."""
    log = Path(tmp) / f"{mix}-{n}.{fmt}"
    make(log, n, mix, fmt)
    names = engines()
    cmds: dict[str, tuple[list[str], str | None]] = {
        e: (["env", f"SVCDIAG_PREFILTER={e}", sys.executable, "-m", "svcdiag", "replay", str(log)], None) for e in names}
    if before:
        cmds["before"] = ([sys.executable, "-m", "svcdiag", "replay", str(log)], before)
    best: dict[str, tuple[float, float, int | None]] = {}
    grep = (0.0, 1e9, None)
    for _ in range(runs):  # round by round: a busy machine slows each alike
        for name, (cmd, tree) in cmds.items():
            r = scan.run(cmd, tree)
            if name not in best or r[1] < best[name][1]:
                best[name] = r
        g = scan.run(["grep", "-E", "-c", "|".join(scan.PATTERNS), str(log)])
        grep = g if g[1] < grep[1] else grep
    out = {name: (r[1] / grep[1], r[1], r[2]) for name, r in best.items()}
    cells = "; ".join(f"{name} {cpu:5.2f} s {ratio:.2f}x" for name, (ratio, cpu, _) in out.items())
    rss = " / ".join(scan._mib(m) for _, _, m in out.values())
    print(f"{fmt:>6} {mix:>5} {n:>10,} lines ({log.stat().st_size / 1e6:>5.0f} MB): grep -E -c {grep[1]:5.2f} s CPU; "
          f"svcdiag replay {cells}; peak RSS {rss}", flush=True)
    log.unlink()
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--10m", dest="big", action="store_true", help="also 10M lines of each mix (~1.4 GB of /tmp each)")
    ap.add_argument("--50m", dest="huge", action="store_true", help="also 50M lines of each mix (~7 GB of /tmp each, one run)")
    ap.add_argument("--runs", type=int, default=3, help="best of N runs (default 3; 1 at 10M and 50M)")
    ap.add_argument("--mix", action="append", choices=list(MIXES), help="only these mixes (default: all)")
    ap.add_argument("--no-export", action="store_true", help="leave out the export row")
    ap.add_argument("--export-only", action="store_true", help="only the export row")
    ap.add_argument("--export-records", type=int, metavar="N", help="records of the export row (default 1M, "
                    "the plain rows' million)")
    ap.add_argument("--before", metavar="DIR", help="also another svcdiag tree (`git archive REV svcdiag templates | tar -x -C "
                    "DIR`), run round by round beside this one")
    args = ap.parse_args()
    sizes = [1_000_000] + ([10_000_000] if args.big else []) + ([50_000_000] if args.huge else [])
    print(f"== {datetime.now():%Y-%m-%d %H:%M} UTC, load {' '.join(f'{x:.2f}' for x in os.getloadavg())}; "
          f"engines: {', '.join(engines())} (CPU of the whole command, best of {args.runs}; ratio against grep -E -c)", flush=True)
    plain: dict[str, list[dict[str, tuple[float, float, int | None]]]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for mix in [] if args.export_only else args.mix or list(MIXES):
            plain[mix] = [measure(tmp, n, mix, "plain", args.runs if n < 10_000_000 else 1, args.before) for n in sizes]
        records = args.export_records or 1_000_000
        export = None if args.no_export else measure(tmp, records, "noisy",
                                                     "export", args.runs, args.before)
    print(f"load {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    for name in engines():
        exp = f"export <= 1.2x grep {'met' if export[name][0] <= 1.2 else 'MISSED'} ({export[name][0]:.2f}x)" if export else ""
        if not plain:
            print(f"targets ({name}): {exp}")
            continue
        worst = max(row[name][0] for rows in plain.values() for row in rows)
        rss = [row[name][2] for rows in plain.values() for row in rows if row[name][2]]
        flat = max(rss) / min(rss) < 1.3 if rss else False
        print(f"targets ({name}): plain <= 1.0x grep CPU {'met' if worst <= 1.0 else 'MISSED'} (worst {worst:.2f}x), "
              f"<= 0.5x {'met' if worst <= 0.5 else 'MISSED'}; RSS flat {'met' if flat else 'MISSED'}" + (f"; {exp}" if exp else ""))


if __name__ == "__main__":
    main()
