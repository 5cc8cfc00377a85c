"""The failure registry (svcdiag/sglang/failures/, a module per cause family): one row per cause and sub-case, the docs
table generated from it, and the ids scripts match on."""

from __future__ import annotations

import importlib.util
import json
from importlib.machinery import SourceFileLoader
from pathlib import Path

import pytest

from svcdiag.judge.diagnosis import diagnose
from svcdiag.judge.verdict import Verdict
from svcdiag.sglang import failures
from svcdiag.sglang.events import Failure
from svcdiag.sglang.failures import FAILURES, Cause, classify, refine

ROOT = Path(__file__).resolve().parents[1]


def _script():
    loader = SourceFileLoader("cause_table", str(ROOT / "scripts" / "cause-table"))
    spec = importlib.util.spec_from_loader("cause_table", loader)
    assert spec is not None
    mod = importlib.util.module_from_spec(spec)
    loader.exec_module(mod)
    return mod


def test_the_docs_cause_table_is_the_registrys() -> None:
    text = (ROOT / "docs" / "replay.md").read_text()
    assert _script().rewritten(text) == text, "docs/replay.md's cause table is stale: run scripts/cause-table"
    page = (ROOT / "docs" / "causes.md").read_text()
    assert _script().causes_page() == page, "docs/causes.md is stale: run scripts/cause-table"


def test_every_cause_has_one_row_with_its_evidence_and_sub_cases_have_ids() -> None:
    heads = [r.cause for r in FAILURES if not r.detail]
    assert sorted(heads) == sorted(Cause), "each cause exactly one row of its own"
    assert all(r.doc for r in FAILURES if not r.detail)
    keys = [(r.cause, r.detail) for r in FAILURES]
    assert len(keys) == len(set(keys)), "a (cause, detail) is one row"
    assert all(r.said is not None for r in FAILURES if r.detail), "a sub-case is picked by its words"


def test_cause_ids_are_strings_in_json_and_comparisons() -> None:
    cause = classify("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB.")
    assert cause == "cuda_oom" and json.dumps({"cause": cause}) == '{"cause": "cuda_oom"}'
    assert classify("INFO:     127.0.0.1:5000 - \"GET /health HTTP/1.1\" 200 OK") is None


def test_rows_are_tried_by_priority_and_filed_by_their_causes_family() -> None:
    """The order is the rows' priorities, not where a module stands; a row in another family's module, or two rows
    of one priority (which would make the order a matter of filing again), is refused."""
    from types import SimpleNamespace

    from svcdiag.sglang.failures import FAMILY, Family, filed

    assert [r.priority for r in FAILURES] == sorted(r.priority for r in FAILURES)
    oom, ports = failures.FailureClass(Cause.CUDA_OOM, priority=2), failures.FailureClass(Cause.PORT_IN_USE, priority=1)
    late = SimpleNamespace(__name__="late", FAMILIES=(FAMILY[Cause.CUDA_OOM],), ROWS=(oom,))
    early = SimpleNamespace(__name__="early", FAMILIES=(Family.NETWORK,), ROWS=(ports,))
    assert filed((late, early)) == (ports, oom)
    with pytest.raises(ValueError, match="belongs to family network"):
        filed((SimpleNamespace(__name__="memory", FAMILIES=(Family.OUT_OF_MEMORY,), ROWS=(ports,)),))
    twin = failures.FailureClass(Cause.PORT_IN_USE, "twin", priority=1)
    with pytest.raises(ValueError, match="share priority 1"):
        filed((SimpleNamespace(__name__="network", FAMILIES=(Family.NETWORK,), ROWS=(ports, twin)),))
    assert {FAMILY[c] for c in Cause} == set(Family), "every family has a cause, every cause a family"


@pytest.mark.parametrize("row", [r for r in FAILURES if r.detail], ids=lambda r: f"{r.cause}-{r.detail}")
def test_a_sub_case_is_reachable_from_its_own_example(row: failures.FailureClass) -> None:
    """Each sub-case row's `said` pattern picks it for the example in its doc, not an earlier row of its cause."""
    assert row.doc, f"{row.cause}/{row.detail} has no example"
    assert refine(row.cause, row.doc)[0] == row.detail
    f = Failure(cause=row.cause, message=row.doc, evidence=(row.doc,))
    v = Verdict(verdict="failed", phase="starting", cause=f.cause, message=f.message, detail=f.detail, captures=f.captures)
    d = diagnose(v)
    assert d is not None and d["detail"] == row.detail and all(d["explanation"]), d
