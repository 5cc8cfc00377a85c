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


def test_every_cause_has_its_evidence_and_the_prose_files_name_only_their_modules_rows(tmp_path: Path) -> None:
    """A family's .toml (memory.toml beside memory.py) holds its causes' evidence and its rows' sentences; a table that
    names no row of its module, or a field the loader does not know, is refused naming the file and the table."""
    from svcdiag.sglang.failures import _prose, memory

    assert all(failures.prose(c).evidence for c in Cause), "each cause's evidence, for docs/replay.md's table"
    bad = tmp_path / "memory.toml"
    bad.write_text('[cuda_oom.npu]\nexplain = ["The NPU ran out."]\n\n[cuda_oom.tpu]\nexplain = ["No such row."]\n')
    with pytest.raises(ValueError, match=r"memory.toml: \[cuda_oom.tpu\] is no row of memory.py"):
        _prose.read(bad, memory.ROWS)
    bad.write_text('[cuda_oom]\nexplian = ["a typo"]\n')
    with pytest.raises(ValueError, match=r"memory.toml: \[cuda_oom\] has explian"):
        _prose.read(bad, memory.ROWS)
    bad.write_text('[cuda_oom.say]\nfull = ["It is full."]\n\n[cuda_oom.npu]\nexplain = [{ say = "ful" }]\n')
    with pytest.raises(ValueError, match=r"memory.toml: \[cuda_oom.npu\]'s explain has \{'say': 'ful'\}"):
        _prose.read(bad, memory.ROWS)
    bad.write_text('[cuda_oom.say]\nfull = ["It is full."]\n\n[cuda_oom.npu]\nexplain = [{ say = "full" }, "On the NPU."]\n')
    assert _prose.read(bad, memory.ROWS)[("cuda_oom", "npu")].explain == ("It is full.", "On the NPU.")
    bad.write_text('explain = ["whose?"]\n')
    with pytest.raises(ValueError, match=r"memory.toml: explain is a key outside any table"):
        _prose.read(bad, memory.ROWS)


def test_no_sentence_is_written_twice_in_the_registrys_prose() -> None:
    """Where two rows say the same, the sentence is written once (a cause's `say`, named in their `explain`)."""
    import tomllib
    from collections import Counter

    def sentences(table: dict) -> list[str]:
        return [x for k, v in table.items() for x in (sentences(v) if isinstance(v, dict) else
                                                       v if isinstance(v, list) else [v] if k == "evidence" else [])
                if isinstance(x, str)]

    said = Counter(s for path in (ROOT / "svcdiag" / "sglang" / "failures").glob("*.toml")
                   for s in sentences(tomllib.loads(path.read_text())))
    assert [s for s, n in said.items() if n > 1 and s.strip("{}") not in ("message", "short")] == []


def _names(arg: object) -> list[str]:
    """The sentence names an argument can be: a string, or either branch of a conditional expression."""
    import ast

    if isinstance(arg, ast.IfExp):
        return _names(arg.body) + _names(arg.orelse)
    return [arg.value] if isinstance(arg, ast.Constant) and isinstance(arg.value, str) else []


def test_every_sentence_a_diagnosis_function_names_is_in_its_rows_prose() -> None:
    """judge/diagnosis.py's functions choose sentences by name (`_said(v, cfg, "sigbus")`): each name is in the .toml of
    the row the function explains (or of its cause), so no choice fails at run time on a start that takes it."""
    import ast
    import inspect

    from svcdiag.judge import diagnosis

    rows = {fn.__name__: key for key, fn in diagnosis._BY_DETAIL.items() if fn.__name__ != "<lambda>"} \
        | {fn.__name__: (c, "") for c, fn in diagnosis._BY_CAUSE.items()} | {"_draft_oom": (Cause.CUDA_OOM, ""), "_per_request": (Cause.MAX_RUNNING_ZERO, ""),
           "_fraction_fixes": (Cause.MAX_RUNNING_ZERO, "")}  # helpers, by the row they speak for
    checked = 0
    for fn in (n for n in ast.parse(inspect.getsource(diagnosis)).body if isinstance(n, ast.FunctionDef)):
        for call in ast.walk(fn):
            if isinstance(call, ast.Call) and getattr(call.func, "id", "") == "_said" and len(call.args) > 2:
                of = next((k.value for k in call.keywords if k.arg == "of"), None)  # another cause's row: Cause.X
                row = (Cause[of.attr], "") if isinstance(of, ast.Attribute) else rows[fn.name]
                for name in _names(call.args[2]):
                    assert name in failures.prose(*row).say or name in failures.prose(row[0]).say, (row, name)
                    checked += 1
    assert checked >= 20


def test_a_rows_text_is_one_line_in_its_module() -> None:
    """A row's own text (`doc`) is one string on one line; the long text is its family's .toml."""
    import ast

    for path in sorted((ROOT / "svcdiag" / "sglang" / "failures").glob("[!_]*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.keyword) and node.arg == "doc":
                assert isinstance(node.value, ast.Constant) and node.value.lineno == node.value.end_lineno, \
                    f"{path.name}:{node.lineno}: a row's doc is one line"


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
