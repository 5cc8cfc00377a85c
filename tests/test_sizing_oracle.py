"""svcdiag's memory model against SGLang's own sizing code, release by release.

The golden tables (tests/fixtures/sizing-oracle/sglang-VERSION.jsonl) are what each release's
own functions computed (scripts/sglang-sizing-oracle; docs/preflight.md#the-oracle); no SGLang is
needed here. A row whose KV tokens (exact, at any page size), Mamba slots, max_running_requests or
refusal differ fails its release's test unless known-differences.json lists it under its cause.
"""

from __future__ import annotations

import json

import pytest

from tests import sizing_oracle as so

TABLES = so.tables()


def _known() -> dict[str, dict[str, str]]:
    return json.loads(so.KNOWN.read_text())["rows"] if so.KNOWN.exists() else {}


def test_every_table_has_rows_with_provenance() -> None:
    assert TABLES, "no golden tables: run scripts/sglang-sizing-oracle"
    for path in TABLES:
        head, rows = so.read_table(path)
        assert len(rows) >= 2000, f"{path.name}: {len(rows)} rows"
        for row in rows:
            code = row["code"]
            assert code, (path.name, row["id"])
            if "error" not in row["out"]:  # sized: the release's own pool code ran (a refusal may stop before)
                assert any("kv_cache_configurator" in f or "model_runner" in f for f in code), (path.name, row["id"])


@pytest.mark.parametrize("path", TABLES, ids=[p.stem for p in TABLES])
def test_svcdiag_matches_sglang_or_the_difference_is_known(path) -> None:
    head, _ = so.read_table(path)
    known = _known().get(head["release"], {})
    differ = list(so.mismatches(path))
    unlisted = [m for m in differ if str(m.id) not in known]
    fixed = set(known) - {str(m.id) for m in differ}
    msg = "\n".join(f"row {m.id} [{so.classify(m)}] {m.fields}: case {m.case} SGLang {m.sglang} svcdiag {m.svcdiag}"
                    for m in unlisted[:8])
    assert not unlisted, f"{len(unlisted)} rows differ from SGLang {head['release']} and are not known:\n{msg}"
    assert not fixed, (f"{len(fixed)} rows listed in known-differences.json now match SGLang {head['release']}: "
                       "regenerate it with scripts/sglang-sizing-oracle --known")


def test_the_adapter_reads_what_an_operator_gives() -> None:
    """A dp-attention EAGLE3 case becomes preflight's inputs: per-GPU weights, the card, the draft."""
    case = {"model": "Qwen/Qwen3-8B", "card": "H100-80GB", "tp": 4, "dp_mode": "dp_attention", "dp_size": 4,
            "spec": "EAGLE3", "num_draft_tokens": 4, "num_steps": 3, "topk": 1, "draft_layers": 1,
            "draft_weights_gb": 0.8, "page_size": 64, "mem_fraction_static": None, "max_running_requests": None,
            "gpu_capacity_mib": 81090, "free_gb": 78.5, "weights_gb": 3.815}
    inp = so.sizing(case, "0.5.23", so.models()["Qwen/Qwen3-8B"])
    assert inp.tp_size == 4 and inp.dp_size == 4 and inp.page_size == 64
    assert inp.speculative_algorithm == "EAGLE3" and inp.draft_layers == 1
    assert abs(inp.weights_gb - 3.815) < 1e-6 and abs(inp.draft_weights_gb - 0.2) < 1e-6
    assert inp.gpu_total_gb == pytest.approx(81090 / 1024)
