#!/usr/bin/env python3
"""Commands on a big journal, side by side at two sizes, in one run (root; boots the rig).

Fills the private systemd's journal with noise from 1,000 other units, plus 200 svcdiag starts
of 20 configs (the last start of the first config left running), then times `status` (every
config), `events --since 1h`, `logs NAME`, `history` and `wait NAME` (attaching to that
running start) at ~300k entries and again at ~3M (or what --entries says). Target: each ≤ 0.5 s, and growing with what is shown, not
with the journal's size: svcdiag's journal matches are indexed fields
(_SYSTEMD_INVOCATION_ID, INVOCATION_ID, SVCDIAG_SCHEMA) and it seeks, never scans.

    sudo .venv/bin/python bench/journal_scale.py [--entries 3000000] [--configs 20] [--starts 10]
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from svcdiag.systemd.rig import Rig, available  # noqa: E402

NOISE_UNITS = 1000
JOURNALD_DROPIN = """[Journal]
RateLimitBurst=0
RuntimeMaxUse=6G
RuntimeMaxFileSize=512M
"""


def scale_units(prefix: str, names: list[str]) -> Path:
    """A scratch units folder under .rig-tmp/: `names` as simulated starts (demo-smoke, its port each)."""
    units = ROOT / ".rig-tmp" / f"{prefix}-{uuid.uuid4().hex[:6]}"
    units.mkdir(parents=True)
    for base in ("dflash-smoke", "demo-smoke"):  # demo-smoke (the simulated start) extends dflash-smoke
        shutil.copy(ROOT / "units" / f"{base}.toml", units / f"{base}.toml")
    for i, name in enumerate(names):
        (units / f"{name}.toml").write_text(f'extends = "demo-smoke"\nport = {23000 + i}\nsim_time_scale = 0.01\n')
    return units


def fill(rig: Rig, entries: int, start: int) -> None:
    """`entries` more journal entries from NOISE_UNITS transient units, SGLang-shaped lines."""
    per = max(1, entries // NOISE_UNITS)
    script = (f"for i in $(seq {start} {start + NOISE_UNITS - 1}); do systemd-run --quiet --unit=noise-$i "
              f"sh -c 'seq {per} | sed \"s/^/[2026-12-03 10:00:00 TP0] Decode batch. #running-req: 3, #token: /\"'"
              " ; done")
    rig.run(script, timeout=900)
    deadline = time.monotonic() + 900
    while time.monotonic() < deadline:  # until every noise unit has exited and journald has written it all
        out = rig.run("systemctl list-units --no-legend --state=active 'noise-*' | wc -l", check=False).stdout
        if out.strip() == b"0":
            break
        time.sleep(1)


def entries(rig: Rig) -> int:
    out = rig.run("journalctl --no-pager -q -o cat | wc -l", check=False, timeout=600).stdout.decode().strip()
    return int(out or 0)


def timed(rig: Rig, cmd: str, runs: int = 3) -> float:
    best = []
    for _ in range(runs):
        t = time.perf_counter()
        rig.run(cmd, check=False, timeout=120)
        best.append(time.perf_counter() - t)
    return min(best)


def measure(rig: Rig, units: Path, names: list[str]) -> dict[str, float]:
    base = f"svcdiag --units {units}"
    floor = timed(rig, "true")  # nsenter into the rig: subtracted from each figure
    return {
        "status (all)": timed(rig, f"{base} status >/dev/null") - floor,
        "events --since 1h": timed(rig, f"{base} events --since -1h >/dev/null") - floor,
        f"logs {names[0]}": timed(rig, f"{base} logs {names[0]} >/dev/null") - floor,
        "history": timed(rig, f"{base} history >/dev/null") - floor,
        f"wait {names[0]} (attach)": timed(rig, f"{base} wait {names[0]} --json >/dev/null") - floor,
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--entries", type=int, default=3_000_000)
    ap.add_argument("--configs", type=int, default=20)
    ap.add_argument("--starts", type=int, default=10, help="svcdiag starts per config")
    args = ap.parse_args()
    why = available()
    if why:
        print(f"journal_scale: the rig is unavailable: {why}", file=sys.stderr)
        return 2
    names = [f"scale-{i:02d}" for i in range(args.configs)]
    units = scale_units("scale", names)
    results: list[tuple[int, dict[str, float]]] = []
    with Rig(ROOT, name=f"svcdiag-scale-{uuid.uuid4().hex[:4]}") as rig:
        rig.run(f"mkdir -p /etc/systemd/journald.conf.d && printf '{JOURNALD_DROPIN}' > "
                "/etc/systemd/journald.conf.d/bench.conf && systemctl restart systemd-journald")
        for i in range(args.starts):
            for name in names:
                last = i == args.starts - 1 and name == names[0]  # `wait` attaches to it, running
                rig.run(f"svcdiag --units {units} up {name} --wait-ready --json >/dev/null"
                        + ("" if last else f"; svcdiag --units {units} down {name} >/dev/null"),
                        check=False, timeout=120)
        running = rig.run(f"svcdiag --units {units} wait {names[0]} --json", check=False, timeout=120)
        if running.returncode != 0:
            shutil.rmtree(units, ignore_errors=True)
            print(f"journal_scale: {names[0]} is not a healthy running start to attach to: "
                  f"{running.stdout.decode()[-300:]}", file=sys.stderr)
            return 1
        batch = 0  # noise units' names stay unique over every fill
        for target in (max(args.entries // 10, 100_000), args.entries):
            while (n := entries(rig)) < target * 0.98:  # journald keeps ~90 % of a burst: top up
                fill(rig, target - n, batch * NOISE_UNITS)
                batch += 1
            results.append((n, measure(rig, units, names)))
    shutil.rmtree(units, ignore_errors=True)
    (n1, r1), (n2, r2) = results
    print(f"journal entries: {n1:,} and {n2:,} ({n2 / max(n1, 1):.1f}x); {args.configs} configs x {args.starts} starts")
    width = max(map(len, r1))
    for key in r1:
        print(f"  {key:<{width}}  {r1[key]:.3f} s  →  {r2[key]:.3f} s  ({r2[key] / max(r1[key], 1e-3):.2f}x)")
    worst = max(r2.values())
    growth = statistics.median(r2[k] / max(r1[k], 1e-3) for k in r1)
    print(f"targets: each ≤ 0.5 s {'met' if worst <= 0.5 else 'MISSED'} (worst {worst:.3f} s); "
          f"time flat in the journal's size {'met' if growth <= 1.5 else 'MISSED'} (median growth {growth:.2f}x)")
    print(json.dumps({"entries": [n1, n2], "small": r1, "large": r2}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
