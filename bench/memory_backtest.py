#!/usr/bin/env python3
"""The memory model back-tested on logs: the real start-up logs of
tests/fixtures/memory-backtest (public sources, index.toml), and every log in tests/fixtures/sglang
whose inputs are known (the free memory before and after loading, mem_fraction_static, and a model
whose shape is a public config.json fact in svcdiag.sglang.modelinfo), predict KV tokens,
Mamba slots and max_running_requests with svcdiag.sglang.memory.predict for the log's release
and compare with what SGLang logged. Prints the table, the error distribution, the real logs'
classes (release, speculative, hybrid, tp > 1, dp-attention, ROCm) against the back-test's
requirement and its goal (docs/preflight.md#back-test); tests/test_memory_backtest.py holds them,
and checks that docs/preflight.md shows this output as printed (`--write-docs` rewrites it there).

    .venv/bin/python bench/memory_backtest.py [--markdown] [--write-docs]
"""

from __future__ import annotations

import re
import sys
import tomllib
from dataclasses import dataclass, replace
from pathlib import Path

from svcdiag.judge.pipeline import Judge
from svcdiag.sglang import memory, rope
from svcdiag.sglang.figures import Figures
from svcdiag.sglang.modelinfo import DTYPE_BYTES, PUBLIC_CONFIGS, ModelShape, public_shape, shape_from_config

FIXTURES = Path(__file__).resolve().parent.parent / "tests" / "fixtures" / "sglang"
REAL = FIXTURES.parent / "memory-backtest"
DOCS = Path(__file__).resolve().parent.parent / "docs" / "preflight.md"
#: the block of docs/preflight.md that shows `--markdown`'s output, between these two lines
DOCS_BEGIN, DOCS_END = "<!-- memory_backtest.py --markdown: begin -->", "<!-- memory_backtest.py --markdown: end -->"

#: issue 38's requirement on the real logs: how many of each class, and the goal (share of rows)
REQUIRED = {"rows": 20, "releases": 6, "speculative": 4, "hybrid": 4, "tp > 1": 4, "dp-attention": 2, "ROCm": 2}
GOAL = 0.9
#: server_args fields the judge files as what was asked for, beside the figure SGLang resolved
REQUESTED = frozenset({"max_running_requests", "max_mamba_cache_size", "max_total_tokens"})

GB = memory.GB
#: the free-memory and pool figures are logged to 0.01 GB: what rounding alone can move
ROUNDING_GB = 0.05


#: logs whose figures are one start's but whose logged max_running_requests is not what
#: resolve_max_num_reqs gives on their own pools, and why (docs/preflight.md#back-test)
MAX_RUNNING_NOTES = {
    "v0214-port-not-available-moved-healthy.log":
        "0.2.14 is older than the oldest wheel read (0.4.6): its request pool is max_num_reqs − 1 (2047), not + 1",
    "v046-torch-compile-17min-capture-healthy.log":
        "the summary says 4097 with --max-running-requests unset and 443,560 tokens for a 131,072 context: 0.4.6's "
        "init_memory_pool gives 2049 (2048 + 1); the log's summary line is not that start's",
    "v046-torch-compile-inductor-warnings-healthy.log": "the same start as v046-torch-compile-17min-capture-healthy",
    "v0510-pd-prefill-bootstrap-port-in-use-server-error.log":
        "the summary says 4096 with --max-running-requests unset and 422,711 tokens for a 131,072 context: "
        "0.5.12's code gives 2048; the log's summary line is not that start's",
}


#: real logs (tests/fixtures/memory-backtest) the model misses — KV tokens off by more than 1 %, the
#: request cap or the Mamba slots not SGLang's, or pools that are not the logged budget — and why, with
#: SGLang's file and function where the miss is a rule of its release (docs/preflight.md#back-test)
REAL_MISSES: dict[str, str] = {
    "alesha-4x3090-qwen3.8-27b-nvfp4-tp2-mtp-0.5.18-main.log":
        "its intermediate SSM state (4.78 GB for 16 requests × 4 draft tokens) leaves the KV pool 12,060 tokens; "
        "its pools, six two-decimal figures (6.41 GB), are 0.05 GB under 8.87 − 23.12 × (1 − 0.9) − 0.10 = 6.46 GB, "
        "the draft's 0.02 GB of KV and the figures' rounding (±0.03 GB) between them; predicted −0.27 %, slots exact",
    "alesha-4x3090-qwen3.8-27b-nvfp4-tp2-fp8kv-mtp-0.5.18-main.log":
        "the same start with an fp8_e4m3 KV cache (24,121 tokens), the same readings and pool figures, 0.05 GB "
        "under the same budget for the same reasons; predicted −0.27 %, slots exact",
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
    source: str | None = None  # a real log's public source (None: a grammar fixture)
    slots_on_logged_budget: int | None = None  # the slot solve on the budget the log's own pools add up to
    speculative: str | None = None  # the speculative algorithm (EAGLE, NEXTN, DFLASH), None without
    hybrid: bool = False
    tp: int = 1
    dp_attention: bool = False
    rocm: bool = False

    @property
    def classes(self) -> str:
        """The row's classes, as the table's 'classes' column shows them."""
        out = [f"tp{self.tp}"] if self.tp > 1 else []
        out += [c for c, on in ((self.speculative or "", bool(self.speculative)), ("hybrid", self.hybrid),
                                ("dp-attn", self.dp_attention), ("ROCm", self.rocm)) if on]
        return ", ".join(out) or "–"

    @property
    def error_pct(self) -> float:
        return 100 * (self.predicted_kv - self.logged_kv) / self.logged_kv if self.logged_kv else 0.0


def release_of(case: dict[str, object]) -> str | None:
    m = re.match(r"\d+\.\d+(?:\.\d+)?", str(case.get("release") or ""))
    return m.group(0) if m else None


def figures(lines: list[str]) -> Figures:
    judge = Judge()
    for line in lines:
        judge.line(line)
    return judge.finish().figures


def rows() -> list[Row]:
    """Every back-tested log: the real ones first, then the grammar fixtures whose inputs are known."""
    return real_rows() + fixture_rows()


def real_rows() -> list[Row]:
    """The real logs of tests/fixtures/memory-backtest, with the flags and figures index.toml
    gives from the same source where the excerpt is silent."""
    out: list[Row] = []
    for entry in tomllib.loads((REAL / "index.toml").read_text())["log"]:
        every = [ln for ln in (REAL / entry["file"]).read_text().splitlines() if not ln.startswith("#")]
        lines = first_rank(every)
        # what the excerpt logged wins, then index.toml's logged figures, then its flags (server_args names;
        # the judge's 'requested_' ones)
        flags = {f"requested_{key}" if key in REQUESTED else key: v for key, v in entry.get("flags", {}).items()}
        where = f"{REAL / 'index.toml'}: {entry['file']}"
        f = Figures.from_json({**flags, **entry.get("logged", {}), **figures(lines).to_json()}, where)
        f = f.replace(**least_over_ranks(every, f))
        shape = shape_from_config(entry["config"], REAL / "index.toml") if "config" in entry else None
        args = sizing_args(lines, entry.get("flags", {}))
        if entry.get("dp_attention") and "enable_dp_attention" not in args:
            args["enable_dp_attention"] = True  # index.toml's class, from the source's command line
        platform = entry.get("platform", "cuda")
        if platform not in ("cuda", "rocm"):
            raise ValueError(f"{where}: platform {platform!r} is not cuda or rocm")
        row = predict_row(entry["file"], f, entry["release"], entry["model"], source=entry["source"], shape=shape,
                          kv_bytes=kv_dtype_bytes(lines), mamba_state_tp=entry.get("mamba_state_tp"), args=args,
                          draft=entry.get("draft_config"), config=entry.get("config"), rocm=platform == "rocm")
        if row is None:
            raise ValueError(f"{where}: its inputs are not all known")
        out.append(replace(row, dp_attention=row.dp_attention or bool(entry.get("dp_attention", False)),
                           rocm=platform == "rocm"))
    return out


def fixture_rows() -> list[Row]:
    cases = {c["file"]: c for c in tomllib.loads((FIXTURES / "cases.toml").read_text())["case"]}
    out: list[Row] = []
    for path in sorted(FIXTURES.glob("*.log")):
        lines = path.read_text(errors="replace").splitlines()
        f = figures(lines)
        # the log's own server_args line gives its sizing flags (dp-attention's split, the draft's D, an fp8 cache)
        row = predict_row(path.name, f, release_of(cases.get(path.name, {})), f.model_path or "",
                          args=sizing_args(lines, {}), kv_bytes=kv_dtype_bytes(lines))
        if row is not None:
            out.append(row)
    return out


#: --kv-cache-dtype values (server_args' kv_cache_dtype, or the KV line's torch dtype) that store one byte
FP8_KV = re.compile(r"kv_cache_dtype='fp8|dtype: torch\.float8|Using KV cache dtype: torch\.float8")


#: a log line's rank tag: "[2026-05-25 17:30:11 TP0]" → "TP0", "[… DP0 TP0 EP0]" → "DP0 TP0 EP0"
RANK = re.compile(r"^\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d ((?:[A-Z]+\d+ ?)+)\]")
LOAD = re.compile(r"Load weight (begin|end)\..*?avail mem=([\d.]+) GB")


def first_rank(lines: list[str]) -> list[str]:
    """The lines of the first rank a multi-rank excerpt tags (and the untagged ones): the judge reads one rank."""
    tags = [m.group(1) for ln in lines if (m := RANK.match(ln))]
    return [ln for ln in lines if not (m := RANK.match(ln)) or m.group(1) == tags[0]]


def least_over_ranks(lines: list[str], f: Figures) -> dict[str, float]:
    """Free memory before and after the target's load, the least over the excerpt's ranks: SGLang sizes
    every rank on the minimum (get_available_gpu_memory(distributed=True) in init_torch_distributed and
    in the pool sizing); a single-rank excerpt changes nothing."""
    seen: dict[tuple[str, str], float] = {}
    for ln in lines:
        m, load = RANK.match(ln), LOAD.search(ln)
        if m and load and (m.group(1), load.group(1)) not in seen:  # each rank's first: the target's
            seen[(m.group(1), load.group(1))] = float(load.group(2))
    out = {}
    for phase, field in (("begin", "avail_before_load_gb"), ("end", "avail_after_load_gb")):
        values = [v for (_, ph), v in seen.items() if ph == phase]
        if len(values) > 1 and getattr(f, field) is not None:
            out[field] = min(values)
    return out


#: server_args fields that size the pools beyond those the judge files: a real log's own server_args line
#: gives them, else index.toml's flags (the source's command line)
SIZING_ARGS = ("speculative_num_draft_tokens", "speculative_dflash_block_size", "mamba_scheduler_strategy",
               "mamba_radix_cache_strategy", "disable_overlap_schedule", "disable_radix_cache", "page_size",
               "dp_size", "enable_dp_attention", "speculative_num_steps", "speculative_draft_model_path",
               "mamba_ssm_dtype", "speculative_eagle_topk")


def _literal(text: str) -> object:
    text = text.strip()
    if text in ("None", "True", "False"):
        return {"None": None, "True": True, "False": False}[text]
    if re.fullmatch(r"-?\d+", text):
        return int(text)
    return text.strip("'\"")


def sizing_args(lines: list[str], flags: dict[str, object]) -> dict[str, object]:
    """SIZING_ARGS as the start was given them: index.toml's flags, overridden by the log's own server_args line."""
    out = {k: flags[k] for k in SIZING_ARGS if k in flags}
    for line in lines:
        m = re.search(r"server_args=ServerArgs\((.*)\)", line)
        if m:
            for key in SIZING_ARGS:
                v = re.search(rf"(?:^|, ){key}=([^,()\[\]]*)", m.group(1))
                if v:
                    out[key] = _literal(v.group(1))
    return out


def kv_dtype_bytes(lines: list[str]) -> int | None:
    """The KV cache's bytes per element where the log says it is not the model's dtype (an fp8 cache: 1)."""
    return 1 if any(FP8_KV.search(line) for line in lines) else None


def predict_row(name: str, f: Figures, release: str | None, model: str, *,
                source: str | None = None, shape: ModelShape | None = None,
                kv_bytes: int | None = None, mamba_state_tp: int | None = None,
                args: dict[str, object] | None = None, draft: dict[str, int] | None = None,
                config: dict[str, object] | None = None, rocm: bool = False) -> Row | None:
    """The model's prediction for one log's inputs, beside what SGLang logged; None when an
    input is unknown. Free memory before loading is the logged one, else (an excerpt that
    starts at 'Load weight end') free after loading + the weights' 'mem usage', SGLang's own sum.
    The model's shape is `shape` (a real log's config facts in index.toml), else its public one by name;
    `kv_bytes` an fp8 cache's 1 byte; `mamba_state_tp` the split of the linear-attention state where the
    source's build does not split it by tp (index.toml says why); `args` the start's other sizing flags
    (SIZING_ARGS); `draft` a DFlash draft's KV shape (index.toml's draft_config: its own layers, KV heads, head_dim);
    `config` the model's config.json facts (else its public ones by name), for the RoPE caches SGLang grows
    after loading (svcdiag.sglang.rope; `rocm`: in the model dtype, not float32)."""
    shape = shape or public_shape(model)
    if shape is not None and kv_bytes is not None:
        shape = replace(shape, kv_dtype_bytes=kv_bytes)
    if f.avail_before_load_gb is None and f.avail_after_load_gb is not None and f.weights_gb:
        f = f.replace(avail_before_load_gb=round(f.avail_after_load_gb + f.weights_gb, 2))
    if shape is None or f.avail_before_load_gb is None or f.avail_after_load_gb is None \
            or f.mem_fraction_static is None or not f.kv_tokens:
        return None  # the inputs are not all known: not back-tested
    tp = int(f.tp_size or 1)
    spec = f.draft_model_type
    algo = ("EAGLE" if "Eagle" in str(spec) else "NEXTN" if "NextN" in str(spec) or "MTP" in str(spec)
            else "DFLASH" if spec else None)
    hybrid = shape.kind == "hybrid"
    args = args or {}
    draft_gb = float(f.draft_weights_gb or 0.0)
    after = f.avail_after_load_gb
    draft_reading = False
    if draft_gb and memory.family(release).draft_weights_counted:  # the draft loads before the pool is sized
        draft_reading = f.draft_avail_before_load_gb is not None
        after = (round(f.draft_avail_before_load_gb - draft_gb, 2) if draft_reading
                 else round(after - draft_gb, 2))
    dp = int(args.get("dp_size") or 1) if args.get("enable_dp_attention") else 1
    # dp-attention splits the KV heads by the attention group, tp // dp, not by the whole tp
    # (pool_configurator.py _compute_cell_size: get_num_kv_heads(attn_tp_size))
    attn_tp = max(1, tp // dp)
    draft_cell = None
    if draft:
        draft_cell = (int(draft["num_hidden_layers"]) * max(1, int(draft["num_key_value_heads"]) // attn_tp)
                      * int(draft["head_dim"]) * 2 * shape.kv_dtype_bytes)
    inp = memory.SizingInputs(
        free_before_gb=f.avail_before_load_gb, weights_gb=f.weights_gb or 0.0,
        free_after_load_gb=after, kv_cell_bytes=shape.kv_bytes_per_token(attn_tp), draft_weights_gb=draft_gb,
        context_len=int(f.context_len or shape.max_position_embeddings or 0),
        attention_layers=shape.attention_layers, mem_fraction_static=f.mem_fraction_static,
        mamba_per_req_bytes=mamba_slot_bytes(shape, mamba_state_tp or attn_tp, args) if hybrid else None,
        max_mamba_cache_size=f.requested_max_mamba_cache_size,
        max_running_requests=f.requested_max_running_requests,
        speculative_algorithm=algo,
        draft_layers=eagle_draft_layers(shape, args) if algo in ("EAGLE", "NEXTN")
        else int(draft["num_hidden_layers"]) if draft else None,
        num_draft_tokens=args.get("speculative_num_draft_tokens") or args.get("speculative_dflash_block_size"),  # type: ignore[arg-type]
        draft_cell_bytes=draft_cell,
        mamba_scheduler_strategy=str(args.get("mamba_scheduler_strategy") or args.get("mamba_radix_cache_strategy")
                                     or "auto"),
        disable_overlap_schedule=bool(args.get("disable_overlap_schedule")),
        disable_radix_cache=bool(args.get("disable_radix_cache")), page_size=int(args.get("page_size") or 1),  # type: ignore[arg-type]
        speculative_num_steps=args.get("speculative_num_steps"),  # type: ignore[arg-type]
        speculative_eagle_topk=args.get("speculative_eagle_topk"),  # type: ignore[arg-type]
        dp_size=dp, slots_per_request=f.mamba_slots_per_request, tp_size=tp, version=release,
        multimodal=is_multimodal(shape),
        # the draft's own 'Load weight begin' reading comes after the target's caches grew: only the draft's
        # would be left, and its config.json is not in the inputs
        rope_growth_gb=0.0 if draft_reading else rope_growth(config or PUBLIC_CONFIGS.get(model.lower(), {}),
                                                             int(f.context_len or shape.max_position_embeddings or 0),
                                                             release, rocm, args).nominal_bytes / GB)
    p = memory.predict(inp)
    own = None
    mamba_gb = mamba_pools_gb(f)
    kv_gb = f.kv_gb or ((f.kv_k_gb or 0) + (f.kv_v_gb or 0))
    if hybrid and mamba_gb and kv_gb:  # SGLang measured its budget after 'Load weight end': take it from its pools
        budget = inp.free_after_load_gb - inp.rope_growth_gb - inp.free_before_gb * (1 - inp.mem_fraction_static)  # type: ignore[operator]
        # the multimodal reserve (0.5.18+) is not a pool: predict() takes it out of the budget itself
        budget -= memory.family(release).mm_reserve_gb if inp.multimodal else 0.0
        gap = budget - (float(kv_gb) + mamba_gb - unbudgeted_padding_gb(f, inp))
        # the RoPE growth stays an input: it was taken out of `budget` above, and predict() takes it out again
        own = memory.predict(replace(inp, free_after_load_gb=inp.free_after_load_gb - gap)).mamba_slots  # type: ignore[operator]
    cap = memory.max_running(inp, f.kv_tokens, f.mamba_slots)[0] if f.max_running_requests is not None else None
    return Row(name, model, release or "?", p.family, f.kv_tokens, p.kv_tokens,
               f.max_running_requests, p.max_running_requests, f.mamba_slots, p.mamba_slots, cap,
               inconsistency(f, inp, draft_in_budget=p.cell_bytes > inp.kv_cell_bytes), source, own, algo or (f.speculative_algorithm or "").upper() or None, hybrid, tp,
               dp_attention=bool(args.get("enable_dp_attention")))


def eagle_draft_layers(shape: ModelShape, args: dict[str, object]) -> int | None:
    """An EAGLE/MTP draft's layers in the target's KV cell, as preflight takes them: one (a draft
    model's path given, or a log that does not say), else, for a path-less MTP start (index.toml's
    speculative_draft_model_path = "None"), the target's own num_nextn_predict_layers, none when its
    config has none (Qwen3.5: mtp_num_hidden_layers). SGLang counts a draft in the cell only through
    spec_aux_hidden_state.py's eagle_draft_num_layers, which a path-less start leaves unset unless the
    target's config has num_nextn_predict_layers (0.5.19: the path alone; 0.5.20+: the target's config)."""
    if "speculative_draft_model_path" in args and args["speculative_draft_model_path"] in (None, "None"):
        return shape.nextn_layers or None
    return 1


def mamba_slot_bytes(shape: ModelShape, tp: int, args: dict[str, object]) -> int:
    """One request slot's linear-attention state on one GPU, its SSM state in --mamba-ssm-dtype (or
    SGLANG_MAMBA_SSM_DTYPE, which SGLang's mamba_utils reads first) where the start sets one, as
    preflight sizes it; float32 otherwise."""
    conv, ssm = shape.mamba_bytes_per_slot(tp)
    dtype = args.get("mamba_ssm_dtype")
    if dtype and dtype != "None":
        ssm = ssm * DTYPE_BYTES.get(str(dtype), 4) // 4
    return conv + ssm


def rope_growth(config: dict[str, object], context_len: int, release: str | None, rocm: bool,
                args: dict[str, object]) -> rope.RopeGrowth:
    """The RoPE caches the start's release grows between 'Load weight end' and the pool sizing
    (svcdiag.sglang.rope); its nominal end is the figure preflight takes too."""
    return rope.rope_growth(rope.rope_caches(config), context_len, version=release, rocm=rocm,
                            speculative_num_steps=int(args.get("speculative_num_steps") or 0),  # type: ignore[call-overload]
                            num_draft_tokens=int(args.get("speculative_num_draft_tokens") or 0))  # type: ignore[call-overload]


def is_multimodal(shape: ModelShape) -> bool:
    """A vision-language model, as SGLang's model_config reads it: a vision_config, or a
    `…ForConditionalGeneration` architecture (Qwen3.5/3.6/3.8, Qwen3-VL, Llava), whose KV budget
    0.5.18+ cut by 100 MB for the embedding cache (kv_cache_configurator.py mm_runtime_reservation_gb;
    the DFlash log's own 'Reserving 0.10 GB of the KV budget for post-sizing multimodal allocations')."""
    return bool(shape.multimodal or (shape.architecture or "").endswith("ForConditionalGeneration"))


def mamba_pools_gb(f: Figures) -> float:
    """The Mamba pools the log gave: conv + SSM state, and speculative decoding's intermediate state."""
    return sum(float(x or 0) for x in (f.mamba_conv_gb, f.mamba_ssm_gb, f.mamba_intermediate_ssm_gb,
                                       f.mamba_intermediate_conv_gb))


def unbudgeted_padding_gb(f: Figures, inp: memory.SizingInputs) -> float:
    """What a log's Mamba pools hold beyond SGLang's budget. MambaPool allocates max_mamba_cache_size
    + 1 slots' state, and a speculative start's intermediate state for its requests + 1, in every
    release read (0.5.2 on, mem_cache/memory_pool.py: size + 1, spec_state_size + 1), but only
    0.5.18+ budget the padding: before, one slot's state and one request's D intermediate states
    are over budget."""
    if not f.mamba_slots or memory.family(inp.version).mamba == "joint_padded":
        return 0.0
    slot = (float(f.mamba_conv_gb or 0) + float(f.mamba_ssm_gb or 0)) / (f.mamba_slots + 1)
    d = memory.draft_tokens(inp) if f.mamba_intermediate_ssm_gb else 0
    return slot * (1 + d)


def inconsistency(f: Figures, inp: memory.SizingInputs, draft_in_budget: bool = False) -> str | None:
    """Why this log's own figures cannot be one start SGLang sized, or None. Two checks that use
    the log alone: its KV line's bytes per token against the model's cell at its tp (a different
    model's line, an fp8 cache); and its pools against its own budget, free after loading −
    free before × (1 − mem_fraction_static), SGLang's identity in every release (the draft's KV pool
    among them where the release sizes it from the same budget: `draft_in_budget`)."""
    tokens = f.kv_tokens or 0
    kv_gb = f.kv_gb or ((f.kv_k_gb or 0) + (f.kv_v_gb or 0))
    if kv_gb and tokens:
        logged_cell = float(kv_gb) * GB / tokens
        # two-decimal figures: 'KV size' to ±0.005 GB; K and V logged apart, each to ±0.005 GB
        rounding = 0.01 if f.kv_k_gb is not None and f.kv_v_gb is not None else 0.006
        if abs(logged_cell - inp.kv_cell_bytes) > max(0.01 * inp.kv_cell_bytes, rounding * GB / tokens):
            return (f"its KV line is {logged_cell:,.0f} bytes per token, the model's cell at tp {inp.tp_size} is "
                    f"{inp.kv_cell_bytes:,}: another model's line, or another KV dtype")
    # up to 0.4.8.post1 ModelRunner scales a VLM's fraction before it sizes (Family.vlm_runner_factor)
    mfs = float(inp.mem_fraction_static or 0) * (memory.family(inp.version).vlm_runner_factor if inp.multimodal else 1.0)
    budget = float(inp.free_after_load_gb or 0) - inp.rope_growth_gb - inp.free_before_gb * (1 - mfs)
    # 0.5.18+ keeps a VLM's multimodal reserve out of the pools ('Reserving 0.10 GB of the KV budget')
    reserve = memory.family(inp.version).mm_reserve_gb if inp.multimodal else 0.0
    budget -= reserve
    pools = float(kv_gb or tokens * inp.kv_cell_bytes / GB) + mamba_pools_gb(f)
    pools -= unbudgeted_padding_gb(f, inp)
    if draft_in_budget:
        pools += float(f.draft_kv_gb or 0)
    if abs(pools - budget) > max(ROUNDING_GB, 0.005 * pools):
        return (f"its pools ({pools:.2f} GB) are not its own budget, {inp.free_after_load_gb} − "
                f"{inp.free_before_gb} × (1 − {round(mfs, 4)})"
                + (f" − {inp.rope_growth_gb:.3f} RoPE" if inp.rope_growth_gb else "")
                + (f" − {reserve:.2f} multimodal" if reserve else "") + f" = {budget:.2f} GB")
    return None


def distribution(table: list[Row]) -> dict[str, int]:
    errs = [abs(r.error_pct) for r in table]
    return {"rows": len(errs), "exact": sum(e == 0 for e in errs), "≤ 0.1 %": sum(e <= 0.1 for e in errs),
            "≤ 1 %": sum(e <= 1 for e in errs), "≤ 5 %": sum(e <= 5 for e in errs), "> 5 %": sum(e > 5 for e in errs)}


def render(table: list[Row], markdown: bool = False) -> str:
    head = ("log", "release", "family", "classes", "KV logged", "KV predicted", "error",
            "max_running logged / on the logged pools", "Mamba slots logged / predicted")
    lines = []
    if markdown:
        lines += ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in table:
        mr = f"{r.logged_mr} / {r.cap_from_logged_pools}" if r.logged_mr is not None else "–"
        slots = f"{r.logged_slots} / {r.predicted_slots}" if r.logged_slots is not None else "–"
        if r.logged_slots is not None and r.slots_on_logged_budget not in (None, r.predicted_slots):
            slots += f" ({r.slots_on_logged_budget} ³)"
        name = r.file.removesuffix(".log") + (" †" if r.source else "") + (" ¹" if r.outlier else "") \
            + (" ⁴" if r.file in REAL_MISSES else "")
        cells = (name, r.release, r.family, r.classes, f"{r.logged_kv:,}",
                 f"{r.predicted_kv:,}", f"{r.error_pct:+.2f} %", mr, slots)
        lines.append("| " + " | ".join(cells) + " |" if markdown else "  ".join(cells))
    lines.append("")
    lines.append("KV tokens, |error|, every row: " + ", ".join(f"{k} {v}" for k, v in distribution(table).items()))
    one = [r for r in table if r.outlier is None]
    lines.append("KV tokens, |error|, logs whose figures are one start's: "
                 + ", ".join(f"{k} {v}" for k, v in distribution(one).items()))
    real = [r for r in table if r.source]
    lines.append("KV tokens, |error|, real logs †: " + ", ".join(f"{k} {v}" for k, v in distribution(real).items()))
    with_mr = [r for r in real if r.logged_mr is not None]
    with_slots = [r for r in real if r.logged_slots is not None]
    lines.append(f"real logs †: max_running_requests predicted = logged {sum(r.predicted_mr == r.logged_mr for r in with_mr)}"
                 f" of {len(with_mr)}, on the logged pools {sum(r.cap_from_logged_pools == r.logged_mr for r in with_mr)}"
                 f" of {len(with_mr)}; Mamba slots predicted = logged {sum(r.predicted_slots == r.logged_slots for r in with_slots)}"
                 f" of {len(with_slots)}, on the budget the log's pools add up to ³ "
                 f"{sum(r.slots_on_logged_budget == r.logged_slots for r in with_slots)} of {len(with_slots)}")
    lines += requirement(real)
    return "\n".join(lines) + "\n"


def class_counts(real: list[Row]) -> dict[str, int]:
    """How many real logs of each class issue 38 asks for (a row counts in every class it has)."""
    return {"rows": len(real), "releases": len({r.release for r in real}),
            "speculative": sum(bool(r.speculative) for r in real), "hybrid": sum(r.hybrid for r in real),
            "tp > 1": sum(r.tp > 1 for r in real), "dp-attention": sum(r.dp_attention for r in real),
            "ROCm": sum(r.rocm for r in real)}


def goal(real: list[Row]) -> dict[str, tuple[int, int]]:
    """(met, of) per goal on the real logs: KV within 1 %; max_running and Mamba slots exact, each
    figure apart, then per log (a log counts once, met when every one of the two it logs is exact: the
    goal's "slots and max_running exact" read per start rather than per figure; both are printed)."""
    with_mr = [r for r in real if r.logged_mr is not None]
    with_slots = [r for r in real if r.logged_slots is not None]
    with_either = [r for r in real if r.logged_mr is not None or r.logged_slots is not None]
    exact = [r for r in with_either if (r.logged_mr is None or r.predicted_mr == r.logged_mr)
             and (r.logged_slots is None or r.predicted_slots == r.logged_slots)]
    return {"KV within 1 %": (sum(abs(r.error_pct) <= 1 for r in real), len(real)),
            "max_running exact": (sum(r.predicted_mr == r.logged_mr for r in with_mr), len(with_mr)),
            "Mamba slots exact": (sum(r.predicted_slots == r.logged_slots for r in with_slots), len(with_slots)),
            "both exact, per log": (len(exact), len(with_either))}


def requirement(real: list[Row]) -> list[str]:
    """The real logs' classes against issue 38's requirement, and the goal's shares."""
    counts = class_counts(real)
    have = ", ".join(f"{k} {counts[k]} of {need}" + ("" if counts[k] >= need else " (short)")
                     for k, need in REQUIRED.items())
    shares = ", ".join(f"{k} {met} of {of} ({100 * met / of:.0f} %)" if of else f"{k} – (none logged)"
                       for k, (met, of) in goal(real).items())
    return [f"real logs †, classes against the requirement: {have}",
            f"real logs †, goal (≥ {GOAL:.0%} each): {shares}"]


def report(table: list[Row], markdown: bool = False) -> str:
    """Everything the script prints: the table, its distributions and classes, then the notes."""
    item = "- " if markdown else ""
    notes = [f"{item}¹ {r.file.removesuffix('.log')}: {r.outlier}" for r in table if r.outlier]
    notes += [f"{item}² {name.removesuffix('.log')}: {why}" for name, why in MAX_RUNNING_NOTES.items()]
    notes += [f"{item}⁴ {name.removesuffix('.log')}: {why}" for name, why in REAL_MISSES.items()]
    notes += [f"{item}† {r.file.removesuffix('.log')}: {r.source}" for r in table if r.source]
    notes.append(f"{item}³ the slot solve on the budget the log's own KV and Mamba pools add up to, where that "
                 "differs from free after loading − free before × (1 − mem_fraction_static): SGLang measures free "
                 "memory again when it sizes the pools, after 'Load weight end'")
    text = render(table, markdown)
    if markdown:  # the summary lines as a list, so that Markdown keeps them apart
        head, _, tail = text.partition("\n\n")
        text = head + "\n\n" + "".join(f"- {line}\n" for line in tail.splitlines() if line)
    return text + "\n".join(notes) + "\n"


def docs_block(text: str | None = None) -> str:
    """What docs/preflight.md shows between DOCS_BEGIN and DOCS_END."""
    text = DOCS.read_text() if text is None else text
    begin, end = text.find(DOCS_BEGIN), text.find(DOCS_END)
    if begin < 0 or end < begin:
        raise ValueError(f"{DOCS}: no {DOCS_BEGIN} … {DOCS_END} block")
    return text[begin + len(DOCS_BEGIN):end].strip("\n") + "\n"


def write_docs(table: list[Row]) -> None:
    """Rewrite the docs' block with this run's `--markdown` output."""
    text = DOCS.read_text()
    docs_block(text)  # both markers are there, in order
    begin, end = text.find(DOCS_BEGIN) + len(DOCS_BEGIN), text.find(DOCS_END)
    DOCS.write_text(text[:begin] + "\n" + report(table, markdown=True) + text[end:])


def main() -> None:
    table = rows()
    if "--write-docs" in sys.argv:
        write_docs(table)
        print(f"{DOCS}: the back-test's table rewritten ({len(table)} rows)")
        return
    print(report(table, "--markdown" in sys.argv), end="")


if __name__ == "__main__":
    main()
