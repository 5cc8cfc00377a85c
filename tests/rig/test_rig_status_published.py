"""`status` of a notify unit serving after a healthy start reads the verdict its supervisor
published in the journal (svcdiag.systemd.journal.publish_verdict) instead of judging the start's
lines again (#40): the two must say the same thing, and only the unit's own entry counts.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from svcdiag.output.tables import render_status

from .helpers import config, journal, json_lines, sv, unit_name, verdict_of
from .helpers import published as published_entry

pytestmark = pytest.mark.rig

#: inside the rig: the rows `status` makes from the published verdict and from the journal's lines,
#: and which units had a published verdict to read
BOTH_WAYS = """
import json, sys
from svcdiag.config.service import find_units_dir
from svcdiag.ops.serve.service import published_verdicts, status
from svcdiag.systemd.dbus import Systemd
units = find_units_dir(sys.argv[1])
cfgs = [units.load(n) for n in sys.argv[2:]]
with Systemd.connect() as sd:
    said = published_verdicts(sd, cfgs, sd.states([c.unit for c in cfgs], brief=True))
    print(json.dumps({"published_for": sorted(said), "rows": [status(sd, cfgs, units, published=p) for p in (True, False)]}))
"""

#: inside the rig: `top`'s snapshot rows, from the published verdicts and with none published
BOARD = """
import json, sys
from svcdiag.config.service import find_units_dir
from svcdiag.ops.serve import service
from svcdiag.ops.serve.board import Board
from svcdiag.systemd.dbus import Systemd
units = find_units_dir(sys.argv[1])
cfgs = [units.load(n) for n in sys.argv[2:]]
out = []
with Systemd.connect() as sd:
    for _ in range(2):
        board = Board(sd, cfgs, follow=False)
        board.refresh()
        out.append([r.to_json() for r in board.rows()])
        board.close()
        service.published_verdicts = lambda *args: {}
print(json.dumps(out))
"""


def both_ways(rig, units: Path, *names: str) -> tuple[list[str], list[dict], list[dict]]:
    out = json.loads(rig.run([".venv/bin/python", "-c", BOTH_WAYS, str(units), *names]).stdout)
    published, judged = out["rows"]
    for row in published + judged:  # what moves between the two reads: the uptime, the serving watch's seconds
        row.pop("uptime_s", None)
        if "watch" in row:  # its state; its words count seconds
            row["watch"] = {"state": row["watch"]["state"], "status": row["watch"]["state"]}
    return out["published_for"], published, judged


#: what a verdict says, as opposed to when each observer's clock saw it (ts, phase_seconds, startup_s)
SAYS = ("verdict", "cause", "phase", "degraded", "diagnosis")
FIGURES = ("kv_tokens", "max_running_requests", "max_total_num_tokens", "context_len")


def says(record: dict) -> dict:
    return {**{k: record.get(k) for k in SAYS}, **{k: record["figures"].get(k) for k in FIGURES}}


def test_status_from_the_supervisors_published_verdict_says_what_judging_the_journal_says(rig, units: Path) -> None:
    # the serving watch's first word (10 s after ready by default) must not fall between the two reads compared
    # below: a loaded CI once had it in the second only. It asks /health first in 10 minutes, after this test
    name = config(units, unit_name("pub"), "demo-smoke", health_interval_s=600)
    plain = config(units, unit_name("jrn"), "demo-smoke", readiness="journal")  # no supervisor: nothing published
    v = verdict_of(sv(rig, units, "up", name, "--wait-ready", "--json"))
    assert v["verdict"] == "healthy"
    assert verdict_of(sv(rig, units, "up", plain, "--wait-ready", "--json"))["verdict"] == "healthy"

    # one entry of the start's own, and no second verdict event (`svcdiag events` holds up's one record)
    entry = published_entry(rig, "verdict", v["invocation"])  # once written: `up` may return first
    assert json.loads(entry["SVCDIAG_JSON"])["figures"]["kv_tokens"] == v["figures"]["kv_tokens"]
    assert len(journal(rig, "SVCDIAG_EVENT=verdict", f"SVCDIAG_CONFIG={name}")) == 1

    published_for, published, judged = both_ways(rig, units, name, plain)
    assert published_for == [f"{name}.service"]  # the journal-mode unit is judged from its lines
    # what a person reads is the same, line for line
    assert [render_status(r) for r in published] == [render_status(r) for r in judged]
    assert {k: val for k, val in published[0].items() if k != "verdict"} == \
        {k: val for k, val in judged[0].items() if k != "verdict"}
    assert published[1] == judged[1]
    # the record is the supervisor's: what `up` said (HTTP's cross-check included, which a judge of the
    # journal alone does not know), on the supervisor's clock
    row = published[0]
    assert says(row["verdict"]) == says(judged[0]["verdict"]) == says(v)
    assert row["verdict"]["message"] == v["message"] and row["verdict"]["invocation"] == v["invocation"]
    assert (row["phase"], row["kv_tokens"]) == ("ready", v["figures"]["kv_tokens"])
    said = sv(rig, units, "status", name, plain).stdout.decode()
    assert said.count("phase ready") == 2 and f"kv_tokens {v['figures']['kv_tokens']}" in said

    # `top`'s snapshot: the same board either way, but for the message (the supervisor's names HTTP's check)
    published_board, judged_board = json.loads(rig.run([".venv/bin/python", "-c", BOARD, str(units), name, plain]).stdout)
    for row in published_board + judged_board:
        row.pop("uptime_s"), row.pop("watch")
    [mine] = [r for r in published_board if r["name"] == name]
    [judged_mine] = [r for r in judged_board if r["name"] == name]
    assert mine.pop("message") == v["message"]
    assert judged_mine.pop("message").startswith("the server is fired up")
    assert published_board == judged_board and mine["state"] == "healthy"


def test_a_verdict_written_from_outside_the_unit_is_not_taken_for_its_supervisors(rig, units: Path) -> None:
    name = config(units, unit_name("forge"), "demo-smoke")
    v = verdict_of(sv(rig, units, "up", name, "--wait-ready", "--json"))
    entry = published_entry(rig, "verdict", v["invocation"])  # once written: `up` may return first
    forged = json.loads(entry["SVCDIAG_JSON"])
    forged["figures"]["kv_tokens"] = 1
    forged["ts"] += 1  # later than the genuine one
    # written by another process (this one, root, outside the unit's cgroup), naming the start in every
    # field a client may set (journald alone stamps _SYSTEMD_INVOCATION_ID: a client's `_` field is refused)
    rig.run([".venv/bin/python", "-c", "import sys; from cysystemd.journal import send; "
             "send(MESSAGE='forged', SYSLOG_IDENTIFIER='svcdiag', SVCDIAG_PUBLISHED='verdict', "
             f"SVCDIAG_JSON=sys.argv[1], INVOCATION_ID={v['invocation']!r}, SVCDIAG_INVOCATION={v['invocation']!r})",
             json.dumps(forged)])
    assert len(journal(rig, "SVCDIAG_PUBLISHED=verdict")) >= 2
    row = json_lines(sv(rig, units, "status", name, "--json"))[0]
    assert row["kv_tokens"] == v["figures"]["kv_tokens"] and row["verdict"]["figures"]["kv_tokens"] != 1
