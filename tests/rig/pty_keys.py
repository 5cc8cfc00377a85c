"""`python tests/rig/pty_keys.py [--cols N] [--rows N] [--after S] [--until TEXT] [--keys K] -- CMD...`:
run CMD on a fresh pseudo-terminal of that size, wait until TEXT appears on it (or S seconds), type K,
then copy everything it drew to stdout and exit with CMD's status (124 if it did not exit within 30 s)."""

from __future__ import annotations

import argparse
import fcntl
import os
import pty
import select
import struct
import sys
import termios
import time


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--cols", type=int, default=220)
    ap.add_argument("--rows", type=int, default=50)
    ap.add_argument("--after", type=float, default=3.0)
    ap.add_argument("--until", default=None)
    ap.add_argument("--keys", default="q")
    ap.add_argument("cmd", nargs="+")
    a = ap.parse_args(argv)
    size = struct.pack("HHHH", a.rows, a.cols, 0, 0)
    pid, fd = pty.fork()
    if pid == 0:  # the size is set before CMD runs (it may ask at once), and no COLUMNS/LINES overrides it
        fcntl.ioctl(0, termios.TIOCSWINSZ, size)
        for var in ("COLUMNS", "LINES"):
            os.environ.pop(var, None)
        os.environ["TERM"] = "xterm-256color"
        os.execvp(a.cmd[0], a.cmd)
    out = bytearray()
    deadline = time.monotonic() + a.after
    typed_at: float | None = None
    status = None
    while status is None:
        now = time.monotonic()
        if typed_at is None and (now >= deadline or (a.until and a.until.encode() in out)):
            os.write(fd, a.keys.encode())
            typed_at = now
        if typed_at is not None and now - typed_at > 30:
            os.kill(pid, 9)
            os.waitpid(pid, 0)
            sys.stdout.buffer.write(bytes(out))
            return 124
        ready, _, _ = select.select([fd], [], [], 0.1)
        if ready:
            try:
                chunk = os.read(fd, 65536)
            except OSError:
                chunk = b""
            out += chunk
            if not chunk:
                _, st = os.waitpid(pid, 0)
                status = os.waitstatus_to_exitcode(st)
        else:
            done, st = os.waitpid(pid, os.WNOHANG)
            if done:
                status = os.waitstatus_to_exitcode(st)
    sys.stdout.buffer.write(bytes(out))
    return status


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
