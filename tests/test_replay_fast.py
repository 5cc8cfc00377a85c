"""Replay's plain fast path (quiet runs skipped in bulk) against the line-by-line reference:
the same verdicts, events and starts on every fixture, and on fixtures spliced with serving
lines at random chunk boundaries."""

from __future__ import annotations

import io
import json
import re
from datetime import datetime, timedelta
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from svcdiag.errors import SvcdiagError
from svcdiag.ops.replay import replay

from .conftest import EXAMPLES

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
    ][r % 6]


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
