"""How records look to an operator: one human line each (a block for a verdict), or one JSON object."""

from __future__ import annotations

from svcdiag.judge.verdict import PhaseChange, UnitState
from svcdiag.output.event_text import event_line
from svcdiag.output.preflight_text import _fix_lines, interval_line, render_calibration, render_preflight  # noqa: F401  (kept here too)
from svcdiag.output.schema import ON_REQUEST, ReadinessEvent
from svcdiag.output.tables import render_status, table  # noqa: F401  (render_status: `status`'s, kept here too)
from svcdiag.sglang.events import (
    CudaGraph,
    DraftRunner,
    Event,
    Failure,
    KernelPrecompile,
    KVBelowContext,
    KVCache,
    MambaCache,
    MaxRunningLimited,
    PoolEnd,
    ProcessesGone,
    Ready,
    SchedulerInfo,
    ServerArgs,
    StartupTimings,
    StopRequested,
    UnifiedMemoryPool,
    Uvicorn,
    WeightsBegin,
    WeightsEnd,
)
from svcdiag.sglang.figures import Figures

TYPE_CHECKING = False  # typing costs ~3 ms to import, and no module a replay loads needs it at run time
if TYPE_CHECKING:
    from typing import Any, TextIO

KEY_FIGURES = ("kv_tokens", "max_total_num_tokens", "max_running_requests", "context_len", "mamba_slots",
               "weights_gb", "avail_before_load_gb", "available_gpu_mem_gb", "startup_s")


HEADS = {"healthy": "HEALTHY", "failed": "FAILED", "timed_out": "TIMED OUT", "incomplete": "INCOMPLETE"}


def _gb(v: float | None) -> str:
    return "?" if v is None else f"{v:.2f} GB"


def _n(v: Any) -> str:
    return f"{v:,}" if isinstance(v, int) and not isinstance(v, bool) else str(v)


def describe(ev: Event) -> str | None:
    """One line for an event, or None for those not worth a line of their own."""
    if isinstance(ev, PhaseChange):
        took = f" (after {ev.previous_s:.1f} s in {ev.previous})" if ev.previous_s is not None else ""
        return f"phase → {ev.phase}{took}"
    if isinstance(ev, ServerArgs):
        spec = f", speculative {ev.speculative_algorithm}" if ev.speculative_algorithm else ""
        return (f"server_args: {ev.model_path}, tp={ev.tp_size}, context_length={ev.context_length}, "
                f"mem_fraction_static={ev.mem_fraction_static}, max_running_requests={ev.max_running_requests}{spec}")
    if isinstance(ev, WeightsBegin):  # ≤ 0.1.16 says no free memory (avail_gb -1)
        return f"loading weights, {_gb(ev.avail_gb)} free" if ev.avail_gb >= 0 else "loading weights"
    if isinstance(ev, WeightsEnd):
        took = f" in {ev.elapsed_s:.1f} s" if ev.elapsed_s is not None else ""
        said = [x for x in (ev.model_type, _gb(ev.mem_usage_gb) + took if ev.mem_usage_gb is not None else took.strip(),
                            f"{_gb(ev.avail_gb)} left" if ev.avail_gb is not None else None) if x]
        return "weights loaded" + (": " + ", ".join(said) if said else "")
    if isinstance(ev, KVCache):
        size = (f"K {_gb(ev.k_gb)} + V {_gb(ev.v_gb)}" if ev.k_gb is not None else f"KV {_gb(ev.kv_gb)}")
        what = "KV cache upper bound" if ev.upper_bound else "draft KV cache" if ev.draft else \
            f"{ev.label} KV cache" if ev.label else "KV cache"
        tokens = f"{ev.tokens:,} tokens" if ev.tokens is not None else "allocated (tokens: see the scheduler's summary)"
        return f"{what}: {tokens} ({size}{', ' + ev.dtype if ev.dtype else ''})"
    if isinstance(ev, MambaCache):
        inter = f" + intermediate {_gb(ev.intermediate_ssm_gb)}" if ev.intermediate_ssm_gb is not None else ""
        return f"Mamba cache: {ev.slots} slots, conv {_gb(ev.conv_gb)} + ssm {_gb(ev.ssm_gb)}{inter}"
    if isinstance(ev, PoolEnd):
        return f"memory pools done, {_gb(ev.avail_gb)} free"
    if isinstance(ev, MaxRunningLimited):
        by = "post-capture KV sizing" if ev.by == "post_capture" else f"the {ev.by} cache"
        return f"max_running_requests limited to {ev.value} by {by}"
    if isinstance(ev, KVBelowContext):
        return f"KV pool {ev.tokens:,} tokens, below --context-length {ev.context_length:,}: degraded"
    if isinstance(ev, StartupTimings):
        return "SGLang's own start-up timings: " + ", ".join(f"{k} {v:.1f} s" for k, v in ev.seconds.items())
    if isinstance(ev, UnifiedMemoryPool):
        return f"unified memory pool: {_gb(ev.total_gb)}, KV and Mamba split at run time"
    if isinstance(ev, CudaGraph):
        if ev.stage == "begin":
            return f"capturing {ev.name} CUDA graphs, {_gb(ev.avail_gb)} free"
        return f"{ev.name} CUDA graphs captured: {_gb(ev.mem_usage_gb)}" + (
            f" in {ev.elapsed_s:.1f} s" if ev.elapsed_s is not None else "")
    if isinstance(ev, KernelPrecompile):
        return f"compiling {ev.what} kernels: slow the first time on a host, the phase's deadline grows by timeouts.jit_compile"
    if isinstance(ev, DraftRunner):
        return f"{ev.algorithm} draft runner {ev.stage}"
    if isinstance(ev, SchedulerInfo):
        said = [f"max_total_num_tokens={ev.max_total_num_tokens:,}"]
        if ev.max_running_requests is not None:  # ≤ 0.1.20 the summary has none
            said.append(f"max_running_requests={ev.max_running_requests}")
        said.append(f"context_len={_n(ev.context_len)}")
        if ev.available_gpu_mem_gb is not None:
            said.append(f"available_gpu_mem={_gb(ev.available_gpu_mem_gb)}")
        return "scheduler: " + ", ".join(said)
    if isinstance(ev, Uvicorn):
        return {"started": "HTTP server process started", "startup_complete": None,
                "running": f"HTTP listening on {ev.url}"}.get(ev.stage)
    if isinstance(ev, Ready):
        return "fired up and ready to roll"
    if isinstance(ev, StopRequested):
        return f"stopped from outside ({ev.by}): the deaths after this are the stop's"
    if isinstance(ev, ProcessesGone):
        return "every process of the server has ended (Python's resource tracker says so at its exit)"
    if isinstance(ev, UnitState):
        return f"systemd: {ev.line}" if ev.state in ("started", "exited", "stopping", "stopped", "result") else None
    if isinstance(ev, Failure):
        return f"failure ({ev.cause}): {ev.message}" if ev.role != "suspect" else None
    return None


class JsonLines:
    """Every record as one JSON object per line (schema.py)."""

    def __init__(self, out: TextIO, *, progress: bool = False):
        import json  # here, not at import: a replay's text needs none (~1.5 ms)

        self.out, self.with_progress = out, progress  # not `progress`: Publisher.progress() calls sinks' progress()
        # json.dumps with options builds an encoder per call: on a live follower's cold wakeup ~10 µs of each event
        self._encode = json.JSONEncoder(ensure_ascii=False, default=str).encode

    def publish(self, rec: ReadinessEvent) -> None:
        if rec.event in ON_REQUEST and not self.with_progress:
            return
        self.out.write(self._encode(rec.to_json()) + "\n")
        self.out.flush()


class Lines:
    """A human line per milestone, phase and failure, the verdict as a block. `with_unit`
    names the config on each line when one stream shows several (`svcdiag events`)."""

    def __init__(self, out: TextIO, *, with_unit: bool = False):
        self.out, self.with_unit = out, with_unit

    def text(self, rec: ReadinessEvent) -> str | None:
        who = f"{rec.config or rec.unit or '-'}  " if self.with_unit else ""
        if rec.event == "note":
            return f"{who}{rec.message}\n"
        if rec.event == "progress":
            return None  # a live line shows it; scrolling lines would drown the milestones
        if rec.event == "verdict":
            return render_verdict(rec.to_json())
        if rec.event in ("diagnosis", "baseline_result", "drift") and not self.with_unit:
            return None  # the verdict block shows the diagnosis; baseline-check prints its own summary
        return event_line(rec.event, rec.ts, rec.cause, rec.message, who)

    def publish(self, rec: ReadinessEvent) -> None:
        text = self.text(rec)
        if text:
            self.out.write(text)
            self.out.flush()


def render_verdict(v: dict[str, Any]) -> str:
    """A verdict record (schema.py's JSON form) as the block an operator reads."""
    head = HEADS.get(v["verdict"], v["verdict"].upper())
    cause = f" [{v['cause']}]" if v.get("cause") else ""
    who = f"{v['unit']}: " if v.get("unit") else ""
    figures = Figures.from_json(v.get("figures"), "the verdict record")
    took = f" after {figures.startup_s:.1f} s" if figures.startup_s is not None else ""
    degraded = v.get("degraded") or []
    head += " (DEGRADED)" if degraded else ""
    lines = [f"\n{who}{head}{cause} in phase {v.get('phase')}{took}: {v.get('message')}"]
    lines += [f"  degraded: {d['reason']}: {d['message']}" for d in degraded]
    doubt = figures.doubtful()
    figs = [f"{k}={_n(val)}" + ("?" if k in doubt else "") for k, val in figures.pick(KEY_FIGURES).items()
            if k != "startup_s"]
    if figs:
        lines.append("  figures: " + ", ".join(figs))
    if lost := figures.journal_dropped_lines:  # journald's "Suppressed N messages": the journal is not the whole story
        lines.append(f"  journald dropped {lost:,} of this start's lines (its rate limit): the figures and phases are "
                     "read from the lines it kept" + (", and those marked ? may be wrong" if doubt else ""))
        lines += [f"    {k}?: {why}" for k, why in doubt.items()]
    if v.get("phase_seconds"):
        lines.append("  phases:  " + ", ".join(f"{p} {s:.1f} s" for p, s in v["phase_seconds"].items()))
    if v.get("evidence"):
        lines.append("  evidence:")
        lines += [f"    {e[:400]}" for e in v["evidence"]]
    d = v.get("diagnosis")
    if d:
        lines.append("  diagnosis:")
        for sentence in d.get("explanation", []):
            lines.append(f"    {sentence}")
        lines += _fix_lines(d.get("fixes"))
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------- tables of the other commands


def render_diff(result: dict[str, Any]) -> str:
    import json
    a, b, rows = result["a"], result["b"], result["differences"]
    if not rows:
        return f"{a} and {b} have the same effective config\n"
    width = max(len(r["key"]) for r in rows) + 2
    out = [f"  {'key'.ljust(width)}{a}  →  {b}"]
    out += [f"{'*' if r['memory'] else ' '} {r['key'].ljust(width)}{json.dumps(r['a'])}  →  {json.dumps(r['b'])}"
            for r in rows]
    if any(r["memory"] for r in rows):
        out.append("(* changes GPU memory: KV cache, Mamba cache or CUDA graphs)")
    return "\n".join(out) + "\n"


def render_down(row: dict[str, Any]) -> str:
    where = f"{row['host']}:" if row.get("host") else ""
    return f"{where}{row['unit']}: {row['state_before']} → {row['state_after']} (stop job {row['job']})\n"


def render_baseline(result: dict[str, Any]) -> str:
    import json
    drift = result.get("drift") or []
    out = [result["summary"], f"  compared with: {result['compared_with'] or 'no earlier good snapshot'}",
           "  drift: " + ("none" if not drift else "")]
    out += [f"    - {d['message']}" for d in drift]
    out.append(f"  state: {result['state_before']} before, {result['state_after']} after; snapshot {result['snapshot']}")
    against = result.get("against")
    if against:
        out.append(f"  against {against['candidate']} ({against['source']}): "
                   f"{against.get('explanation') or against['verdict']}")
        for r in against["differences"]:
            mark = "*" if r["key"] in against["explaining_keys"] else " "
            out.append(f"    {mark} {r['key']}: {json.dumps(r['a'])} → {json.dumps(r['b'])}")
    return "\n".join(out) + "\n"


def log_record(rec: Any) -> dict[str, Any]:
    """A journal record of `svcdiag logs` as its JSON line."""
    return {"event": "log", "ts": rec.ts, "systemd": rec.systemd, "text": rec.text}


def render_log_record(row: dict[str, Any]) -> str:
    return ("systemd: " if row["systemd"] else "") + row["text"] + "\n"


def render_tune(result: dict[str, Any]) -> str:
    """`tune`: the outcome, every start as a row of the evidence table, the written config and its diff."""
    import json
    t = result["target"]
    head = {"met": "SERVED", "impossible": "IMPOSSIBLE", "budget": "BUDGET SPENT", "stuck": "STUCK",
            "interrupted": "INTERRUPTED"}.get(result["status"], result["status"].upper())
    out = [f"{result['config']}: tune {head}: {t['max_running']} × {t['context']:,} — {result['message']}",
           f"  {result['starts']} start(s) spent; a 0.01 grid of mem_fraction_static would take "
           f"{result['grid_starts']} (run {result['run_id']})"]
    prior = result.get("prior")
    if prior:
        slot = f", {prior['slot_gb']:.3f} GB per Mamba slot" if prior.get("slot_gb") else ""
        out.append(f"  prior: {prior['free_gb']:.2f} GB free, weights {prior['weights_gb']:.2f} GB, "
                   f"{prior['cell_bytes']:,.0f} KV bytes per token{slot}")
    need = t["max_running"] * t["context"]
    rows = [("#", "MEM_FRAC", "MAMBA", "MAX_RUN", "GRAPH_BS", "CHUNK", "DRAFT", "VERDICT", "KV TOKENS", "RUNNING",
             "TARGET", "WHY")]
    for i, tr in enumerate(result["trials"], 1):
        s, f = tr["settings"], Figures.from_json(tr["figures"], f"tune's start #{i}")
        verdict = tr["verdict"] + (f" ({tr['cause']})" if tr.get("cause") else "")
        running = "-" if f.max_running_requests is None else f"{f.max_running_requests}"
        met = (tr["verdict"] == "healthy" and (f.max_running_requests or 0) >= t["max_running"]
               and (f.kv_tokens or 0) >= need and (f.context_len or t["context"]) >= t["context"])
        rows.append((str(i), f"{s['mem_fraction_static']:.2f}", _n(s.get("max_mamba_cache_size") or "-"),
                     _n(s.get("max_running_requests") or "-"), _n(s.get("cuda_graph_max_bs") or "-"),
                     _n(s.get("chunked_prefill_size") or "-"), _n(s.get("speculative.num_draft_tokens") or "-"),
                     verdict, _n(f.kv_tokens if f.kv_tokens is not None else "-"), running,
                     "met" if met else "short" if tr["verdict"] == "healthy" else "-", tr["why"]))
    if len(rows) > 1:
        out.append("  " + table(rows).rstrip("\n").replace("\n", "\n  "))
    for fb in result.get("fallbacks") or []:
        out.append(f"  instead: svcdiag tune {result['config']} --target max_running={fb['max_running']} "
                   f"--target context={fb['context']}")
    if result.get("written"):
        what = "" if result["status"] == "met" else f"the best start so far, short of {t['max_running']} × {t['context']:,}; "
        out.append(f"  written: {result['written']} ({what}extends {result['config']}); start it with: "
                   f"svcdiag up {result['config']}-tuned --wait-ready")
        out += [f"    {r['key']}: {json.dumps(r['a'])} → {json.dumps(r['b'])}" for r in result.get("diff") or []]
    return "\n".join(out) + "\n"
