"""One name for a signal, as systemd and SGLang print it (11 → "SEGV")."""

from __future__ import annotations


def signal_name(number: int) -> str:
    """A signal as systemd and SGLang name it: 11 → "SEGV". signal is imported here (~0.6 ms, its enums):
    the traceback reader that asks is loaded by every replay, and asks only of a process a signal ended."""
    import signal

    try:
        return signal.Signals(number).name.removeprefix("SIG")
    except ValueError:
        return str(number)
