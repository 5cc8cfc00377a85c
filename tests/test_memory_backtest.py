"""The memory model back-tested on the logs in tests/fixtures/sglang (bench/memory_backtest.py):
every log whose figures are one start's is predicted within 1 % of the KV tokens SGLang
logged, and its request cap is what SGLang's own resolve_max_num_reqs gives on its pools, or
the difference is explained; every other log says which of its own figures disagree."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parent.parent / "bench" / "memory_backtest.py"


@pytest.fixture(scope="module")
def backtest():
    spec = importlib.util.spec_from_file_location("memory_backtest", BENCH)
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod  # its dataclasses look themselves up there
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture(scope="module")
def table(backtest):
    return backtest.rows()


def test_every_log_of_one_start_is_predicted_within_1pct(table) -> None:
    one = [r for r in table if r.outlier is None]
    assert len(one) >= 8
    misses = [(r.file, round(r.error_pct, 2)) for r in one if abs(r.error_pct) > 1]
    assert misses == []


def test_every_other_log_says_which_of_its_figures_disagree(table) -> None:
    others = [r for r in table if r.outlier is not None]
    assert others and all(("KV line" in r.outlier) or ("not its own budget" in r.outlier) for r in others)


def test_the_request_cap_is_sglangs_on_the_logged_pools_or_explained(backtest, table) -> None:
    for r in table:
        if r.outlier is None and r.logged_mr is not None and r.logged_mr != r.cap_from_logged_pools:
            assert r.file in backtest.MAX_RUNNING_NOTES, (r.file, r.logged_mr, r.cap_from_logged_pools)
    assert set(backtest.MAX_RUNNING_NOTES) <= {r.file for r in table}


def test_the_table_prints_its_error_distribution(backtest, table) -> None:
    text = backtest.render(table, markdown=True)
    assert text.startswith("| log | release | family |")
    assert "logs whose figures are one start's: rows" in text


def test_the_real_logs_are_back_tested_and_meet_the_goal(table) -> None:
    """Real start-up logs from public sources (tests/fixtures/memory-backtest): KV tokens within
    1 %, the request cap and the Mamba slots exactly SGLang's on the budget its pools add up to."""
    real = [r for r in table if r.source]
    assert {r.file for r in real} >= {"jerryzsj-rtx3090-deepseek-r1-distill-qwen-7b-0.4.2.log",
                                      "otel-h100-qwen3.8-27b-fp8-0.5.18.log"}
    assert all(r.outlier is None and abs(r.error_pct) <= 1 for r in real), [(r.file, r.error_pct) for r in real]
    assert all(r.cap_from_logged_pools == r.logged_mr for r in real if r.logged_mr is not None)
    hybrid = [r for r in real if r.logged_slots is not None]
    assert hybrid and all(r.slots_on_logged_budget == r.logged_slots for r in hybrid)


def test_every_real_log_names_its_public_source(backtest) -> None:
    import tomllib

    for entry in tomllib.loads((backtest.REAL / "index.toml").read_text())["log"]:
        text = (backtest.REAL / entry["file"]).read_text()
        assert entry["source"].startswith("https://github.com/") and f"# source: {entry['source']}" in text
        assert entry["release"] and entry["release_from"] and entry["model"]


def test_the_printed_table_marks_the_real_logs(backtest, table) -> None:
    text = backtest.render(table)
    assert "otel-h100-qwen3.8-27b-fp8-0.5.18 †" in text and "real logs †: rows 2" in text
