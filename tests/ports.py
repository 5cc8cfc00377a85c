"""A free port for a test's server: tests share this host's network with other runs and workers."""

from __future__ import annotations

import socket


def free_port(addr: str = "127.0.0.1") -> int:
    """A port nothing listens on at `addr` now (the kernel's pick, from the ephemeral range)."""
    with socket.socket() as s:
        s.bind((addr, 0))
        return s.getsockname()[1]
