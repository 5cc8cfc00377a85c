"""What the live path spends, where a user would notice it: journal mode's tick on a hung start
(CPU) and after a silence (latency), and the terminal hearing of a burst before the other sinks."""

from __future__ import annotations

import pytest

from svcdiag.ops.serve.follow import tick_after
from svcdiag.output.publish import Publisher
from svcdiag.output.schema import ReadinessEvent


@pytest.mark.parametrize(("silence", "tick"), [(0.0, 0.005), (0.4, 0.005), (2.0, 0.020), (5.0, 0.050),
                                               (10.0, 0.100), (600.0, 0.100)])
def test_the_tick_is_one_percent_of_the_silence_between_5_and_100_ms(silence: float, tick: float) -> None:
    # a wakeup costs ~0.1 ms of CPU on this VM: a hung start settles at 10 a second, ~0.1 % of a core,
    # while the first line after a silence of q waits at most ~q/100
    assert tick_after(silence) == pytest.approx(tick)


class Sink:
    def __init__(self, name: str, log: list[tuple[str, str]]):
        self.name, self.log = name, log

    def publish(self, rec: ReadinessEvent) -> None:
        self.log.append((self.name, rec.message or ""))


def test_a_burst_reaches_the_terminal_first_and_every_sink_in_order() -> None:
    log: list[tuple[str, str]] = []
    pub = Publisher([Sink("terminal", log), Sink("journal", log), Sink("textfile", log)], unit="u.service")
    with pub.terminal_first():
        pub.note("kv cache")
        pub.note("memory pool")
        assert log == [("terminal", "kv cache"), ("terminal", "memory pool")]
    assert log[2:] == [("journal", "kv cache"), ("textfile", "kv cache"),
                       ("journal", "memory pool"), ("textfile", "memory pool")]
    pub.note("ready")  # outside a block: every sink at once
    assert log[-3:] == [("terminal", "ready"), ("journal", "ready"), ("textfile", "ready")]
