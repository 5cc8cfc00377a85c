#!/usr/bin/env python3
"""Where a notify unit's milestone latency goes, inside `up` (#16): hop by hop, on the rig (root).

For N notify starts of the stand-in (as bench/latency.py's), `svcdiag up --wait-ready --json`
runs with stamps (time.time, after each step) around what it does between the signal and the
event: the poll/select that woke it, reading D-Bus, reading the journal (each record), the
signals' bodies, the journal reader's next() (sd_journal_next) and the judge of each line, the
event on stdout, svcdiag's own journal record, Python's garbage collections. Nothing in svcdiag
is changed to do it: this script wraps those functions in the `up` process it starts. Then, per
milestone, from the journal's stamp of its line: when `up` woke, when next() began and returned,
when it had the record, when the judge had its events, when the event left on stdout, when the
bench's reader had it; the medians, the steps of the milestones read first after their wakeup,
and the collections (those on a milestone's way from wakeup to event, and all while following).
Run as root: python bench/notify_trace.py [--starts N] [--show K]
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
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from latency import MILESTONES, reader  # noqa: E402

from svcdiag.systemd.rig import Rig  # noqa: E402

#: run inside the rig as `python -c TRACED OUT -- svcdiag-args`: `up`, with its steps stamped to OUT
TRACED = r'''
import atexit, select, sys, time
out_path, sys.argv = sys.argv[1], ["svcdiag", *sys.argv[3:]]
T = []
def st(label, extra=""):
    T.append((time.time(), label, extra))
_select = select.select
def traced_select(r, w, x, t=None):
    res = _select(r, w, x, t)
    st("woke", f"select {bool(res[0])}")
    return res
select.select = traced_select
_poll = select.poll
class Poll:
    def __init__(self): self.p = _poll()
    def register(self, *a): return self.p.register(*a)
    def unregister(self, *a): return self.p.unregister(*a)
    def poll(self, t=None):
        res = self.p.poll(t)
        st("woke", f"poll {res}")
        return res
select.poll = Poll
from svcdiag.systemd import dbus, journal
from svcdiag.output import report
def wrap(cls, name, label):
    f = getattr(cls, name)
    def g(self, *a):
        st(label + "-begin"); r = f(self, *a); st(label + "-end"); return r
    setattr(cls, name, g)
wrap(dbus.Systemd, "process", "dbus")
wrap(journal.JournalSink, "publish", "own-journal-record")
_read = journal.Follower.read
def read(self):
    for rec in _read(self):
        st("record", f"{rec.ts:.6f}\t{rec.text[:60]}")
        yield rec
journal.Follower.read = read
class Reader:  # the journal reader, its next() (sd_journal_next) stamped
    def __init__(self, r): self.r = r
    def __getattr__(self, name): return getattr(self.r, name)
    def next(self):
        st("jnext-begin"); e = self.r.next(); st("jnext-end"); return e
_init = journal.Follower.__init__
def init(self, *a, **kw):
    _init(self, *a, **kw); self.reader = Reader(self.reader)
journal.Follower.__init__ = init
from svcdiag.judge import pipeline
_line = pipeline.Judge.service_line
def service_line(self, *a):
    st("judge-begin"); r = _line(self, *a); st("judge-end"); return r
pipeline.Judge.service_line = service_line
import gc
gc.callbacks.append(lambda phase, info: st("gc-" + phase, f"gen {info['generation']} {info.get('collected', '')}"))
for name in ("props", "status_text"):
    p = getattr(dbus.Tracked, name)
    def getter(self, p=p, name=name):
        st("signal-bodies-begin", name); v = p.fget(self); st("signal-bodies-end"); return v
    setattr(dbus.Tracked, name, property(getter, p.fset))
_pub = report.JsonLines.publish
def publish(self, rec):
    _pub(self, rec); st("stdout", f"{rec.ts}\t{(rec.line or '')[:60]}")
report.JsonLines.publish = publish
def dump():
    with open(out_path, "w") as f:
        for wall, label, extra in T:
            f.write(f"{wall:.6f}\t{label}\t{extra}\n")
atexit.register(dump)
from svcdiag.cli import main
main()
'''


def one_start(rig: Rig, units: Path, name: str, trace: Path) -> list[tuple[float, str, float]]:
    """(journal stamp, line, arrival at the reader) of each milestone event of one traced start."""
    proc = rig.popen(["python", "-c", TRACED, str(trace), "--", "--units", str(units), "up", name, "--wait-ready",
                      "--json"], stdout=subprocess.PIPE)
    got: list[tuple[float, str]] = []
    t = threading.Thread(target=reader, args=(proc, got), daemon=True)
    t.start()
    proc.wait(timeout=120)
    t.join(timeout=5)
    rig.run(["svcdiag", "--units", str(units), "down", name], check=False)
    out = []
    for arrived, text in got:
        ev = json.loads(text)
        if ev.get("event") not in ("note", "phase", "verdict") and ev.get("ts") and \
                any(m in ev.get("line", "") for m in MILESTONES):
            out.append((ev["ts"], ev["line"], arrived))
    return out


@dataclass(frozen=True)
class Hops:
    """One milestone, in seconds after the journal stamped its line; `first`/`last`: its trace rows.
    `next0`/`next1`: the reader's next() that returned its entry began and ended; `judged`: the judge done."""

    woke: float
    next0: float
    next1: float
    record: float
    judged: float
    stdout: float
    reader: float
    woken_by: str
    first: int
    last: int
    #: Python's garbage collections on the way (between the wakeup and the event)
    gc: float = 0.0


def hops(rows: list[tuple[float, str, str]], ts: float, line: str, arrived: float) -> Hops:
    rec = next(j for j, (_, label, extra) in enumerate(rows)
               if label == "record" and abs(float(extra.split("\t")[0]) - ts) < 2e-6 and line[:20] in extra)
    woke = max(j for j in range(rec) if rows[j][1] == "woke")
    n0 = max(j for j in range(rec) if rows[j][1] == "jnext-begin")
    n1 = max(j for j in range(rec) if rows[j][1] == "jnext-end")
    judged = next(j for j in range(rec, len(rows)) if rows[j][1] == "judge-end")
    out = next(j for j in range(rec, len(rows)) if rows[j][1] == "stdout" and line[:40] in rows[j][2])
    return Hops(rows[woke][0] - ts, rows[n0][0] - ts, rows[n1][0] - ts, rows[rec][0] - ts, rows[judged][0] - ts,
                rows[out][0] - ts, arrived - ts, rows[woke][2], woke, out, sum(d for _, d in _collections(rows[woke:out])))


def _collections(rows: list[tuple[float, str, str]], after_first: bool = False) -> list[tuple[str, float]]:
    """Python's garbage collections in `rows` (after `up` read its first journal entry): (generation, duration)."""
    first = next((j for j, r in enumerate(rows) if r[1] == "record"), len(rows)) if after_first else 0
    out, began = [], None
    for wall, label, extra in rows[first:]:
        if label == "gc-start":
            began = wall
        elif label == "gc-stop" and began is not None:
            out.append((extra.split()[1] if extra.startswith("gen") else "?", wall - began))
            began = None
    return [(f"gen {g}", d) for g, d in out]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--starts", type=int, default=4)
    ap.add_argument("--show", type=int, default=2, help="print the whole trace of the K slowest milestones")
    args = ap.parse_args()
    work = ROOT / ".rig-tmp" / f"trace-{uuid.uuid4().hex[:6]}"
    units = work / "units"
    shutil.copytree(ROOT / "units", units)
    found: list[tuple[Hops, list[tuple[float, str, str]], str]] = []
    collections: list[tuple[str, float]] = []
    try:
        with Rig(ROOT, name="svcdiag-notify-trace") as rig:
            for i in range(args.starts):
                name = f"trace-{uuid.uuid4().hex[:6]}"
                (units / f"{name}.toml").write_text(f'extends = "demo-smoke"\nport = {23600 + i}\n'
                                                    'sim_time_scale = 0.2\nreadiness = "notify"\n')
                time.sleep(0.5)
                trace = work / f"{name}.tsv"
                events = one_start(rig, units, name, trace)
                rows = [(float(w), label, extra) for w, label, extra in
                        (ln.rstrip("\n").split("\t", 2) for ln in trace.read_text().splitlines())]
                for ts, line, arrived in events:
                    found.append((hops(rows, ts, line, arrived), rows, line))
                collections.extend(_collections(rows, after_first=True))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    ms = lambda v: f"{v * 1000:+7.3f}"  # noqa: E731
    keys = ("woke", "next0", "next1", "record", "judged", "stdout", "reader")
    print(f"{len(found)} milestones over {args.starts} notify starts; ms after the journal stamped the line "
          "(next0/next1: the journal reader's next() began/returned; judged: the judge has its events):")
    print("  " + " ".join(f"{k:>7s}" for k in keys) + "  (woken by)             line")
    for h, _, line in found:
        print("  " + " ".join(ms(getattr(h, k)) for k in keys) + f"  {h.woken_by[:22]:22s} {line[:40]}")
    med = {k: statistics.median(getattr(h, k) for h, _, _ in found) for k in keys}
    print("medians: " + ", ".join(f"{k} {ms(med[k])}" for k in keys) + " ms")
    first = [h for h, _, _ in found if h.next0 - h.woke < 0.0003]  # the first entry read after its wakeup
    if first:
        step = lambda a, b: statistics.median(getattr(h, b) - getattr(h, a) for h in first)  # noqa: E731
        print(f"the {len(first)} milestones read first after a wakeup, median steps (ms): woke→next() "
              f"{ms(step('woke', 'next0'))}, next() {ms(step('next0', 'next1'))}, →record "
              f"{ms(step('next1', 'record'))}, judge {ms(step('record', 'judged'))}, →stdout {ms(step('judged', 'stdout'))}")
    hit = [h.gc for h, _, _ in found if h.gc]
    print(f"milestones with a garbage collection between the wakeup and the event: {len(hit)} of {len(found)}"
          + (f", {ms(sum(hit) / len(hit))} ms each on average" if hit else ""))
    for gen in sorted({g for g, _ in collections}):
        took = [d for g, d in collections if g == gen]
        print(f"garbage collections while following, {gen}: {len(took)} over {args.starts} starts, "
              f"median {ms(statistics.median(took))} ms, max {ms(max(took))} ms")
    for h, rows, line in sorted(found, key=lambda f: -f[0].reader)[:args.show]:
        ts = rows[h.first][0] - h.woke
        print(f"--- {line[:60]} (reader {ms(h.reader)} ms)")
        for wall, label, extra in rows[max(0, h.first - 12):h.last + 1]:
            print(f"  {ms(wall - ts)}  {label:20s} {extra[:70]}")


if __name__ == "__main__":
    main()
