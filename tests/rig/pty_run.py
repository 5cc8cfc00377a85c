"""`python tests/rig/pty_run.py CMD...`: run CMD on a fresh pseudo-terminal (TERM=xterm) and copy
everything it drew to stdout, byte for byte; exit with CMD's status. The rig's commands
otherwise run without a terminal, so this is how a test sees what an operator's screen does."""

from __future__ import annotations

import os
import pty
import sys


def main(argv: list[str]) -> int:
    pid, fd = pty.fork()
    if pid == 0:
        os.environ["TERM"] = "xterm-256color"
        os.execvp(argv[0], argv)
    out = bytearray()
    while True:
        try:
            chunk = os.read(fd, 65536)
        except OSError:  # EIO: the child closed its side
            break
        if not chunk:
            break
        out += chunk
    _, status = os.waitpid(pid, 0)
    sys.stdout.buffer.write(bytes(out))
    return os.waitstatus_to_exitcode(status)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
