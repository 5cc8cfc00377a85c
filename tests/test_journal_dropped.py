"""journald's own record of a unit's lines its rate limit dropped ("Suppressed N messages from
UNIT", #30 item 2): read as a count on the start's verdict (`figures.journal_dropped_lines`), never
as a line of the server's, and a reason the supervisor's verdict stands (docs/reliability.md)."""

from __future__ import annotations

import io
import json

import pytest

from svcdiag.judge.pipeline import JOURNAL_DROPPED as JUDGES_ID
from svcdiag.judge.pipeline import Judge
from svcdiag.ops.offline.replay import replay
from svcdiag.systemd import journal
from svcdiag.systemd.journal_formats import JOURNAL_DROPPED, record_from_fields

from .conftest import EXAMPLES

INV = "020cff57ab154e8faf1f54f995475702"  # the healthy start of two-starts-json.json


def dropped_fields(n: int, *, inv: str = INV, doubled: bool = False, ts_us: int = 1796236883900000) -> dict:
    """What systemd-journald writes (journald-server.c: server_driver_message with the sender's pid)."""
    return {"MESSAGE_ID": JOURNAL_DROPPED, "MESSAGE": f"Suppressed {n} messages from p1.service",
            "N_DROPPED": str(n), "SYSLOG_IDENTIFIER": "systemd-journald", "_TRANSPORT": "driver", "PRIORITY": "6",
            "_SYSTEMD_UNIT": "systemd-journald.service", "_PID": "31", "OBJECT_PID": "84",
            "OBJECT_SYSTEMD_UNIT": "p1.service", "OBJECT_SYSTEMD_INVOCATION_ID": ("=" if doubled else "") + inv,
            "__REALTIME_TIMESTAMP": str(ts_us)}


@pytest.mark.parametrize("doubled", [False, True])
def test_journalds_record_is_a_count_of_the_unit_it_names(doubled: bool) -> None:
    rec = record_from_fields(dropped_fields(20_039, doubled=doubled))
    assert rec is not None and (rec.dropped, rec.invocation, rec.unit, rec.systemd) == (20_039, INV, "p1.service", False)
    plain = dict(dropped_fields(7))
    del plain["N_DROPPED"]  # the count is in the message too
    assert record_from_fields(plain).dropped == 7
    assert JUDGES_ID == JOURNAL_DROPPED  # the judge's copy of the id (judge/ imports nothing of systemd/)
    assert journal.JOURNAL_DROPPED == JOURNAL_DROPPED  # and the published verdict's reader's


def test_a_server_line_quoting_the_words_is_not_journalds_record() -> None:
    rec = record_from_fields({"MESSAGE": "Suppressed 5 messages from p1.service", "_SYSTEMD_UNIT": "p1.service",
                              "_SYSTEMD_INVOCATION_ID": INV})
    assert rec is not None and rec.dropped == 0


def test_the_count_is_on_the_verdict_before_or_after_it() -> None:
    j = Judge(unit="p1.service", invocation=INV)
    j.journal_dropped(1000)
    j.service_line("[2026-12-02 18:41:23.950] INFO:     Started server process [84]", 10.0)
    v = j.finish()
    assert v.figures.journal_dropped_lines == 1000
    j.journal_dropped(24)  # journald writes it with the unit's next line: after the verdict, too
    assert j.verdict is not None and j.verdict.figures.journal_dropped_lines == 1024


def test_the_supervisors_verdict_says_how_many_lines_journald_dropped() -> None:
    j = Judge(unit="p1.service", invocation=INV)
    j.journal_dropped(20_039)
    v = j.supervisor_ready("ready: 40,179 KV tokens", 12.0)
    assert (v.verdict, v.figures.verdict_source, v.figures.journal_dropped_lines) == ("healthy", "supervisor",
                                                                                          20_039)
    assert "journald dropped 20,039 of this start's lines" in v.message


def test_replay_of_a_journal_with_journalds_record_counts_it_on_its_start() -> None:
    data = (EXAMPLES / "two-starts-json.json").read_bytes()
    extra = json.dumps(dropped_fields(20_039)).encode() + b"\n"
    res = replay(io.BytesIO(data + extra), "two-starts-json.json")
    assert res.verdict.verdict == "healthy" and res.verdict.figures.journal_dropped_lines == 20_039
    assert res.starts[0].verdict.figures.journal_dropped_lines is None  # the earlier start lost nothing


def _port_in_use() -> Judge:
    j = Judge(unit="p1.service", invocation=INV)
    j.service_line("[2026-12-02 18:41:23.950] ERROR:    [Errno 98] error while attempting to bind on address "
                   "('127.0.0.1', 32100): address already in use", 10.0)
    assert j.verdict is not None and j.verdict.cause == "port_in_use"
    return j


def test_where_journald_dropped_lines_the_supervisors_failure_stands_over_the_journals() -> None:
    from types import SimpleNamespace

    from svcdiag.ops.serve.follow import _supervisors_failure

    said = SimpleNamespace(status_text="failed [cuda_oom]: CUDA out of memory while capturing CUDA graphs")
    kept = _port_in_use()
    _supervisors_failure(kept, said)  # journald said nothing: the journal's own failure stands
    assert kept.verdict is not None and kept.verdict.cause == "port_in_use"
    lost = _port_in_use()
    lost.journal_dropped(5_000)
    _supervisors_failure(lost, said)
    v = lost.verdict
    assert v is not None and (v.verdict, v.cause, v.figures.verdict_source) == ("failed", "cuda_oom", "supervisor")
    assert v.figures.journal_dropped_lines == 5_000 and v.evidence[-1].startswith("STATUS=failed [cuda_oom]")


def test_status_says_how_many_lines_journald_dropped() -> None:
    from svcdiag.output.report import render_status

    row = {"name": "p1", "active_state": "active", "phase": "ready", "kv_tokens": 40179, "max_running_requests": 4,
           "verdict": {"verdict": "healthy", "cause": None, "figures": {"journal_dropped_lines": 20039,
                                                                        "verdict_source": "supervisor"}}}
    said = render_status(row)
    assert "journald dropped 20,039 of this start's lines" in said and "svcdiag supervise's" in said
    row["verdict"]["figures"] = {}
    assert "journald" not in render_status(row)


def _healthy_start_without_the_targets_weight_lines(tmp_path, n: int = 99_722):
    """two-starts-json.json's DFlash start as journald's rate limit left it: the target's `Load weight`
    lines dropped, the draft's kept, and journald's record of how many it dropped."""
    out = []
    for line in (EXAMPLES / "two-starts-json.json").read_text().splitlines():
        d = json.loads(line)
        msg = str(d.get("MESSAGE"))
        if d.get("_SYSTEMD_INVOCATION_ID") == INV and "Load weight" in msg and "DFlash" not in msg:
            continue
        out.append(line)
    out.append(json.dumps(dropped_fields(n)))
    path = tmp_path / "limited.json"
    path.write_text("\n".join(out) + "\n")
    return path


def test_the_human_verdict_says_lines_were_dropped_and_marks_the_figures_that_may_be_wrong(tmp_path, cli) -> None:
    # issue 39 item 6: the draft's 1.66 GB was shown as the model's weights, and nothing said 99,722 lines were lost
    r = cli("replay", str(_healthy_start_without_the_targets_weight_lines(tmp_path)))
    assert r.exit_code == 0, r.output
    assert "weights_gb=1.66?" in r.output and "kv_tokens=649,789," in r.output  # only the doubtful one marked
    assert ("journald dropped 99,722 of this start's lines (its rate limit): the figures and phases are read from "
            "the lines it kept, and those marked ? may be wrong") in r.output
    assert "weights_gb?: one weight load kept of the two a speculative start prints: it may be the draft's" in r.output
    whole = cli("replay", str(EXAMPLES / "two-starts-json.json"))
    assert "journald dropped" not in whole.output and "?" not in whole.output.split("figures:")[1].splitlines()[0]


def test_doubtful_figures_only_where_lines_were_dropped() -> None:
    from svcdiag.sglang.figures import Figures

    spec = Figures(speculative_algorithm="DFLASH", model_path="/m", weights_gb=1.66)
    assert spec.doubtful() == {}  # nothing dropped: the figures are the log's
    assert set(spec.replace(journal_dropped_lines=5).doubtful()) == {"weights_gb"}
    assert spec.replace(journal_dropped_lines=5, draft_weights_gb=1.66).doubtful() == {}  # both loads kept
    assert Figures(model_path="/m", weights_gb=50.3, journal_dropped_lines=5).doubtful() == {}  # no draft to mistake
    assert "server_args line was dropped" in Figures(weights_gb=50.3, journal_dropped_lines=5).doubtful()["weights_gb"]
    eagle = Figures(speculative_algorithm="EAGLE3", model_path="/m", weights_gb=50.3, draft_weights_gb=1.2,
                    kv_tokens=9000, journal_dropped_lines=5)
    assert set(eagle.doubtful()) == {"kv_tokens"}  # its draft's KV line may be the one kept
    assert eagle.replace(draft_kv_tokens=9000).doubtful() == {}
    assert eagle.replace(http_max_total_num_tokens=9000).doubtful() == {}  # the server itself agreed
