"""The kernel's ephemeral port range, read where the unit runs: a server port inside it can be held,
at the moment the server binds, by any outgoing connection the kernel gave that port to (port_in_use
with no other server to blame). `svcdiag check` warns; nothing is refused (the clash is not certain).
"""

from __future__ import annotations

from pathlib import Path

PROC = Path("/proc/sys/net/ipv4")


def _ports(text: str) -> set[int]:
    """net.ipv4.ip_local_reserved_ports' syntax: "8000,30000-30010" (empty: none reserved)."""
    out: set[int] = set()
    for part in text.replace("\n", "").split(","):
        lo, _, hi = part.strip().partition("-")
        if lo.isdigit() and (not hi or hi.isdigit()):
            out.update(range(int(lo), int(hi or lo) + 1))
    return out


def ephemeral_range(proc: Path | None = None) -> tuple[int, int] | None:
    """net.ipv4.ip_local_port_range, or None where it cannot be read (not Linux, a container without /proc/sys)."""
    try:
        lo, hi = (int(x) for x in ((proc or PROC) / "ip_local_port_range").read_text().split())
    except (OSError, ValueError):
        return None
    return lo, hi


def ephemeral_clash(port: int, proc: Path | None = None) -> str | None:
    """Why `port` may be taken by an outgoing connection when the server binds it, or None."""
    span = ephemeral_range(proc)
    if span is None or not span[0] <= port <= span[1]:
        return None
    try:
        if port in _ports(((proc or PROC) / "ip_local_reserved_ports").read_text()):
            return None
    except OSError:
        pass
    return (f"port {port} lies in this host's ephemeral port range {span[0]}-{span[1]} "
            "(net.ipv4.ip_local_port_range): any outgoing connection may hold it when the server binds "
            f"(port_in_use); use a port below {span[0]}, or add {port} to net.ipv4.ip_local_reserved_ports")
