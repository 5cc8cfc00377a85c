"""History, learned deadlines, campaign plans, GPU hygiene and bundles, without systemd (#17)."""

from __future__ import annotations

import io
import json
import os
import signal
import sqlite3
import struct
import subprocess
import sys
import tarfile
import time
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from svcdiag.config.campaign import load_plan
from svcdiag.config.service import find_units_dir
from svcdiag.judge.verdict import Verdict
from svcdiag.ops.fleet.campaign import bench_figures, benchmark_argv, resources
from svcdiag.ops.host import history as h
from svcdiag.ops.host.gpu_hygiene import parse_apps, parse_gpus, unit_of
from svcdiag.ops.offline.bundle import REDACTED, Redactor, Secret
from svcdiag.ops.offline.bundle_read import open_bundle
from svcdiag.output.campaign import INSTALL_PLOT, chart, csv_text, markdown

from .conftest import EXAMPLES, assert_one_line_error


def verdict(weights: float, *, kv: int = 94126, verdict_: str = "healthy", ts: float | None = None) -> Verdict:
    return Verdict(ts=ts or time.time(), verdict=verdict_, phase="ready", cause=None, message="ready",
                   figures={"kv_tokens": kv, "max_running_requests": 4, "startup_s": weights + 20,
                            "sglang_version": "0.5.23", "sglang_phase_seconds": {"load_weight": weights - 1}},
                   phase_seconds={"starting": 5.0, "loading_weights": weights, "kv_cache": 1.0},
                   unit="x.service", invocation=f"inv{weights}")


@pytest.fixture
def cfg(units: Path):
    return find_units_dir(str(units)).load("demo-smoke")


def test_every_start_is_a_row_and_history_prints_it(cli, tmp_path: Path, cfg) -> None:
    for w in (40.0, 42.0, 44.0):
        assert h.record_start(cfg, verdict(w), "up", state=str(tmp_path))[1] is None
    h.record_start(cfg, verdict(50.0, verdict_="failed"), "wait", state=str(tmp_path))
    rows = [json.loads(ln) for ln in cli("history", "demo-smoke", "--state-dir", str(tmp_path), "--json").output.splitlines()]
    assert [r["verdict"] for r in rows] == ["healthy"] * 3 + ["failed"] and rows[-1]["command"] == "wait"
    assert rows[0]["sglang_phase_seconds"] == {"load_weight": 39.0} and rows[0]["config_hash"] == cfg.config_hash
    assert rows[0]["host"] and rows[0]["mode"] in ("journal", "notify", "live")
    table = cli("history", "--state-dir", str(tmp_path)).output
    assert "demo-smoke" in table and "weights" in table and "42.0" in table
    assert cli("history", "--state-dir", str(tmp_path), "--since", "@9999999999").output == "no recorded starts\n"
    assert_one_line_error(cli("history", "--state-dir", str(tmp_path), "--since", "soonish"), "soonish")


def test_rows_recorded_before_typed_figures_still_print_and_drift_is_measured_against_them(
        cli, tmp_path: Path, cfg) -> None:
    """A history written by an earlier svcdiag (its figures a plain JSON object, one of them a figure
    this release does not know) prints as it was stored, and a new start's drift reads it."""
    h.record_start(cfg, verdict(40.0), "up", state=str(tmp_path))
    old = {"kv_tokens": 94126, "max_running_requests": 4, "startup_s": 60.0, "sglang_version": "0.5.23",
           "figure_dropped_since": 7}
    db = sqlite3.connect(h.db_path(str(tmp_path)))
    with db:
        db.execute("UPDATE starts SET figures = ?", (json.dumps(old),))
    db.close()
    [row] = [json.loads(ln) for ln in
             cli("history", "demo-smoke", "--state-dir", str(tmp_path), "--json").output.splitlines()]
    assert row["figures"] == old  # --json passes a row's figures through, not re-written
    table = cli("history", "--state-dir", str(tmp_path)).output
    assert "94126" in table.splitlines()[1]
    d = h.drift(h.load_usual(cfg, "0.5.23", str(tmp_path)), verdict(41.0, kv=90000))
    assert [x["what"] for x in d] == ["kv_tokens"] and "94,126 → 90,000" in d[0]["message"]


def test_learned_deadlines_slow_phase_and_drift_follow_from_three_healthy_starts(tmp_path: Path, cfg) -> None:
    for w in (40.0, 42.0, 44.0):
        h.record_start(cfg, verdict(w), "up", state=str(tmp_path))
    u = h.load_usual(cfg, "0.5.23", str(tmp_path))
    assert u.enough and u.phases["loading_weights"].p90 == pytest.approx(43.6)
    learned = h.learned_timeouts(cfg, u)
    assert learned["loading_weights"] == 88  # ceil(2 × p99 43.96)
    assert learned["kv_cache"] == h.LEARNED_FLOOR_S  # 2 × 1 s is below the floor
    assert h.with_learned(cfg, u).timeout["loading_weights"] == 88
    configured = cfg.__class__(**{**cfg.__dict__, "timeouts": tuple({**cfg.timeout, "loading_weights": 500.0}.items())})
    assert "loading_weights" not in h.learned_timeouts(configured, u)  # a configured deadline stays
    assert h.load_usual(cfg, "0.5.12", str(tmp_path)).healthy == 0  # another release: no history

    published = []

    class Pub:
        def note(self, text):
            published.append(("note", text))

        def record(self, event, **kw):
            return (event, kw)

        def publish(self, rec):
            published.append(rec)

    assert cfg.readiness == "notify"  # its supervisor enforces the configured deadlines: the reader keeps them
    notify = h.PhaseWatch(cfg, u, Pub())
    assert notify.cfg.timeout["loading_weights"] == cfg.timeout["loading_weights"] != 88
    assert "history advises deadlines" in published[0][1] and "loading_weights 88 s" in published[0][1]
    published.clear()
    w = h.PhaseWatch(cfg.__class__(**{**cfg.__dict__, "readiness": "journal"}), u, Pub())
    assert w.cfg.timeout["loading_weights"] == 88 and "learned deadlines" in published[0][1]
    t0 = 1000.0
    assert w.tick("loading_weights", t0) == (t0, 42.0)
    w.tick("loading_weights", t0 + 60)  # 60 s < 1.5 × 43.6
    assert len(published) == 1
    w.tick("loading_weights", t0 + 70)
    w.tick("loading_weights", t0 + 80)  # said once
    slow = [p for p in published if p[0] == "slow_phase"]
    assert len(slow) == 1 and slow[0][1]["message"].startswith("loading weights 70 s, usually 42 s")
    d = h.drift(u, verdict(43.0, kv=90000))
    assert [x["what"] for x in d] == ["kv_tokens"] and "94,126 → 90,000" in d[0]["message"]
    assert h.drift(u, verdict(43.0)) == []


def test_advise_names_deadlines_timeout_start_sec_and_a_startup_probe(cli, tmp_path: Path, cfg) -> None:
    for w in (40.0, 42.0, 44.0):
        h.record_start(cfg, verdict(w), "up", state=str(tmp_path))
    a = json.loads(cli("history", "demo-smoke", "--advise", "--state-dir", str(tmp_path), "--json").output)
    assert a["timeout_start_sec"] == 128  # ceil(2 × p99 of 60/62/64)
    probe = a["startup_probe"]
    assert probe["timeoutSeconds"] >= 2 and probe["failureThreshold"] * probe["periodSeconds"] >= 128
    text = cli("history", "demo-smoke", "--advise", "--state-dir", str(tmp_path)).output
    assert "TimeoutStartSec=128" in text and "startupProbe:" in text and "failureThreshold: 13" in text
    assert_one_line_error(cli("history", "--advise"), "name a config")


def test_history_survives_sigkill_during_writes(tmp_path: Path) -> None:
    """A writer killed mid-transaction: the database passes integrity_check and keeps whole rows only."""
    script = f"""
import sys, time
sys.path.insert(0, {str(Path(__file__).resolve().parent.parent)!r})
from svcdiag.ops.host.history import History
from pathlib import Path
h = History(Path({str(tmp_path / "history.sqlite3")!r}))
i = 0
while True:
    h.record({{"ts": time.time(), "config": "x", "verdict": "healthy", "figures": {{"i": i, "pad": "x" * 50000}}}})
    if i == 0:  # one row is in (however slow a loaded machine makes the writes), and the writes go on
        print("ready", flush=True)
    i += 1
"""
    for _ in range(3):
        p = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE)
        assert p.stdout.readline() == b"ready\n"
        time.sleep(0.4)
        os.kill(p.pid, signal.SIGKILL)
        p.wait()
    path = tmp_path / "history.sqlite3"
    assert h.integrity(path) == "ok"
    with h.History(path) as db:
        rows = db.rows("x")
        assert rows and all(len(r["figures"]["pad"]) == 50000 for r in rows)
        db.record({"ts": time.time(), "config": "x", "verdict": "failed"})  # and it still takes writes
    assert sqlite3.connect(path).execute("PRAGMA journal_mode").fetchone()[0] == "wal"


@given(st.lists(st.floats(min_value=0, max_value=1e5, allow_nan=False), min_size=1, max_size=30),
       st.floats(min_value=0, max_value=100))
def test_percentile_lies_within_the_values_and_grows_with_q(values: list[float], q: float) -> None:
    p = h.percentile(values, q)
    assert min(values) <= p <= max(values) + 1e-9
    assert h.percentile(values, 100) == max(values) and h.percentile(values, 0) == min(values)
    assert p <= h.percentile(values, min(q + 10, 100)) + 1e-9


# ---------------------------------------------------------------- campaign plans


def write_plan(tmp_path: Path, text: str) -> Path:
    p = tmp_path / "plan.toml"
    p.write_text(text)
    return p


def test_a_plan_loads_with_phases_gpu_sets_and_benchmark(units: Path, tmp_path: Path) -> None:
    u = find_units_dir(str(units))
    plan = load_plan(write_plan(tmp_path, 'benchmark = "bench --port {port} --host {host} --model {served_model_name}"\n'
                                          '[[phase]]\nname = "tp1"\nconfigs = ["dflash-tp1-mr8", "nospec-tp1"]\n'
                                          '[[phase]]\nname = "tp4"\nconfigs = ["dflash-tp4"]\nbenchmark = false\n'), u)
    assert plan.baseline is not None and plan.baseline.name == "dflash-smoke" and plan.name == "plan"
    assert [p.name for p in plan.phases] == ["tp1", "tp4"] and plan.phases[1].benchmark is None
    assert plan.results_dir == tmp_path / "plan-results"
    cfg = plan.phases[0].configs[0]
    assert benchmark_argv(plan.phases[0].benchmark, cfg, tmp_path / "o.json") == \
        ["bench", "--port", str(cfg.port), "--host", "127.0.0.1", "--model", "qwen3.6-27b"]
    assert ("gpu", 0) in resources(cfg) & resources(plan.phases[0].configs[1])  # both on GPU 0: never at once
    assert ("port", cfg.port) in resources(cfg)


@pytest.mark.parametrize(("text", "field", "needle"), [
    ('[[phase]]\nname = "a"\nconfigs = ["nospec-tp1"]\nparalel = true\n', "phase[0].paralel", "did you mean 'parallel'"),
    ('[[phase]]\nname = "a"\nconfigs = ["nospec-tp01"]\n', "phase[0].configs", "did you mean 'nospec-tp1'"),
    ('[[phase]]\nname = "a"\nconfigs = "nospec-tp1"\n', "phase[0].configs", "non-empty list"),
    ('benchmark = "b --port {prot}"\n[[phase]]\nname = "a"\nconfigs = ["nospec-tp1"]\n', "benchmark", "{port}"),
    ('[[phase]]\nname = "a"\nconfigs = ["nospec-tp1"]\n[[phase]]\nname = "a"\nconfigs = ["dflash-tp4"]\n',
     "phase[1].name", "named twice"),
    ('baseline = "nope"\n[[phase]]\nname = "a"\nconfigs = ["nospec-tp1"]\n', "baseline", "no config 'nope'"),
    ('name = "x"\n', "phase", "is required"),
    ('[[phase]]\nconfigs = ["nospec-tp1"]\n', "phase[0].name", "is required"),
    ('benchmark_timeout = -1\n[[phase]]\nname = "a"\nconfigs = ["nospec-tp1"]\n', "benchmark_timeout", "> 0"),
])
def test_a_bad_plan_is_one_line_naming_file_and_field(cli, tmp_path: Path, text: str, field: str, needle: str) -> None:
    p = write_plan(tmp_path, text)
    r = cli("campaign", str(p))
    assert_one_line_error(r, f"{p}: {field}:", needle)


@settings(max_examples=40, deadline=None)
@given(st.dictionaries(st.text(st.characters(codec="ascii", categories=["Ll"]), min_size=1, max_size=8),
                       st.one_of(st.integers(), st.text(st.characters(categories=["L", "N"]), max_size=5), st.booleans()),
                       max_size=3))
def test_unknown_top_level_keys_are_refused_by_name(tmp_path_factory, data: dict) -> None:
    from svcdiag.config.campaign import TOP
    from svcdiag.errors import ConfigError

    units = find_units_dir(str(Path(__file__).resolve().parent.parent / "units"))
    extra = {k: v for k, v in data.items() if k not in TOP}
    body = "".join(f"{k} = {json.dumps(v, ensure_ascii=False)}\n" for k, v in extra.items())
    p = tmp_path_factory.mktemp("plan") / "p.toml"
    p.write_text(body + '[[phase]]\nname = "a"\nconfigs = ["nospec-tp1"]\n')
    if extra:
        with pytest.raises(ConfigError, match="unknown key"):
            load_plan(p, units)
    else:
        assert load_plan(p, units).phases[0].name == "a"


def test_benchmark_figures_come_from_the_output_file_or_stdout(tmp_path: Path) -> None:
    out = tmp_path / "o.jsonl"
    out.write_text('{"old": 1}\n{"request_throughput": 3.5, "backend": "sglang", "ok": true}\n')
    assert bench_figures("text", out) == {"request_throughput": 3.5}
    assert bench_figures('progress...\n{"output_throughput": 120.0}\n', None) == {"output_throughput": 120.0}
    assert bench_figures("no json here", None) == {}


def test_results_as_markdown_csv_and_a_chart_or_how_to_get_one(tmp_path: Path) -> None:
    rows = [{"phase": "tp1", "config": "a", "status": "healthy", "cause": None, "figures": {"kv_tokens": 9, "startup_s": 7.0},
             "phase_seconds": {"starting": 2.0, "loading_weights": 5.0}, "degraded": [],
             "benchmark": {"exit_code": 0, "figures": {"tps": 3.0}}},
            {"phase": "tp1", "config": "b", "status": "failed", "cause": "cuda_oom", "figures": {}, "phase_seconds": {},
             "degraded": [], "benchmark": None, "diagnosis": {"explanation": ["graphs ran out of memory"]}}]
    md = markdown("c", {"config": "base", "verdict": "healthy", "cause": None}, rows)
    assert "| a | healthy |  | 2.0 | 5.0 | 7.0 | 9 |" in md and "**b**: graphs ran out of memory" in md
    assert csv_text(rows).splitlines()[0].startswith("phase,config,status,cause,starting_s,loading_weights_s")
    got = chart(rows, tmp_path / "startup")
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        assert got == INSTALL_PLOT and "pip install 'svcdiag[plot]'" in got
    else:
        assert [p.suffix for p in got] == [".png", ".svg"] and all(p.stat().st_size > 0 for p in got)


# ---------------------------------------------------------------- GPU hygiene


def test_nvidia_smi_apps_map_to_gpus_and_units(tmp_path: Path) -> None:
    gpus = parse_gpus("0, GPU-aaaa\n1, GPU-bbbb\n")
    assert parse_apps("4242, GPU-bbbb, 73216\n17, GPU-aaaa, 512 MiB\nnonsense\n", gpus) == [(4242, 1, 71.5), (17, 0, 0.5)]
    (tmp_path / "4242").mkdir()
    (tmp_path / "4242" / "cgroup").write_text("0::/system.slice/orphan.service\n")
    (tmp_path / "17").mkdir()
    (tmp_path / "17" / "cgroup").write_text("0::/user.slice/user-0.slice/session-3.scope\n")
    assert unit_of(4242, tmp_path) == "orphan.service" and unit_of(17, tmp_path) == "session-3.scope"
    assert unit_of(99, tmp_path) is None


# ---------------------------------------------------------------- bundles


def export_entry(fields: dict[str, bytes]) -> bytes:
    out = b""
    for k, v in fields.items():
        if b"\n" in v:
            out += k.encode() + b"\n" + struct.pack("<Q", len(v)) + v + b"\n"
        else:
            out += k.encode() + b"=" + v + b"\n"
    return out + b"\n"


def test_redaction_keeps_the_export_format_readable() -> None:
    red = Redactor([Secret("env.HF_TOKEN", "hf_abcdef123"), Secret("extra_args[1] (--api-key)", "sk-999")])
    data = export_entry({"MESSAGE": b"token hf_abcdef123 here", "_SYSTEMD_UNIT": b"x.service"}) + \
        export_entry({"MESSAGE": b"multi\nline sk-999\n", "PRIORITY": b"6"})
    out = red.export("journal.export", data)
    assert b"hf_abcdef123" not in out and b"sk-999" not in out and out.count(REDACTED.encode()) == 2
    size = struct.unpack_from("<Q", out, out.index(b"MESSAGE\n", 10) + 8)[0]
    assert size == len(b"multi\nline [REDACTED]\n")
    assert {m["what"]: m["found_in"] for m in red.manifest()} == {"env.HF_TOKEN": ["journal.export"],
                                                                   "extra_args[1] (--api-key)": ["journal.export"]}


def test_replay_judges_a_bundle_and_refuses_a_tar_that_is_not_one(cli, tmp_path: Path) -> None:
    src = (EXAMPLES / "two-starts.export").read_bytes()
    good = tmp_path / "b.tar.gz"
    with tarfile.open(good, "w:gz") as tar:
        info = tarfile.TarInfo("x-1/journal.export")
        info.size = len(src)
        tar.addfile(info, io.BytesIO(src))
    direct = cli("replay", str(EXAMPLES / "two-starts.export"), "--json").output.splitlines()[-1]
    bundled = cli("replay", str(good), "--json").output.splitlines()[-1]
    assert json.loads(direct)["verdict"] == json.loads(bundled)["verdict"]
    assert open_bundle(str(good)) is not None
    bad = tmp_path / "c.tar.gz"
    with tarfile.open(bad, "w:gz") as tar:
        info = tarfile.TarInfo("README")
        tar.addfile(info, io.BytesIO(b""))
    assert_one_line_error(cli("replay", str(bad)), "not a svcdiag bundle")
    assert_one_line_error(cli("replay", str(tmp_path / "missing.tar.gz")), "missing.tar.gz")


def test_the_documented_example_plan_loads() -> None:
    root = Path(__file__).resolve().parent.parent
    plan = load_plan(root / "docs" / "examples" / "seed-campaign.toml", find_units_dir(str(root / "units")))
    assert [p.name for p in plan.phases] == ["tp1", "tp4", "tp8"] and plan.baseline.name == "dflash-smoke"


def test_the_live_line_shows_the_phase_eta_from_history() -> None:
    from svcdiag.output.live_line import LiveTerminal
    from svcdiag.output.publish import Progress

    t = LiveTerminal(io.StringIO(), colour=False)
    t.progress(Progress("x.service", "x", "loading_weights", 100.0, 500.0, 130.0, phase_started=110.0, usual=40.0))
    assert "ETA 20 s (usually 40 s)" in t.status_line(t.units["x.service"])
    t.progress(Progress("x.service", "x", "loading_weights", 100.0, 500.0, 160.0, phase_started=110.0, usual=40.0))
    assert "10 s over its usual 40 s" in t.status_line(t.units["x.service"])
    t.progress(Progress("y.service", "y", "kv_cache", 100.0, 500.0, 130.0))  # no history: no ETA
    assert "ETA" not in t.status_line(t.units["y.service"])


def test_two_observers_of_one_start_record_it_once(tmp_path: Path, cfg) -> None:
    v = verdict(40.0)
    first = h.record_start(cfg, v, "up", state=str(tmp_path))[0]
    assert h.record_start(cfg, v, "wait", state=str(tmp_path))[0] == first
    with h.History(h.db_path(str(tmp_path))) as db:
        assert len(db.rows("demo-smoke")) == 1
