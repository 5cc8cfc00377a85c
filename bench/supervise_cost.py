#!/usr/bin/env python3
"""The supervisor's CPU per 1M lines it forwards while judging, side by side with its anchors, in one run.

`svcdiag supervise -- cat LOG` (a notify unit's main process in front of a server that prints LOG)
on 1M serving lines (bench/replay_noise.py's noisy mix without its starts: decode and prefill
batches, access lines, a bar and a traceback now and then), so that no start concludes and every
line is judged. Its own
share is its CPU less `cat`'s and less its start-up (`supervise -- true`). Anchors: `cat LOG`,
and the grammar's own cost measured alone: the same lines judged in this process by `replay`'s
fast path (the judge's bulk path over a file, no pipe, no pass-through). Target: the supervisor's
share ≤ 2× (cat + the grammar alone). No rig needed.

    .venv/bin/python bench/supervise_cost.py [--lines N] [--runs R]
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import replay_noise  # a sibling bench script: its noisy serving log

ROOT = Path(__file__).resolve().parent.parent
ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}


def child_cpu(argv: list[str], env: dict[str, str] | None = None) -> float:
    """A child's CPU seconds; with PYTHONPATH in `env`, run from there (`python -m` puts its working
    directory first on sys.path: from this tree, this tree's svcdiag would be imported)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run(argv, stdout=subprocess.DEVNULL, check=False, env=env or ENV, cwd=(env or ENV).get("PYTHONPATH", ROOT))
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def grammar_alone(log: Path) -> float:
    """CPU seconds of judging the log in this process (replay's fast path), imports already done."""
    from svcdiag.ops.offline.replay import replay

    t = time.process_time()
    with open(log, "rb") as f:
        replay(f, str(log))
    return time.process_time() - t


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--lines", type=int, default=1_000_000)
    ap.add_argument("--runs", type=int, default=3, help="best of N (default 3)")
    ap.add_argument("--before", metavar="DIR", help="also the supervisor of another svcdiag tree (`git archive REV "
                    "svcdiag templates | tar -x -C DIR`), run beside this one")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        units = Path(tmp)
        # a notify unit whose start never concludes within the run: every line is judged
        (units / "p.toml").write_text('model_path = "/m"\nreadiness = "notify"\n[timeouts]\nstarting = 100000\n')
        log = units / "log"
        replay_noise.make(log, args.lines, "noisy", starts=False)  # no start: nothing concludes
        sv = [sys.executable, "-m", "svcdiag", "--units", str(units), "supervise", "--config", "p", "--"]
        trees = {"this tree": ENV, **({"before": {**ENV, "PYTHONPATH": args.before}} if args.before else {})}
        best: dict[str, float] = {"cat": 1e9, "grammar": 1e9}
        for label, env in trees.items():
            child_cpu([*sv, "true"], env)  # bytecode written
            best[f"start-up {label}"] = best[f"supervise {label}"] = 1e9
        for _ in range(args.runs):
            best["cat"] = min(best["cat"], child_cpu(["cat", str(log)]))
            for label, env in trees.items():
                best[f"start-up {label}"] = min(best[f"start-up {label}"], child_cpu([*sv, "true"], env))
                best[f"supervise {label}"] = min(best[f"supervise {label}"], child_cpu([*sv, "cat", str(log)], env))
            best["grammar"] = min(best["grammar"], grammar_alone(log))
    anchor = best["cat"] + best["grammar"]
    per = 1_000_000 / args.lines
    print(f"per 1M lines: cat {best['cat'] * per:.2f} s CPU; the grammar alone (replay's fast path, in process) "
          f"{best['grammar'] * per:.2f} s; anchor (cat + grammar) {anchor * per:.2f} s")
    for label in trees:
        own = best[f"supervise {label}"] - best["cat"] - best[f"start-up {label}"]
        print(f"svcdiag supervise ({label}), {args.lines:,} lines judged: its own share {own * per:.2f} s CPU per 1M, "
              f"ratio {own / anchor:.2f}x (cat + grammar) (start-up {best[f'start-up {label}'] * 1000:.0f} ms subtracted); "
              f"target <= 2x {'met' if own <= 2 * anchor else 'MISSED'}")


if __name__ == "__main__":
    main()
