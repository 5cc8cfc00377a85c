#!/usr/bin/env python3
"""The memory model back-tested on real logs: for every log in tests/fixtures/sglang whose
inputs are known (the free memory before and after loading, mem_fraction_static, and a model
whose shape is a public config.json fact in svcdiag.sglang.modelinfo), predict KV tokens,
Mamba slots and max_running_requests with svcdiag.sglang.memory.predict for the log's release
and compare with what SGLang logged. Prints the table and the error distribution
(docs/preflight.md#back-test); tests/test_memory_backtest.py holds the goal.

    .venv/bin/python bench/memory_backtest.py [--markdown]
"""

from __future__ import annotations

import re
import sys
import tomllib
from dataclasses import dataclass
from pathlib import Path

from svcdiag.judge.pipeline import Judge
from svcdiag.sglang import memory
from svcdiag.sglang.modelinfo import public_shape

FIXTURES = Path(__file__).resolve().parent.parent / "tests" / "fixtures" / "sglang"

GB = memory.GB
#: the free-memory and pool figures are logged to 0.01 GB: what rounding alone can move
ROUNDING_GB = 0.05


#: logs whose figures are one start's but whose logged max_running_requests is not what
#: resolve_max_num_reqs gives on their own pools, and why (docs/preflight.md#back-test)
MAX_RUNNING_NOTES = {
    "v0214-port-not-available-moved-healthy.log":
        "0.2.14 is older than the oldest wheel read (0.4.6): its request pool is max_num_reqs − 1 (2047), not + 1",
    "v046-pd-decode-dp16-deepep-node0-healthy.log":
        "a PD decode server: the cap (256) is its CUDA-graph batch size with DP attention, which the model leaves out",
    "v046-torch-compile-17min-capture-healthy.log":
        "the summary says 4097 with --max-running-requests unset and 443,560 tokens for a 131,072 context: 0.4.6's "
        "init_memory_pool gives 2049 (2048 + 1); the log's summary line is not that start's",
    "v046-torch-compile-inductor-warnings-healthy.log": "the same start as v046-torch-compile-17min-capture-healthy",
    "v0510-pd-prefill-bootstrap-port-in-use-server-error.log":
        "the summary says 4096 with --max-running-requests unset and 422,711 tokens for a 131,072 context: "
        "0.5.12's code gives 2048; the log's summary line is not that start's",
}


@dataclass(frozen=True)
class Row:
    file: str
    model: str
    release: str
    family: str
    logged_kv: int
    predicted_kv: int
    logged_mr: int | None
    predicted_mr: int
    logged_slots: int | None
    predicted_slots: int | None
    cap_from_logged_pools: int | None  # resolve_max_num_reqs on the logged KV tokens and Mamba slots
    outlier: str | None  # why the log's own figures cannot test the model (None: they can)

    @property
    def error_pct(self) -> float:
        return 100 * (self.predicted_kv - self.logged_kv) / self.logged_kv if self.logged_kv else 0.0


def release_of(case: dict[str, object]) -> str | None:
    m = re.match(r"\d+\.\d+(?:\.\d+)?", str(case.get("release") or ""))
    return m.group(0) if m else None


def rows() -> list[Row]:
    cases = {c["file"]: c for c in tomllib.loads((FIXTURES / "cases.toml").read_text())["case"]}
    out: list[Row] = []
    for path in sorted(FIXTURES.glob("*.log")):
        judge = Judge()
        for line in path.read_text(errors="replace").splitlines():
            judge.line(line)
        f = judge.finish().figures
        shape = public_shape(str(f.get("model_path") or ""))
        need = ("kv_tokens", "avail_before_load_gb", "avail_after_load_gb", "mem_fraction_static")
        if shape is None or any(f.get(k) is None for k in need) or not f["kv_tokens"]:
            continue  # the inputs are not all known: not back-tested
        release = release_of(cases.get(path.name, {}))
        tp = int(f.get("tp_size") or 1)
        spec = f.get("draft_model_type")
        algo = ("EAGLE" if "Eagle" in str(spec) else "NEXTN" if "NextN" in str(spec) or "MTP" in str(spec)
                else "DFLASH" if spec else None)
        hybrid = shape.kind == "hybrid"
        inp = memory.SizingInputs(
            free_before_gb=f["avail_before_load_gb"], weights_gb=f.get("weights_gb") or 0.0,
            free_after_load_gb=f["avail_after_load_gb"], kv_cell_bytes=shape.kv_bytes_per_token(tp),
            context_len=int(f.get("context_len") or shape.max_position_embeddings or 0),
            attention_layers=shape.attention_layers, mem_fraction_static=f["mem_fraction_static"],
            mamba_per_req_bytes=sum(shape.mamba_bytes_per_slot(tp)) if hybrid else None,
            max_mamba_cache_size=f.get("requested_max_mamba_cache_size"),
            max_running_requests=f.get("requested_max_running_requests"),
            speculative_algorithm=algo, draft_layers=1 if algo in ("EAGLE", "NEXTN") else None,
            slots_per_request=f.get("mamba_slots_per_request"), tp_size=tp, version=release)
        p = memory.predict(inp)
        cap = memory.max_running(inp, int(f["kv_tokens"]), f.get("mamba_slots"))[0] \
            if f.get("max_running_requests") is not None else None
        out.append(Row(path.name, str(f.get("model_path")), release or "?", p.family, int(f["kv_tokens"]),
                       p.kv_tokens, f.get("max_running_requests"), p.max_running_requests, f.get("mamba_slots"),
                       p.mamba_slots, cap, inconsistency(f, inp)))
    return out


def inconsistency(f: dict[str, object], inp: memory.SizingInputs) -> str | None:
    """Why this log's own figures cannot be one start SGLang sized, or None. Two checks that use
    the log alone: its KV line's bytes per token against the model's cell at its tp (a different
    model's line, an fp8 cache); and its pools against its own budget, free after loading −
    free before × (1 − mem_fraction_static), SGLang's identity in every release."""
    tokens = int(f["kv_tokens"])  # type: ignore[call-overload]
    kv_gb = f.get("kv_gb") or ((f.get("kv_k_gb") or 0) + (f.get("kv_v_gb") or 0))  # type: ignore[operator]
    if kv_gb and tokens:
        logged_cell = float(kv_gb) * GB / tokens  # type: ignore[arg-type]
        if abs(logged_cell - inp.kv_cell_bytes) > max(0.01 * inp.kv_cell_bytes, 0.006 * GB / tokens):
            return (f"its KV line is {logged_cell:,.0f} bytes per token, the model's cell at tp {inp.tp_size} is "
                    f"{inp.kv_cell_bytes:,}: another model's line, or another KV dtype")
    budget = float(inp.free_after_load_gb or 0) - inp.free_before_gb * (1 - float(inp.mem_fraction_static or 0))
    mamba = sum(float(f.get(k) or 0) for k in ("mamba_conv_gb", "mamba_ssm_gb",  # type: ignore[arg-type]
                                               "mamba_intermediate_ssm_gb", "mamba_intermediate_conv_gb"))
    pools = float(kv_gb or tokens * inp.kv_cell_bytes / GB) + mamba  # type: ignore[arg-type]
    if abs(pools - budget) > max(ROUNDING_GB, 0.005 * pools):
        return (f"its pools ({pools:.2f} GB) are not its own budget, {inp.free_after_load_gb} − "
                f"{inp.free_before_gb} × (1 − {inp.mem_fraction_static}) = {budget:.2f} GB")
    return None


def distribution(table: list[Row]) -> dict[str, int]:
    errs = [abs(r.error_pct) for r in table]
    return {"rows": len(errs), "exact": sum(e == 0 for e in errs), "≤ 0.1 %": sum(e <= 0.1 for e in errs),
            "≤ 1 %": sum(e <= 1 for e in errs), "≤ 5 %": sum(e <= 5 for e in errs), "> 5 %": sum(e > 5 for e in errs)}


def render(table: list[Row], markdown: bool = False) -> str:
    head = ("log", "release", "family", "KV logged", "KV predicted", "error", "max_running logged / on the logged "
            "pools", "Mamba slots logged / predicted")
    lines = []
    if markdown:
        lines += ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in table:
        mr = f"{r.logged_mr} / {r.cap_from_logged_pools}" if r.logged_mr is not None else "–"
        slots = f"{r.logged_slots} / {r.predicted_slots}" if r.logged_slots is not None else "–"
        cells = (r.file.removesuffix(".log") + (" ¹" if r.outlier else ""), r.release, r.family, f"{r.logged_kv:,}",
                 f"{r.predicted_kv:,}", f"{r.error_pct:+.2f} %", mr, slots)
        lines.append("| " + " | ".join(cells) + " |" if markdown else "  ".join(cells))
    lines.append("")
    lines.append("KV tokens, |error|, every row: " + ", ".join(f"{k} {v}" for k, v in distribution(table).items()))
    one = [r for r in table if r.outlier is None]
    lines.append("KV tokens, |error|, logs whose figures are one start's: "
                 + ", ".join(f"{k} {v}" for k, v in distribution(one).items()))
    return "\n".join(lines) + "\n"


def main() -> None:
    table = rows()
    print(render(table, "--markdown" in sys.argv), end="")
    for r in table:
        if r.outlier:
            print(f"¹ {r.file.removesuffix('.log')}: {r.outlier}")
    for name, why in MAX_RUNNING_NOTES.items():
        print(f"² {name.removesuffix('.log')}: {why}")


if __name__ == "__main__":
    main()
