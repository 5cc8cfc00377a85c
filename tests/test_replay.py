"""Readiness on log timestamps, and `svcdiag replay` over every input format."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from svcdiag.judge.pipeline import Judge
from svcdiag.ops.offline.replay import replay
from svcdiag.output.schema import EVENT_TYPES

from .conftest import EXAMPLES, assert_one_line_error, run_svcdiag
from .journal_formats import as_export, as_json, as_short, entry

SMOKE = (EXAMPLES / "dflash-smoke.log").read_text().splitlines()
ZERO = (EXAMPLES / "max-running-zero.log").read_text().splitlines()
T0 = 1779529320.0


def judge_lines(lines: list[str], **kw):
    j = Judge(**kw)
    for line in lines:
        j.service_line(line)
    return j.finish()


def test_healthy_start_has_its_figures_and_phase_times() -> None:
    v = judge_lines(SMOKE)
    assert v.verdict == "healthy" and v.cause is None and v.phase == "ready"
    f = v.figures
    assert f.kv_tokens == f.max_total_num_tokens and f.kv_tokens > 100_000
    assert (f.max_running_requests, f.context_len, f.mamba_slots) == (4, 32768, 24)
    assert (f.mamba_conv_gb, f.mamba_ssm_gb, f.mamba_intermediate_ssm_gb) == (0.07, 3.52, 11.25)
    assert f.weights_gb == 50.29 and f.avail_before_load_gb == 139.72
    assert v.phase_seconds["loading_weights"] == pytest.approx(42, abs=1)
    assert set(v.phase_seconds) >= {"starting", "loading_weights", "kv_cache", "cuda_graph", "scheduler", "http"}


def test_seed_failure_has_cause_and_figures() -> None:
    v = judge_lines(ZERO)
    assert (v.verdict, v.cause) == ("failed", "max_running_zero")
    assert (v.figures.kv_tokens, v.figures.context_len, v.figures.max_running_requests) == (11893, 32768, 0)
    assert "AssertionError: max_running_request is zero" in v.evidence


def test_failed_the_moment_a_failure_is_seen_not_at_a_deadline() -> None:
    j = Judge()
    verdict_at = None
    for i, line in enumerate(ZERO):
        j.service_line(line)
        if j.verdict is not None and verdict_at is None:
            verdict_at = i
    assert ZERO[verdict_at] == "AssertionError: max_running_request is zero"


def stamp(seconds: float) -> str:
    import time as _t

    return _t.strftime("%Y-%m-%d %H:%M:%S", _t.localtime(T0 + seconds))


def test_deadline_is_judged_on_the_log_own_timestamps() -> None:
    lines = [f"[{stamp(0)}] Init torch distributed begin.", f"[{stamp(2)}] Load weight begin. avail mem=79.00 GB",
             f"[{stamp(50)}] TP rank 0 could finish the model loading, but there are other ranks that didn't finish loading.",
             f"[{stamp(100)}] Load weight end. elapsed=98.00 s, type=X, avail mem=20.00 GB, mem usage=59.00 GB."]
    v = judge_lines(lines, cfg=None)
    assert v.verdict == "incomplete" and v.phase == "kv_cache"
    j = Judge()
    j.readiness.timeouts["loading_weights"] = 60
    for line in lines:
        j.service_line(line)
    v = j.finish()  # the weights did load, after the deadline: slow, then the log ends
    assert (v.verdict, v.phase) == ("incomplete", "kv_cache")
    j = Judge()
    j.readiness.timeouts["loading_weights"] = 60
    for line in lines[:-1]:  # no `Load weight end`: past the deadline, and it never came
        j.service_line(line)
    j.service_line(f"[{stamp(100)}] TP rank 1 could finish the model loading, but there are other ranks that didn't finish loading.")
    v = j.finish()
    assert (v.verdict, v.phase) == ("timed_out", "loading_weights")
    assert v.stalled_s == pytest.approx(98, abs=0.01) and "deadline 60 s" in v.message
    assert "other ranks that didn't finish loading" in v.last_line


def test_stall_at_end_of_input_past_deadline_is_timed_out_before_it_incomplete() -> None:
    j = Judge()
    j.readiness.timeouts["loading_weights"] = 10
    j.service_line(f"[{stamp(0)}] Load weight begin. avail mem=79.00 GB")
    j.service_line(f"[{stamp(5)}] Decode batch. x")
    assert j.finish().verdict == "incomplete"
    j = Judge()
    j.readiness.timeouts["loading_weights"] = 10
    j.service_line(f"[{stamp(0)}] Load weight begin. avail mem=79.00 GB")
    j.service_line(f"[{stamp(11)}] some unrelated line")
    assert j.finish().verdict == "timed_out"


def test_hybrid_expected_from_server_args_waits_for_mamba() -> None:
    lines = [l for l in SMOKE if "Mamba Cache" not in l]
    j = Judge()
    phases = []
    for line in lines:
        for ev in j.service_line(line):
            if ev.kind == "phase":
                phases.append(ev.phase)
    assert "mamba_cache" in phases  # server_args said max_mamba_cache_size=24
    dense = [l.replace("max_mamba_cache_size=24", "max_mamba_cache_size=None") for l in lines]
    assert judge_lines(dense).verdict == "healthy"


def test_segfault_seen_only_in_systemd_lines() -> None:
    j = Judge()
    j.service_line(f"[{stamp(0)}] Load weight begin. avail mem=79.00 GB")
    j.service_line("Loading safetensors checkpoint shards:  41% Completed | 5/12")
    j.systemd_line("Main process exited, code=dumped, status=11/SEGV", T0 + 20)
    j.systemd_line("Failed with result 'core-dump'.", T0 + 20)
    v = j.finish()
    assert (v.verdict, v.cause, v.phase, v.figures.signal) == ("failed", "killed_by_signal", "loading_weights", "SEGV")
    assert "core dumped" in v.message
    assert "Failed with result 'core-dump'." in v.evidence


def test_stopped_from_outside_before_ready() -> None:
    j = Judge()
    j.service_line(f"[{stamp(0)}] Load weight begin. avail mem=79.00 GB")
    j.systemd_line("Stopping demo.service - SGLang...", T0 + 3)
    assert (j.finish().cause) == "stopped"


def entries_for(lines: list[str], invocation: str, t0: float, *, exit_line: str | None = None,
                unit: str = "demo.service") -> list[dict[str, str]]:
    out = [entry("Starting demo.service - SGLang...", t0, pid1=True, invocation=invocation, unit=unit),
           entry("Started demo.service - SGLang.", t0, pid1=True, invocation=invocation, unit=unit)]
    for i, line in enumerate(lines):
        out.append(entry(line, t0 + 1 + i * 0.5, invocation=invocation, unit=unit))
    if exit_line:
        out.append(entry(exit_line, t0 + 1 + len(lines) * 0.5, pid1=True, invocation=invocation, unit=unit))
    return out


TWO_STARTS = (entries_for(ZERO, "1" * 32, T0, exit_line="Main process exited, code=killed, status=9/KILL")
              + entries_for(SMOKE, "2" * 32, T0 + 600))


@pytest.mark.parametrize("writer", [as_json, as_export, as_short])
def test_all_journal_formats_and_several_starts(writer) -> None:
    data = writer(TWO_STARTS)
    res = replay(io.BytesIO(data), "x")
    assert res.format == writer.__name__.removeprefix("as_")
    assert len(res.starts) == 2
    assert res.verdict.verdict == "healthy", res.verdict
    first = replay(io.BytesIO(data), "x", **({"start": 1} if writer is as_short else {"invocation": "1111"}))
    assert (first.verdict.verdict, first.verdict.cause) == ("failed", "max_running_zero")
    assert "Main process exited, code=killed, status=9/KILL" in first.verdict.evidence


def notify_entries(lines: list[str], invocation: str, t0: float, exit_line: str | None = None) -> list[dict[str, str]]:
    """A notify unit's start: systemd says "Started" only at READY=1, after the server's own lines."""
    first, *rest = entries_for(lines, invocation, t0, exit_line=exit_line)
    started, server = rest[0], rest[1:]
    return [first, *server, started] if exit_line is None else [first, *server]


@pytest.mark.parametrize("writer", [as_json, as_export, as_short])
def test_a_notify_units_started_line_after_ready_is_the_same_start(writer) -> None:
    data = writer(notify_entries(ZERO, "1" * 32, T0, exit_line="Main process exited, code=killed, status=9/KILL")
                  + notify_entries(SMOKE, "2" * 32, T0 + 600))
    res = replay(io.BytesIO(data), "x")
    assert len(res.starts) == 2 and res.verdict.verdict == "healthy", res.verdict


@pytest.mark.parametrize("ms", [False, True])
def test_plain_log_with_two_starts_judges_the_last(ms: bool) -> None:
    import re

    lines = ZERO + SMOKE
    if ms:  # SGLANG_LOG_MS=1: `[2026-05-23 09:42:05.123]`
        lines = [re.sub(r"^\[(\S+ \d\d:\d\d:\d\d)", r"[\1.123", l) for l in lines]
    res = replay(io.BytesIO(("\n".join(lines) + "\n").encode()), "x")
    assert res.format == "plain" and len(res.starts) == 2 and res.verdict.verdict == "healthy"
    assert res.starts[0].verdict.cause == "max_running_zero"


def test_journal_json_with_byte_array_and_null_messages() -> None:
    es = entries_for(SMOKE, "3" * 32, T0)
    es[5]["MESSAGE"] = list(es[5]["MESSAGE"].encode()) + [0xFF]  # non-UTF-8: journalctl prints a byte array
    es[6]["MESSAGE"] = None
    assert replay(io.BytesIO(as_json(es)), "x").verdict.verdict == "healthy"


def test_export_with_multiline_binary_message() -> None:
    es = entries_for(ZERO[:20], "4" * 32, T0)
    tb = "\n".join(l for l in ZERO if not l.startswith("[") or "Scheduler hit" in l)
    es.append(entry(tb, T0 + 30, invocation="4" * 32))
    v = replay(io.BytesIO(as_export(es)), "x").verdict
    assert (v.verdict, v.cause) == ("failed", "max_running_zero")


def test_an_export_line_that_is_no_field_is_skipped_not_the_end_of_the_input() -> None:
    """Neither KEY=value nor a binary field's name with a size after it: the entries after it still count."""
    es = entries_for(SMOKE, "5" * 32, T0)
    data = as_export(es[:3]) + b"this is not a journal field\n" + as_export(es[3:])
    assert replay(io.BytesIO(data), "x").verdict.verdict == "healthy"
    assert replay(io.BytesIO(data), "x", fast=False).verdict.verdict == "healthy"


def test_replay_cli_json_lines_verdict_last_and_exit_codes(tmp_path: Path) -> None:
    r = run_svcdiag("replay", "--json", str(EXAMPLES / "max-running-zero.log"))
    assert r.returncode == 1
    lines = [json.loads(l) for l in r.stdout.decode().splitlines()]
    last = lines[-1]
    assert last["event"] == "verdict" and last["verdict"] == "failed" and last["cause"] == "max_running_zero"
    assert {"kv_tokens", "max_running_requests", "context_len"} <= set(last["figures"])
    assert all(isinstance(last["figures"][k], int) for k in ("kv_tokens", "max_running_requests", "context_len"))
    assert last["evidence"]
    assert any(l["event"] == "milestone" and l["milestone"] == "kv_cache" for l in lines[:-1])
    assert all(l["schema"] == 1 and l["event"] in EVENT_TYPES for l in lines)
    assert lines[-2]["event"] == "diagnosis" and lines[-2]["fixes"]
    assert run_svcdiag("replay", "--example", "dflash-smoke").returncode == 0
    cut = tmp_path / "cut.log"
    cut.write_text("\n".join(SMOKE[:20]))  # truncated: no newline at the end either
    assert run_svcdiag("replay", str(cut)).returncode == 4
    stdin = run_svcdiag("replay", "-", input=(EXAMPLES / "dflash-smoke.log").read_bytes())
    assert stdin.returncode == 0 and b"HEALTHY" in stdin.stdout


def test_replay_bad_input(tmp_path: Path) -> None:
    assert_one_line_error(run_svcdiag("replay", str(tmp_path / "missing.log")), "missing.log: no such file")
    assert_one_line_error(run_svcdiag("replay", str(tmp_path)), "is a directory")
    locked = tmp_path / "locked.log"
    locked.write_text("x")
    locked.chmod(0)
    import os

    if os.geteuid() != 0:
        assert_one_line_error(run_svcdiag("replay", str(locked)), "cannot read")
    notjournal = tmp_path / "j.json"
    notjournal.write_text('{"hello": 1}\n')
    assert_one_line_error(run_svcdiag("replay", str(notjournal)), "not journal JSON")
    assert_one_line_error(run_svcdiag("replay", "--example", "dflash-smok"), "did you mean 'dflash-smoke'")
    for name, data in {"empty": b"", "garbage": bytes(range(256)) * 400, "badutf8": b"\xff\xfe[2026-05-23 \xc3(\n" * 100,
                       "longline": b"[2026-05-23 09:42:05] " + b"x" * (1 << 20) + b"\n" + "\n".join(SMOKE).encode()}.items():
        f = tmp_path / name
        f.write_bytes(data)
        r = run_svcdiag("replay", str(f))
        assert b"Traceback" not in r.stderr, (name, r.stderr)
        assert r.returncode in (0, 4), (name, r.returncode, r.stderr)
    assert run_svcdiag("replay", str(tmp_path / "longline")).returncode == 0


@settings(max_examples=150, deadline=None)
@given(st.binary(max_size=3000))
def test_replay_never_raises_on_arbitrary_bytes(data: bytes) -> None:
    for prefix in (b"", b"{", b"__CURSOR=x\nMESSAGE=", b"May 23 09:44:49 host x[1]: "):
        try:
            res = replay(io.BytesIO(prefix + data), "x")
        except Exception as e:  # only our one-line errors may escape
            from svcdiag.errors import SvcdiagError

            assert isinstance(e, SvcdiagError), repr(e)
            continue
        assert res.verdict.verdict in ("healthy", "failed", "timed_out", "incomplete")


@pytest.mark.parametrize("name", ["two-starts.export", "two-starts-json.json"])
def test_real_journalctl_captures_from_the_rig(name: str) -> None:
    """journalctl's own -o export / -o json of a unit started twice in the rig (failed, then healthy)."""
    data = (EXAMPLES / name).read_bytes()
    res = replay(io.BytesIO(data), name)
    assert len(res.starts) == 2
    assert res.verdict.verdict == "healthy"
    first = res.starts[0].verdict
    assert (first.cause, first.figures.kv_tokens) == ("max_running_zero", 11893)
    assert "Main process exited, code=killed, status=9/KILL" in first.evidence


def test_real_short_capture_of_a_segfault() -> None:
    v = replay(io.BytesIO((EXAMPLES / "segfault.short").read_bytes()), "x").verdict
    assert (v.cause, v.figures.signal, v.phase, v.unit) == ("killed_by_signal", "SEGV", "loading_weights",
                                                              "demo-segfault.service")


def test_bundled_plain_examples_are_what_the_stand_in_prints() -> None:
    from svcdiag.config.service import UnitsDir
    from svcdiag.sim.examples import EXAMPLES as SPECS
    from svcdiag.sim.examples import generate

    from .conftest import UNITS

    for name in SPECS:
        assert generate(name, UnitsDir(UNITS, "t")) == (EXAMPLES / f"{name}.log").read_text(), name


def test_a_journal_paste_that_begins_at_started_is_one_start() -> None:
    """`journalctl -u X --since …` often begins at systemd's `Started …` (its `Starting …` cut off):
    the start begins there (it was an AssertionError)."""
    lines = ["May 23 09:42:00 gpu-node-07 systemd[1]: Started sglang.service - SGLang."] + \
        [f"May 23 09:42:{i:02d} gpu-node-07 python3[61848]: {ln}" for i, ln in enumerate(SMOKE[:50], 1)]
    res = replay(io.BytesIO("\n".join(lines).encode()), "t.log")
    assert res.format == "short" and len(res.starts) == 1


def test_a_restart_loop_cut_while_loading_names_the_failures_before_it() -> None:
    """The last start of a Restart= loop, pasted while it loads again, is judged (incomplete); the note
    says the ones before it failed, and why, so the loop's cause is not hidden."""
    zero = "\n".join(ZERO) + "\n"
    cut = "\n".join(ZERO[:3]) + "\n"
    res = replay(io.BytesIO((zero + zero + cut).encode()), "t.log")
    assert res.verdict.verdict == "incomplete" and len(res.starts) == 3
    note = res.describe()
    assert "other starts: 2 failed (max_running_zero)" in note and "--start 2" in note, note


@pytest.mark.parametrize("margin", ["    ", "  ", "\t"])
def test_a_paste_indented_as_one_block_reads_as_the_plain_log(margin: str) -> None:
    """Audit R14d: a notebook's output in Markdown indents every line: the verdict is the unindented log's."""
    plain = replay(io.BytesIO("\n".join(SMOKE).encode()), "plain.log").chosen.verdict
    text = "\n".join(margin + ln if ln.strip() else ln for ln in SMOKE)
    got = replay(io.BytesIO(text.encode()), "indented.log")
    assert got.format == "indented"
    v = got.chosen.verdict
    assert (v.verdict, v.phase, v.figures.kv_tokens) == (plain.verdict, plain.phase, plain.figures.kv_tokens)


def test_a_traceback_pasted_alone_is_no_indented_block() -> None:
    """Frames indent most lines of a traceback; its first line is no dated SGLang line, so no margin is taken."""
    tb = 'Traceback (most recent call last):\n  File "/x/sglang/launch_server.py", line 1, in <module>\n    main()\n'
    assert replay(io.BytesIO((tb + "ValueError: bad\n").encode()), "tb.log").format == "plain"


def test_piecewise_capture_after_the_decode_graphs_gets_a_capture_s_time() -> None:
    """Audit R14f: 0.5.x captures its piecewise graphs after `Capture cuda graph end`, compiling for minutes: the
    phase after the decode graphs gets the capture's allowance, not only the scheduler's."""
    lines = [f"[{stamp(0)}] Capture cuda graph begin. This can take up to several minutes. avail mem=11.64 GB",
             f"[{stamp(20)}] Capture cuda graph end. Time elapsed: 20.00 s. mem usage=0.83 GB. avail mem=10.81 GB.",
             f"[{stamp(20)}] Capture piecewise CUDA graph begin. avail mem=10.81 GB",
             f"[{stamp(420)}] Compiling a graph for dynamic shape takes 3.38 s"]
    j = Judge()
    j.readiness.timeouts.update(scheduler=300, cuda_graph=600)
    for line in lines:
        j.service_line(line)
    v = j.finish()
    assert (v.verdict, v.figures.precompile_extra_s) == ("incomplete", {"scheduler": 600})
    j = Judge()
    j.readiness.timeouts.update(scheduler=300, cuda_graph=600)
    for line in lines[:2] + lines[3:]:  # no piecewise capture: 400 s after the decode graphs is a stall
        j.service_line(line)
    assert j.finish().verdict == "timed_out"
