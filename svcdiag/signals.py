"""One name for a signal, as systemd and SGLang print it (11 → "SEGV")."""

from __future__ import annotations

import signal


def signal_name(number: int) -> str:
    """A signal as systemd and SGLang name it: 11 → "SEGV"."""
    try:
        return signal.Signals(number).name.removeprefix("SIG")
    except ValueError:
        return str(number)
