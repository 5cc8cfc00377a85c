"""The bundled SGLang flag tables and the argv check svcdiag runs against them."""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from svcdiag.sglang.flag_tables import (
    DATA_DIR,
    FlagProblem,
    compare_versions,
    known_versions,
    renames,
    table_for,
    version_key,
)

ROOT = Path(__file__).resolve().parent.parent
OLDEST, NEWEST = "0.3.6", "0.5.23"


def errors(problems: list[FlagProblem]) -> list[FlagProblem]:
    return [p for p in problems if p.severity == "error"]


# ------------------------------------------------------------------ the data

def test_bundled_versions_span_the_renames():
    versions = known_versions()
    assert versions[0] == OLDEST and versions[-1] == NEWEST
    assert {"0.4.0", "0.5.19", "0.5.20", "0.5.22"} <= set(versions)
    assert list(versions) == sorted(versions, key=version_key)


def test_tables_are_well_formed_and_small():
    total = 0
    for v in known_versions():
        path = DATA_DIR / f"sglang-{v}.json"
        total += path.stat().st_size
        raw = json.loads(path.read_text())
        assert raw["version"] == v and raw["source"].startswith(f"sglang-{v}-")
        assert len(raw["flags"]) > 50
        for name, f in raw["flags"].items():
            assert name.startswith("--")
            assert set(f) == {"dest", "takes_value", "nargs", "type", "aliases", "choices",
                              "deprecated", "error"}
            assert f["type"] in (None, "int", "float", "str", "human_int")
            assert f["takes_value"] or (f["nargs"] is None and f["choices"] is None)
    assert total < 1_000_000


def test_renames_point_at_flags_that_exist():
    later_names = {}
    for v in known_versions():
        t = table_for(v)
        later_names[v] = {n for s in t.flags.values() for n in (s.name, *s.aliases)}
    for flag, r in renames().items():
        gone = [v for v in known_versions() if version_key(v) >= version_key(r.removed_in)]
        assert gone and all(flag not in later_names[v] for v in gone), flag
        if r.last_seen in later_names:
            assert flag in later_names[r.last_seen], flag
        for use in r.use:
            name = use.replace("=", " ").split()[0]
            assert any(name in later_names[v] for v in gone), (flag, use)
        assert r.use or r.note, flag


def _renderer_flags() -> set[str]:
    """The flag literals of svcdiag's launch_server argv builder (read, not imported:
    the module is being moved around)."""
    for rel in ("svcdiag/sglang/flags.py", "svcdiag/flags.py"):
        path = ROOT / rel
        if path.exists():
            tree = ast.parse(path.read_text())
            fn = next(n for n in ast.walk(tree)
                      if isinstance(n, ast.FunctionDef) and n.name == "sglang_args")
            return {n.value for n in ast.walk(fn) if isinstance(n, ast.Constant)
                    and isinstance(n.value, str) and n.value.startswith("--")}
    pytest.skip("svcdiag's flags.py not found")


# flag -> (first bundled release that has it, release that removed it)
RENDERED_SINCE = {
    "--cuda-graph-max-bs": (OLDEST, "0.5.20"),
    "--cuda-graph-max-bs-decode": ("0.5.19", None),  # added in 0.5.13
    "--max-mamba-cache-size": ("0.5.6", None),      # added in 0.5.3
    "--speculative-algorithm": ("0.4.6.post1", None),  # speculative flags: 0.4.1
    "--speculative-draft-model-path": ("0.4.6.post1", None),
    "--speculative-num-steps": ("0.4.6.post1", None),
    "--speculative-eagle-topk": ("0.4.6.post1", None),
    "--speculative-num-draft-tokens": ("0.4.6.post1", None),
}


def test_rendered_flags_exist_in_the_releases_they_should():
    flags = _renderer_flags()
    assert {"--model-path", "--tp-size", "--port"} <= flags
    for flag in sorted(flags):
        first, removed = RENDERED_SINCE.get(flag, (OLDEST, None))
        for v in known_versions():
            expected = version_key(v) >= version_key(first) and (
                removed is None or version_key(v) < version_key(removed))
            assert (flag in table_for(v)) == expected, (
                f"{flag} in sglang {v}: expected {'present' if expected else 'absent'}; "
                "new renderer flags go in RENDERED_SINCE")


# ------------------------------------------------------------------- versions

@pytest.mark.parametrize("older,newer", [
    ("0.5.0rc2", "0.5.0"), ("0.5.0", "0.5.0.post1"), ("0.4.6", "0.4.6.post1"),
    ("0.4.6.post1", "0.4.6.post2"), ("0.4.6.post5", "0.4.7"), ("0.5.9", "0.5.23"),
    ("0.5.0.dev1", "0.5.0rc1"), ("0.5.0rc1", "0.5.0rc2"), ("0.4.10.post2", "0.5.1"),
])
def test_version_order(older, newer):
    assert compare_versions(older, newer) == -1
    assert compare_versions(newer, older) == 1
    assert version_key(older) < version_key(newer)


def test_version_equality_and_garbage():
    assert compare_versions("0.5", "0.5.0") == 0
    assert compare_versions("v0.5.23", "0.5.23") == 0
    with pytest.raises(ValueError):
        version_key("latest")


@given(st.tuples(st.integers(0, 30), st.integers(0, 30), st.integers(0, 30)),
       st.tuples(st.integers(0, 30), st.integers(0, 30), st.integers(0, 30)))
def test_version_order_is_numeric(a, b):
    va, vb = ".".join(map(str, a)), ".".join(map(str, b))
    assert compare_versions(va, vb) == (a > b) - (a < b)


# ---------------------------------------------------------- choosing a table

@pytest.mark.parametrize("asked,used,exact", [
    ("0.5.23", "0.5.23", True),
    ("0.4.6.post1", "0.4.6.post1", True),
    ("0.5.21", "0.5.20", False),      # between bundled ones: the one below
    ("0.4.6", "0.4.6.post1", False),  # its own post-release, not 0.4.0
    ("0.4.6.post3", "0.4.6.post1", False),
    ("0.4.5", "0.4.0", False),
    ("0.5.0rc2", "0.4.6.post1", False),
    ("0.5.24", "0.5.23", False),      # above the newest: the newest
    ("0.6.0", "0.5.23", False),
    ("0.2.0", "0.3.6", False),        # below the oldest: the oldest
])
def test_table_for_fallback(asked, used, exact):
    t = table_for(asked)
    assert (t.version, t.requested, t.exact) == (used, asked, exact)
    assert asked in t.label and (exact or used in t.label)


# ------------------------------------------------------------------- checking

def test_cuda_graph_max_bs_removed_in_new_releases():
    (p,) = table_for("0.5.23").check(["--cuda-graph-max-bs", "4"])
    assert p.severity == "error" and p.flag == "--cuda-graph-max-bs"
    assert "--cuda-graph-max-bs-decode" in p.replacement
    assert "--cuda-graph-max-bs-decode" in p.message and "0.5.23" in p.message
    assert "\n" not in p.message
    # between bundled tables, renames.json still knows it is gone
    assert errors(table_for("0.5.21").check(["--cuda-graph-max-bs", "4"]))


@pytest.mark.parametrize("version", ["0.3.6", "0.4.6.post1", "0.5.1", "0.5.12"])
def test_cuda_graph_max_bs_fine_in_older_releases(version):
    assert table_for(version).check(["--cuda-graph-max-bs", "4"]) == []


def test_cuda_graph_max_bs_deprecated_alias_before_removal():
    (p,) = table_for("0.5.19").check(["--cuda-graph-max-bs=4"])
    assert p.severity == "warning" and p.replacement == ("--cuda-graph-max-bs-decode",)


def test_enable_dp_attention_warns_in_0_5_23():
    problems = table_for("0.5.23").check(["--dp-size", "2", "--enable-dp-attention"])
    (p,) = problems
    assert p.severity == "warning" and p.flag == "--enable-dp-attention"
    assert "--attn-dp-size" in p.message and "0.5.23" in p.message
    assert p.replacement and p.replacement[0].startswith("--attn-dp-size")
    assert table_for("0.5.12").check(["--dp-size", "2", "--enable-dp-attention"]) == []


def test_disable_cuda_graph_warns_in_0_5_23():
    (p,) = table_for("0.5.23").check(["--disable-cuda-graph"])
    assert p.severity == "warning" and "--cuda-graph-backend" in p.message


@pytest.mark.parametrize("version", ["0.5.12", "0.5.22", "0.5.23"])
def test_model_alias_accepted(version):
    assert table_for(version).check(["--model", "/m", "--tp-size", "2"]) == []


def test_tp_size_must_be_an_integer():
    (p,) = table_for("0.5.23").check(["--model-path", "/m", "--tp-size", "x"])
    assert p.severity == "error" and p.flag == "--tp-size" and "'x'" in p.message


def test_value_missing():
    (p,) = table_for("0.5.23").check(["--tp-size", "--trust-remote-code"])
    assert p.severity == "error" and p.flag == "--tp-size" and p.kind == "missing-value"
    (p,) = table_for("0.5.23").check(["--port"])
    assert p.kind == "missing-value"


def test_equals_form():
    t = table_for("0.5.23")
    assert t.check(["--port=30000", "--host=0.0.0.0", "--mem-fraction-static=0.8"]) == []
    (p,) = t.check(["--port=http"])
    assert p.kind == "bad-type"
    (p,) = t.check(["--trust-remote-code=yes"])
    assert p.kind == "unexpected-value"


def test_choices_and_stray_words():
    t = table_for("0.5.23")
    (p,) = t.check(["--attention-backend", "nonsense"])
    assert p.kind == "bad-choice" and "nonsense" in p.message
    assert t.check(["--attention-backend", "triton"]) == []
    (p,) = t.check(["--trust-remote-code", "true"])
    assert p.kind == "stray"


def test_negative_numbers_and_human_ints_are_values():
    t = table_for("0.5.23")
    assert t.check(["--context-length", "32k", "--max-running-requests", "-1"]) == []
    assert t.check(["--context-length", "32768"]) == []
    (p,) = t.check(["--context-length", "lots"])
    assert p.kind == "bad-type"


def test_unknown_flag():
    (p,) = table_for("0.5.23").check(["--no-such-flag", "3", "--port", "1"])
    assert p.severity == "error" and p.flag == "--no-such-flag" and p.kind == "unknown"


def test_rename_chain_names_the_current_spelling():
    (p,) = table_for("0.5.23").check(["--nsa-decode", "fa3"])
    assert p.replacement == ("--dsa-decode-backend",)
    (p,) = table_for("0.5.12").check(["--nsa-decode", "fa3"])
    assert p.replacement == ("--nsa-decode-backend",)


def test_flag_too_new_for_the_release():
    (p,) = table_for("0.5.12").check(["--attn-dp-size", "2"])
    assert p.severity == "error" and p.kind == "too-new"
    # between two bundled tables it may have been added: a warning, not an error
    (p,) = table_for("0.5.21").check(["--attn-dp-size", "2"])
    assert p.severity == "warning" and p.kind == "unverified"


def test_deprecated_flag_that_stops_the_launch():
    (p,) = table_for("0.4.0").check(["--disable-flashinfer"])
    assert p.severity == "error" and p.kind == "rejected"
    assert p.replacement == ("--attention-backend triton",)


# ------------------------------------------------------------------- property

def _value(spec):
    if spec.choices:
        return st.sampled_from([str(c) for c in spec.choices])
    if spec.type == "int":
        return st.integers(-10**6, 10**9).map(str)
    if spec.type == "float":
        return st.floats(-1e6, 1e6, allow_nan=False).map(lambda x: f"{x:.4f}")
    if spec.type == "human_int":
        return st.one_of(st.integers(0, 10**9).map(str),
                         st.tuples(st.integers(1, 999), st.sampled_from(["k", "M", "Ki", "Gi"]))
                         .map(lambda t: f"{t[0]}{t[1]}"))
    return st.text("abcxyz0123456789_/.:", min_size=1, max_size=12)


@st.composite
def clean_argv(draw):
    version = draw(st.sampled_from(known_versions()))
    t = table_for(version)
    usable = sorted(s.name for s in t.flags.values() if not s.deprecated and not s.error)
    names = draw(st.lists(st.sampled_from(usable), min_size=1, max_size=12, unique=True))
    argv: list[str] = []
    for name in names:
        spec = t.flags[name]
        spelled = draw(st.sampled_from((spec.name, *spec.aliases)))
        if not spec.takes_value:
            argv.append(spelled)
            continue
        nargs = spec.nargs
        if nargs is None and draw(st.booleans()):
            argv.append(f"{spelled}={draw(_value(spec))}")
            continue
        lo, hi = {None: (1, 1), "?": (0, 1), "*": (0, 3), "+": (1, 3)}.get(
            nargs, (nargs, nargs) if isinstance(nargs, int) else (1, 1))
        values = draw(st.lists(_value(spec), min_size=lo, max_size=hi))
        argv += [spelled, *values]
    return version, argv


@settings(max_examples=300, deadline=None)
@given(clean_argv())
def test_argv_from_a_tables_own_flags_checks_clean(case):
    version, argv = case
    assert table_for(version).check(argv) == []


@pytest.mark.parametrize("version", known_versions())
def test_every_deprecated_flag_warns(version):
    t = table_for(version)
    for spec in t.flags.values():
        if not spec.deprecated or spec.error:
            continue
        argv = [spec.name] + (["1"] if spec.takes_value and spec.nargs not in ("?", "*") else [])
        if spec.choices:
            argv[1:] = [str(spec.choices[0])]
        kinds = {p.kind for p in t.check(argv) if p.severity == "warning"}
        assert "deprecated" in kinds, (version, spec.name)
