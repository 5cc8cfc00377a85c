"""A verdict's figures: one typed record, its JSON form the wire format, its table in docs/events.md."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from svcdiag.errors import SvcdiagError
from svcdiag.judge.verdict import Verdict
from svcdiag.sglang.figures import FIELDS, Figures, table

DOCS = Path(__file__).resolve().parents[1] / "docs" / "events.md"

_num = st.one_of(st.integers(-10**9, 10**9), st.floats(allow_nan=False, allow_infinity=False))
_ints = st.integers(0, 10**7)
_KINDS = {
    "num": _num, "int": _ints, "str": st.text(max_size=20), "bool": st.booleans(),
    "map": st.dictionaries(st.sampled_from(["loading_weights", "kv_cache", "cuda_graph", "scheduler"]), _num),
    "ints": st.one_of(_ints, st.lists(_ints, min_size=2, max_size=4)),
    "list": st.lists(st.fixed_dictionaries({"node_rank": _ints, "verdict": st.sampled_from(["healthy", "failed"])}),
                     max_size=3),
}
figures_json = st.fixed_dictionaries({}, optional={f.name: _KINDS[f.metadata["kind"]] for f in FIELDS})


@given(figures_json)
def test_figures_round_trip_through_json(d: dict) -> None:
    assert Figures.from_json(d).to_json() == d
    assert Figures.from_json(Figures.from_json(d).to_json()) == Figures.from_json(d)


def test_unset_figures_are_absent_not_null() -> None:
    v = Verdict(verdict="healthy", phase="ready", cause=None, message="ok", figures=Figures(kv_tokens=11893))
    assert v.to_json()["figures"] == {"kv_tokens": 11893}


def test_a_newer_records_unknown_figure_is_skipped() -> None:
    """A history or bundle written by a later svcdiag still loads here."""
    assert Figures.from_json({"kv_tokens": 5, "figure_from_2030": 1}) == Figures(kv_tokens=5)


def test_a_known_figure_of_the_wrong_shape_names_its_file_and_key() -> None:
    with pytest.raises(SvcdiagError, match=r"^history\.db: figures\.kv_tokens: expected an integer, got 'many'$"):
        Figures.from_json({"kv_tokens": "many"}, "history.db")


def test_a_misspelt_figure_in_code_fails_at_once() -> None:
    with pytest.raises(TypeError):
        Figures(kv_token=5)  # type: ignore[call-arg]


def test_every_figure_has_a_meaning_and_the_docs_list_each_once() -> None:
    assert all(f.metadata["doc"] for f in FIELDS)
    text = DOCS.read_text()
    m = re.search(r"<!-- figures table: generated from svcdiag/sglang/figures.py -->\n(.*?)<!-- end figures table -->",
                  text, re.S)
    assert m is not None, "docs/events.md lost its figures table"
    assert m.group(1) == table(), "docs/events.md's figures table differs from svcdiag/sglang/figures.py: regenerate it"


def test_figures_are_read_by_name_never_by_string_key() -> None:
    """The string-key reads are gone: a reader that goes back to them fails at once, not with a silent None."""
    f = Figures(kv_tokens=11893)
    with pytest.raises(TypeError):
        f["kv_tokens"]  # type: ignore[index]
    with pytest.raises(TypeError):
        "kv_tokens" in f  # type: ignore[operator]  # noqa: B015
    with pytest.raises(AttributeError):
        f.get("kv_tokens")  # type: ignore[attr-defined]
    with pytest.raises(TypeError):
        dict(f)  # type: ignore[call-overload]


def test_a_records_chosen_figures_keep_their_own_order_on_the_wire() -> None:
    """A snapshot, trial or campaign row lists its figures in its own order, as it always did."""
    f = Figures(startup_s=60.0, context_len=32768, kv_tokens=11893)
    assert list(f.pick(("kv_tokens", "max_running_requests", "context_len", "startup_s"))) == \
        ["kv_tokens", "context_len", "startup_s"]
    assert f.only(("kv_tokens", "startup_s")) == Figures(kv_tokens=11893, startup_s=60.0)
    for misspelt in (f.only, f.pick):
        with pytest.raises(TypeError):
            misspelt(("kv_token",))
