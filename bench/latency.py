#!/usr/bin/env python3
"""Live-path latency and cost on the private rig, side by side with `journalctl -f | grep`.

For each of N starts of a simulated unit, two followers watch the same start at once:
`svcdiag up --wait-ready --json` and the anchor `journalctl -f -o json -u UNIT | grep
--line-buffered` on the milestone patterns. A milestone's latency is the time its line
reaches the follower's reader minus the journal's receive timestamp of that line
(journald stamps an entry as it reads it from the server's stdout). Then:
fail-fast (SIGSEGV in the weight load: the main process's exit, as systemd records it,
to svcdiag's verdict line) and the CPU svcdiag uses while waiting on a hung start.
Targets: p50 ≤ 10 ms, p99 ≤ 50 ms, fail-fast ≤ 200 ms, CPU ≤ 0.5 % of a core.
Run as root: python bench/latency.py [--starts N]
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from svcdiag.systemd.rig import Rig  # noqa: E402

MILESTONES = ("Load weight begin", "Load weight end", "Mamba Cache is allocated", "KV Cache is allocated",
              "Memory pool end", "max_total_num_tokens=", "fired up and ready to roll")


def pct(values: list[float], q: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(round(q * (len(values) - 1))))]


def reader(proc: subprocess.Popen, sink: list[tuple[float, str]]) -> None:
    for raw in proc.stdout:
        sink.append((time.time(), raw.decode(errors="replace")))


def one_start(rig: Rig, units: Path, name: str) -> tuple[list[float], list[float]]:
    unit = f"{name}.service"
    anchor = rig.popen(f"journalctl -f -n0 -o json -u {unit} | grep --line-buffered -E "
                       f"'{'|'.join(MILESTONES)}'", stdout=subprocess.PIPE)
    time.sleep(0.5)  # the anchor is following before the start
    ours = rig.popen(["svcdiag", "--units", str(units), "up", name, "--wait-ready", "--json"], stdout=subprocess.PIPE)
    got_a: list[tuple[float, str]] = []
    got_o: list[tuple[float, str]] = []
    ta = threading.Thread(target=reader, args=(anchor, got_a), daemon=True)
    to = threading.Thread(target=reader, args=(ours, got_o), daemon=True)
    ta.start()
    to.start()
    ours.wait(timeout=120)
    to.join(timeout=5)
    time.sleep(0.5)
    rig.run(["svcdiag", "--units", str(units), "down", name], check=False)
    rig.run("pkill -f '[j]ournalctl -f -n0 -o json'", check=False)
    anchor.wait(timeout=10)
    ta.join(timeout=5)
    lat_o, lat_a = [], []
    for arrived, text in got_o:
        ev = json.loads(text)
        if ev.get("event") not in ("note", "phase", "verdict") and ev.get("ts") and \
                any(m in ev.get("line", "") for m in MILESTONES):
            lat_o.append(arrived - ev["ts"])
    for arrived, text in got_a:
        try:
            e = json.loads(text)
        except ValueError:
            continue
        lat_a.append(arrived - int(e["__REALTIME_TIMESTAMP"]) / 1e6)
    return lat_o, lat_a


def fail_fast(rig: Rig, units: Path, n: int) -> list[float]:
    out = []
    for i in range(n):
        name = f"bench-segv-{uuid.uuid4().hex[:6]}"
        (units / f"{name}.toml").write_text(f'extends = "demo-segfault"\nport = {33200 + i}\n')
        proc = rig.popen(["svcdiag", "--units", str(units), "up", name, "--wait-ready", "--json"], stdout=subprocess.PIPE)
        lines: list[tuple[float, str]] = []
        reader(proc, lines)
        proc.wait()
        verdict_at = lines[-1][0]
        path = "/org/freedesktop/systemd1/unit/" + name.replace("-", "_2d") + "_2eservice"
        died = rig.run(["busctl", "get-property", "org.freedesktop.systemd1", path,
                        "org.freedesktop.systemd1.Service", "ExecMainExitTimestamp"]).stdout.split()[1]
        out.append(verdict_at - int(died) / 1e6)
    return out


def cpu_while_hung(rig: Rig, units: Path, seconds: float) -> float:
    name = f"bench-hang-{uuid.uuid4().hex[:6]}"
    (units / f"{name}.toml").write_text('extends = "demo-hang"\nport = 33300\n[timeouts]\nloading_weights = 600\n')
    proc = rig.popen(["svcdiag", "--units", str(units), "up", name, "--wait-ready"], stdout=subprocess.DEVNULL)
    time.sleep(3)
    pid = rig.run(f"pgrep -f '[b]in/svcdiag --units {units} up {name}'").stdout.decode().split()[0]
    tick = int(rig.run("getconf CLK_TCK").stdout)

    def cpu() -> float:
        fields = rig.run(f"cat /proc/{pid}/stat").stdout.decode().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / tick

    c0, t0 = cpu(), time.monotonic()
    time.sleep(seconds)
    c1, t1 = cpu(), time.monotonic()
    rig.run(f"pkill -INT -f '[b]in/svcdiag --units {units} up {name}'", check=False)
    proc.wait(timeout=10)
    rig.run(["svcdiag", "--units", str(units), "down", name], check=False)
    return 100 * (c1 - c0) / (t1 - t0)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--starts", type=int, default=4)
    ap.add_argument("--cpu-seconds", type=float, default=30)
    args = ap.parse_args()
    units = ROOT / ".rig-tmp" / f"bench-{uuid.uuid4().hex[:6]}"
    shutil.copytree(ROOT / "units", units)
    try:
        with Rig(ROOT, name="svcdiag-bench") as rig:
            lo, la = [], []
            for i in range(args.starts):
                name = f"bench-lat-{uuid.uuid4().hex[:6]}"
                (units / f"{name}.toml").write_text(f'extends = "demo-smoke"\nport = {33100 + i}\nsim_time_scale = 0.2\n')
                o, a = one_start(rig, units, name)
                lo += o
                la += a
            ff = fail_fast(rig, units, 5)
            cpu = cpu_while_hung(rig, units, args.cpu_seconds)
    finally:
        shutil.rmtree(units, ignore_errors=True)
    ms = lambda v: f"{v * 1000:.1f} ms"  # noqa: E731
    print(f"milestone latency, {len(lo)} events over {args.starts} starts (same starts, same lines):")
    print(f"  svcdiag up --wait-ready   p50 {ms(pct(lo, .5))}  p99 {ms(pct(lo, .99))}  max {ms(max(lo))}")
    print(f"  journalctl -f | grep      p50 {ms(pct(la, .5))}  p99 {ms(pct(la, .99))}  max {ms(max(la))}  ({len(la)} lines)")
    print(f"  ratio (anchor / svcdiag)  p50 {pct(la, .5) / pct(lo, .5):.1f}x  p99 {pct(la, .99) / pct(lo, .99):.1f}x")
    print(f"fail-fast, SIGSEGV → verdict line: median {ms(statistics.median(ff))}, max {ms(max(ff))} ({len(ff)} runs)")
    print(f"CPU while waiting on a hung start: {cpu:.2f} % of a core over {args.cpu_seconds:.0f} s")
    ok = pct(lo, .5) <= 0.010 and pct(lo, .99) <= 0.050 and max(ff) <= 0.200 and cpu <= 0.5
    print("targets (p50 ≤ 10 ms, p99 ≤ 50 ms, fail-fast ≤ 200 ms, CPU ≤ 0.5 %): " + ("met" if ok else "NOT all met"))


if __name__ == "__main__":
    main()
