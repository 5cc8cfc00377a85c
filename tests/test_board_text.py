"""`top`'s piped snapshot is written without rich: the text must be rich's table, byte for byte."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from svcdiag.judge.progress import PhaseProgress
from svcdiag.ops.serve.board import BoardRow
from svcdiag.output.board import STYLE, cells, plain_text, render_text, rich_text

#: mostly what a board holds, now and then a character plain_text leaves to rich (tab, newline, wide, combining)
PLAIN = st.sampled_from("abcxyz AZ09-_.:/[]()!~,'\"\\█▌…↓·")
TEXT = st.text(PLAIN, max_size=60) | st.text(PLAIN | st.sampled_from("\té中\u0301\n"), max_size=60)
SECONDS = st.none() | st.floats(0, 200_000, allow_nan=False)
NUMBER = st.none() | st.integers(0, 10**7)


@st.composite
def board_rows(draw: st.DrawFn) -> BoardRow:
    progress = None
    if draw(st.booleans()):
        total = draw(st.integers(1, 5000))
        progress = PhaseProgress(ts=0.0, phase="load_weights", what=draw(st.sampled_from(["shards", "cuda_graph", "x"])),
                                 label="", done=draw(st.integers(0, total)), total=total, eta_s=draw(SECONDS),
                                 slowest_rank=draw(st.none() | st.integers(0, 15)))
    name = draw(st.text(st.sampled_from("abcdefgh-0123456789"), min_size=1, max_size=40))
    return BoardRow(name, f"{name}.service", draw(st.sampled_from(sorted(STYLE))), "active", "running",
                    phase=draw(st.none() | st.sampled_from(["load_weights", "cuda_graph", "ready"])), progress=progress,
                    elapsed_s=draw(SECONDS), phase_elapsed_s=draw(SECONDS), usual_s=draw(SECONDS),
                    usual_phase_s=draw(SECONDS), uptime_s=draw(SECONDS), kv_tokens=draw(NUMBER),
                    max_running=draw(NUMBER), max_running_requested=draw(NUMBER),
                    degraded=tuple(draw(st.lists(st.sampled_from(["max_running_reduced", "port_moved", "odd"]), max_size=3))),
                    verdict=draw(st.none() | st.sampled_from(["healthy", "failed", "timed_out"])),
                    cause=draw(st.none() | st.sampled_from(["cuda_oom", "killed_by_signal"])), message=draw(st.none() | TEXT),
                    watch=draw(st.none() | st.tuples(st.sampled_from(["serving", "busy", "wedged"]), TEXT)))


def _rows() -> list[BoardRow]:
    p = PhaseProgress(ts=0.0, phase="load_weights", what="shards", label="", done=3, total=8, eta_s=42.0, slowest_rank=1)
    return [BoardRow("llama-70b", "llama-70b.service", "starting", "activating", "start", phase="load_weights", progress=p,
                     elapsed_s=61.0, phase_elapsed_s=20.5, usual_s=300.0, usual_phase_s=120.0),
            BoardRow("qwen", "qwen.service", "healthy", "active", "running", verdict="healthy", kv_tokens=94126,
                     max_running=4, max_running_requested=8, degraded=("max_running_reduced",), uptime_s=3600.0),
            BoardRow("dead", "dead.service", "failed", "failed", "failed", verdict="failed", cause="killed_by_signal",
                     message="x" * 400)]


def test_the_plain_snapshot_is_richs_table_on_a_real_board() -> None:
    rows = _rows()
    for width in range(60, 210):  # across the narrowest width plain_text takes
        text = plain_text([cells(r) for r in rows], width)
        if width >= 160:  # room for every column: written without rich
            assert text is not None
        if text is not None:
            assert text == rich_text(rows, width)
        assert render_text(rows, width) == rich_text(rows, width)
    assert "[killed_by_signal]: xxx" in render_text(rows, 200) and render_text(rows, 200).splitlines()[-2].endswith("…")
    assert plain_text([], 200) == rich_text([], 200)


@settings(max_examples=150, deadline=None)
@given(st.lists(board_rows(), max_size=6), st.integers(60, 400))
def test_the_plain_snapshot_is_richs_table_for_any_rows(rows: list[BoardRow], width: int) -> None:
    text = plain_text([cells(r) for r in rows], width)
    if text is not None:
        assert text == rich_text(rows, width)
    assert render_text(rows, width) == rich_text(rows, width)


def test_a_piped_snapshot_does_not_import_rich() -> None:
    code = ("import sys; sys.path.insert(0, '.'); from tests.test_board_text import _rows;"
            "from svcdiag.output.board import render_text; render_text(_rows(), 200); print('rich' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         cwd=Path(__file__).resolve().parent.parent).stdout
    assert out.strip() == "False"
