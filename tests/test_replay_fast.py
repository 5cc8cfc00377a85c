"""Replay's fast paths (quiet runs skipped in bulk) against the line-by-line, record-by-record
reference: the same verdicts, events and starts on every fixture, as plain text, `-o json` and
`-o export`, and on fixtures spliced with serving lines at random chunk boundaries."""

from __future__ import annotations

import io
import json
import random
import re
from datetime import datetime, timedelta
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from svcdiag.errors import SvcdiagError
from svcdiag.ops.offline.replay import replay

from .conftest import EXAMPLES
from .journal_formats import as_export, entry

FIXTURES = Path(__file__).parent / "fixtures" / "sglang"
INPUTS = sorted(FIXTURES.glob("*.log")) + sorted(EXAMPLES.iterdir())


def outcome(data: bytes, **kw) -> str:
    """Everything replay says about an input, as one JSON text (or its one-line error)."""
    try:
        r = replay(io.BytesIO(data), "x", **kw)
    except SvcdiagError as e:
        return f"error: {e}"
    return json.dumps({
        "format": r.format, "chosen": r.chosen.index,
        "starts": [(s.index, s.invocation, s.verdict.to_json() if s.verdict else None) for s in r.starts],
        "events": [repr(e) for e in r.events],
    }, sort_keys=True, default=repr)


@pytest.mark.parametrize("path", INPUTS, ids=lambda p: p.name)
@pytest.mark.parametrize("chunk", [None, 64, 7])
def test_fast_path_matches_the_reference_on_every_fixture(path: Path, chunk: int | None) -> None:
    data = path.read_bytes()
    assert outcome(data, fast=True, chunk=chunk) == outcome(data, fast=False)


def serving_line(ts: str, r: int) -> str:
    return [
        f"[{ts} TP0] Decode batch. #running-req: {r % 7}, #token: {r}, token usage: 0.01, cuda graph: True, "
        f"gen throughput (token/s): 212.40, #queue-req: 0, ",
        f"[{ts}] Prefill batch. #new-seq: 1, #new-token: 512, #cached-token: 0, token usage: 0.01, "
        f"#running-req: 0, #queue-req: 0, ",
        f'INFO:     127.0.0.1:{30000 + r % 999} - "POST /generate HTTP/1.1" 200 OK',
        f"[{ts} TP0] INFO:     127.0.0.1:{r % 999} - \"GET /health HTTP/1.1\" 200 OK",
        f"[{ts}.{r % 1000:03d} TP1] Decode batch. #running-req: 1, #token: {r}, token usage: 0.00, ",
        f"[{ts} DP0 TP0 EP0] WARNING: a slow step ({r})",
        # odd shapes: the fast path must take each exactly as the reference does (or walk it)
        f"[{ts} TP0] Decode batch. prompt «café» ({r}), ",
        f"[2é{ts[2:]} TP0] Decode batch. #running-req: {r % 3}, ",  # non-ASCII where the time is
        f"[2é{ts[3:]}] Decode batch. #running-req: {r % 3}, ",  # its `] ` at byte 20, not at character 20
        f"[{ts[:-2]}x{r % 10} TP0] Prefill batch. #new-seq: 1, ",  # a time that does not parse
        f"[{ts} TP0]x] Decode batch. #token: {r}, ",
        f"[{ts}.1] TP0] Decode batch. #token: {r}, ",
        f"[{ts}] ",
        f"WARNING:  an unprefixed line ({r})",
        f"INFO:     Waiting for application startup. ({r})",
    ][r % 15]


STAMP = re.compile(r"^\[(2\d{3}-\d\d-\d\d \d\d:\d\d:\d\d)")
LOGS = [p for p in INPUTS if p.suffix == ".log"]


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(LOGS), st.lists(st.tuples(st.integers(0, 400), st.integers(0, 40), st.integers(-5, 4000)),
                                       max_size=8),
       st.integers(8, 600), st.booleans())
def test_fast_path_matches_the_reference_on_spliced_logs(path: Path, splices, chunk: int, twice: bool) -> None:
    lines = path.read_text().splitlines()
    if twice:  # several starts in one file
        lines = lines + lines
    for where, count, jump in splices:  # serving lines, stamped from 5 s before the line they follow to past any deadline
        at = min(where, len(lines))
        before = [m.group(1) for ln in lines[:at] if (m := STAMP.match(ln))]
        base = datetime.fromisoformat(before[-1]) if before else datetime(2026, 5, 23, 9, 42)
        lines[at:at] = [serving_line((base + timedelta(seconds=jump + i)).strftime("%Y-%m-%d %H:%M:%S"), at + i)
                        for i in range(count)]
    data = ("\n".join(lines) + "\n").encode()
    assert outcome(data, fast=True, chunk=chunk) == outcome(data, fast=False)


def noise(ts: str, k: int) -> list[str]:
    """The lines that once sent a whole chunk line by line, and now only themselves and an open traceback's lines."""
    return [
        ["Capturing batches (bs=8 avail_mem=1.0 GB):   0%|  | 0/2 [00:00<?, ?it/s]\rCapturing batches (bs=4 "
         "avail_mem=1.0 GB):  50%|█ | 1/2 [00:01<00:01,  1.2it/s]\r"],
        [f"[{ts}] Error in request: too long ({k})", "Traceback (most recent call last):",
         '  File "/sglang/srt/entrypoints/openai/serving_base.py", line 42, in handle_request',
         "    raise ValueError(", f"ValueError: The input ({k} tokens) is longer than the model's context length"],
        ["Traceback (most recent call last):", '  File "/x.py", line 1, in <module>'],  # cut: no final line
        [f"\x1b[32m[{ts} TP0] Decode batch. #running-req: {k}, \x1b[0m"],
        [f"[{ts} TP0] Decode batch. #running-req: {k}, \r"],  # a CRLF line
        [f"[{ts} TP0] Decode batch. then Traceback (most recent call last):"],
        [f"[{ts} TP0] Prefill batch. \rx"],
    ][k % 7]


def splice_noise(lines: list[str], splices: list[tuple[int, int, int, int]]) -> None:
    """Insert into `lines`, at each (where, kind, count, jump), noise of that kind and `count` serving lines,
    stamped `jump` seconds after the last stamp before `where`."""
    for where, kind, count, jump in splices:
        at = min(where, len(lines))
        before = [m.group(1) for ln in lines[:at] if (m := STAMP.match(ln))]
        base = datetime.fromisoformat(before[-1]) if before else datetime(2026, 5, 23, 9, 42)
        stamp = (base + timedelta(seconds=jump)).strftime("%Y-%m-%d %H:%M:%S")
        lines[at:at] = noise(stamp, kind + 7 * at) + [
            serving_line((base + timedelta(seconds=jump + i)).strftime("%Y-%m-%d %H:%M:%S"), at + i)
            for i in range(count)]


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(LOGS), st.lists(st.tuples(st.integers(0, 400), st.integers(0, 6), st.integers(0, 30),
                                                 st.integers(-5, 4000)), max_size=8),
       st.integers(8, 2000), st.booleans())
def test_fast_path_matches_the_reference_on_noisy_logs(path: Path, splices, chunk: int, twice: bool) -> None:
    """Bars glued by CRs, tracebacks (whole, cut), colour codes and CRLF lines among serving lines."""
    lines = path.read_text().splitlines()
    if twice:
        lines = lines + lines
    splice_noise(lines, splices)
    data = ("\n".join(lines) + "\n").encode()
    assert outcome(data, fast=True, chunk=chunk) == outcome(data, fast=False)


@pytest.mark.parametrize("r", range(15))
def test_a_log_of_one_serving_shape_is_judged_the_same_both_ways(r: int) -> None:
    """Alone, a shape decides whether the file holds SGLang's lines at all (or no start: exit 4)."""
    t0 = datetime(2026, 5, 23, 9, 42)
    data = "".join(serving_line((t0 + timedelta(seconds=i)).strftime("%Y-%m-%d %H:%M:%S"), r) + "\n"
                   for i in range(50)).encode()
    assert outcome(data, fast=True, chunk=64) == outcome(data, fast=False)


def as_journal(lines: list[str], fmt: str, seed: int, *, systemd: bool, ascii_json: bool) -> bytes:
    """A plain log as `journalctl -o json` or `-o export` would print it: one invocation per start
    (a new `server_args=` line), the journal's time taken from each line's prefix (a line without
    one keeps the last), fields in an order of their own per record as journald's hash gives them,
    and, with `systemd`, PID 1's "Starting" line before each start and its exit line after."""
    rng = random.Random(seed)
    ts, inv, out = datetime(2026, 5, 23, 9, 42).timestamp(), 0, []
    for ln in lines:
        if "] server_args=" in ln:
            inv += 1
            if systemd:
                out.append(entry("Starting demo.service - SGLang...", ts, pid1=True, invocation=f"{inv:032x}"))
        if (m := STAMP.match(ln)) is not None:
            ts = max(ts, datetime.fromisoformat(m.group(1)).timestamp() + rng.random() / 10)
        e = entry(ln, ts, invocation=f"{inv:032x}")
        e.update({"__CURSOR": f"s=1;i={len(out):x}", "_BOOT_ID": "b" * 32, "_TRANSPORT": "stdout", "PRIORITY": "6"})
        keys = list(e)
        rng.shuffle(keys)
        out.append({k: e[k] for k in keys})
    if systemd:
        out.append(entry("Main process exited, code=exited, status=1/FAILURE", ts + 1, pid1=True,
                         invocation=f"{inv:032x}"))
    if fmt == "export":
        return as_export(out)
    return "".join(json.dumps(e, ensure_ascii=ascii_json) + "\n" for e in out).encode()


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(LOGS), st.sampled_from(["json", "export"]),
       st.lists(st.tuples(st.integers(0, 400), st.integers(0, 40), st.integers(-5, 4000)), max_size=6),
       st.integers(40, 3000), st.booleans(), st.booleans(), st.booleans(), st.integers(0, 9))
def test_journal_fast_path_matches_the_reference(path: Path, fmt: str, splices, chunk: int, twice: bool,
                                                 systemd: bool, ascii_json: bool, seed: int) -> None:
    lines = path.read_text().splitlines()
    if twice:  # several starts, each its own invocation
        lines = lines + lines
    for where, count, jump in splices:
        at = min(where, len(lines))
        before = [m.group(1) for ln in lines[:at] if (m := STAMP.match(ln))]
        base = datetime.fromisoformat(before[-1]) if before else datetime(2026, 5, 23, 9, 42)
        lines[at:at] = [serving_line((base + timedelta(seconds=jump + i)).strftime("%Y-%m-%d %H:%M:%S"), at + i)
                        for i in range(count)]
    data = as_journal(lines, fmt, seed, systemd=systemd, ascii_json=ascii_json)
    assert outcome(data, fast=True, chunk=chunk) == outcome(data, fast=False)


@pytest.mark.parametrize("fmt", ["json", "export"])
@pytest.mark.parametrize("path", INPUTS, ids=lambda p: p.name)
def test_journal_fast_path_matches_the_reference_on_every_fixture(path: Path, fmt: str) -> None:
    data = as_journal(path.read_text().splitlines(), fmt, 1, systemd=True, ascii_json=False)
    for chunk in (None, 200):
        assert outcome(data, fast=True, chunk=chunk) == outcome(data, fast=False)


@pytest.mark.parametrize("fmt", ["plain", "json", "export"])
def test_a_deadline_inside_a_run_of_quiet_lines_times_out_on_the_same_line(fmt: str) -> None:
    """A start that stalls while the server prints quiet lines: the fast path may skip them in
    bulk only up to the deadline, so the verdict is stamped on the same line both ways."""
    lines = (EXAMPLES / "dflash-smoke.log").read_text().splitlines()[:5]  # up to "Load weight begin"
    t = datetime.fromisoformat(lines[-1][1:20])
    lines += [serving_line((t + timedelta(seconds=10 * i)).strftime("%Y-%m-%d %H:%M:%S"), 15 * i) for i in range(300)]
    data = ("\n".join(lines) + "\n").encode() if fmt == "plain" else as_journal(lines, fmt, 3, systemd=False,
                                                                                 ascii_json=True)
    reference = outcome(data, fast=False)
    assert '"verdict": "timed_out"' in reference
    for chunk in (300, 1000, 2000, 5000, None):
        assert outcome(data, fast=True, chunk=chunk) == reference


@settings(max_examples=200, deadline=None)
@given(st.sampled_from([b"", b'{"MESSAGE": "x", "__REALTIME_TIMESTAMP": "1"}\n{', b"__CURSOR=x\nMESSAGE=",
                        b"[2026-05-23 09:42:05] server_args=ServerArgs(tp_size=1)\n"]),
       st.lists(st.sampled_from([b"\n", b"\n\n", b"\x00", b"\r", b"=", b'"', b"\\", b"{", b"}", b"MESSAGE=",
                                 b'"MESSAGE":"', b"[2026-05-23 09:43:12 TP0] Decode batch. ", b"INFO:     1.2.3.4 ",
                                 b"Load weight begin. avail mem=1 GB", b"_SYSTEMD_INVOCATION_ID=", b"UNIT=", b"x"]),
                max_size=60), st.integers(8, 300))
def test_the_fast_paths_match_the_reference_on_garbage(prefix: bytes, parts: list[bytes], chunk: int) -> None:
    data = prefix + b"".join(parts)
    assert outcome(data, fast=True, chunk=chunk) == outcome(data, fast=False)


def test_a_line_glued_after_an_access_line_moves_the_clock_both_ways() -> None:
    """An access line with SGLang's line glued after it (two writers on one pipe) is no quiet line: the reference
    reads the glued line, its time the clock, so the next milestone is stamped 09:43:12 (the fast path once skipped
    it as an access line and stamped it with no time; hypothesis found it)."""
    lines = ["INFO:     1.2.3.4 [2026-05-23 09:43:12 TP0] Decode batch. ", "Load weight begin. avail mem=1 GB"]
    data = "\n".join(lines).encode()
    reference = outcome(data, fast=False)
    assert f"WeightsBegin(ts={datetime(2026, 5, 23, 9, 43, 12).timestamp()}" in reference
    for chunk in (8, 50, None):
        assert outcome(data, fast=True, chunk=chunk) == reference


@pytest.mark.parametrize("fmt", ["json", "export"])
def test_a_wrapped_message_is_not_taken_for_a_quiet_one(fmt: str) -> None:
    """Jenkins' `[2025-11-06T02:08:14.810Z] ` before SGLang's prefix looks like SGLang's own dated prefix
    to the quiet pattern; the journal reader unwraps it, so such a record is never skipped in bulk
    (with no traceback in the chunk to send it line by line, the server_args line was once lost)."""
    path = FIXTURES / "v055-jenkins-bracket-stamps-load-weights-keyerror.log"
    lines = [ln for ln in path.read_text().splitlines() if "Traceback" not in ln]
    data = as_journal(lines, fmt, 1, systemd=True, ascii_json=True)
    reference = outcome(data, fast=False)
    assert "ServerArgs(" in reference
    for chunk in (None, 300):
        assert outcome(data, fast=True, chunk=chunk) == reference
