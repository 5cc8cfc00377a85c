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
    began = time.monotonic()
    with pytest.raises(OSError, match="no bus"):
        briefly(lambda: (_ for _ in ()).throw(OSError("no bus")), 0.2, first_wait=0.01, max_wait=0.05)
    assert 0.2 <= time.monotonic() - began < 2.0
