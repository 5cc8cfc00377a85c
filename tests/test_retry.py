"""The brief retry the bus and the journal are opened with (svcdiag.systemd.retry)."""

from __future__ import annotations

import time

import pytest

from svcdiag.systemd.retry import briefly


def test_a_call_that_fails_twice_then_answers_is_answered(monkeypatch: pytest.MonkeyPatch) -> None:
    tries, waits = [], []
    sleep = time.sleep
    monkeypatch.setattr(time, "sleep", lambda s: (waits.append(s), sleep(s)))  # asked, not measured: load stretches it

    def flaky() -> str:
        tries.append(time.monotonic())
        if len(tries) < 3:
            raise OSError("journald is restarting")
        return "open"

    assert briefly(flaky, 2.0, first_wait=0.01) == "open"
    assert len(tries) == 3
    assert waits == [0.01, 0.02]  # the waits grow


def test_a_call_that_keeps_failing_raises_its_own_error_once_the_time_is_up() -> None:
    tries: list[float] = []

    def failing() -> str:
        tries.append(time.monotonic())
        if len(tries) > 50:  # ~2.3 s of waits: a retry that ignored its time would get this answer
            return "open"
        raise OSError("no bus")

    began = time.monotonic()
    with pytest.raises(OSError, match="no bus"):
        briefly(failing, 0.2, first_wait=0.01, max_wait=0.05)
    # not before the 0.2 s were up, and then at once: seven tries fit in them (waits of 0.01, 0.02, 0.04, then
    # 0.05 s), fewer where a loaded machine stalls it. No ceiling on the time: a stall lengthens any wait
    assert time.monotonic() - began >= 0.2
    assert 1 <= len(tries) <= 8, tries
