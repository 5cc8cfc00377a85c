#!/usr/bin/env python3
"""Live-path latency and cost on the private rig, side by side with `journalctl -f | grep`.

For each of N starts of a simulated unit, two followers watch the same start at once:
`svcdiag up --wait-ready --json` and the anchor `journalctl -f -o json -u UNIT | grep
--line-buffered` on the milestone patterns. A milestone's latency is the time its line
reaches the follower's reader minus the journal's receive timestamp of that line
(journald stamps an entry as it reads it from the server's stdout). Then:
fail-fast (SIGSEGV in the weight load: the main process's exit, as systemd records it,
to svcdiag's verdict line) and the CPU svcdiag uses while waiting on a hung start.
Each of these runs twice: on units in journal mode and on units in notify mode
(readiness = "notify": `svcdiag supervise` is the main process, `up` waits on D-Bus).
In notify mode a milestone also has a second latency: its line in the journal to systemd's
StatusText saying it (the PropertiesChanged carrying it, at a D-Bus client on `up`'s bus). Last, the
supervisor's own CPU per 1M lines passed through, beside `cat`'s (no rig needed).
Targets: p50 ≤ 10 ms, p99 ≤ 50 ms, fail-fast ≤ 200 ms, CPU ≤ 0.5 % of a core (journal mode);
notify mode (#16): p50 ≤ 1 ms, p99 ≤ 5 ms, fail-fast ≤ 50 ms, CPU ≤ 0.05 %.
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

#: how `up` is run in the rig: as root it follows on PID 1's private bus; --bus system says SVCDIAG_BUS=system
UP = ["svcdiag"]
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
    ours = rig.popen([*UP, "--units", str(units), "up", name, "--wait-ready", "--json"], stdout=subprocess.PIPE)
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


def fail_fast(rig: Rig, units: Path, n: int, mode: str = "journal") -> list[float]:
    out = []
    for i in range(n):
        name = f"bench-segv-{uuid.uuid4().hex[:6]}"
        (units / f"{name}.toml").write_text(f'extends = "demo-segfault"\nport = {23200 + i}\nreadiness = "{mode}"\n')
        proc = rig.popen([*UP, "--units", str(units), "up", name, "--wait-ready", "--json"], stdout=subprocess.PIPE)
        lines: list[tuple[float, str]] = []
        reader(proc, lines)
        proc.wait()
        verdict_at = lines[-1][0]
        path = "/org/freedesktop/systemd1/unit/" + name.replace("-", "_2d") + "_2eservice"
        died = rig.run(["busctl", "get-property", "org.freedesktop.systemd1", path,
                        "org.freedesktop.systemd1.Service", "ExecMainExitTimestamp"]).stdout.split()[1]
        out.append(verdict_at - int(died) / 1e6)
    return out


def cpu_while_hung(rig: Rig, units: Path, seconds: float, mode: str = "journal") -> tuple[float, float | None]:
    """CPU of `up --wait-ready` while the start hangs, and (notify mode) of the supervisor."""
    name = f"bench-hang-{uuid.uuid4().hex[:6]}"
    (units / f"{name}.toml").write_text(f'extends = "demo-hang"\nport = 23300\nreadiness = "{mode}"\n'
                                        '[timeouts]\nloading_weights = 600\n')
    proc = rig.popen([*UP, "--units", str(units), "up", name, "--wait-ready"], stdout=subprocess.DEVNULL)
    time.sleep(3)
    pid = rig.run(f"pgrep -f '[b]in/svcdiag --units {units} up {name}'").stdout.decode().split()[0]
    sup = rig.run(f"pgrep -f '[s]upervise --config {name} '", check=False).stdout.decode().split()[:1]
    tick = int(rig.run("getconf CLK_TCK").stdout)

    def cpu(pid: str) -> float:
        # time on a CPU in ns (sched_info), where the kernel keeps it: clock ticks (10 ms) are too coarse
        # for a process that wakes a few times a second; else utime + stime
        sched = rig.run(f"cat /proc/{pid}/schedstat", check=False).stdout.decode().split()
        if sched and sched[0].isdigit() and int(sched[0]) > 0:
            return int(sched[0]) / 1e9
        fields = rig.run(f"cat /proc/{pid}/stat").stdout.decode().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / tick

    c0, s0, t0 = cpu(pid), cpu(sup[0]) if sup else 0.0, time.monotonic()
    time.sleep(seconds)
    c1, s1, t1 = cpu(pid), cpu(sup[0]) if sup else 0.0, time.monotonic()
    rig.run(f"pkill -INT -f '[b]in/svcdiag --units {units} up {name}'", check=False)
    proc.wait(timeout=10)
    rig.run(["svcdiag", "--units", str(units), "down", name], check=False)
    return 100 * (c1 - c0) / (t1 - t0), (100 * (s1 - s0) / (t1 - t0) if sup else None)


STATUS_WATCH = """
import select, sys, time
from svcdiag.systemd.dbus import Systemd
with Systemd.connect() as sd:
    seen, woke = None, [0.0]
    tracked = sd.track(sys.argv[1], sd.props(sys.argv[1]), lambda: None)  # (Subscribe included)
    print("watching", flush=True)
    while seen is None or not seen.startswith(("ready", "failed")):
        select.select([sd.fileno()], [], [], 5)
        woke = time.time()
        sd.process()
        text = tracked.props.status_text  # from the signal itself, as `up` reads it
        if text != seen:
            seen = text
            print(f"{woke}\t{text}", flush=True)
"""


def status_latency(rig: Rig, units: Path, name: str) -> list[float]:
    """Notify mode: a milestone line's journal timestamp → systemd's StatusText naming it, as a
    D-Bus client on the same bus as `up` sees it (the PropertiesChanged that carries it): the
    part of `up`'s latency that is the supervisor, PID 1 and the bus."""
    unit = f"{name}.service"
    rig.run(["svcdiag", "--units", str(units), "install", name])
    mon = rig.popen([*UP[:-1], "python", "-c", STATUS_WATCH, unit], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    assert mon.stdout is not None
    mon.stdout.readline()
    rig.run(["systemctl", "start", unit], timeout=120)
    out = mon.communicate(timeout=30)[0].decode()
    texts = [(float(t), x) for t, x in (ln.split("\t", 1) for ln in out.splitlines() if "\t" in ln)]
    inv = rig.run(["systemctl", "show", "-P", "InvocationID", unit]).stdout.decode().strip()
    lines = [json.loads(x) for x in rig.run(["journalctl", "--no-pager", "-o", "json", f"_SYSTEMD_INVOCATION_ID={inv}",
                                              "_TRANSPORT=stdout"]).stdout.decode().splitlines()]
    res = []
    for say, pattern in (("loading weights", "Load weight begin"), ("kv cache", "Load weight end"),
                         ("cuda graph", "KV Cache is allocated"), ("http", "max_total_num_tokens=")):
        line = next((e for e in lines if pattern in str(e.get("MESSAGE"))), None)
        st = next((t for t, x in texts if x.startswith(say)), None)
        if line is not None and st is not None:
            res.append(st - int(line["__REALTIME_TIMESTAMP"]) / 1e6)
    rig.run(["systemctl", "stop", unit], check=False)
    return res


def passthrough_cpu(lines: int = 1_000_000) -> tuple[float, float, float]:
    """CPU seconds for `lines` SGLang-like lines: `cat` alone, and `svcdiag supervise -- cat` (the
    supervisor's own share: its total less cat's and less its own start-up), judging every line
    (no start concludes), and once the start has a verdict (lines pass through unjudged)."""
    import os
    import resource
    import tempfile

    units = Path(tempfile.mkdtemp())
    (units / "p.toml").write_text('model_path = "/m"\nreadiness = "notify"\n[timeouts]\nstarting = 100000\n')
    big = units / "log"
    row = b"[2026-12-03 14:00:00.000 TP0] Decode batch, #running-req: 4, #token: 8192, token usage: 0.01, gen throughput (token/s): 71.20, #queue-req: 0\n"
    big.write_bytes(row * lines)

    def run(argv: list[str]) -> float:
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        subprocess.run(argv, stdout=subprocess.DEVNULL, check=False, env={**os.environ, "PYTHONPATH": str(ROOT)})
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)

    # the same, once the start has a verdict (here: timed out at once), when lines only pass through
    (units / "q.toml").write_text('model_path = "/m"\nreadiness = "notify"\n[timeouts]\nstarting = 0.001\n')
    cat = run(["cat", str(big)])
    # svcdiag's own start-up (imports), subtracted: what is left is the cost of the lines
    base = run([sys.executable, "-m", "svcdiag", "--units", str(units), "supervise", "--config", "p", "--", "true"])
    cat += base
    sup = run([sys.executable, "-m", "svcdiag", "--units", str(units), "supervise", "--config", "p", "--", "cat", str(big)])
    after = run([sys.executable, "-m", "svcdiag", "--units", str(units), "supervise", "--config", "q", "--", "cat", str(big)])
    shutil.rmtree(units, ignore_errors=True)
    return cat - base, sup - cat, after - cat


def over_ssh(starts: int) -> None:
    """The same milestone latency, local beside remote (docs/remote.md): `svcdiag up --wait-ready` run
    inside the rig, and run on this host with `--host` reaching the rig's systemd over SSH (an sshd
    in the rig on 127.0.0.2, D-Bus through systemd-stdio-bridge, the journal by `journalctl -o
    export --follow`), on the same kind of start; then fail-fast (SIGSEGV → verdict line) both ways."""
    import os

    from tests.rig.sshd import make_sshd

    units = ROOT / ".rig-tmp" / f"bench-{uuid.uuid4().hex[:6]}"
    shutil.copytree(ROOT / "units", units)
    res: dict[str, tuple[list[float], list[float]]] = {}
    try:
        with Rig(ROOT, name="svcdiag-bench-ssh") as rig:
            sshd = make_sshd(rig, ROOT, addr="127.0.0.2")  # a test host's own address (tests/rig/sshd.py)
            env = {**os.environ, **sshd.env(), "SVCDIAG_STATE_DIR": str(units / "state"),
                   "SVCDIAG_LOCK_DIR": str(units / "locks")}
            for where in ("local", "ssh"):
                lat: list[float] = []
                ff: list[float] = []
                for i in range(starts + 3):
                    seg = i >= starts
                    name = f"bench-{where}-{uuid.uuid4().hex[:6]}"
                    (units / f"{name}.toml").write_text(
                        f'extends = "{"demo-segfault" if seg else "demo-smoke"}"\nport = {23300 + i}\nsim_time_scale = 0.2\n')
                    argv = ["svcdiag", "--units", str(units), "up", name, "--wait-ready", "--json"]
                    proc = rig.popen(argv, stdout=subprocess.PIPE) if where == "local" else subprocess.Popen(
                        [str(ROOT / ".venv/bin/svcdiag"), *argv[1:], "--host", sshd.target], stdout=subprocess.PIPE, env=env)
                    got: list[tuple[float, str]] = []
                    reader(proc, got)
                    proc.wait(timeout=120)
                    recs = [(t, json.loads(x)) for t, x in got if x.startswith("{")]
                    if seg:
                        # the verdict's ts is the evidence's: systemd's SIGSEGV line, as the journal stamped it
                        v = next(((t, e) for t, e in recs if e.get("event") == "verdict"), None)
                        if v is not None and v[1].get("ts"):
                            ff.append(v[0] - v[1]["ts"])
                    else:
                        lat += [t - e["ts"] for t, e in recs if e.get("event") not in ("note", "phase", "verdict")
                                and e.get("ts") and any(m in e.get("line", "") for m in MILESTONES)]
                    rig.run(["systemctl", "stop", f"{name}.service"], check=False)
                res[where] = (lat, ff)
            sshd.kill()
            shutil.rmtree(sshd.dir, ignore_errors=True)
    finally:
        shutil.rmtree(units, ignore_errors=True)
    ms = lambda v: f"{v * 1000:.1f} ms"  # noqa: E731
    for where, (lat, ff) in res.items():
        label = "in the rig (local D-Bus + journal)" if where == "local" else "from the host, --host over SSH"
        print(f"[{where}] {label}: milestone latency p50 {ms(pct(lat, .5))}  p99 {ms(pct(lat, .99))}  "
              f"max {ms(max(lat))} ({len(lat)} events, {starts} starts); fail-fast median "
              f"{ms(statistics.median(ff)) if ff else '-'} ({len(ff)} runs)")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--starts", type=int, default=4)
    ap.add_argument("--cpu-seconds", type=float, default=30)
    ap.add_argument("--ssh", action="store_true", help="only the local-vs-SSH comparison (docs/remote.md)")
    ap.add_argument("--modes", default="journal,notify", help="readiness modes to measure, in order (docs/config.md#readiness)")
    ap.add_argument("--bus", choices=("private", "system"), default="private",
                    help="the bus `up` follows on: PID 1's own (root's default) or the system bus (dbus-daemon)")
    ap.add_argument("--no-passthrough", action="store_true", help="skip the 1M-line pass-through CPU figure")
    args = ap.parse_args()
    if args.bus == "system":
        UP[:] = ["env", "SVCDIAG_BUS=system", "svcdiag"]
    if args.ssh:
        over_ssh(args.starts)
        return
    units = ROOT / ".rig-tmp" / f"bench-{uuid.uuid4().hex[:6]}"
    shutil.copytree(ROOT / "units", units)
    res: dict[str, dict] = {}
    try:
        with Rig(ROOT, name="svcdiag-bench") as rig:
            for mode in args.modes.split(","):
                lo, la, sl = [], [], []
                for i in range(args.starts):
                    name = f"bench-lat-{uuid.uuid4().hex[:6]}"
                    (units / f"{name}.toml").write_text(f'extends = "demo-smoke"\nport = {23100 + i}\n'
                                                        f'sim_time_scale = 0.2\nreadiness = "{mode}"\n')
                    o, a = one_start(rig, units, name)
                    lo += o
                    la += a
                    if mode == "notify":
                        sl += status_latency(rig, units, name)
                ff = fail_fast(rig, units, 5, mode)
                cpu, sup = cpu_while_hung(rig, units, args.cpu_seconds, mode)
                res[mode] = {"lo": lo, "la": la, "sl": sl, "ff": ff, "cpu": cpu, "sup": sup}
    finally:
        shutil.rmtree(units, ignore_errors=True)
    cat_s, sup_s, after_s = passthrough_cpu() if not args.no_passthrough else (0.0, 0.0, 0.0)
    ms = lambda v: f"{v * 1000:.1f} ms"  # noqa: E731
    for mode, r in res.items():
        lo, la, ff = r["lo"], r["la"], r["ff"]
        print(f"[{mode} mode] milestone latency, {len(lo)} events over {args.starts} starts (same starts, same lines; "
              f"D-Bus: {'PID 1 private socket' if args.bus == 'private' else 'system bus'}):")
        print(f"  svcdiag up --wait-ready   p50 {ms(pct(lo, .5))}  p99 {ms(pct(lo, .99))}  max {ms(max(lo))}")
        print(f"  journalctl -f | grep      p50 {ms(pct(la, .5))}  p99 {ms(pct(la, .99))}  max {ms(max(la))}  ({len(la)} lines)")
        if r["sl"]:
            sl = r["sl"]
            print(f"  systemd StatusText        p50 {ms(pct(sl, .5))}  p99 {ms(pct(sl, .99))}  max {ms(max(sl))}  "
                  f"({len(sl)} milestones: journal line → PropertiesChanged)")
        print(f"  fail-fast, SIGSEGV → verdict line: median {ms(statistics.median(ff))}, max {ms(max(ff))} ({len(ff)} runs)")
        sup = f", supervisor {r['sup']:.3f} %" if r["sup"] is not None else ""
        print(f"  CPU while waiting on a hung start: up {r['cpu']:.3f} % of a core{sup} over {args.cpu_seconds:.0f} s")
    if not args.no_passthrough:
        print(f"1M lines passed through: cat {cat_s:.2f} s CPU; svcdiag supervise's own share: {sup_s:.2f} s while "
              f"judging every line (before a verdict), {after_s:.2f} s once the start has its verdict")


if __name__ == "__main__":
    main()
