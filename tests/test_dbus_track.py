"""A unit's state from its PropertiesChanged signals alone (svcdiag.systemd.dbus.track): what
the follower of a start knows after each signal, with no call back to systemd."""

from __future__ import annotations

import dataclasses

from svcdiag.systemd.dbus import SERVICE, UNIT, Tracked, UnitProps, apply_changes

BEFORE = UnitProps(name="n.service", load_state="loaded", active_state="activating", sub_state="start",
                   result="success", invocation="ab" * 16, main_pid=42, exec_main_code=0, exec_main_status=0,
                   active_enter_ts=None, inactive_exit_ts=1000.0, state_change_ts=1000.0,
                   fragment_path="/etc/systemd/system/n.service", job=True, status_text="starting n")


class Signal:
    """pystemd's message as a match callback gets it: the body is read on process_reply."""

    def __init__(self, body: object):
        self._body, self.body, self.read = body, None, 0

    def process_reply(self, with_headers: bool) -> None:
        self.read += 1
        self.body = self._body


def test_a_service_signal_carries_status_and_the_main_process_end() -> None:
    after = apply_changes(BEFORE, SERVICE, {b"StatusText": b"loading weights 3 s", b"Result": b"signal",
                                            b"ExecMainCode": 2, b"ExecMainStatus": 11, b"MainPID": 0,
                                            b"NRestarts": 0})
    assert after.status_text == "loading weights 3 s"
    assert after.exit_line == "Main process exited, code=killed, status=11/SEGV"
    assert (after.result, after.main_pid, after.active_state) == ("signal", 0, "activating")  # Unit's untouched


def test_a_unit_signal_carries_state_and_invocation() -> None:
    after = apply_changes(BEFORE, UNIT, {b"ActiveState": b"failed", b"SubState": b"failed",
                                         b"InvocationID": list(bytes.fromhex("cd" * 16)), b"Job": (0, b"/"),
                                         b"StateChangeTimestamp": 2_000_000_000})
    assert not after.running and after.invocation == "cd" * 16 and after.job is False
    assert after.state_change_ts == 2000.0 and after.status_text == "starting n"


def test_other_interfaces_change_nothing() -> None:
    assert apply_changes(BEFORE, b"org.freedesktop.systemd1.Socket", {b"Result": b"x"}) is BEFORE


def test_signals_are_read_only_when_the_state_is_asked_for_and_a_bad_one_asks_systemd() -> None:
    asked: list[int] = []
    from_systemd = dataclasses.replace(BEFORE, active_state="active")
    t = Tracked(BEFORE, lambda: asked.append(1) or from_systemd)
    good = Signal((SERVICE, {b"StatusText": b"kv cache 0 s"}, []))
    t.add(good)
    assert good.read == 0  # kept, not read, as it arrives
    assert t.props.status_text == "kv cache 0 s" and good.read == 1 and not asked
    t.add(Signal((SERVICE,)))  # not the shape systemd sends
    assert t.props.active_state == "active" and asked == [1]


def test_status_text_reads_the_service_signal_and_leaves_the_unit_one_for_later() -> None:
    t = Tracked(BEFORE, lambda: BEFORE)
    service = Signal((SERVICE, {b"StatusText": b"kv cache 0 s"}, []))
    unit = Signal((UNIT, {b"ActiveState": b"failed", b"SubState": b"failed"}, []))
    t.add(service)
    t.add(unit)
    assert t.status_text == "kv cache 0 s" and unit.read == 0  # the journal is looked at before the Unit body
    assert t.props.active_state == "failed" and unit.read == 1 and service.read == 1
