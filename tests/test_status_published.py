"""Which starts `status` and `top` take the supervisor's published verdict for (ops.serve.service.published_verdicts),
and pystemd's D-Bus module loaded without pystemd's `__init__` (systemd.dbus.dbuslib). The rig test
(tests/rig/test_rig_status_published.py) checks both ways say the same on a real systemd."""

from __future__ import annotations

import dataclasses
import subprocess
import sys
from pathlib import Path

import pytest

from svcdiag.config.service import UnitsDir
from svcdiag.ops.serve import service
from svcdiag.systemd import journal
from svcdiag.systemd.dbus import UnitProps

from .conftest import UNITS

SERVING = UnitProps(name="x.service", load_state="loaded", active_state="active", sub_state="running",
                    result="success", invocation="ab" * 16, main_pid=0, exec_main_code=0, exec_main_status=0,
                    active_enter_ts=1000.0, inactive_exit_ts=None, state_change_ts=None, fragment_path="", job=False,
                    status_text="ready · KV 40,179 tokens · max_running 4 · HTTP agrees · serving 30 s · /health HTTP 200")


class Local:
    remote = None


def published(monkeypatch: pytest.MonkeyPatch, configs: list, states: list[UnitProps], records: dict) -> tuple[dict, list]:
    """published_verdicts with the journal's answer given: (what it returns, the starts it asked the journal for)."""
    asked: list[dict] = []

    def read(starts: dict) -> dict:
        asked.append(dict(starts))
        return {inv: rec for inv, rec in records.items() if inv in starts}

    monkeypatch.setattr(journal, "published_verdicts", read)
    return service.published_verdicts(Local(), configs, states), asked


def record(props: UnitProps, verdict: str = "healthy") -> dict:
    return {"event": "verdict", "unit": props.name, "invocation": props.invocation, "verdict": verdict, "phase": "ready",
            "figures": {"kv_tokens": 40179}}


def configs(n: int, readiness: str = "notify") -> list:
    base = UnitsDir(UNITS, "t").load("demo-smoke")
    return [dataclasses.replace(base, name=f"x{i}", readiness=readiness) for i in range(n)]


def test_a_serving_notify_start_takes_its_published_verdict(monkeypatch: pytest.MonkeyPatch) -> None:
    [cfg] = configs(1)
    props = dataclasses.replace(SERVING, name=cfg.unit)
    got, asked = published(monkeypatch, [cfg], [props], {props.invocation: record(props)})
    assert got == {cfg.unit: record(props)} and asked == [{props.invocation: cfg.unit}]


@pytest.mark.parametrize("change", [
    {"active_state": "deactivating"},  # stopping: judged from its lines
    {"active_state": "failed"},
    {"invocation": ""},  # no current start
    {"load_state": "not-found"},
    {"status_text": "loading weights 12 s · loading weights, 94.50 GB free"},  # still starting
    {"status_text": "failed [cuda_oom]: CUDA out of memory"},
    {"status_text": "ready · KV 40,179 tokens · HTTP agrees · died_after_ready: the log: Segmentation fault"},
])
def test_a_start_that_is_not_serving_after_ready_is_judged_from_its_lines(monkeypatch: pytest.MonkeyPatch,
                                                                        change: dict) -> None:
    [cfg] = configs(1)
    props = dataclasses.replace(SERVING, name=cfg.unit, **change)
    got, asked = published(monkeypatch, [cfg], [props], {props.invocation: record(props)})
    assert got == {} and asked == []


def test_a_journal_mode_unit_has_no_supervisor_to_publish(monkeypatch: pytest.MonkeyPatch) -> None:
    [cfg] = configs(1, readiness="journal")
    props = dataclasses.replace(SERVING, name=cfg.unit)
    assert published(monkeypatch, [cfg], [props], {props.invocation: record(props)}) == ({}, [])


def test_a_record_that_is_not_healthy_or_names_another_unit_is_not_taken(monkeypatch: pytest.MonkeyPatch) -> None:
    a, b = configs(2)
    pa = dataclasses.replace(SERVING, name=a.unit, invocation="a" * 32)
    pb = dataclasses.replace(SERVING, name=b.unit, invocation="b" * 32)
    records = {pa.invocation: record(pa, "failed"), pb.invocation: {**record(pb), "unit": a.unit}}
    got, asked = published(monkeypatch, [a, b], [pa, pb], records)
    assert got == {} and asked == [{pa.invocation: a.unit, pb.invocation: b.unit}]


def test_a_journal_that_cannot_be_read_leaves_every_start_to_be_judged(monkeypatch: pytest.MonkeyPatch) -> None:
    from svcdiag.errors import SvcdiagError

    [cfg] = configs(1)

    def refuse(starts: dict) -> dict:
        raise SvcdiagError("no access to the journal")

    monkeypatch.setattr(journal, "published_verdicts", refuse)
    assert service.published_verdicts(Local(), [cfg], [dataclasses.replace(SERVING, name=cfg.unit)]) == {}


def test_pystemds_dbus_module_loads_without_lxml_and_pystemd_itself_still_imports() -> None:
    code = ("import sys; from svcdiag.systemd.dbus import dbuslib; m = dbuslib(); "
            "print(m.__name__, 'lxml' in sys.modules, 'pystemd' in sys.modules); "
            "import pystemd.systemd1; print('lxml' in sys.modules, hasattr(pystemd, 'systemd1'))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         cwd=Path(__file__).parent.parent).stdout.split()
    assert out == ["pystemd.dbuslib", "False", "False", "True", "True"]
