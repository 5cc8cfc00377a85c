"""The published event schema, the Prometheus textfile, --since, and the live terminal line."""

from __future__ import annotations

import json
import multiprocessing
import os
import re
import time
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from prometheus_client.parser import text_string_to_metric_families

from svcdiag.config.service import PHASES
from svcdiag.errors import SvcdiagError
from svcdiag.output.live_line import LiveTerminal, wants_live
from svcdiag.output.publish import Progress
from svcdiag.output.schema import EVENT_TYPES, MESSAGE_IDS, ReadinessEvent
from svcdiag.output.textfile import Textfile
from svcdiag.systemd.journal import parse_since

from .conftest import EXAMPLES, run_svcdiag

# ---------------------------------------------------------------- schema

_RESERVED = {"schema", "event", "ts", "time", "unit", "invocation", "config", "phase", "milestone", "verdict",
             "cause", "message", "line", "figures"}
names = st.text(st.sampled_from("abcdefghijklmnopqrstuvwxyz_"), min_size=1, max_size=12)
text = st.text(st.characters(blacklist_categories=("Cs",)), max_size=40)
scalars = st.none() | st.booleans() | st.integers(-2**53, 2**53) | st.floats(allow_nan=False, allow_infinity=False) | text
events = st.builds(
    ReadinessEvent,
    event=st.sampled_from(EVENT_TYPES),
    ts=st.none() | st.floats(0, 4e9),
    unit=st.none() | names.map(lambda n: n + ".service"),
    invocation=st.none() | st.text("0123456789abcdef", min_size=32, max_size=32),
    config=st.none() | names,
    phase=st.none() | st.sampled_from(PHASES),
    milestone=st.none() | names,
    verdict=st.none() | st.sampled_from(["healthy", "failed", "timed_out", "incomplete"]),
    cause=st.none() | names,
    message=st.none() | text,
    figures=st.dictionaries(names, scalars, max_size=4),
    line=st.none() | text,
    data=st.dictionaries(names.filter(lambda n: n not in _RESERVED), scalars | st.lists(scalars, max_size=3),
                         max_size=4),
)


@settings(max_examples=200, deadline=None)
@given(events)
def test_an_event_survives_json_and_the_journal_unchanged(rec: ReadinessEvent) -> None:
    line = json.dumps(rec.to_json())
    assert ReadinessEvent.from_json(json.loads(line)) == rec
    fields = rec.journal_fields()
    assert all(re.fullmatch(r"[A-Z][A-Z0-9_]*", k) and isinstance(v, str) for k, v in fields.items()), fields
    assert ReadinessEvent.from_journal_fields(fields) == rec
    # what a dashboard filters on, without svcdiag installed
    assert fields["MESSAGE_ID"] == MESSAGE_IDS[rec.event] and fields["SVCDIAG_EVENT"] == rec.event
    for name in ("unit", "phase", "verdict", "config", "invocation"):
        assert fields.get(f"SVCDIAG_{name.upper()}") == (None if getattr(rec, name) is None else str(getattr(rec, name)))


def test_every_record_has_the_common_fields_and_a_fixed_message_id() -> None:
    rec = ReadinessEvent(event="milestone", milestone="kv_cache", figures={"tokens": 11893})
    obj = rec.to_json()
    assert list(obj)[:8] == ["schema", "event", "ts", "time", "unit", "invocation", "config", "phase"]
    assert obj["schema"] == 1 and obj["figures"] == {"tokens": 11893}
    assert len(set(MESSAGE_IDS.values())) == len(MESSAGE_IDS)
    assert all(re.fullmatch(r"[0-9a-f]{32}", m) for m in MESSAGE_IDS.values())
    with pytest.raises(ValueError, match="unknown event type 'ready'"):
        ReadinessEvent(event="ready")


def test_failures_are_journalled_at_err_and_drift_at_warning() -> None:
    prio = {e: ReadinessEvent(event=e).journal_fields()["PRIORITY"] for e in EVENT_TYPES}
    assert prio["failure"] == "3" and prio["drift"] == "4" and prio["milestone"] == "6"
    assert ReadinessEvent(event="verdict", verdict="failed").journal_fields()["PRIORITY"] == "3"
    assert ReadinessEvent(event="verdict", verdict="healthy").journal_fields()["PRIORITY"] == "6"


def test_a_newer_writers_unknown_fields_are_kept_not_dropped() -> None:
    rec = ReadinessEvent.from_json({"schema": 1, "event": "verdict", "verdict": "healthy", "gpu_temp_c": 71})
    assert rec.data == {"gpu_temp_c": 71} and rec.to_json()["gpu_temp_c"] == 71
    assert ReadinessEvent.from_journal_fields({"SVCDIAG_JSON": "{not json"}) is None
    assert ReadinessEvent.from_journal_fields({"MESSAGE": "someone else's line"}) is None


def test_replay_json_lines_are_schema_records() -> None:
    r = run_svcdiag("replay", str(EXAMPLES / "max-running-zero.log"), "--json")
    recs = [ReadinessEvent.from_json(json.loads(line)) for line in r.stdout.decode().splitlines()]
    kinds = [rec.event for rec in recs]
    assert kinds[-1] == "verdict" and "failure" in kinds and "diagnosis" in kinds and "milestone" in kinds
    kv = next(rec for rec in recs if rec.milestone == "kv_cache")
    assert kv.figures["tokens"] == 11893


# ---------------------------------------------------------------- textfile


def start(unit: str, inv: str, t0: float = 1000.0) -> list[ReadinessEvent]:
    """One start's records, as a Publisher would send them."""
    common = {"unit": f"{unit}.service", "config": unit, "invocation": inv}
    return [
        ReadinessEvent(event="phase_entered", ts=t0 + 1, phase="loading_weights", data={"previous": "starting",
                                                                                        "previous_s": 1.0}, **common),
        ReadinessEvent(event="milestone", ts=t0 + 40, phase="loading_weights", milestone="weights_end",
                       figures={"mem_usage_gb": 51.0}, message="weights loaded: 51.00 GB", **common),
        ReadinessEvent(event="milestone", ts=t0 + 41, phase="kv_cache", milestone="kv_cache",
                       figures={"tokens": 11893}, message="KV cache: 11,893 tokens", **common),
    ]


def families(path: Path) -> dict[str, dict[tuple, float]]:
    out: dict[str, dict[tuple, float]] = {}
    for fam in text_string_to_metric_families(path.read_text()):
        for s in fam.samples:
            out.setdefault(s.name, {})[tuple(sorted(s.labels.items()))] = s.value
    return out


def value(fams: dict, name: str, **labels: str) -> float:
    rows = [v for k, v in fams[name].items() if all(dict(k).get(a) == b for a, b in labels.items())]
    assert len(rows) == 1, (name, labels, fams.get(name))
    return rows[0]


def test_textfile_holds_each_units_latest_state_and_parses(tmp_path: Path) -> None:
    tf = Textfile(tmp_path / "svcdiag.prom")
    for rec in start("tp1", "a" * 32) + start("tp8", "b" * 32):
        tf.publish(rec)
    tf.publish(ReadinessEvent(event="verdict", ts=1050, unit="tp8.service", config="tp8", invocation="b" * 32,
                              phase="scheduler", verdict="failed", cause="max_running_zero",
                              figures={"kv_tokens": 11893}))
    fams = families(tmp_path / "svcdiag.prom")
    assert value(fams, "svcdiag_healthy", unit="tp8.service") == 0
    assert value(fams, "svcdiag_verdict", unit="tp8.service", verdict="failed") == 1
    assert value(fams, "svcdiag_verdict", unit="tp1.service", verdict="pending") == 1
    assert value(fams, "svcdiag_phase", unit="tp1.service", phase="kv_cache") == 1
    assert value(fams, "svcdiag_phase", unit="tp1.service", phase="ready") == 0
    assert value(fams, "svcdiag_kv_tokens", unit="tp1.service") == 11893
    assert value(fams, "svcdiag_weights_bytes", unit="tp1.service") == 51 * 2**30
    assert value(fams, "svcdiag_start_info", unit="tp8.service", cause="max_running_zero") == 1
    assert value(fams, "svcdiag_phase_duration_seconds", unit="tp1.service", phase="starting") == 1.0


def test_a_new_start_of_a_unit_replaces_its_old_state(tmp_path: Path) -> None:
    tf = Textfile(tmp_path / "svcdiag.prom")
    for rec in start("tp1", "a" * 32):
        tf.publish(rec)
    tf.publish(ReadinessEvent(event="phase_entered", ts=2000, unit="tp1.service", config="tp1", invocation="c" * 32,
                              phase="loading_weights"))
    fams = families(tmp_path / "svcdiag.prom")
    assert value(fams, "svcdiag_start_info", unit="tp1.service")  # exactly one row: the new start
    assert dict(next(iter(fams["svcdiag_start_info"]))).get("invocation") == "c" * 32
    assert "svcdiag_kv_tokens" not in fams  # the old start's figure is not passed off as the new one's


def _writer(path: str, unit: str, n: int) -> None:
    tf = Textfile(path)
    for i in range(n):
        tf.publish(ReadinessEvent(event="phase_entered", ts=1000.0 + i, unit=f"{unit}.service", config=unit,
                                  invocation="d" * 32, phase=PHASES[i % len(PHASES)]))


def test_concurrent_writers_lose_no_unit_and_readers_never_see_a_partial_file(tmp_path: Path) -> None:
    path = tmp_path / "campaign.prom"
    ctx = multiprocessing.get_context("fork")
    procs = [ctx.Process(target=_writer, args=(str(path), u, 60)) for u in ("tp1", "tp4", "tp8")]
    for p in procs:
        p.start()
    reads = 0
    while any(p.is_alive() for p in procs):
        if path.exists():
            list(text_string_to_metric_families(path.read_text()))  # raises on a torn file
            reads += 1
    for p in procs:
        p.join()
        assert p.exitcode == 0
    fams = families(path)
    assert {dict(k)["unit"] for k in fams["svcdiag_healthy"]} == {"tp1.service", "tp4.service", "tp8.service"}
    assert reads > 0
    assert [p.name for p in tmp_path.iterdir() if not p.name.startswith(".")] == ["campaign.prom"]


def test_textfile_bad_paths_are_named(tmp_path: Path) -> None:
    with pytest.raises(SvcdiagError, match=r"only \*\.prom files"):
        Textfile(tmp_path / "svcdiag.txt")
    with pytest.raises(SvcdiagError, match="no such directory"):
        Textfile(tmp_path / "missing" / "svcdiag.prom")


# ---------------------------------------------------------------- --since


NOW = time.mktime((2026, 12, 3, 14, 30, 0, 0, 0, -1))


@pytest.mark.parametrize("text, expected", [
    ("-10min", NOW - 600), ("10 min ago", NOW - 600), ("-2h", NOW - 7200), ("1 day ago", NOW - 86400),
    ("-30s", NOW - 30), ("@1796286000", 1796286000.0), ("now", NOW),
    ("today", time.mktime((2026, 12, 3, 0, 0, 0, 0, 0, -1))),
    ("yesterday", time.mktime((2026, 12, 2, 0, 0, 0, 0, 0, -1))),
    ("2026-12-02 19:30", time.mktime((2026, 12, 2, 19, 30, 0, 0, 0, -1))),
    ("2026-12-02T19:30:05", time.mktime((2026, 12, 2, 19, 30, 5, 0, 0, -1))),
    ("09:15", time.mktime((2026, 12, 3, 9, 15, 0, 0, 0, -1))),
])
def test_since_takes_what_operators_type_for_journalctl(text: str, expected: float) -> None:
    assert parse_since(text, now=NOW) == pytest.approx(expected)


@pytest.mark.parametrize("text", ["bogus", "10min", "25:00", "2026-13-01", "@soon", ""])
def test_since_rejects_what_it_cannot_read_and_says_so(text: str) -> None:
    with pytest.raises(SvcdiagError, match=r"--since .*not a time \(try "):
        parse_since(text, now=NOW)


# ---------------------------------------------------------------- the live line, on a pseudo-terminal


class Pty:
    """A real pseudo-terminal: LiveTerminal writes to the slave, the test reads the master."""

    def __init__(self) -> None:
        self.master, slave = os.openpty()
        self.out = os.fdopen(slave, "w", encoding="utf-8")
        os.set_blocking(self.master, False)

    def read(self) -> str:
        chunks = []
        while True:
            try:
                chunk = os.read(self.master, 65536)
            except BlockingIOError:
                break
            if not chunk:
                break
            chunks.append(chunk)
        return b"".join(chunks).decode()

    def close(self) -> None:
        self.out.close()
        os.close(self.master)


@pytest.fixture
def pty_out(monkeypatch):
    monkeypatch.setenv("TERM", "xterm-256color")
    monkeypatch.delenv("NO_COLOR", raising=False)
    p = Pty()
    yield p
    p.close()


def drive(term: LiveTerminal, t0: float = 5000.0) -> None:
    for rec in start("tp8", "e" * 32, t0=t0)[:2]:
        term.publish(rec)
    term.progress(Progress("tp8.service", "tp8", "loading_weights", t0, t0 + 600, t0 + 42.0))


def test_live_line_shows_phase_elapsed_deadline_and_last_milestone(pty_out: Pty) -> None:
    assert wants_live(pty_out.out, as_json=False) and not wants_live(pty_out.out, as_json=True)
    term = LiveTerminal(pty_out.out)
    drive(term)
    screen = pty_out.read()
    status = screen.rsplit("\x1b[2K", 1)[-1]
    plain = re.sub(r"\x1b\[[0-9;]*m", "", status)
    assert "tp8" in plain and "phase loading_weights" in plain and "42.0 s" in plain
    assert "558 s left on the deadline" in plain and "weights loaded" in plain
    assert "\x1b[1m" in status  # bold: colour is on
    term.publish(ReadinessEvent(event="verdict", ts=5100, unit="tp8.service", config="tp8", invocation="e" * 32,
                                phase="ready", verdict="healthy", message="ready"))
    term.close()
    tail = pty_out.read()
    assert "HEALTHY" in tail and "s left on the deadline" not in tail.rsplit("HEALTHY", 1)[-1]


def test_live_line_is_redrawn_at_most_four_times_a_second(pty_out: Pty) -> None:
    term = LiveTerminal(pty_out.out)
    drive(term)
    pty_out.read()
    for i in range(40):  # 40 ticks in one simulated second
        term.progress(Progress("tp8.service", "tp8", "loading_weights", 5000, 5600, 5043.0 + i / 40))
    assert pty_out.read().count("left on the deadline") <= 4


def test_no_color_keeps_the_line_but_drops_the_colour(pty_out: Pty, monkeypatch) -> None:
    monkeypatch.setenv("NO_COLOR", "1")
    term = LiveTerminal(pty_out.out)
    drive(term)
    screen = pty_out.read()
    assert "left on the deadline" in screen
    assert not re.search(r"\x1b\[[0-9;]*m", screen)


def test_no_live_line_when_piped(tmp_path: Path) -> None:
    with open(tmp_path / "out", "w") as f:
        assert not wants_live(f, as_json=False)


def test_a_dumb_terminal_gets_one_line_redrawn_with_a_carriage_return(monkeypatch, pty_out: Pty) -> None:
    """TERM=dumb (Emacs' shell, IDE consoles) knows \r but no escape sequence: the start still
    visibly moves, on one line, without colour or cursor movement."""
    monkeypatch.setenv("TERM", "dumb")
    assert wants_live(pty_out.out, as_json=False)
    term = LiveTerminal(pty_out.out)
    drive(term)
    term.progress(Progress("tp8.service", "tp8", "loading_weights", 5000, 5600, 5050.0))
    screen = pty_out.read()
    assert "\x1b" not in screen and "42.0 s" in screen and "50.0 s" in screen
    assert "\r" in screen.split("42.0 s", 1)[1]  # the second line was drawn over the first


def test_records_are_the_same_only_when_they_say_the_same_thing() -> None:
    common = {"unit": "a.service", "invocation": "f" * 32, "phase": "cuda_graph", "ts": 10.0}
    begin = ReadinessEvent(event="milestone", milestone="cuda_graph", message="capturing", **common)
    end = ReadinessEvent(event="milestone", milestone="cuda_graph", message="captured: 1.21 GB", **common)
    assert begin.key() != end.key()  # same millisecond, two milestones: both kept
    up_says = ReadinessEvent(event="verdict", verdict="healthy", **common)
    wait_says = ReadinessEvent(event="verdict", verdict="healthy", **{**common, "ts": 11.5})
    assert up_says.key() == wait_says.key()  # one start, one verdict, whoever judged it
