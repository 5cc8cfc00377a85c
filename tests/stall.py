"""`python tests/stall.py [--pause S] [--every S] [--some P] -- CMD...`: run CMD (a pytest run, say) and, every
`--every` seconds, stop it and every process under it (the rig's systemd, journald, units, the svcdiag commands
tests run in it) with SIGSTOP for `--pause` seconds, then go on (SIGCONT): a loaded machine's stall, on demand.
`--some P`: each process is stopped with probability P only, as a loaded machine stalls some and not others
(a sender but not its reader, a server but not its health check). CI (2 cores at load 15) stalls processes
for seconds; busy loops beside the tests rarely do (the scheduler favours a process that slept), this does
every time. Exits with CMD's status; prints how many stalls."""

from __future__ import annotations

import argparse
import os
import random
import signal
import subprocess
import sys
import time


def tree(root: int) -> list[int]:
    """`root` and every process under it, as /proc has them now."""
    found, todo = [], [root]
    while todo:
        pid = todo.pop()
        if pid in found or pid == os.getpid():
            continue
        found.append(pid)
        try:
            for task in os.listdir(f"/proc/{pid}/task"):
                with open(f"/proc/{pid}/task/{task}/children") as f:
                    todo += [int(p) for p in f.read().split()]
        except OSError:
            pass
    return found


def signal_all(pids: list[int], sig: int) -> None:
    for pid in pids:
        try:
            os.kill(pid, sig)
        except OSError:
            pass


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(prog="python tests/stall.py")
    ap.add_argument("--pause", type=float, default=3.0, help="seconds each stall lasts (default 3)")
    ap.add_argument("--every", type=float, default=7.0, help="seconds between stalls (default 7)")
    ap.add_argument("--some", type=float, default=1.0, help="the chance each process is stopped (default 1: all)")
    ap.add_argument("cmd", nargs="+")
    a = ap.parse_args(argv)
    child = subprocess.Popen(a.cmd)
    stalls, stopped = 0, []
    try:
        while child.poll() is None:
            time.sleep(a.every)
            if child.poll() is not None:
                break
            stopped = []
            for _ in range(3):  # a process may fork while the others are stopped: sweep again
                more = [p for p in tree(child.pid) if p not in stopped]
                if not more:
                    break
                stopped += more
                signal_all([p for p in more if random.random() < a.some], signal.SIGSTOP)
            time.sleep(a.pause)
            signal_all(stopped, signal.SIGCONT)
            stopped = []
            stalls += 1
    finally:
        signal_all(stopped, signal.SIGCONT)
        code = child.wait()
    print(f"stall.py: {stalls} stalls of {a.pause:g} s, one every {a.every:g} s (each process stopped at "
          f"a chance of {a.some:g})", file=sys.stderr)
    return code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
