"""A free port for a test's server. Every pytest-xdist worker, every rig and any other run of the suite
on this machine share the host's network: each worker takes ports from a range of its own, below the
kernel's ephemeral range (32768-60999 by default), and skips any port held now. A port the kernel picks
(`bind(("", 0))`) lies inside that range: free when picked, it may be lent to an outgoing connection
before the server binds it (CI once saw a start fail on port_in_use with no server holding the port)."""

from __future__ import annotations

import os
import socket

from svcdiag.ops.host.ports import ephemeral_clash

WORKER = int(os.environ.get("PYTEST_XDIST_WORKER", "gw0")[2:] or 0)
_ports = iter(range(24000 + 400 * WORKER, 24400 + 400 * WORKER))


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
    """The first of `n` consecutive free ports from this worker's range (every test takes from it)."""
    while True:
        ports = [next(_ports) for _ in range(n)]
        if ports == list(range(ports[0], ports[0] + n)) and all(_free(p, addr) for p in ports):
            return ports[0]


def free_port(addr: str = "127.0.0.1") -> int:
    """A port nothing listens on at `addr` now, from this worker's range."""
    return next_port(1, addr)
