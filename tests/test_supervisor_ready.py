"""`up` on a notify unit returns once systemd agrees: its supervisor's READY=1 (active), or the start's end
(svcdiag.ops.serve.start.supervisor_ready), never while systemd still says activating unless the limit passed."""

from __future__ import annotations

import contextlib
import os
import time
from types import SimpleNamespace

from svcdiag.ops.serve.start import supervisor_ready


class Sd:
    """systemd as seen over D-Bus: each props() call the next state, the last one repeated; the unit's signal
    arrives on every turn (its fd always readable) while states are left, and never after."""

    def __init__(self, *states: tuple[str, str]) -> None:
        self.states, self.asked, self.callbacks = list(states), 0, []
        self.r, w = os.pipe()
        os.set_blocking(self.r, False)
        os.write(w, b"x")

    def watch(self, unit: str, callback) -> None:
        self.callbacks.append(callback)

    def fileno(self) -> int:
        return self.r

    def process(self) -> None:
        if self.asked < len(self.states):
            for callback in self.callbacks:
                callback()
        else:  # nothing more to say: the fd goes quiet
            with contextlib.suppress(BlockingIOError):
                os.read(self.r, 1)

    def props(self, unit: str) -> SimpleNamespace:
        invocation, active = self.states[min(self.asked, len(self.states) - 1)]
        self.asked += 1
        return SimpleNamespace(invocation=invocation, active_state=active, running=active in ("activating", "active"))


def test_waits_for_ready() -> None:
    sd = Sd(("a", "activating"), ("a", "activating"), ("a", "active"))
    assert supervisor_ready(sd, "u.service", "a", 30).active_state == "active" and sd.asked == 3


def test_a_start_that_ends_before_ready_is_returned_ended() -> None:
    sd = Sd(("a", "activating"), ("a", "failed"))
    now = supervisor_ready(sd, "u.service", "a", 30)
    assert (now.active_state, now.running) == ("failed", False)


def test_another_invocation_ends_the_wait() -> None:
    assert supervisor_ready(Sd(("b", "activating")), "u.service", "a", 30).invocation == "b"


def test_the_limit_ends_it_still_activating() -> None:
    began = time.monotonic()
    assert supervisor_ready(Sd(("a", "activating")), "u.service", "a", 0.3).active_state == "activating"
    assert time.monotonic() - began >= 0.3
