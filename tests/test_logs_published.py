"""`logs --milestones` from a start's published milestones (systemd.journal.published_milestones,
cli.plain.published_milestones): which journals it takes them from, and that it prints them as the
judge's sinks print the same records. The rig test (tests/rig/test_rig_logs_published.py) checks both
ways print the same bytes on a real systemd."""

from __future__ import annotations

import io
import json
import os
from pathlib import Path

import pytest

from svcdiag.cli import plain
from svcdiag.config.service import UnitsDir
from svcdiag.judge.pipeline import Judge
from svcdiag.output.publish import Publisher
from svcdiag.output.report import JsonLines, Lines
from svcdiag.systemd import journal
from svcdiag.systemd.journal_formats import JOURNAL_DROPPED

from .conftest import EXAMPLES, UNITS

INV = "ab" * 16
UNIT = "demo-smoke.service"


class Entry:
    def __init__(self, **data: str):
        self.data = data

    def get_realtime_usec(self) -> int:
        return 1_700_000_000_000_000


def line(text: str, **fields: str) -> Entry:
    return Entry(MESSAGE=text, _SYSTEMD_INVOCATION_ID=INV, _SYSTEMD_UNIT=UNIT, **fields)


CFG = UnitsDir(UNITS, "t").load("demo-smoke")


def published_entry(records: list, judged: int, config: str = "demo-smoke", cfg=CFG, **fields: str) -> Entry:
    body = {"invocation": INV, "unit": UNIT, "config": config, "judged_with": journal.judged_with(cfg),
            "judged": judged, "records": records}
    entry = line("svcdiag supervise: milestones", SVCDIAG_PUBLISHED="milestones", SVCDIAG_JSON=json.dumps(body), **fields)
    return entry


class Reader:
    """cysystemd's reader over `entries` (every one matches the start's filter, as journald would have it)."""

    def __init__(self, entries: list[Entry]):
        self.entries = iter(entries)

    def add_filter(self, rule) -> None:
        pass

    def seek_head(self) -> None:
        pass

    def next(self):
        return next(self.entries, None)


def read(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, entries: list[Entry], invocation: str | None = INV):
    """published_milestones with the start's journal given."""
    tmp_path.mkdir(exist_ok=True)
    if invocation is not None and not (tmp_path / f"invocation:{UNIT}").is_symlink():
        os.symlink(f"../invocation/{invocation}", tmp_path / f"invocation:{UNIT}")
    monkeypatch.setattr(journal, "UNIT_INVOCATIONS", tmp_path)
    monkeypatch.setattr(journal, "open_journal", lambda *a: Reader(entries))
    return journal.published_milestones(CFG)


def followed(monkeypatch: pytest.MonkeyPatch, entries: list[Entry]) -> int:
    """How many records Follower.read yields from `entries`: what the supervisor counts as judged."""
    monkeypatch.setattr(journal, "open_journal", lambda *a: Reader(entries))
    monkeypatch.setattr(journal, "JournalHeads", lambda: None)
    return len(list(journal.Follower(UNIT, INV).read()))


RECORDS = [{"event": "milestone", "ts": 1.5, "message": "fired up and ready to roll"}]


#: entries a start's filter also matches that Follower.read does not yield (or yields as no line): the count
#: of judged entries skips them alike
OTHERS = [
    Entry(MESSAGE="Started demo-smoke.service.", UNIT=UNIT, INVOCATION_ID=INV, _PID="1"),  # PID 1's line: counted
    Entry(_SYSTEMD_INVOCATION_ID=INV, CODE_FILE="x.c"),  # no MESSAGE: no record
    Entry(MESSAGE="Stopped demo-smoke.service.", UNIT=UNIT, INVOCATION_ID="cd" * 16, _PID="1",
          OBJECT_SYSTEMD_UNIT=UNIT),  # an earlier start's, matched by the unit alone
    Entry(MESSAGE="Suppressed 5 messages from demo-smoke.service", MESSAGE_ID=JOURNAL_DROPPED, N_DROPPED="5",
          OBJECT_SYSTEMD_UNIT=UNIT, OBJECT_SYSTEMD_INVOCATION_ID="cd" * 16),  # an earlier start's dropped lines
]


def test_the_published_records_are_taken_while_they_are_the_starts_last_entry(monkeypatch, tmp_path) -> None:
    start = [line("a"), *OTHERS, line("b"), line("c")]
    judged = followed(monkeypatch, start)
    assert judged == 4  # the three lines and PID 1's
    assert read(monkeypatch, tmp_path, [*start, published_entry(RECORDS, judged)]) == RECORDS
    assert read(monkeypatch, tmp_path / "x", [*start, published_entry(RECORDS, judged + 1)]) is None


@pytest.mark.parametrize("why", ["a line since", "a count that differs", "another config", "other deadlines", "dropped",
                                 "forged", "no current start", "not JSON"])
def test_otherwise_the_lines_are_judged(monkeypatch, tmp_path, why: str) -> None:
    start = [line("a"), line("b"), line("c")]
    pub = published_entry(RECORDS, 3)
    invocation: str | None = INV
    if why == "a line since":
        entries = [*start, pub, line("INFO: 127.0.0.1 - \"GET /health HTTP/1.1\" 200 OK")]
    elif why == "a count that differs":
        entries = [*start[1:], pub]
    elif why == "another config":
        entries = [*start, published_entry(RECORDS, 3, config="other")]
    elif why == "other deadlines":  # the config was edited since the supervisor judged the start
        import dataclasses

        edited = dataclasses.replace(CFG, timeouts=tuple({**CFG.timeout, "loading_weights": 60.0}.items()))
        entries = [*start, published_entry(RECORDS, 3, cfg=edited)]
    elif why == "dropped":
        entries = [*start, Entry(MESSAGE="Suppressed 5 messages from demo-smoke.service", MESSAGE_ID=JOURNAL_DROPPED,
                                 N_DROPPED="5", OBJECT_SYSTEMD_UNIT=UNIT), pub]
    elif why == "forged":  # another process's entry names the start in the fields a client may set
        forged = published_entry(RECORDS, 3)
        del forged.data["_SYSTEMD_INVOCATION_ID"]
        forged.data["INVOCATION_ID"] = INV
        entries = [*start, forged]
    elif why == "no current start":
        entries, invocation = [*start, pub], None
    else:
        pub.data["SVCDIAG_JSON"] = "{not json"
        entries = [*start, pub]
    assert read(monkeypatch, tmp_path, entries, invocation) is None


def test_the_current_invocation_is_pid1s_export(tmp_path, monkeypatch) -> None:
    monkeypatch.setattr(journal, "UNIT_INVOCATIONS", tmp_path)
    os.symlink(f"../invocation/{INV}", tmp_path / f"invocation:{UNIT}")
    os.symlink("../invocation/not-an-id", tmp_path / "invocation:odd.service")
    assert journal.current_invocation(UNIT) == INV
    assert journal.current_invocation("odd.service") is None
    assert journal.current_invocation("absent.service") is None


@pytest.mark.parametrize("as_json", [False, True])
def test_published_records_print_as_the_judges_sinks_print_them(monkeypatch, capsys, as_json: bool) -> None:
    """A real start's records, as the supervisor stores them (their JSON, read back), print the bytes the
    terminal's sink prints for the records themselves."""
    cfg = UnitsDir(UNITS, "t").load("demo-smoke")
    out = io.StringIO()
    kept: list = []

    class Keep:
        def publish(self, rec) -> None:
            if rec.event != "progress":
                kept.append(json.loads(json.dumps(rec.to_json(), ensure_ascii=False, default=str)))

    pub = Publisher([JsonLines(out) if as_json else Lines(out), Keep()], config=cfg.name, unit=cfg.unit)
    judge = Judge(cfg, unit=cfg.unit, invocation=INV, start_ts=1_700_000_000.0)
    for n, text in enumerate((EXAMPLES / "dflash-smoke.log").read_text().splitlines()):
        for ev in judge.service_line(text, 1_700_000_000.0 + n * 0.37):
            pub.event(ev)
    assert len(kept) > 10 and out.getvalue()
    monkeypatch.setattr(journal, "published_milestones", lambda cfg: kept)
    assert plain.published_milestones(cfg, as_json)
    assert capsys.readouterr().out == out.getvalue()
