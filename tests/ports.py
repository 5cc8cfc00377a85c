"""A free port for a test's server. Every pytest-xdist worker, every rig, and every other run of the suite on
this machine (other worktrees', at the same time) share the host's network, so a port is handed out only

- below the kernel's ephemeral range (32768-60999 by default): a port the kernel picks (`bind(("", 0))`) lies
  inside it, free when picked, and may be lent to an outgoing connection before the server binds it (CI once
  saw a start fail on port_in_use with no server holding the port);
- reserved for this process: an abstract Unix socket named after the port, bound for as long as the process
  lives, which no other run's worker can bind too. Free now is not enough: the server binds seconds later,
  and another run could have been handed the same free port meanwhile (two runs' gw0 once were);
- free now: nothing on the host listens on it or holds it.

Each worker starts looking at a point of its own (24000 + 1000 × N), so workers rarely try the same ports."""

from __future__ import annotations

import os
import socket

from svcdiag.ops.host.ports import ephemeral_clash, ephemeral_range

WORKER = int(os.environ.get("PYTEST_XDIST_WORKER", "gw0")[2:] or 0)
FIRST = 24000
#: below the ephemeral range (the kernel's, or its default where /proc does not say, or where it starts below
#: FIRST: then every port here is refused by _free, and next_port says so)
END = min((ephemeral_range() or (32768, 60999))[0], 32768)
END = END if END > FIRST + 1000 else 32768
_next = FIRST + (1000 * WORKER) % (END - FIRST)
_held: list[socket.socket] = []  # this process's reservations: the kernel lets them go when it exits


def _reserve(port: int) -> bool:
    """Reserve `port` for this process (machine-wide, among the suite's runs), unless another holds it."""
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        s.bind(f"\0svcdiag-test-port-{port}")
    except OSError:
        s.close()
        return False
    _held.append(s)
    return True


def _free(port: int, addr: str) -> bool:
    """Nothing on this host listens on or holds `port` at `addr`, and the kernel will not lend it to a connection."""
    if ephemeral_clash(port) is not None:
        return False
    with socket.socket() as s:
        try:
            s.bind((addr, port))
        except OSError:
            return False
    return True


def next_port(n: int = 1, addr: str = "127.0.0.1") -> int:
    """The first of `n` consecutive ports reserved for this process and free now."""
    global _next
    for _ in range(END - FIRST):
        first = _next if _next + n <= END else FIRST
        _next = first + n
        if all(_reserve(p) for p in range(first, first + n)) and all(_free(p, addr) for p in range(first, first + n)):
            return first
    raise RuntimeError(f"no {n} free consecutive ports left in {FIRST}-{END - 1} (other runs of the suite hold them?)")


def free_port(addr: str = "127.0.0.1") -> int:
    """A port nothing listens on at `addr` now, reserved for this process."""
    return next_port(1, addr)
