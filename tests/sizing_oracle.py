"""svcdiag's sizing against SGLang's own (tests/fixtures/sizing-oracle, written by
scripts/sglang-sizing-oracle): the one place a golden row's case becomes preflight's inputs.

A case is what an operator gives preflight: the model's config.json (models.json), the server
flags (tp, dp-attention, speculative decoding, page size, mem_fraction_static,
max_running_requests), the card's capacity and free memory, and the weights' size. It goes
through svcdiag's own path: a ServiceConfig, modelinfo.shape_from_config, preflight.inputs_from_shape,
preflight.sizing_inputs, memory.predict.

`mismatches()` compares every row; `classify()` names the cause of a difference (SGLang's file
and function); `write_known()` (scripts/sglang-sizing-oracle --known) rewrites
known-differences.json and /work/wt/oracle-mismatches.md's summary from the current code.
"""

from __future__ import annotations

import json
from collections import Counter, defaultdict
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from pathlib import Path, PurePosixPath
from typing import Any

from svcdiag.config.service import ServiceConfig, Speculative
from svcdiag.sglang import memory
from svcdiag.sglang.failures import Cause
from svcdiag.sglang.memory import GB
from svcdiag.sglang.modelinfo import shape_from_config
from svcdiag.sglang.preflight import inputs_from_shape, sizing_inputs

FIXTURES = Path(__file__).parent / "fixtures" / "sizing-oracle"
KNOWN = FIXTURES / "known-differences.json"
SPEC_ALGORITHMS = {"EAGLE3": "EAGLE3", "NEXTN": "NEXTN", "DFLASH": "DFLASH", "NGRAM": "NGRAM"}


def models() -> dict[str, dict[str, Any]]:
    return json.loads((FIXTURES / "models.json").read_text())


def tables() -> list[Path]:
    return sorted(FIXTURES.glob("sglang-*.jsonl"))


def read_table(path: Path) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The header and the rows, each {"id", "in", "out", "code": the files:functions that ran}
    (the file is columnar)."""
    lines = path.read_text().splitlines()
    head = json.loads(lines[0])
    ins, outs = head["in_columns"], head["out_columns"]
    rows = []
    for line in lines[1:]:
        rid, i, o, code = json.loads(line)
        rows.append({"id": rid, "in": dict(zip(ins, i, strict=True)),
                     "out": {k: v for k, v in zip(outs, o, strict=True) if v is not None or k != "error"},
                     "code": [head["code"][k] for k in head["code_sets"][code]]})
    return head, rows


def service_config(c: dict[str, Any], release: str) -> ServiceConfig:
    """The case's flags as an svcdiag config says them."""
    extra: list[str] = []
    if c["page_size"] != 1:
        extra += ["--page-size", str(c["page_size"])]
    if c.get("disable_radix_cache"):
        extra.append("--disable-radix-cache")
    if c.get("attention_backend"):
        extra += ["--attention-backend", c["attention_backend"]]
    dp = 1
    if c["dp_mode"] == "dp_attention":
        extra.append("--enable-dp-attention")
        dp = c["dp_size"]
    elif c["dp_mode"] == "attn_dp_size":
        extra += ["--attn-dp-size", str(c["dp_size"])]
    spec = None
    if c.get("spec"):
        spec = Speculative(algorithm=SPEC_ALGORITHMS[c["spec"]], num_steps=c.get("num_steps"),
                           eagle_topk=c.get("topk"), num_draft_tokens=c.get("num_draft_tokens"))
    return ServiceConfig(name="oracle", path=Path("oracle.toml"), model_path=c["model"], tp_size=c["tp"], dp_size=dp,
                         mem_fraction_static=c.get("mem_fraction_static"),
                         max_running_requests=c.get("max_running_requests"), speculative=spec,
                         extra_args=tuple(extra), sglang_version=release)


def sizing(c: dict[str, Any], release: str, model_cfg: dict[str, Any]) -> memory.SizingInputs:
    """The case → memory.SizingInputs, through preflight's own functions."""
    cfg = service_config(c, release)
    shape = shape_from_config({k: v for k, v in model_cfg.items() if not k.startswith("_")},
                              PurePosixPath(f"oracle:{c['model']}/config.json"))
    draft_layers = c.get("draft_layers") if c.get("spec") in ("EAGLE3", "NEXTN", "DFLASH") else None
    inp = inputs_from_shape(cfg, shape, gpu_free_gb=c["free_gb"], gpu_source="oracle",
                            weights_bytes=int(c["weights_gb"] * GB) * c["tp"],
                            draft_bytes=int((c.get("draft_weights_gb") or 0.0) * GB), draft_layers=draft_layers,
                            gpu_total_gb=c["gpu_capacity_mib"] / 1024, gpu_name=c["card"])
    # the oracle stubs the post-load reading: the RoPE caches SGLang grows before it (svcdiag.sglang.rope,
    # reserve_rope_cache_for_long_sequences) are outside the sizing code it runs
    return replace(sizing_inputs(cfg, inp), rope_growth_gb=0.0)


@dataclass(frozen=True)
class Mismatch:
    release: str
    id: int
    fields: tuple[str, ...]  # which of kv_tokens / max_running_requests / mamba_slots / refusal differ
    sglang: dict[str, Any]
    svcdiag: dict[str, Any]
    case: dict[str, Any]


def compare(row: dict[str, Any], release: str, model_cfg: dict[str, Any]) -> Mismatch | None:
    c, out = row["in"], row["out"]
    p = memory.predict(sizing(c, release, model_cfg))
    ours = {"kv_tokens": p.kv_tokens, "max_running_requests": p.max_running_requests, "mamba_slots": p.mamba_slots,
            "mem_fraction_static": p.mem_fraction_static, "failure": p.failure}
    fields: list[str] = []
    # SGLang fails: its code raised, or (up to 0.5.9) the scheduler's `max_running_request is zero` assert,
    # or (0.5.6) a negative slot count from a negative budget (handle_max_mamba_cache's floor division):
    # the oracle stops before the pools are built, where HybridReqToTokenPool's torch.zeros((-1, …)) raises
    sglang_fails = "error" in out or (out.get("max_running_requests") is not None and out["max_running_requests"] <= 0)
    # its server args' ValueError (0.5.10-0.5.13 _handle_mamba_radix_cache) is a refusal of the arguments:
    # svcdiag must say so (bad_arguments, SGLang's words), not predict a memory failure in its place
    args_refused = out.get("error", "").startswith("ValueError: Speculative decoding for")
    if sglang_fails:
        if p.failure is None or args_refused != (p.failure == Cause.BAD_ARGUMENTS):
            fields.append("refusal")
    elif p.failure is not None:
        fields.append("refusal")
    else:
        # exact, at any page size: a one-page tolerance hid 0.5.12-0.5.13's page 1 for a no_buffer hybrid
        if p.kv_tokens != out["kv_tokens"]:
            fields.append("kv_tokens")
        if p.max_running_requests != out["max_running_requests"]:
            fields.append("max_running_requests")
        if out.get("mamba_slots") is not None and p.mamba_slots != out["mamba_slots"]:
            fields.append("mamba_slots")
    if not fields:
        return None
    return Mismatch(release, row["id"], tuple(fields), out, ours, c)


def mismatches(path: Path) -> Iterator[Mismatch]:
    head, rows = read_table(path)
    cfgs = models()
    for row in rows:
        m = compare(row, head["release"], cfgs[row["in"]["model"]])
        if m is not None:
            yield m


# ------------------------------------------------------------------ causes (issue 38's families)

def _kind(c: dict[str, Any]) -> str:
    m = c["model"]
    return ("hybrid" if "Next" in m or "3.8-27B" in m else "mla" if "DeepSeek" in m else "swa" if "gpt-oss" in m
            else "vlm" if "VL" in m else "moe" if "A3B" in m or "A22B" in m else "dense")


#: (cause, where in SGLang, predicate on a mismatch): the first that holds names the row's cause
CAUSES: list[tuple[str, str, Callable[[Mismatch], bool]]] = [
    ("auto-mem-fraction", "the automatic mem_fraction_static by card size, chunked prefill and graph batch sizes: "
     "0.5.19+ arg_groups/memory_hook.py handle_gpu_memory_settings, reserve_for_graph_mb, adjust_mem_fraction_for_vlm; "
     "up to 0.5.18 server_args.py ServerArgs._handle_gpu_memory_settings",
     lambda m: "error" not in m.sglang and m.sglang.get("mem_fraction_static") is not None
     and abs(m.sglang["mem_fraction_static"] - m.svcdiag["mem_fraction_static"]) > 1e-9),
    ("sm100-attention-backend", "on an SM100 card the attention backend SGLang picks sets the page size (trtllm_mha, "
     "trtllm_mla: 64) and, 0.5.8-0.5.9, gpt-oss's one pool: up to 0.5.18 server_args.py ServerArgs._handle_attention_"
     "backend_compatibility, _handle_model_specific_adjustments (GptOssForCausalLM, DeepseekV3ForCausalLM); 0.5.15+ "
     "arg_groups/overrides.py _attention_backend_default, _mla_backend_page_constraints, _gpt_oss_overrides, "
     "_deepseek_family_overrides; 0.5.19+ arg_groups/attention_hook.py handle_attention_backend_compatibility, "
     "model_overrides/gpt_oss.py, model_overrides/deepseek_v2.py; a hybrid GDN model's own choice with its radix "
     "cache: the Qwen3NextForCausalLM / Qwen3_5ForConditionalGeneration branch of _handle_model_specific_adjustments "
     "(<= 0.5.13 with _handle_mamba_radix_cache's sm100_default_attention_backend), 0.5.15+ _qwen3_5_hybrid_overrides",
     lambda m: m.case.get("sm", 0) >= 100 and "refusal" not in m.fields),
    ("speculative-48", "max_running_requests unset → 48 with speculative decoding: 0.5.13+ "
     "arg_groups/speculative_hook.py _handle_eagle_family / _handle_dflash / _handle_ngram; up to 0.5.12 "
     "server_args.py ServerArgs._handle_speculative_decoding",
     lambda m: bool(m.case.get("spec")) and m.case.get("max_running_requests") is None
     and m.sglang.get("max_running_requests_flag") == 48),
    ("dp-attention", "KV heads split by the attention TP group, caps per DP worker: model_executor/"
     "pool_configurator.py DefaultPoolConfigurator._compute_cell_size (get_num_kv_heads(attn_tp_size)), "
     "kv_cache_configurator.py resolve_max_num_reqs; up to 0.5.9 model_runner(_kv_cache_mixin).py "
     "get_cell_size_per_token (get_attention_tp_size()), init_memory_pool",
     lambda m: m.case["dp_mode"] != "none"),
    ("draft-kv-cell", "the draft's KV in the target's budget: 0.5.14+ pool_configurator.py "
     "DefaultPoolConfigurator.__init__ (EAGLE / DFlash draft layers in the cell); up to 0.5.13 "
     "model_runner(_kv_cache_mixin).py profile_max_num_token / init_memory_pool", lambda m: m.case.get("spec") in ("EAGLE3", "NEXTN", "DFLASH")),
    ("hybrid-mamba", "mem_cache/kv_cache_configurator.py _handle_max_mamba_cache, _calculate_mamba_ratio",
     lambda m: _kind(m.case) == "hybrid"),
    ("hybrid-swa", "the sliding-window pool beside the full one: 0.5.11+ model_executor/pool_configurator.py "
     "HybridSWAPoolConfigurator (calculate_pool_sizes, _solve_pool_sizes); 0.5.10 model_runner_kv_cache_mixin.py "
     "_resolve_token_capacity, _resolve_hybrid_swa_tokens; 0.5.7-0.5.9 set_num_tokens_hybrid_swa; 0.5.2-0.5.6 none "
     "(server_args.py _handle_model_specific_adjustments: disable_hybrid_swa_memory)",
     lambda m: _kind(m.case) == "swa"),
    ("multimodal-reserve", "mem_cache/kv_cache_configurator.py mm_runtime_reservation_gb",
     lambda m: _kind(m.case) == "vlm"),
    ("estimate-before-page-align", "up to 0.5.9 model_runner(_kv_cache_mixin).py init_memory_pool estimates "
     "max_num_reqs (tokens / context × 512) from the profiled tokens before they are rounded down to the page size",
     lambda m: m.fields == ("max_running_requests",) and m.case["page_size"] > 1
     and abs(m.sglang["max_running_requests"] - m.svcdiag["max_running_requests"]) == 1),
    ("refusal", "mem_cache/kv_cache_configurator.py _profile_available_bytes / _handle_max_mamba_cache raise",
     lambda m: "refusal" in m.fields),
]


def classify(m: Mismatch) -> str:
    for name, _, pred in CAUSES:
        if pred(m):
            return name
    return "unclassified"


def current() -> dict[str, dict[str, str]]:
    """release → {row id: cause} for every row that differs today."""
    out: dict[str, dict[str, str]] = {}
    for path in tables():
        head, _ = read_table(path)
        out[head["release"]] = {str(m.id): classify(m) for m in mismatches(path)}
    return out


def summary() -> str:
    """The mismatch classes with counts per release and the first example of each (markdown)."""
    lines = ["# svcdiag vs SGLang's own sizing (scripts/sglang-sizing-oracle)", "",
             "Regenerate: `scripts/sglang-sizing-oracle --known` (project venv). Fields: which of kv_tokens /",
             "max_running_requests / mamba_slots / refusal differ. Cause: the first of tests/sizing_oracle.py CAUSES",
             "that holds (a row can have more than one).", ""]
    where = {name: w for name, w, _ in CAUSES}
    for path in tables():
        head, rows = read_table(path)
        ms = list(mismatches(path))
        by: dict[str, list[Mismatch]] = defaultdict(list)
        for m in ms:
            by[classify(m)].append(m)
        lines += [f"## {head['release']} ({head['wheel']}): {len(ms)} of {len(rows)} rows differ", ""]
        for cause, group in sorted(by.items(), key=lambda kv: -len(kv[1])):
            fields = Counter(f for m in group for f in m.fields)
            ex = group[0]
            lines += [f"- **{cause}** ({len(group)} rows; {', '.join(f'{k} {v}' for k, v in fields.most_common())}); "
                      f"SGLang: {where.get(cause, '?')}",
                      f"  - first: row {ex.id} `{json.dumps({k: v for k, v in ex.case.items() if v is not None}, sort_keys=True)}`",
                      f"  - SGLang `{json.dumps({k: ex.sglang.get(k) for k in ('kv_tokens', 'max_running_requests', 'mamba_slots', 'mem_fraction_static', 'max_running_requests_flag', 'error') if ex.sglang.get(k) is not None})}`",
                      f"  - svcdiag `{json.dumps(ex.svcdiag)}`"]
        lines.append("")
    return "\n".join(lines)


def write_known(out: Path = FIXTURES, md: Path | None = Path("/work/wt/oracle-mismatches.md")) -> int:
    known = current()
    doc = {"why": {name: w for name, w, _ in CAUSES},
           "note": "rows of each golden table where svcdiag differs from SGLang today, by cause; "
                   "regenerate with scripts/sglang-sizing-oracle --known",
           "rows": known}
    (out / "known-differences.json").write_text(json.dumps(doc, indent=1, sort_keys=True) + "\n")
    text = summary()
    if md is not None and md.parent.is_dir():
        md.write_text(text)
    print(text)
    return 0
