"""`logs NAME --milestones` of a notify unit serving after a healthy start prints the milestones its
supervisor published in the journal (svcdiag.ops.serve.milestones) instead of judging the start's lines
again (#40): both must print the same bytes, and only the unit's own entry, while it is the start's
last, counts.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from .helpers import config, sv, unit_name, verdict_of
from .helpers import published as published_entry

pytestmark = pytest.mark.rig

#: inside the rig: `logs --milestones` (text, then --json) printed from the published record and by judging
#: the lines, and what the published way imported (neither the judge nor pystemd, where it was taken)
BOTH_WAYS = """
import io, json, sys
from svcdiag.cli import plain
units, name = sys.argv[1], sys.argv[2]
cfg = plain.load(units, name)
out = {"published": [], "judged": [], "taken": []}
for as_json in (False, True):
    sys.stdout = buf = io.StringIO()
    out["taken"].append(plain.published_milestones(cfg, as_json))
    out["published"].append(buf.getvalue())
    out["modules"] = sorted(m for m in sys.modules if m.startswith(("svcdiag.judge", "svcdiag.sglang", "pystemd",
                                                                  "svcdiag.systemd.dbus", "svcdiag.systemd.journal_formats")))
for as_json in (False, True):
    sys.stdout = buf = io.StringIO()
    real, plain.published_milestones = plain.published_milestones, lambda *a: False
    plain.logs(units, name, True, False, None, as_json)
    plain.published_milestones = real
    out["judged"].append(buf.getvalue())
sys.stdout = sys.__stdout__
print(json.dumps(out))
"""


def both_ways(rig, units: Path, name: str) -> dict:
    return json.loads(rig.run([".venv/bin/python", "-c", BOTH_WAYS, str(units), name]).stdout)


def published(rig, invocation: str) -> dict:
    """The supervisor's milestones entry for the start, once it is written (off its loop, after READY=1)."""
    return published_entry(rig, "milestones", invocation)


def test_logs_milestones_from_the_supervisors_record_prints_what_judging_the_journal_prints(rig, units: Path) -> None:
    name = config(units, unit_name("lgp"), "demo-smoke")
    v = verdict_of(sv(rig, units, "up", name, "--wait-ready", "--json"))
    assert v["verdict"] == "healthy"
    body = json.loads(published(rig, v["invocation"])["SVCDIAG_JSON"])
    assert body["unit"] == f"{name}.service" and body["invocation"] == v["invocation"]

    out = both_ways(rig, units, name)
    assert out["taken"] == [True, True]
    assert out["published"] == out["judged"]  # byte for byte, text and --json
    text, as_json = out["published"]
    assert "fired up and ready to roll" in text and "phase → ready" in text
    kinds = [json.loads(line)["event"] for line in as_json.splitlines()]
    assert "phase_entered" in kinds and "milestone" in kinds
    assert out["modules"] == []  # neither the judge, the grammar, D-Bus, nor the journal formats
    # and the command itself prints the same
    said = sv(rig, units, "logs", name, "--milestones")
    assert said.returncode == 0 and said.stdout.decode() == text


def test_a_line_after_the_record_or_a_forged_record_has_the_lines_judged(rig, units: Path) -> None:
    name = config(units, unit_name("lgf"), "demo-smoke")
    v = verdict_of(sv(rig, units, "up", name, "--wait-ready", "--json"))
    inv = v["invocation"]
    entry = published(rig, inv)
    forged = json.loads(entry["SVCDIAG_JSON"])
    forged["records"] = forged["records"][:1]
    forged["judged"] += 1
    # written by another process (root, outside the unit's cgroup), naming the start in every field a client
    # may set: it is the start's last entry now (INVOCATION_ID matches it), but not the unit's own
    rig.run([".venv/bin/python", "-c", "import sys; from cysystemd.journal import send; "
             "send(MESSAGE='forged', SYSLOG_IDENTIFIER='svcdiag', SVCDIAG_PUBLISHED='milestones', "
             f"SVCDIAG_JSON=sys.argv[1], INVOCATION_ID={inv!r}, OBJECT_SYSTEMD_UNIT={name + '.service'!r})",
             json.dumps(forged)])
    out = both_ways(rig, units, name)
    assert out["taken"] == [False, False]
    assert out["published"] == ["", ""]
    text = out["judged"][0]
    assert "fired up and ready to roll" in text and text.count("\n") > 3
    assert sv(rig, units, "logs", name, "--milestones").stdout.decode() == text
