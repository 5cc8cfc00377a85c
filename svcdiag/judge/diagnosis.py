"""Why a start failed, and what to change, with the arithmetic shown.

Pure: a verdict's figures (what SGLang printed), its cause and sub-case (the grammar read them off the
log once, sglang/failures/ holds each one's words) and the effective config in, sentences and fixes
out; no text is matched here. The sentences are the registry's (each family's .toml): a function here chooses
among a row's named ones (`_said`) and fills in what the figures and the config say, and only the memory
arithmetic's narration is written here. The memory arithmetic is SGLang's own for the start's release family
(svcdiag.sglang.memory.predict, the logged start read back by svcdiag.sglang.memory_plan), the same model
every memory fix is re-checked with (preflight.recheck_fixes), so the explanation and the fixes agree:
    rest = free_after_weights − free_before_load × (1 − mem_fraction_static)
so raising mem_fraction_static by Δ gives the caches Δ × free_before_load more bytes.
"""

from __future__ import annotations

from typing import Any

from svcdiag.config.service import PHASE_TIMEOUTS, ServiceConfig
from svcdiag.judge.verdict import Verdict
from svcdiag.sglang import failures, memory_plan, stalls
from svcdiag.sglang.failures import Cause
from svcdiag.sglang.memory import ACTIVATION_HEADROOM_GB, GB, MAX_MEM_FRACTION, more_reserve
from svcdiag.sglang.message_catalogue import row_releases
from svcdiag.sglang.preflight import recheck_fixes

#: the failures of SGLang's own sizing, whose fixes its arithmetic can check
_SGLANG_SIZED = failures.in_family(failures.Family.NOT_ENOUGH_MEMORY)


def _n(v: float | int) -> str:
    return f"{int(v):,}"


def _gb(v: float) -> str:
    return f"{v:.2f} GB"


def _fix(changes: dict[str, Any], reason: str) -> dict[str, Any]:
    return {"set": changes, "reason": reason}


def diagnose(v: Verdict, cfg: ServiceConfig | None = None, *, port_owners: list[str] | None = None) -> dict[str, Any] | None:
    """The diagnosis object of a verdict that is not healthy, or healthy but degraded (None when simply healthy)."""
    if v.verdict == "healthy":
        return _degraded(v, cfg) if v.degraded else None
    cause = v.cause or v.verdict
    # the most particular first: the sub-case's function, the cause's, then the registry's words (sub-case, cause)
    fn = _BY_DETAIL.get((cause, v.detail)) or _BY_CAUSE.get(cause)
    if fn is not None:
        explanation, fixes = fn(v, cfg, port_owners or [])
    else:
        explanation, fixes = _template(v, cfg) or _generic(v, cfg, [])
    if cause in _SGLANG_SIZED:  # through SGLang's own arithmetic
        fixes = recheck_fixes(fixes, v.figures, cfg)
    return {"cause": cause, "detail": v.detail, "explanation": [*explanation, *_release_note(v)], "fixes": fixes}


def _release_note(v: Verdict) -> list[str]:
    """A note when the log's release cannot have printed the words its cause was read from (their row's range,
    from the message catalogues): the cause stands, but the release svcdiag believes is in question."""
    rng = row_releases(v.cause or "", v.detail)
    said = v.figures.sglang_version
    if rng is None or not said or not rng.excludes(said):
        return []
    return [f"Note: SGLang prints these words only in releases {rng.describe()} of its catalogues (not in "
            f"{rng.absent_before or rng.absent_after}), yet this log's release is {said} "
            f"({v.figures.sglang_version_source or 'as given'}): the words came from another release or another "
            "program than the one svcdiag believes ran."]


class _Words(dict[str, str]):
    """A template's words: an optional capture its pattern did not take reads as nothing."""

    def __missing__(self, key: str) -> str:
        return ""


def _template(v: Verdict, cfg: ServiceConfig | None, say: str = "", of: str = "",
              **more: str) -> tuple[list[str], list[dict[str, Any]]] | None:
    """The registry's explanation and fixes of the verdict's sub-case (or, lacking words of its own, its cause),
    over the failure's words and what its pattern captured (`say`: its sentences of that name, which a function
    here chose; `of`: another cause's, where two say the same); None when the registry has none."""
    cause = of or v.cause or v.verdict
    sub = failures.row(cause, "" if of else v.detail)
    row = sub if sub is not None and _sentences(sub, say) else failures.row(cause)
    sentences = _sentences(row, say) if row is not None else ()
    if row is None or not sentences:
        return None
    model = cfg.model_path if cfg else v.figures.model_path
    words = _Words({"message": v.message, "short": _short(v.message), "phase": v.phase, "name": cfg.name if cfg else "NAME",
                    "unit": v.unit or (cfg.unit if cfg else "UNIT"), "model": repr(model) if model else "the model",
                    "model_type": v.figures.model_type or "the target model", **v.captures, **more})
    if row.words is not None:
        words.update(row.words(words))
    return [line.format_map(words) for line in sentences], \
        [_fix({k: val.format_map(words) if isinstance(val, str) else val for k, val in change.items()}, why.format_map(words))
         for change, why in row.fixes]


def _sentences(row: failures.FailureClass, say: str) -> tuple[str, ...]:
    p = failures.prose(row.cause, row.detail)
    return p.say.get(say, ()) if say else p.explain


def _said(v: Verdict, cfg: ServiceConfig | None, say: str = "", of: str = "", **more: str) -> list[str]:
    """The registry's sentences for the verdict's row (those named `say`, where a function here chooses; `of`
    another cause's row), over its words and `more` (what only the verdict's figures or the config can say)."""
    found = _template(v, cfg, say, of, **more)
    assert found is not None, f"{v.cause}/{v.detail}: no sentences {say!r} in its family's .toml"
    return found[0]


# ---------------------------------------------------------------- memory: the seed's failure


def _max_running_zero(v: Verdict, cfg: ServiceConfig | None, _: list[str]) -> tuple[list[str], list[dict[str, Any]]]:
    f = v.figures
    logged = memory_plan.read(f, cfg)
    tokens = int(f.kv_tokens or 0)
    ctx = f.context_len or (cfg.context_length if cfg else None)
    asked = f.requested_max_running_requests or (cfg.max_running_requests if cfg else None)
    req = asked or 1
    slots = f.mamba_slots
    spr = memory_plan.slots_per_request(f, cfg)
    say: list[str] = []
    if tokens and ctx:
        fit = tokens // ctx
        say += _said(v, cfg, "none_fit" if fit == 0 else "some_fit", tokens=_n(tokens), ctx=_n(ctx), fit=str(fit))
    if slots is not None:
        by_mamba = slots // spr
        say += _said(v, cfg, "mamba_slots", slots=str(slots), spr=str(spr), by_mamba=str(by_mamba),
                     verb=_said(v, cfg, "serves_none" if by_mamba == 0 else "serves", by_mamba=str(by_mamba))[0],
                     asked_for=_said(v, cfg, "of_those_asked", req=str(req))[0] if asked else ".")
    if logged is None:
        return say, []
    say += _per_request(v, cfg, logged, ctx or 0)
    before, mfs = logged.inputs.free_before_gb, logged.inputs.mem_fraction_static
    say += _said(v, cfg, "sizing", mfs=str(mfs), before=_gb(before), step=_gb(before / 100), family=str(logged.now.family))
    fixes = _fraction_fixes(v, cfg, logged, req, say)
    fixes += _shorter_context(logged, req, ctx)
    if asked and slots is not None and 0 < slots // spr < asked:
        fixes.append(_fix({"max_running_requests": slots // spr}, "what the Mamba slots can serve"))
    return say, fixes


def _per_request(v: Verdict, cfg: ServiceConfig | None, logged: memory_plan.Logged, ctx: int) -> list[str]:
    """What one request costs: its KV per token (the draft's included) and its Mamba state."""
    f, cell = v.figures, logged.now.cell_bytes
    k, vv = f.kv_k_gb, f.kv_v_gb
    of = Cause.MAX_RUNNING_ZERO
    parts = _said(v, cfg, "k_and_v", of=of, k_gb=_gb(k), v_gb=_gb(vv))[0] if k is not None and vv is not None else _gb(f.kv_gb or 0)
    own = logged.inputs.kv_cell_bytes
    draft = _said(v, cfg, "draft_kv", of=of, kib=f"{(cell - own) / 1024:.1f}")[0] if cell > own else ""
    say = _said(v, cfg, "per_token", of=of, cell_kib=f"{cell / 1024:.1f}", parts=parts, tokens=_n(f.kv_tokens or 0),
                draft=draft, ctx=_n(ctx), need=_gb(ctx * cell / GB))
    spr = logged.now.slots_per_request
    if spr and logged.slot_gb:
        spec = _said(v, cfg, "draft_state", of=of, draft_tokens=str(logged.draft_tokens),
                     gb=_gb(logged.draft_tokens * logged.slot_gb))[0] if logged.draft_tokens else ""
        say += _said(v, cfg, "mamba_per_request", of=of, spr=str(spr), slot=_gb(logged.slot_gb),
                     total=_gb(spr * logged.slot_gb), spec=spec)
    return say


def _fraction_fixes(v: Verdict, cfg: ServiceConfig | None, logged: memory_plan.Logged, req: int,
                    say: list[str]) -> list[dict[str, Any]]:
    """The mem_fraction_static that holds `req` (then one) full-length requests, said in `say` either way."""
    of = Cause.MAX_RUNNING_ZERO
    fixes: list[dict[str, Any]] = []
    for requests in dict.fromkeys((req, 1)):
        p = memory_plan.plan(logged, requests)
        if p is None:
            say += _said(v, cfg, "never_fits", of=of, requests=str(requests))
            continue
        extra = _said(v, cfg, "more_kv", of=of, gb=_gb(p.extra_kv_gb))[0]
        if round(p.mamba_delta_gb, 2):
            extra += _said(v, cfg, "mamba_delta", of=of, gb=_gb(abs(p.mamba_delta_gb)),
                           more_or_less="more" if p.mamba_delta_gb > 0 else "less")[0]
            extra += _said(v, cfg, "mamba_delta_slots", of=of, slots=str(p.slots))[0] if p.slots is not None else ""
        if p.fits:
            graphs = logged.cuda_graph_gb
            say += _said(v, cfg, "fits", of=of, requests=str(requests), extra=extra, fraction=f"{p.fraction:.2f}",
                         left=_gb(p.left_gb), logged=_said(v, cfg, "graphs_logged", of=of, gb=_gb(graphs))[0] if graphs else "")
            change: dict[str, Any] = {"mem_fraction_static": p.fraction}
            if p.slots is not None and p.slots != logged.slots:
                change["max_mamba_cache_size"] = p.slots
            if requests != req:
                change["max_running_requests"] = requests
            if change == {"mem_fraction_static": logged.inputs.mem_fraction_static}:
                continue  # the model reads this start as serving them already: nothing to change
            fixes.append(_fix(change, f"holds {requests} request(s) of {_n(logged.inputs.context_len)} tokens"))
        else:
            why = _said(v, cfg, "more_than_free", of=of)[0] if p.fraction > MAX_MEM_FRACTION else \
                _said(v, cfg, "too_little_left", of=of, left=_gb(p.left_gb))[0]
            say += _said(v, cfg, "does_not_fit", of=of, requests=str(requests), extra=extra, fraction=f"{p.fraction:.2f}",
                         why=why)
    return fixes


def _shorter_context(logged: memory_plan.Logged, req: int, ctx: int | None) -> list[dict[str, Any]]:
    """The same memory, a shorter context_length: what the KV pool holds per request."""
    spr = logged.now.slots_per_request or 1
    serve = req if logged.slots is None else max(1, min(req, logged.slots // spr))
    for requests in dict.fromkeys((serve, 1)):
        found = memory_plan.shorter_context(logged, requests)
        if found is None or not ctx or found[0] >= ctx:
            continue
        limit, slots = found
        change: dict[str, Any] = {"context_length": limit}
        if slots is not None and slots != logged.slots:
            change = {"max_mamba_cache_size": slots, **change}
        if requests != req:
            change["max_running_requests"] = requests
        return [_fix(change, f"same memory: {requests} request(s) of ≤ {_n(limit)} tokens")]
    return []


def _not_enough_memory(v: Verdict, cfg: ServiceConfig | None, _: list[str]) -> tuple[list[str], list[dict[str, Any]]]:
    f = v.figures
    if v.detail == "swa_pool":
        return _said(v, cfg, "swa_pool", tokens=_n(int(v.captures["tokens"])), window=_n(int(v.captures["window"]))), []
    say = [v.message]
    fixes = []
    floor = v.captures.get("floor")
    rest = memory_plan.cache_budget(f, cfg)
    if rest is not None:
        before = f.avail_before_load_gb
        mfs = f.mem_fraction_static or (cfg.mem_fraction_static if cfg else None)
        say.append(f"mem_fraction_static={mfs} of the {_gb(before)} free before loading is "
                   f"{_gb(before * mfs)} for weights and caches; the weights alone take {_gb(f.weights_gb)}, "
                   f"leaving {_gb(rest)} for the caches.")
        need = next((s / 100 for s in range(1, 100) if (memory_plan.cache_budget(f, cfg, s / 100) or 0)
                     >= ACTIVATION_HEADROOM_GB), MAX_MEM_FRACTION)
        fixes.append(_fix({"mem_fraction_static": round(min(MAX_MEM_FRACTION, need + 0.02), 2)},
                          "room for the weights plus a usable KV cache"))
    elif floor:
        fixes.append(_fix({"mem_fraction_static": round(float(floor) + 0.02, 2)}, "above SGLang's stated floor"))
    if cfg:
        fixes.append(_fix({"tp_size": cfg.tp_size * 2}, "halves the weights on each GPU (give gpus twice as many)"))
    return say, fixes


#: whose memory ran out, by cuda_oom's sub-case (the device's own words); CUDA's otherwise
_DEVICES = {"npu": "The NPU", "xpu": "The XPU", "hip": "HIP"}


def _device(v: Verdict) -> str:
    return _DEVICES.get(v.detail, "CUDA")


def _cuda_oom(v: Verdict, cfg: ServiceConfig | None, _: list[str]) -> tuple[list[str], list[dict[str, Any]]]:
    f = v.figures
    mfs = f.mem_fraction_static or (cfg.mem_fraction_static if cfg else None)
    dev = _device(v)
    if v.phase == "cuda_graph":
        graphs = "CUDA" if dev in ("CUDA", "HIP") else dev[4:]
        say = _said(v, cfg, "graphs", dev=dev, graphs=graphs,
                    kv_tokens=_said(v, cfg, "kv_tokens", tokens=_n(f.kv_tokens))[0] if f.kv_tokens else "",
                    free_at_capture=_said(v, cfg, "free_at_capture", free=_gb(f.pool_end_avail_gb))[0]
                    if f.pool_end_avail_gb else ".")
        fixes = []
        bs = cfg.cuda_graph_max_bs if cfg else None
        if bs and bs > 1:
            fixes.append(_fix({"cuda_graph_max_bs": max(1, bs // 2)}, "fewer, smaller graphs to capture"))
        if mfs:
            fixes.append(_fix({"mem_fraction_static": more_reserve(mfs)}, "moves 5 % of the GPU from the KV cache to the reserve"))
        return say, fixes
    if v.phase == "loading_weights":
        tp = cfg.tp_size if cfg else f.tp_size
        free_each = _said(v, cfg, "free_each", free=_gb(f.avail_before_load_gb))[0] if f.avail_before_load_gb else ""
        say = _said(v, cfg, "weights", dev=dev, tp=str(tp or "?"), devices="GPU" if dev in ("CUDA", "HIP") else dev[4:],
                    free_each=free_each)
        return say, [_fix({"tp_size": (tp or 1) * 2}, "splits the weights over twice as many devices")]
    if v.phase == "scheduler" and f.draft_avail_before_load_gb is not None:
        return _draft_oom(v, cfg, mfs)
    if v.phase == "kv_cache":
        say = _said(v, cfg, "kv_cache", dev=dev, mamba=_said(v, cfg, "and_mamba")[0] if f.mamba_slots is not None else "",
                    mfs=f"={mfs}" if mfs else "")
        if "other_pid" in v.captures:
            say += _said(v, cfg, "other_process")
        return say, [_fix({"mem_fraction_static": more_reserve(mfs)}, "a smaller KV cache")] if mfs else []
    say = _said(v, cfg, "elsewhere", dev=dev)
    return say, [_fix({"mem_fraction_static": more_reserve(mfs)}, "more headroom outside the caches")] if mfs else []


def _draft_oom(v: Verdict, cfg: ServiceConfig | None, mfs: float | None) -> tuple[list[str], list[dict[str, Any]]]:
    """Speculative decoding's draft model is set up after the target's KV cache and CUDA graphs, in what
    they left: an OOM there is the draft's (its weights, KV pool or graphs), not the target's."""
    f = v.figures
    capture = any(e.startswith("File ") and ("graphs.py" in e or "cuda_graph" in e) for e in v.evidence)
    left = _said(v, cfg, "draft_left", free=_gb(f.draft_avail_before_load_gb))[0] \
        if f.draft_avail_before_load_gb is not None else "."
    say = _said(v, cfg, "draft", dev=_device(v), what=_said(v, cfg, "draft_graphs" if capture else "draft_setup")[0],
                left=left)
    fixes = []
    bs = cfg.cuda_graph_max_bs if cfg else None
    if capture and bs and bs > 1:
        fixes.append(_fix({"cuda_graph_max_bs": max(1, bs // 2)}, "fewer, smaller graphs for target and draft"))
    if mfs:
        fixes.append(_fix({"mem_fraction_static": more_reserve(mfs)}, "moves 5 % of the GPU from the target's KV "
                          "cache to the reserve the draft is set up in"))
    if not fixes:
        say += _said(v, cfg, "draft_advice")
    return say, fixes


def _killed(v: Verdict, cfg: ServiceConfig | None, _: list[str]) -> tuple[list[str], list[dict[str, Any]]]:
    sig = v.figures.signal or ""
    if sig == "KILL" and v.figures.killed == "supervisor":
        return _said(v, cfg, "supervisor"), []
    if sig == "KILL":
        certain = any("OOM killer" in e for e in v.evidence)
        return _said(v, cfg, "sigkill", how=_said(v, cfg, "oom_reported" if certain else "oom_suspected")[0]), []
    if sig == "BUS":
        return _said(v, cfg, "sigbus"), \
            [_fix({"env.NCCL_SHM_DISABLE": "1"}, "only if /dev/shm cannot be raised: NCCL then avoids it, a little slower")]
    if sig in ("SEGV", "ABRT", "ILL", "FPE"):
        return _said(v, cfg, "native", signal=sig), \
            [_fix({"env.CUDA_LAUNCH_BLOCKING": "1"}, "the crash then points at the kernel that faulted")]
    if not sig:  # ≤ 0.4.1: the launcher's EOFError is all that is left of a scheduler that died silently
        return _said(v, cfg, "unnamed"), []
    return _said(v, cfg, "other", signal=sig), []


#: systemd's own exit statuses (systemd.exec(5)): the process never became the server
SYSTEMD_STEPS = {
    200: ("CHDIR", "working_directory", "does not exist or is not accessible"),
    203: ("EXEC", "python", "cannot be executed (missing, or not executable)"),
    216: ("GROUP", "group", "does not exist on this host"),
    217: ("USER", "user", "does not exist on this host"),
}


def _exited(v: Verdict, cfg: ServiceConfig | None, _: list[str]) -> tuple[list[str], list[dict[str, Any]]]:
    status = v.figures.exit_status
    if status in SYSTEMD_STEPS:
        step, key, what = SYSTEMD_STEPS[status]
        value = getattr(cfg, key, None) if cfg else None
        return _said(v, cfg, "systemd_step", status=str(status), step=step, key=key, what=what,
                     value=f" ({value!r})" if value else ""), []
    return _said(v, cfg, "status", status=str(status)), []


def _port_in_use(v: Verdict, cfg: ServiceConfig | None, owners: list[str]) -> tuple[list[str], list[dict[str, Any]]]:
    """uvicorn's own port (the sub-cases, SGLang's other ports, are the registry's)."""
    port = cfg.port if cfg else v.figures.port
    say = _said(v, cfg, "http_port", port=str(port)) + _said(v, cfg, "owners" if owners else "no_owner", port=str(port),
                                                            owners=", ".join(owners))
    return say, [_fix({"port": (port or 30000) + 100}, "a port no running server uses")] if port else []


def _store_port_in_use(v: Verdict, cfg: ServiceConfig | None, _: list[str]) -> tuple[list[str], list[dict[str, Any]]]:
    """torch.distributed's TCP store, not the HTTP port: --nccl-port on one node, dist_init_addr's port on several."""
    port = v.captures.get("port") or v.captures.get("errno_port")
    whose, give = _said(v, cfg, "multi_node" if (v.figures.nnodes or 1) > 1 else "one_node")
    return _said(v, cfg, "store", port=port or "?", port_or=port or "PORT", whose=whose, give=give), []


def _model_not_found(v: Verdict, cfg: ServiceConfig | None, _: list[str]) -> tuple[list[str], list[dict[str, Any]]]:
    """The registry's words, unless the path SGLang could not open is not model_path but another flag's."""
    named = next((v.captures[k] for k in ("hub_id", "path_id", "repo_id", "file") if k in v.captures), None)
    model = cfg.model_path if cfg else v.figures.model_path
    if named and model and model.rstrip("/") not in named:  # the missing path is another flag's
        draft = (cfg.speculative.draft_model_path if cfg and cfg.speculative else None) \
            or v.figures.draft_model_path
        whose = _said(v, cfg, "draft" if draft and draft.rstrip("/") in named else "other_path")[0]
        return _said(v, cfg, "another_flag", named=named, model_path=model, whose=whose), []
    path = model or named
    found = _template(v, cfg, what=repr(path) if path else "the model", path=path or "MODEL_PATH")
    assert found is not None
    return found


def _bind_address(v: Verdict, cfg: ServiceConfig | None, _: list[str]) -> tuple[list[str], list[dict[str, Any]]]:
    return _said(v, cfg), [_fix({"host": "0.0.0.0"}, "every address of this host (127.0.0.1: this host alone)")] if cfg else []


def _quantization_blocks(v: Verdict, cfg: ServiceConfig | None, _: list[str]) -> tuple[list[str], list[dict[str, Any]]]:
    tp = cfg.tp_size if cfg else v.figures.tp_size
    return _said(v, cfg, over_gpus=f" over {tp} GPUs" if tp else ""), \
        [_fix({"tp_size": tp // 2}, "whole quantization blocks on each GPU")] if tp and tp > 1 else []


def _unrecognized(v: Verdict, cfg: ServiceConfig | None, _: list[str]) -> tuple[list[str], list[dict[str, Any]]]:
    flags = v.captures["args"].split()
    return _said(v, cfg, flag=next((f for f in flags if f.startswith("--")), flags[0] if flags else "?")), []


def _context_length(v: Verdict, cfg: ServiceConfig | None, _: list[str]) -> tuple[list[str], list[dict[str, Any]]]:
    asked, derived = int(v.captures["asked"]), int(v.captures["derived"])
    return _said(v, cfg, asked=f"{asked:,}", derived=f"{derived:,}"), \
        [_fix({"context_length": derived}, "the length the model was built for")]


def _not_an_eagle_draft(v: Verdict, cfg: ServiceConfig | None, _: list[str]) -> tuple[list[str], list[dict[str, Any]]]:
    kind = v.figures.draft_model_type
    return _said(v, cfg, draft=v.figures.draft_model_path or "none given: SGLang loaded the target itself",
                 draft_class=f", class {kind}" if kind else "", methods=v.message.split(": ", 1)[-1]), []


def _tp_split(v: Verdict, cfg: ServiceConfig | None, _: list[str]) -> tuple[list[str], list[dict[str, Any]]]:
    tp = cfg.tp_size if cfg else v.figures.tp_size
    return _said(v, cfg, tp=str(tp) if tp else "(the one given)"), \
        [_fix({"tp_size": max(1, tp // 2)}, "a divisor of the head count, as a rule")] if tp and tp > 1 else []


def _pd_warmup(v: Verdict, cfg: ServiceConfig | None, _: list[str]) -> tuple[list[str], list[dict[str, Any]]]:
    status = v.captures.get("status", "?")
    model = f"{v.figures.model_type} {v.figures.model_path}"
    multimodal = status in ("400", "422") and ("ForConditionalGeneration" in model or "VL" in model)
    return [*_said(v, cfg, "unhealthy", status=status), *_said(v, cfg, "multimodal" if multimodal else "other")], []


def _torch_compile_failed(v: Verdict, cfg: ServiceConfig | None, _: list[str]) -> tuple[list[str], list[dict[str, Any]]]:
    return _said(v, cfg, when=" while capturing CUDA graphs" if v.phase == "cuda_graph" else ""), []








def _invalid_ordinal(v: Verdict, cfg: ServiceConfig | None, _: list[str]) -> tuple[list[str], list[dict[str, Any]]]:
    tp = v.figures.tp_size or (cfg.tp_size if cfg else None)
    return _said(v, cfg, tp=f" {tp}" if tp else ""), \
        [_fix({"tp_size": tp // 2}, "half the ranks, if half the GPUs are what it sees")] if tp and tp > 1 else []




def _rendezvous(v: Verdict, cfg: ServiceConfig | None, _: list[str]) -> tuple[list[str], list[dict[str, Any]]]:
    node = v.figures.node_rank
    say = _said(v, cfg, "never_met")
    if v.detail == "clients_missing":
        say += _said(v, cfg, "clients_missing")
    elif node:
        say += _said(v, cfg, "node", node=str(node))
    return say + _said(v, cfg, "same_flags"), []


def _kv_transfer_failed(v: Verdict, cfg: ServiceConfig | None, _: list[str]) -> tuple[list[str], list[dict[str, Any]]]:
    say = _said(v, cfg, "engine")
    if v.detail in ("ascend", "nixl_plugin"):  # an NPU's engine, a plugin missing: the registry's words, no RDMA device
        return _template(v, cfg) or (say[:1], [])
    if v.detail == "init_timeout":  # a set-up that hung: the registry's words, then the sandbox's devices below
        say = (_template(v, cfg) or (say, []))[0]
    if v.detail == "nixl":
        say += _said(v, cfg, "nixl")
    fixes: list[dict[str, Any]] = []
    if cfg is None or (cfg.hardening == "strict" and "infiniband" not in cfg.devices):
        say += _said(v, cfg, "strict_unit")
        fixes.append(_fix({"devices": [*(cfg.devices if cfg else ()), "infiniband"]},
                          "the RDMA devices (/dev/infiniband) opened in the sandbox"))
    return say, fixes


def _nvshmem_failed(v: Verdict, cfg: ServiceConfig | None, _: list[str]) -> tuple[list[str], list[dict[str, Any]]]:
    say = _said(v, cfg, "not_connected") + _said(v, cfg, "ib_connect" if v.detail == "ib_connect" else "usual")
    fixes = [_fix({"env.NVSHMEM_DEBUG": "INFO"}, "NVSHMEM then says which transport and NIC failed")]
    if cfg is not None and cfg.hardening == "strict" and "infiniband" not in cfg.devices:
        say += _said(v, cfg, "strict_unit")
        fixes.append(_fix({"devices": [*cfg.devices, "infiniband"]}, "the RDMA devices (/dev/infiniband) in the sandbox"))
    return say, fixes




def _shape_mismatch(v: Verdict, cfg: ServiceConfig | None, _: list[str]) -> tuple[list[str], list[dict[str, Any]]]:
    draft = v.figures.draft_model_path
    if draft and v.figures.weights_gb is not None:  # the target had loaded: this is the draft's
        return _said(v, cfg, "draft", draft=draft), []
    return _said(v, cfg, "target"), []








def _short(msg: str, limit: int = 160) -> str:
    """A long loader message cut for a sentence (the evidence keeps it whole)."""
    return msg if len(msg) <= limit else msg[:limit] + "…"


def _bind_port(v: Verdict, cfg: ServiceConfig | None, _: list[str]) -> tuple[list[str], list[dict[str, Any]]]:
    return _said(v, cfg), [_fix({"port": 30000}, "an unprivileged port")] if int(v.captures["port"]) < 1024 else []


#: a path's parts below the folder a unit should be let write (the hub's cache layout, its locks)
_CACHE_PARTS = (".locks", ".cache", "blobs", "snapshots")


def _access_denied(v: Verdict, cfg: ServiceConfig | None, _: list[str]) -> tuple[list[str], list[dict[str, Any]]]:
    path = v.captures.get("path")
    say = _said(v, cfg, "refused", who=_said(v, cfg, "path" if path else "no_path")[0])
    if path:
        parts = (path.rstrip("/").rsplit("/", 1)[0] or path).split("/")
        cut = next((i for i, p in enumerate(parts) if i and (p in _CACHE_PARTS or p.startswith("models--"))), len(parts))
        folder = "/".join(parts[:cut]) or path
        return say, [_fix({"read_write_paths": [folder]}, "the folder it writes to, writable in the sandbox")]
    return say, []




def _mamba_small(v: Verdict, cfg: ServiceConfig | None, _: list[str]) -> tuple[list[str], list[dict[str, Any]]]:
    spr = memory_plan.slots_per_request(v.figures, cfg)
    req = v.figures.requested_max_running_requests or (cfg.max_running_requests if cfg else None) or 1
    return _said(v, cfg, slots=str(spr)), [_fix({"max_mamba_cache_size": req * spr}, f"{req} request(s) × {spr} slots")]


def _timed_out(v: Verdict, cfg: ServiceConfig | None, _: list[str]) -> tuple[list[str], list[dict[str, Any]]]:
    limit = cfg.timeout.get(v.phase) if cfg else None
    if (total := v.figures.systemd_timeout_s) is not None:
        return _said(v, cfg, "systemd_limit", total=f"{total:.0f}"), []
    extra = (v.figures.precompile_extra_s or {}).get(v.phase)
    f = v.figures
    # the time a phase gets beyond its deadline for what the log announced in it (readiness._allow)
    allowances = ((f.precompile_extra_s, "the kernel compile SGLang announced"),
                  (f.draft_extra_s, "the speculative draft's load and capture"),
                  (f.pool_extra_s, "pinning the hierarchical cache's host pool"))
    more = [f" + {s:.0f} s for {why}" for granted, why in allowances if (s := (granted or {}).get(v.phase))]
    allowed = _said(v, cfg, "deadline", limit=f"{limit:.0f}", allowances="".join(more))[0] if limit else ""
    stop = v.figures.stopped_after_s
    left = _said(v, cfg, "stopped_outside", stop=f"{stop:.0f}")[0] if stop is not None else \
        _said(v, cfg, "supervisor_stopped" if cfg is not None and cfg.readiness == "notify" else "left_running")[0]
    say = [*_said(v, cfg, "no_progress", stalled=f"{v.stalled_s or 0:.0f}", allowed=allowed, left=left),
           *(_said(v, cfg, "last_line", of=Cause.INCOMPLETE, last_line=v.last_line) if v.last_line else
             _said(v, cfg, "no_line")),
           *_said(v, cfg, "slow_or_stuck", main_unit=cfg.unit if cfg else "UNIT")]
    if _at_rendezvous(v):
        say[1:1] = _said(v, cfg, "at_rendezvous")
    elif (work := _last_work(v)) is not None:
        say[2:2] = _said(v, cfg, "working", of=Cause.INCOMPLETE, what=work[0], hang=work[1])
    fixes = [_fix({f"timeouts.{v.phase}": round((limit or 300) * 2)}, "if this phase is merely slow on this host")] \
        if v.phase in PHASE_TIMEOUTS else []
    if extra:
        said = " ".join(v.evidence)
        say[2:2] = _said(v, cfg, "deep_gemm" if "DeepGEMM" in said else "aiter" if "[aiter]" in said else "torch_compile")
        fixes = [_fix({"timeouts.jit_compile": round(extra * 2)}, "if the compile is merely slow on this host")]
    return say, fixes


def _degraded(v: Verdict, cfg: ServiceConfig | None) -> dict[str, Any]:
    """Healthy, but short of what was asked: say what, and the memory fix when there is one."""
    say = [f"The server is up, but degraded: {d['message']}." for d in v.degraded]
    fixes: list[dict[str, Any]] = []
    below = next((d for d in v.degraded if d["reason"] == "kv_below_context"), None)
    if below is not None:
        ctx = below["figures"]["context_length"]
        logged = memory_plan.read(v.figures, cfg)
        p = memory_plan.plan(logged, 1, ctx, running=logged.inputs.max_running_requests) if logged else None
        if p is not None and p.fits and p.fraction > logged.inputs.mem_fraction_static:  # else no change
            fixes.append(_fix({"mem_fraction_static": p.fraction}, f"holds one full {_n(ctx)}-token request"))
        limit = (below["figures"]["kv_tokens"] // 1024) * 1024
        if limit >= 1024:
            fixes.append(_fix({"context_length": limit}, f"what {_n(below['figures']['kv_tokens'])} KV tokens hold"))
    return {"cause": "degraded", "explanation": say, "fixes": recheck_fixes(fixes, v.figures, cfg)}


def _at_rendezvous(v: Verdict) -> bool:
    """A multi-node start whose last line is its ranks meeting at dist_init_addr: waiting for a node."""
    return v.phase == "starting" and (v.figures.nnodes or 1) > 1 and v.last_line is not None \
        and stalls.at_rendezvous(v.last_line)


def _last_work(v: Verdict) -> tuple[str, str] | None:
    """What the start was doing when its last line was printed, if that line says."""
    return stalls.last_work(v.last_line) if v.last_line else None


def _incomplete(v: Verdict, cfg: ServiceConfig | None, _: list[str]) -> tuple[list[str], list[dict[str, Any]]]:
    """Not a failure: the input ended while the start was still going."""
    say = _said(v, cfg, "no_verdict")
    if v.last_line:
        say += _said(v, cfg, "last_line", last_line=v.last_line)
    if _at_rendezvous(v):
        say += _said(v, cfg, "at_rendezvous")
    elif (work := _last_work(v)) is not None:
        say += _said(v, cfg, "working", what=work[0], hang=work[1])
    return say + _said(v, cfg, "saved_log"), []




def _died_after_ready(v: Verdict, cfg: ServiceConfig | None, _: list[str]) -> tuple[list[str], list[dict[str, Any]]]:
    say = _said(v, cfg, "died", Message=f"{v.message[:1].upper()}{v.message[1:]}")
    if v.figures.unit_result == "watchdog":
        say[1:1] = _said(v, cfg, "watchdog")
    return say, []




def _generic(v: Verdict, cfg: ServiceConfig | None, _: list[str]) -> tuple[list[str], list[dict[str, Any]]]:
    """What any failure without sentences of its own gets: exception's."""
    where = next((e for e in v.evidence if e.startswith("File ")), None)
    say = _said(v, cfg, "failed", of=Cause.EXCEPTION)
    return [*say, *_said(v, cfg, "raised_at", of=Cause.EXCEPTION, where=where)] if where else say, []


#: sub-cases whose explanation needs the config or arithmetic (the rest are the registry's templates)
_BY_DETAIL = {
    (Cause.PORT_IN_USE, ""): _port_in_use,
    (Cause.RENDEZVOUS_FAILED, ""): _rendezvous,
    (Cause.RENDEZVOUS_FAILED, "clients_missing"): _rendezvous,
    (Cause.BAD_ARGUMENTS, "bind_address"): _bind_address,
    (Cause.BAD_ARGUMENTS, "quantization_blocks"): _quantization_blocks,
    (Cause.BAD_ARGUMENTS, "unrecognized"): _unrecognized,
    (Cause.BAD_ARGUMENTS, "context_length"): _context_length,
    (Cause.BAD_ARGUMENTS, "not_an_eagle_draft"): _not_an_eagle_draft,
    (Cause.BAD_ARGUMENTS, "tp_split"): _tp_split,
    (Cause.PORT_IN_USE, "rendezvous_store"): _store_port_in_use,
    (Cause.WARMUP_FAILED, "pd_warmup"): _pd_warmup,
    (Cause.BAD_CHECKPOINT, "shape_mismatch"): _shape_mismatch,
    (Cause.ACCESS_DENIED, "bind_port"): _bind_port,
    (Cause.GPU_UNAVAILABLE, "invalid_ordinal"): _invalid_ordinal,
    # the pool ran out while serving, not at sizing: the registry's words, not the sizing arithmetic
    (Cause.MAMBA_CACHE_TOO_SMALL, "slots_exhausted"): lambda v, cfg, _: _template(v, cfg) or ([v.message], []),
    (Cause.PD_BOOTSTRAP_FAILED, "decode_fetch"): lambda v, cfg, _: _template(v, cfg) or ([v.message], []),
}

_BY_CAUSE = {
    Cause.MAX_RUNNING_ZERO: _max_running_zero,
    Cause.NOT_ENOUGH_MEMORY: _not_enough_memory,
    Cause.CUDA_OOM: _cuda_oom,
    Cause.TORCH_COMPILE_FAILED: _torch_compile_failed,
    Cause.KILLED_BY_SIGNAL: _killed,
    Cause.EXITED: _exited,
    Cause.MODEL_NOT_FOUND: _model_not_found,
    Cause.ACCESS_DENIED: _access_denied,
    Cause.KV_TRANSFER_FAILED: _kv_transfer_failed,
    Cause.NVSHMEM_FAILED: _nvshmem_failed,
    Cause.MAMBA_CACHE_TOO_SMALL: _mamba_small,
    Cause.TIMED_OUT: _timed_out,
    Cause.INCOMPLETE: _incomplete,
    Cause.DIED_AFTER_READY: _died_after_ready,
}
