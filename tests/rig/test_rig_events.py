"""Events of real starts on the private rig: read back by `svcdiag events`, by plain
`journalctl -o json` with no svcdiag involved, from a Prometheus textfile, and as a live
line on a pseudo-terminal."""

from __future__ import annotations

import json
import re
import select
import subprocess
import time
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from svcdiag.output.schema import MESSAGE_IDS

from .helpers import config, journal, json_lines, sv, synced, unit_name, verdict_of

pytestmark = pytest.mark.rig


def shape(recs: list[dict]) -> list[tuple]:
    return [(r["event"], r.get("milestone"), r["phase"], r.get("verdict"), r.get("cause")) for r in recs
            if r["event"] != "note"]


def test_events_of_an_up_are_read_back_by_events_journalctl_and_the_textfile(rig, units: Path) -> None:
    name = config(units, unit_name("ev"), "demo-smoke")
    prom = units / "svcdiag.prom"
    up = sv(rig, units, "up", name, "--wait-ready", "--json", "--textfile", str(prom))
    v = verdict_of(up)
    assert v["verdict"] == "healthy"

    # `svcdiag events` after `up` has exited: the same records, in the same order (once journald has stored
    # the last ones: a loaded journald may still hold them when `up` exits)
    synced(rig)
    back = json_lines(sv(rig, units, "events", "--unit", name, "--json"))
    assert shape(back) == shape(json_lines(up))
    assert back[-1]["invocation"] == v["invocation"] and back[-1]["figures"]["kv_tokens"] == v["figures"]["kv_tokens"]
    human = sv(rig, units, "events", "-u", f"{name}.service").stdout.decode()
    assert f"{name}  KV cache: {v['figures']['kv_tokens']:,} tokens" in human and "HEALTHY" in human

    # plain journalctl, the documented fields
    [entry] = journal(rig, "SVCDIAG_EVENT=verdict", f"SVCDIAG_CONFIG={name}")
    assert entry["MESSAGE_ID"] == MESSAGE_IDS["verdict"] and entry["SYSLOG_IDENTIFIER"] == "svcdiag"
    assert (entry["SVCDIAG_UNIT"], entry["SVCDIAG_PHASE"], entry["SVCDIAG_VERDICT"], entry["SVCDIAG_INVOCATION"]) \
        == (f"{name}.service", "ready", "healthy", v["invocation"])
    assert json.loads(entry["SVCDIAG_JSON"])["figures"]["kv_tokens"] == v["figures"]["kv_tokens"]
    kv = journal(rig, f"MESSAGE_ID={MESSAGE_IDS['milestone']}", "SVCDIAG_MILESTONE=kv_cache",
                 f"SVCDIAG_CONFIG={name}")
    assert len(kv) == 1 and kv[0]["SVCDIAG_PHASE"] == "kv_cache"

    # a second observer of the same start (`wait`) adds nothing to the journal
    assert verdict_of(sv(rig, units, "wait", name, "--json"))["invocation"] == v["invocation"]
    assert len(journal(rig, "SVCDIAG_EVENT=verdict", f"SVCDIAG_CONFIG={name}")) == 1

    # the textfile, as node_exporter would read it
    samples = {(s.name, s.labels.get("phase") or s.labels.get("verdict")): s.value
               for fam in text_string_to_metric_families(prom.read_text()) for s in fam.samples
               if s.labels.get("config") == name}
    assert samples[("svcdiag_healthy", None)] == 1
    assert samples[("svcdiag_phase", "ready")] == 1 and samples[("svcdiag_verdict", "healthy")] == 1
    assert samples[("svcdiag_kv_tokens", None)] == v["figures"]["kv_tokens"]

    # --since: a restart's history, without the first start's
    mark = time.time()
    time.sleep(0.05)
    v2 = verdict_of(sv(rig, units, "up", name, "--wait-ready", "--restart", "--json"))
    recent = json_lines(sv(rig, units, "events", "--unit", name, "--json", "--since", f"@{mark:.3f}"))
    assert {r["invocation"] for r in recent} == {v2["invocation"]}
    assert len(json_lines(sv(rig, units, "events", "--unit", name, "--json"))) > len(recent)
    sv(rig, units, "down", name)


def test_a_failed_start_is_journalled_at_err_with_its_cause(rig, units: Path) -> None:
    name = config(units, unit_name("evfail"), "demo-max-running-zero", simulate="max-running-zero")
    assert sv(rig, units, "up", name, "--wait-ready", "--json", "--force").returncode == 1  # started despite preflight
    errs = journal(rig, "-p", "err", "SYSLOG_IDENTIFIER=svcdiag", f"SVCDIAG_CONFIG={name}")
    assert [(e["SVCDIAG_EVENT"], e["SVCDIAG_CAUSE"]) for e in errs] == \
        [("failure", "max_running_zero"), ("verdict", "max_running_zero")]
    predicted, diag = journal(rig, "SVCDIAG_EVENT=diagnosis", f"SVCDIAG_CONFIG={name}")  # preflight's, then the start's
    assert json.loads(predicted["SVCDIAG_JSON"])["message"].startswith("preflight: ")
    assert json.loads(diag["SVCDIAG_JSON"])["fixes"]
    sv(rig, units, "down", name)


def test_events_follow_in_a_second_terminal_sees_a_start_while_it_runs(rig, units: Path) -> None:
    name = config(units, unit_name("evfollow"), "demo-slow", sim_time_scale=0.05)
    follower = rig.popen(["timeout", "60", "svcdiag", "events", "--follow", "--json", "--unit", name],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        time.sleep(1.0)  # the follower is at the journal's end before the start begins
        up = rig.popen(["svcdiag", "--units", str(units), "up", name, "--wait-ready", "--json"],
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        seen: list[dict] = []
        seen_while_running: set[str] = set()
        buf = b""
        deadline = time.monotonic() + 45
        while time.monotonic() < deadline and not any(r["event"] == "verdict" for r in seen):
            ready, _, _ = select.select([follower.stdout], [], [], 1.0)
            if not ready:
                continue
            chunk = follower.stdout.read1(65536)
            if not chunk:
                break
            buf += chunk
            *lines, buf = buf.split(b"\n")
            for line in lines:
                rec = json.loads(line)
                seen.append(rec)
                if up.poll() is None:
                    seen_while_running.add(rec["phase"])
        out, _ = up.communicate(timeout=30)
    finally:
        rig.run(f"pkill -f '[e]vents --follow --json --unit {name}'", check=False)
        follower.communicate(timeout=60)
    assert up.returncode == 0
    # the ~5 s weight load was seen while `up` still waited: live, not read back afterwards. (Not the KV pool:
    # `up` ends ~1 s after it, and a loaded machine may hold the follower back that long.)
    assert "loading_weights" in seen_while_running, seen_while_running
    up_recs = [json.loads(line) for line in out.decode().splitlines() if line.startswith("{")]
    assert shape(seen) == shape(up_recs)
    sv(rig, units, "down", name)


# ---------------------------------------------------------------- the live line on a terminal

_SGR = re.compile(r"\x1b\[[0-9;]*m")


def on_pty(rig, units: Path, *args: str, env: str = "") -> subprocess.CompletedProcess:
    return rig.run(f"{env} python tests/rig/pty_run.py svcdiag --units {units} " + " ".join(args), check=False,
                   timeout=90)


def test_up_on_a_terminal_shows_a_live_line_that_moves(rig, units: Path) -> None:
    name = slow = config(units, unit_name("tty"), "demo-slow", sim_time_scale=0.05)
    p = on_pty(rig, units, "up", name, "--wait-ready")
    screen = p.stdout.decode()
    assert p.returncode == 0, screen
    status_lines = [_SGR.sub("", s) for s in screen.split("\x1b[2K") if "left on the deadline" in s]
    elapsed = [float(m.group(1)) for s in status_lines if (m := re.search(r"  (\d+\.\d) s  ", s))]
    assert len(elapsed) >= 3 and elapsed[-1] > elapsed[0]  # it moves
    assert any(f"{name}  phase loading_weights" in s for s in status_lines)
    assert any("weights loaded" in s for s in status_lines)  # the last milestone's figures
    assert _SGR.search(screen)  # colour on a terminal ...
    assert "HEALTHY" in _SGR.sub("", screen)
    tail = screen.rsplit("HEALTHY", 1)[-1]
    assert "left on the deadline" not in tail  # ... and the live line is gone once the verdict is out
    sv(rig, units, "down", name)

    name = config(units, unit_name("tty"), "demo-smoke", sim_time_scale=0.05)  # the rest need no long phase
    plain = on_pty(rig, units, "up", name, "--wait-ready", env="NO_COLOR=1").stdout.decode()
    assert "left on the deadline" in plain and not _SGR.search(plain)
    sv(rig, units, "down", name)
    as_json = on_pty(rig, units, "up", name, "--wait-ready", "--json").stdout.decode()
    assert "left on the deadline" not in as_json and "\x1b[" not in as_json
    sv(rig, units, "down", name)

    # `wait` on a start in progress, and `baseline-check`, show the same line. `wait` attaches to the slow start
    # (~8 s): a loaded machine may take seconds to start `wait`, and the smoke start (~3 s) could be over by then
    assert sv(rig, units, "up", slow).returncode == 0
    waited = on_pty(rig, units, "wait", slow).stdout.decode()
    assert f"{slow}  phase " in _SGR.sub("", waited) and "left on the deadline" in waited
    sv(rig, units, "down", slow)
    assert sv(rig, units, "up", name, "--wait-ready").returncode == 0
    checked = on_pty(rig, units, "baseline-check", name, "--state-dir", str(units / "state"))
    assert checked.returncode == 0 and "left on the deadline" in checked.stdout.decode()
    assert "baseline " + name + " holds" in _SGR.sub("", checked.stdout.decode())
    sv(rig, units, "down", name)  # the check left it running, as it found it
