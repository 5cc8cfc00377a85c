#!/usr/bin/env python3
"""#40's rig rows: `status`, `top` and `logs --milestones` beside systemd's own tools, on a big journal
(root; boots the rig).

Starts 20 configs in the private systemd (each left running), fills its journal to ≥ 5M entries
with SGLang-shaped noise from other units (bench/journal_scale.py's fill), then, inside the rig,
times in interleaved rounds: `svcdiag status` of the 20 and `svcdiag top` piped (one snapshot)
against `systemctl status` of the same 20 units, and `svcdiag logs NAME --milestones` against
`journalctl -u NAME.service -b | grep -E` of bench/scan.py's patterns. Medians of wall and CPU
time (the children's), each ratio side by side. Targets (#40): status ≤ 2×, top ≤ 2.5×, logs
--milestones ≤ 3×, on wall time (what a person waits for). Each row also says its ratio to the floor:
the interpreter with the two systemd bindings as svcdiag loads them, which no command that asks systemd
can go below (for `logs`, which reads a published start's milestones without D-Bus, the interpreter with
the journal reader alone).

    sudo .venv/bin/python bench/rig_ratios.py [--entries 5000000] [--rounds 7] [--before DIR] [--hold]

--hold keeps the rig up after the run (until .rig-tmp/rig_ratios.stop exists) and writes
.rig-tmp/rig_ratios.env: rerun the measurement alone against it, e.g. after a change, with
`sh -c "$(cat .rig-tmp/rig_ratios.env)"`.
"""

from __future__ import annotations

import argparse
import resource
import shlex
import shutil
import statistics
import subprocess
import sys
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))


def measure(units: Path, names: list[str], rounds: int, before: str | None = None) -> int:
    """Inside the rig: interleaved rounds of each command and its anchor; prints the table. `before`:
    another svcdiag tree (`git archive REV svcdiag templates | tar -x -C DIR`, DIR under the project:
    the rig sees it), each svcdiag command also run from it in the same rounds."""
    from scan import PATTERNS

    services = " ".join(f"{n}.service" for n in names)
    pattern = shlex.quote("|".join(PATTERNS))
    base = f"svcdiag --units {units}"
    systemctl = f"systemctl status --no-pager {services} >/dev/null"
    rows = [  # (label, command, anchor label, anchor, target)
        ("status (20 units)", f"{base} status >/dev/null", "systemctl status (20)", systemctl, 2.0),
        ("top (one snapshot)", f"{base} top | cat >/dev/null", "systemctl status (20)", systemctl, 2.5),
        (f"logs {names[0]} --milestones", f"{base} logs {names[0]} --milestones >/dev/null",
         "journalctl -u -b | grep -E", f"journalctl --no-pager -u {names[0]}.service -b | grep -E {pattern} >/dev/null",
         3.0),
    ]
    if before:
        tree = f"cd {shlex.quote(before)} && PYTHONPATH={shlex.quote(before)} python -m svcdiag --units {units}"
        rows += [(f"{label} (before)", f"({cmd.replace(base, tree, 1)})", alabel, anchor, target)
                 for label, cmd, alabel, anchor, target in rows]
    # the floor: the interpreter, and the two systemd bindings every one of these commands loads, as svcdiag
    # loads them (pystemd's D-Bus module without pystemd's __init__, which imports lxml: svcdiag.systemd.dbus.dbuslib)
    floors = {"python -c pass": "python -c pass",
              "python + pystemd + cysystemd imports": "python -c 'import pystemd.dbuslib, cysystemd.reader'",
              "python + both, as svcdiag loads them": "python -c 'from svcdiag.systemd.dbus import dbuslib; dbuslib(); "
                                                      "import cysystemd.reader'",
              # `logs --milestones` of a start whose supervisor published them asks no D-Bus: the journal reader alone
              "python + cysystemd (the journal reader)": "python -c 'import cysystemd.reader'"}
    both, reader = floors["python + both, as svcdiag loads them"], floors["python + cysystemd (the journal reader)"]
    commands = sorted({c for r in rows for c in (r[1], r[3])} | set(floors.values()))
    wall: dict[str, list[float]] = {c: [] for c in commands}
    cpu: dict[str, list[float]] = {c: [] for c in commands}
    for c in commands:  # warm the page cache once
        subprocess.run(c, shell=True, check=False)
    for _ in range(rounds):
        for c in commands:
            r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
            t = time.perf_counter()
            subprocess.run(c, shell=True, check=False)
            wall[c].append(time.perf_counter() - t)
            r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
            cpu[c].append(r1.ru_utime + r1.ru_stime - r0.ru_utime - r0.ru_stime)
    entries = subprocess.run("journalctl --header | awk '/^Entry objects:/ {s += $3} END {print s}'",
                             shell=True, capture_output=True, text=True).stdout.strip()
    load = open("/proc/loadavg").read().split()[:3]
    print(f"rig: {int(entries or 0):,} journal entries (journalctl --header), {len(names)} units running; "
          f"median of {rounds} interleaved rounds; load {' '.join(load)}; {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}")
    for label, cmd in floors.items():
        print(f"  floor: {label:<39} {statistics.median(wall[cmd]) * 1e3:6.1f} ms wall ({statistics.median(cpu[cmd]) * 1e3:6.1f} CPU)")
    missed = []
    for label, cmd, alabel, anchor, target in rows:
        w, a = statistics.median(wall[cmd]), statistics.median(wall[anchor])
        c, ac = statistics.median(cpu[cmd]), statistics.median(cpu[anchor])
        ok = w / a <= target
        if not ok:
            missed.append(label)
        floor = reader if label.startswith("logs") else both
        fw, fc = statistics.median(wall[floor]), statistics.median(cpu[floor])
        print(f"  {label:<36} {w * 1e3:7.1f} ms wall ({c * 1e3:6.1f} CPU)  {alabel:<26} {a * 1e3:6.1f} ms wall "
              f"({ac * 1e3:6.1f} CPU)  {w / a:5.2f}x wall ({c / max(ac, 1e-4):5.2f}x CPU)  "
              f"target <= {target}x {'met' if ok else 'MISSED'};  {w / fw:4.2f}x floor wall ({c / fc:4.2f}x CPU)")
    print(f"targets: {'MISSED: ' + ', '.join(missed) if missed else 'all met'}")
    return 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--entries", type=int, default=5_000_000)
    ap.add_argument("--configs", type=int, default=20)
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--hold", action="store_true", help="keep the rig up afterwards (see the module's docstring)")
    ap.add_argument("--before", metavar="DIR", help="also another svcdiag tree, under the project (see measure)")
    ap.add_argument("--inside", metavar="UNITS", help=argparse.SUPPRESS)  # the measurement, run in the rig
    args = ap.parse_args()
    names = [f"scale-{i:02d}" for i in range(args.configs)]
    if args.inside:
        return measure(Path(args.inside), names, args.rounds, args.before)

    from journal_scale import JOURNALD_DROPIN, NOISE_UNITS, entries, fill, scale_units

    from svcdiag.systemd.rig import Rig, available

    why = available()
    if why:
        print(f"rig_ratios: the rig is unavailable: {why}", file=sys.stderr)
        return 2
    units = scale_units("ratios", names)
    stop = ROOT / ".rig-tmp" / "rig_ratios.stop"
    stop.unlink(missing_ok=True)
    try:
        with Rig(ROOT, name=f"svcdiag-ratios-{uuid.uuid4().hex[:4]}") as rig:
            rig.run(f"mkdir -p /etc/systemd/journald.conf.d && printf '{JOURNALD_DROPIN}' > "
                    "/etc/systemd/journald.conf.d/bench.conf && systemctl restart systemd-journald")
            for name in names:
                rig.run(f"svcdiag --units {units} up {name} --wait-ready --json >/dev/null", check=False, timeout=120)
            batch = 0
            t = time.monotonic()
            while (n := entries(rig)) < args.entries * 0.98:
                print(f"rig_ratios: {n:,} entries, filling ({time.monotonic() - t:.0f} s)", file=sys.stderr, flush=True)
                fill(rig, args.entries - n, batch * NOISE_UNITS)
                batch += 1
            print(f"rig_ratios: {n:,} entries after {time.monotonic() - t:.0f} s of filling", file=sys.stderr, flush=True)
            inside = (f".venv/bin/python bench/rig_ratios.py --inside {units} --rounds {args.rounds} --configs {args.configs}"
                      + (f" --before {shlex.quote(str(Path(args.before).resolve()))}" if args.before else ""))
            out = rig.run(inside, check=False, timeout=900)
            sys.stdout.write(out.stdout.decode())
            sys.stderr.write(out.stderr.decode()[-2000:])
            if args.hold:
                (ROOT / ".rig-tmp" / "rig_ratios.env").write_text(shlex.join(rig.argv(inside)) + "\n")
                print(f"rig_ratios: holding the rig (PID 1 {rig.pid1}) until {stop} exists", file=sys.stderr, flush=True)
                while not stop.exists():
                    time.sleep(2)
    finally:
        shutil.rmtree(units, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
