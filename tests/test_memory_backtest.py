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
