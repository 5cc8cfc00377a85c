"""Why a start failed, and what to change, with the arithmetic shown.

Pure: a verdict's figures (what SGLang printed) and the effective config in, sentences and
fixes out. The memory arithmetic is SGLang's own (kv_cache_configurator; docs/sglang.md#the-budget):
    rest = free_after_weights − free_before_load × (1 − mem_fraction_static)
    Mamba state first (fixed by --max-mamba-cache-size), the KV cache gets the remainder;
    a request needs context_len tokens of KV and `slots per request` Mamba slots.
so raising mem_fraction_static by Δ gives the caches Δ × free_before_load more bytes.
"""

from __future__ import annotations

import math
import re
from typing import Any

from svcdiag.config.service import PHASE_TIMEOUTS, ServiceConfig
from svcdiag.judge.verdict import Verdict
from svcdiag.sglang.grammar import FLAG_CHECK_FRAME_RE
from svcdiag.sglang.memory import GB, MAX_MEM_FRACTION, Memory


def _n(v: float | int) -> str:
    return f"{int(v):,}"


def _gb(v: float) -> str:
    return f"{v:.2f} GB"


def _fix(changes: dict[str, Any], reason: str) -> dict[str, Any]:
    return {"set": changes, "reason": reason}


def memory(v: Verdict, cfg: ServiceConfig | None) -> Memory:
    """The verdict's figures in the memory model, the config filling what the log did not say."""
    return Memory.from_figures(v.figures, speculative=bool(cfg and cfg.speculative),
                               context_length=cfg.context_length if cfg else None,
                               mem_fraction_static=cfg.mem_fraction_static if cfg else None,
                               max_running_requests=cfg.max_running_requests if cfg else None)


def _said(v: Verdict) -> str:
    """Everything the failure said, its message and its evidence lines, to look for a cause's words in."""
    return f"{v.message} {' '.join(v.evidence)}"


def diagnose(v: Verdict, cfg: ServiceConfig | None = None, *, port_owners: list[str] | None = None) -> dict[str, Any] | None:
    """The diagnosis object of a verdict that is not healthy, or healthy but degraded (None when simply healthy)."""
    if v.verdict == "healthy":
        return _degraded(v, cfg) if v.degraded else None
    cause = v.cause or v.verdict
    fn = _BY_CAUSE.get(cause, _generic)
    explanation, fixes = fn(v, cfg, port_owners or [])
    return {"cause": cause, "explanation": explanation, "fixes": fixes}


# ---------------------------------------------------------------- memory: the seed's failure


def _max_running_zero(v: Verdict, cfg: ServiceConfig | None, _: list[str]) -> tuple[list[str], list[dict[str, Any]]]:
    m = memory(v, cfg)
    say: list[str] = []
    fixes: list[dict[str, Any]] = []
    ctx = m.context_len
    req = m.requested or 1
    if m.kv_tokens and ctx:
        fit = m.kv_tokens // ctx
        if fit == 0:
            say.append(f"The KV cache holds {_n(m.kv_tokens)} tokens, but one request needs context_len {_n(ctx)}, "
                       f"so not even one full-length request fits: max_running_requests came out zero.")
        else:
            say.append(f"The KV cache holds {_n(m.kv_tokens)} tokens: {fit} request(s) of context_len {_n(ctx)}.")
    if m.mamba_slots is not None:
        by_mamba = m.mamba_slots // m.slots_per_req
        verb = "so it can serve none" if by_mamba == 0 else f"so it can serve {by_mamba}"
        say.append(f"The Mamba state cache has {m.mamba_slots} slots and each request takes {m.slots_per_req} "
                   f"({m.mamba_slots} // {m.slots_per_req} = {by_mamba}): {verb}"
                   + (f" of the {req} max_running_requests asked for." if m.requested else "."))
    if m.cell_bytes:
        k, vv = v.figures.get("kv_k_gb"), v.figures.get("kv_v_gb")
        parts = f"K {_gb(k)} + V {_gb(vv)}" if k is not None and vv is not None else _gb(m.kv_gb())
        say.append(f"Each token costs about {m.cell_bytes / 1024:.1f} KiB of KV cache ({parts} over {_n(m.kv_tokens)} tokens); "
                   f"one {_n(ctx or 0)}-token request needs {_gb((ctx or 0) * m.cell_bytes / GB)}.")
    if m.free_before_gb and m.mem_fraction:
        say.append(f"SGLang sizes the caches from mem_fraction_static={m.mem_fraction} of the {_gb(m.free_before_gb)} "
                   f"free before loading: each +0.01 gives them {_gb(m.free_before_gb / 100)}.")
    for requests in dict.fromkeys((req, 1)):
        p = m.plan(requests)
        if p is None:
            continue
        extra = f"{_gb(p['extra_kv_gb'])} more KV"
        if p["extra_mamba_gb"]:
            extra += f" and {_gb(p['extra_mamba_gb'])} more Mamba state ({p['slots']} slots)"
        if p["fits"]:
            say.append(f"{requests} full-length request(s) need {extra}: mem_fraction_static {p['fraction']:.2f}, which "
                       f"still leaves {_gb(p['left_gb'])} for CUDA graphs"
                       + (f" ({_gb(m.cuda_graph_gb)} logged)" if m.cuda_graph_gb else "")
                       + ", activations and the draft model.")
            change: dict[str, Any] = {"mem_fraction_static": p["fraction"]}
            if p["slots"] is not None and p["slots"] != m.mamba_slots:
                change["max_mamba_cache_size"] = p["slots"]
            if requests != req:
                change["max_running_requests"] = requests
            fixes.append(_fix(change, f"holds {requests} request(s) of {_n(ctx or 0)} tokens"))
        else:
            why = ("more than this GPU had free" if p["fraction"] >= 1 else
                   f"which would leave only {_gb(p['left_gb'])} for CUDA graphs, activations and the draft model")
            say.append(f"{requests} full-length request(s) would need {extra}: mem_fraction_static {p['fraction']:.2f}, "
                       f"{why}; that does not fit.")
    if m.cell_bytes and ctx:
        for requests in dict.fromkeys((max(1, min(req, (m.mamba_slots or req * m.slots_per_req) // m.slots_per_req)), 1)):
            change = {}
            tokens = m.kv_tokens
            if m.mamba_slots is not None and m.mamba_slots < requests * m.slots_per_req:
                slots = requests * m.slots_per_req
                change["max_mamba_cache_size"] = slots
                tokens -= int((slots - m.mamba_slots) * (m.slot_gb or 0) * GB / m.cell_bytes)
            limit = (tokens // requests) // 1024 * 1024
            if limit >= 1024 and limit < ctx:
                change["context_length"] = limit
                if requests != req:
                    change["max_running_requests"] = requests
                fixes.append(_fix(change, f"same memory: {requests} request(s) of ≤ {_n(limit)} tokens"))
                break
    if m.requested and m.mamba_slots is not None and 0 < m.mamba_slots // m.slots_per_req < m.requested:
        fixes.append(_fix({"max_running_requests": m.mamba_slots // m.slots_per_req},
                          "what the Mamba slots can serve"))
    return say, fixes


def _not_enough_memory(v: Verdict, cfg: ServiceConfig | None, _: list[str]) -> tuple[list[str], list[dict[str, Any]]]:
    f = v.figures
    if (w := re.search(r"SWA pool \((\d+) tokens\).*?sliding_window_size \((\d+)\)", v.message)) is not None:
        return [f"The sliding-window layers' KV pool holds {_n(int(w.group(1)))} tokens, not even one window of "
                f"{_n(int(w.group(2)))} (plus a page): no request could ever be admitted, so SGLang refuses to start.",
                "The SWA pool is --swa-full-tokens-ratio of the full-attention pool: raise it (the default 0.8), or "
                "give the KV caches more memory (mem_fraction_static)."], []
    m = memory(v, cfg)
    say = [v.message]
    fixes = []
    floor = re.search(r"above (\d\.\d+)", " ".join(v.evidence))
    if m.free_before_gb and m.mem_fraction and f.get("weights_gb") is not None:
        budget = m.free_before_gb * m.mem_fraction
        say.append(f"mem_fraction_static={m.mem_fraction} of the {_gb(m.free_before_gb)} free before loading is "
                   f"{_gb(budget)} for weights and caches; the weights alone take {_gb(f['weights_gb'])}, "
                   f"leaving {_gb(budget - f['weights_gb'])}.")
        need = (f["weights_gb"] + 2.0) / m.free_before_gb
        fixes.append(_fix({"mem_fraction_static": round(min(MAX_MEM_FRACTION, math.ceil(need * 100) / 100 + 0.02), 2)},
                          "room for the weights plus a usable KV cache"))
    elif floor:
        fixes.append(_fix({"mem_fraction_static": round(float(floor.group(1)) + 0.02, 2)}, "above SGLang's stated floor"))
    if cfg:
        fixes.append(_fix({"tp_size": cfg.tp_size * 2}, "halves the weights on each GPU (give gpus twice as many)"))
    return say, fixes


def _device(v: Verdict) -> str:
    """Whose memory ran out, in its own words: CUDA's, or an Ascend NPU's, an Intel XPU's, ROCm's."""
    said = _said(v)
    return next((name for word, name in (("NPU out of memory", "The NPU"), ("XPU out of memory", "The XPU"),
                                         ("UR_RESULT_ERROR_OUT_OF_DEVICE_MEMORY", "The XPU"),
                                         ("HIP out of memory", "HIP"), ("HIP error: out of memory", "HIP"),
                                         ("hipErrorOutOfMemory", "HIP")) if word in said), "CUDA")


def _cuda_oom(v: Verdict, cfg: ServiceConfig | None, _: list[str]) -> tuple[list[str], list[dict[str, Any]]]:
    f = v.figures
    mfs = f.get("mem_fraction_static") or (cfg.mem_fraction_static if cfg else None)
    dev = _device(v)
    if v.phase == "cuda_graph":
        graphs = "CUDA" if dev in ("CUDA", "HIP") else dev[4:]
        say = [f"{dev} ran out of memory while capturing {graphs} graphs, after the KV cache"
               + (f" ({_n(f['kv_tokens'])} tokens)" if f.get("kv_tokens") else "") + " had taken its share.",
               f"{graphs} graphs and activations live in the 1 − mem_fraction_static reserve"
               + (f": {_gb(f['pool_end_avail_gb'])} were free when capture began." if f.get("pool_end_avail_gb") else ".")]
        fixes = []
        bs = cfg.cuda_graph_max_bs if cfg else None
        if bs and bs > 1:
            fixes.append(_fix({"cuda_graph_max_bs": max(1, bs // 2)}, "fewer, smaller graphs to capture"))
        if mfs:
            fixes.append(_fix({"mem_fraction_static": round(mfs - 0.05, 2)}, "moves 5 % of the GPU from the KV cache to the reserve"))
        return say, fixes
    if v.phase == "loading_weights":
        tp = cfg.tp_size if cfg else f.get("tp_size")
        say = [f"{dev} ran out of memory while loading the weights: the model does not fit on "
               f"{tp or '?'} {'GPU' if dev in ('CUDA', 'HIP') else dev[4:]}(s)"
               + (f" with {_gb(f['avail_before_load_gb'])} free each" if f.get("avail_before_load_gb") else "") + "."]
        return say, [_fix({"tp_size": (tp or 1) * 2}, "splits the weights over twice as many devices")]
    if v.phase == "scheduler" and "draft_avail_before_load_gb" in f:
        return _draft_oom(v, cfg, mfs)
    if v.phase == "kv_cache":
        say = [f"{dev} ran out of memory while allocating the KV cache" + (" and the Mamba state" if "mamba_slots" in f
                                                                         else "")
               + ": SGLang sized it from mem_fraction_static" + (f"={mfs}" if mfs else "")
               + " of the memory it measured before loading, and that much was no longer free (another process on "
               "the GPU, or a fraction that leaves nothing for the allocator's own overhead)."]
        if (other := re.search(r"Process (\d+) has ([\d.]+ GiB) memory in use", v.message)) is not None:
            say.append(f"Process {other.group(1)}, not this server, holds {other.group(2)} of that GPU (`nvidia-smi`).")
        return say, [_fix({"mem_fraction_static": round(mfs - 0.05, 2)}, "a smaller KV cache")] if mfs else []
    say = [f"{dev} ran out of memory in phase {v.phase}."]
    return say, [_fix({"mem_fraction_static": round(mfs - 0.05, 2)}, "more headroom outside the caches")] if mfs else []


def _draft_oom(v: Verdict, cfg: ServiceConfig | None, mfs: float | None) -> tuple[list[str], list[dict[str, Any]]]:
    """Speculative decoding's draft model is set up after the target's KV cache and CUDA graphs, in what
    they left: an OOM there is the draft's (its weights, KV pool or graphs), not the target's."""
    f = v.figures
    capture = any(e.startswith("File ") and ("graphs.py" in e or "cuda_graph" in e) for e in v.evidence)
    what = "capturing the draft model's CUDA graphs" if capture else "setting up the speculative draft model"
    say = [f"{_device(v)} ran out of memory while {what}, after the target model's KV cache and CUDA graphs: the draft "
           "(its weights, its KV pool, its graphs) gets only what they left"
           + (f", {_gb(f['draft_avail_before_load_gb'])} when it began loading." if f.get("draft_avail_before_load_gb")
              is not None else ".")]
    fixes = []
    bs = cfg.cuda_graph_max_bs if cfg else None
    if capture and bs and bs > 1:
        fixes.append(_fix({"cuda_graph_max_bs": max(1, bs // 2)}, "fewer, smaller graphs for target and draft"))
    if mfs:
        fixes.append(_fix({"mem_fraction_static": round(mfs - 0.05, 2)}, "moves 5 % of the GPU from the target's KV "
                          "cache to the reserve the draft is set up in"))
    if not fixes:
        say.append("Lower mem_fraction_static (the target's KV cache) or cuda_graph_max_bs, or fewer "
                   "speculative_num_draft_tokens / speculative_eagle_topk (smaller draft graphs).")
    return say, fixes


def _killed(v: Verdict, cfg: ServiceConfig | None, _: list[str]) -> tuple[list[str], list[dict[str, Any]]]:
    sig = v.figures.get("signal", "")
    unit = v.unit or (cfg.unit if cfg else "UNIT")
    if sig == "KILL" and v.figures.get("killed") == "supervisor":
        return [f"svcdiag supervise, the unit's main process, was killed by SIGKILL in phase {v.phase} (`kill -9`, "
                "`systemctl kill`), and SGLang, its child, stopped with it: the server itself did not fail.",
                f"Find who sent it (`journalctl -u {unit}`, your automation); `svcdiag up {cfg.name if cfg else 'NAME'} "
                "--wait-ready --restart` starts it again."], []
    if sig == "KILL":
        certain = any("OOM killer" in e for e in v.evidence)
        say = [f"The server was killed by SIGKILL in phase {v.phase}"
               + (": systemd reports the kernel's OOM killer." if certain else
                  ", without a word in its log: the signature of the kernel's OOM killer (host RAM, not GPU memory)."),
               "Look at `journalctl -k | grep -i -e 'out of memory' -e oom-kill` and the unit's MemoryMax=; "
               "safetensors are read through host memory, once per rank."]
        return say, []
    if sig == "BUS":
        return [f"The server died of SIGBUS in phase {v.phase}: a process touched shared memory that was not there. "
                "For SGLang that is nearly always /dev/shm too small: its ranks and NCCL put their buffers there, and "
                "a container's /dev/shm is 64 MB unless raised.",
                "`docker run --shm-size 16g` (or `--ipc=host`; compose `shm_size:`, Kubernetes an `emptyDir: {medium: "
                "Memory}` mounted at /dev/shm); on a host, `df -h /dev/shm`. A disk full under a memory-mapped "
                "checkpoint is the other cause (`df -h` where the model is)."], \
            [_fix({"env.NCCL_SHM_DISABLE": "1"}, "only if /dev/shm cannot be raised: NCCL then avoids it, a little slower")]
    if sig in ("SEGV", "ABRT", "ILL", "FPE"):
        say = [f"The server crashed with SIG{sig} in phase {v.phase}: a native fault (CUDA, NCCL or a kernel "
               "extension), not a Python exception, so its log says nothing about it.",
               f"Look at `coredumpctl info {unit}` for the stack, `journalctl -k` for GPU Xid errors, and re-run "
               "with CUDA_LAUNCH_BLOCKING=1 to find the failing kernel."]
        return say, [_fix({"env.CUDA_LAUNCH_BLOCKING": "1"}, "the crash then points at the kernel that faulted")]
    if not sig:  # ≤ 0.4.1: the launcher's EOFError is all that is left of a scheduler that died silently
        return [f"A scheduler process died in phase {v.phase} without a word of its own: a signal killed it, most "
                "often SIGKILL from the kernel's OOM killer (host RAM) while the weights load, once per rank.",
                "Look at `journalctl -k | grep -i -e 'out of memory' -e oom-kill`, and at the host's free memory "
                "against the checkpoint's size times the ranks that read it."], []
    return [f"The server was killed by SIG{sig} in phase {v.phase}; see `journalctl -u {unit}` for who sent it."], []


#: systemd's own exit statuses (systemd.exec(5)): the process never became the server
SYSTEMD_STEPS = {
    200: ("CHDIR", "working_directory", "does not exist or is not accessible"),
    203: ("EXEC", "python", "cannot be executed (missing, or not executable)"),
    216: ("GROUP", "group", "does not exist on this host"),
    217: ("USER", "user", "does not exist on this host"),
}


def _exited(v: Verdict, cfg: ServiceConfig | None, _: list[str]) -> tuple[list[str], list[dict[str, Any]]]:
    status = v.figures.get("exit_status")
    name = cfg.name if cfg else "NAME"
    if status in SYSTEMD_STEPS:
        step, key, what = SYSTEMD_STEPS[status]
        value = getattr(cfg, key, None) if cfg else None
        return [f"systemd could not start the process: exit status {status}/{step}, before SGLang ran at all.",
                f"The config's {key}" + (f" ({value!r})" if value else "") + f" {what}."], []
    return [f"The server exited with status {status} in phase {v.phase} without printing an exception.",
            f"Run its command in a shell to see what it says on the terminal: `svcdiag render {name}` shows the "
            "ExecStart line."], []


def _port_in_use(v: Verdict, cfg: ServiceConfig | None, owners: list[str]) -> tuple[list[str], list[dict[str, Any]]]:
    said = _said(v)
    if "PD bootstrap server" in v.message:
        return [f"{v.message[:1].upper()}{v.message[1:]}: the server went on and said ready, but no decode server can "
                "reach this prefill.",
                "Two prefill servers on one host share the bootstrap port unless told otherwise: give each its own "
                "--disaggregation-bootstrap-port (extra_args), or end what holds it (`ss -ltnp 'sport = :PORT'`)."], []
    if re.search(r"server socket has failed|EADDRINUSE|TCPStore|DistNetworkError", said):
        return _store_port_in_use(v, said)
    if (m := re.search(r"(\w+) at (\d+) is not available in (\d+) seconds", said)) is not None:
        holder = re.search(r"process\.cmdline\(\)=\[([^\]]*)\].*?pid=(\d+)", said)
        argv = " ".join(a.strip(" '\"") for a in holder.group(1).split(","))[:120] if holder else ""
        who = f" by pid {holder.group(2)} ({argv})" if holder else ""
        return [f"SGLang's {m.group(1)} ({m.group(2)}) stayed taken for {m.group(3)} s{who}: it derives its internal "
                "ports (tokenizer, detokenizer, NCCL, RPC, metrics) from dist_init_addr's port (or --port), and "
                "another process holds one of them.",
                "Most often a server of an earlier start still running (a killed launcher leaves its scheduler "
                "processes behind: `ss -ltnp 'sport = :PORT'`, `nvidia-smi`): end it; or give this server a "
                "dist_init_addr port (and --port) at least 100 away from any other server's."], []
    if "ZMQError" in said:
        addr = re.search(r"addr='([^']+)'", said)
        return [f"SGLang could not bind one of its own ZMQ sockets{' ' + addr.group(1) if addr else ''} (the pipes between "
                "its tokenizer, scheduler and detokenizer processes): another process holds that port.",
                "On a multi-node or DP start they are TCP ports just above dist_init_addr's (or --port's); most often a "
                "server still running from an earlier start (its scheduler processes outlive a killed launcher: "
                "`nvidia-smi` and `ss -ltnp` name them), or a second server on this host with a neighbouring port. "
                "End the leftovers, or give each server ports at least 100 apart."], []
    port = cfg.port if cfg else v.figures.get("port")
    say = [f"Everything loaded, then uvicorn could not bind port {port}: another process listens there."]
    if owners:
        say.append(f"Our unit(s) configured for port {port} and running: {', '.join(owners)}.")
    else:
        say.append(f"No other svcdiag unit is configured for it; `ss -ltnp 'sport = :{port}'` names the holder.")
    return say, [_fix({"port": (port or 30000) + 100}, "a port no running server uses")] if port else []


def _store_port_in_use(v: Verdict, said: str) -> tuple[list[str], list[dict[str, Any]]]:
    """torch.distributed's TCP store, not the HTTP port: --nccl-port on one node, dist_init_addr's port on several."""
    m = re.search(r"port: (\d+)|:(\d+) \(errno: 98", said)
    port = next((g for g in m.groups() if g), None) if m else None
    multi = (v.figures.get("nnodes") or 1) > 1
    whose = "dist_init_addr's port (the ranks' rendezvous on node 0)" if multi else "the NCCL port (--nccl-port)"
    say = [f"The ranks' rendezvous (torch.distributed's TCP store) could not listen on port {port or '?'}: it is in use. "
           f"That is {whose}, not the HTTP port: the start stopped before loading anything.",
           f"Another server on this host took it (two SGLang servers given the same --nccl-port, or a leftover of an "
           f"earlier start: `ss -ltnp 'sport = :{port or 'PORT'}'` names it). Give each server its own "
           + ("dist_init_addr port." if multi else "--nccl-port (extra_args), or leave it unset: SGLang then picks a free one.")]
    return say, []


def _model_not_found(v: Verdict, cfg: ServiceConfig | None, _: list[str]) -> tuple[list[str], list[dict[str, Any]]]:
    said = _said(v)
    named = re.search(r"huggingface\.co/(?:api/models/)?(?!docs/)([\w.-]+/[\w-]+(?:\.[\w-]+)*)|path_or_model_id: '([^']+)'"
                      r"|Repo id must [^:]*: '([^']+)'|No such file or directory: '([^']+)'", said)
    named_path = next((g for g in named.groups() if g), None) if named else None
    model = cfg.model_path if cfg else v.figures.get("model_path")
    path = model or named_path
    what = repr(path) if path else "the model"
    if named_path and model and model.rstrip("/") not in named_path:  # the missing path is another flag's
        draft = (cfg.speculative.draft_model_path if cfg and cfg.speculative else None) \
            or v.figures.get("draft_model_path")
        whose = "the speculative draft model (speculative_draft_model_path)" if draft and draft.rstrip("/") in \
            named_path else "a LoRA adapter (lora_paths), tokenizer_path or another path in the flags"
        return [f"SGLang cannot open {named_path!r}: not model_path ({model!r}) but {whose}; it is "
                "neither a folder on this host nor a repo id it can reach.",
                f"`ls {named_path}` on the GPU host: a LoRA adapter folder holds adapter_config.json and the adapter's "
                "weights; fix that path in the flags, or download the adapter there."], []
    if re.search(r"RepositoryNotFoundError|Repository Not Found", said):
        return [f"The model hub has no repo {what} (or hides it: a private repo answers the same, HTTP 401).",
                "Check the spelling against the hub page, or download it and point model_path at the folder."], []
    if re.search(r"LocalEntryNotFoundError|in the cached files|outgoing traffic has been disabled|OfflineModeIsEnabled",
                 said):
        return [f"SGLang looked for {what} in the Hugging Face cache only (HF_HUB_OFFLINE=1 or TRANSFORMERS_OFFLINE=1, "
                "or no network) and it is not there.",
                "Download it once where the hub is reachable (`huggingface-cli download`) into the HF_HOME the unit "
                "uses, or point model_path at a local folder; a sandboxed unit sees only the cache its paths allow."], []
    if re.search(r"Can't load (?:image processor|processor|feature extractor)", said):
        return [f"SGLang found the model but not its multimodal processor for {what}: {v.message}",
                "A fine-tuned VLM saved without preprocessor_config.json (and its chat_template/tokenizer files) "
                "cannot take images: copy those files from the base model's repo next to the weights."], []
    if (m := re.search(r"(\S+) does not appear to have a file named ([^.\s]+(?:\.\w+)?)", said)) is not None:
        return [f"{m.group(1)} is there but has no {m.group(2)}: an incomplete copy or download of the model.",
                f"Compare the folder with the model's repo (`ls {m.group(1)}`) and copy the missing files next to the "
                "weights, or download it again."], []
    if "Can't load tokenizer" in said:
        return [f"SGLang found the model but no tokenizer files for {what}: {v.message}",
                "Copy tokenizer.json/tokenizer_config.json next to the weights, or set tokenizer_path to where they "
                "are."], []
    if re.search(r"gated repo|401 Client Error|authenticated|GatedRepoError", said):
        return [f"The model hub refused {what}: it is a gated (or private) repo and this server has no token "
                "that may read it (HTTP 401).",
                "Accept the model's licence on its hub page with the account whose token the server uses, then give "
                "the unit that token as a secret (`[secrets] HF_TOKEN`, docs/security.md), or download the model "
                "and point model_path at the folder."], []
    return [f"SGLang cannot open model_path {what}: it is neither a folder on this host nor a repo id it can reach.",
            f"`ls {path or 'MODEL_PATH'}` on the GPU host; a model in /dev/shm is gone after a reboot."], []


def _hub_unreachable(v: Verdict, cfg: ServiceConfig | None, _: list[str]) -> tuple[list[str], list[dict[str, Any]]]:
    said = _said(v)
    path = cfg.model_path if cfg else v.figures.get("model_path")
    what = repr(path) if path else "the model"
    if re.search(r"429|Too Many Requests", said):
        say = [f"The Hugging Face hub refused to serve {what} for now: HTTP 429, too many requests. Anonymous "
               "requests share a small per-IP quota (every rank and every restart asks again).",
               "Give the unit a token (`[secrets] HF_TOKEN`: a logged-in quota is larger), or download the model "
               "once (`huggingface-cli download`) and start with HF_HUB_OFFLINE=1, which asks the hub nothing."]
    else:
        say = [f"The server could not reach the Hugging Face hub to fetch {what}: {v.message}",
               "Nothing is wrong with the model name: this host has no route to the hub (no network, a firewall, "
               "DNS, or a proxy it is not told about). Put HTTPS_PROXY/NO_PROXY in [env], or HF_ENDPOINT for a "
               "mirror; or download the model where the hub is reachable and point model_path at the folder."]
    return say, [_fix({"env.HF_HUB_OFFLINE": "1"}, "once the model is in the unit's HF cache: ask the hub nothing")]


def _bad_arguments(v: Verdict, cfg: ServiceConfig | None, _: list[str]) -> tuple[list[str], list[dict[str, Any]]]:
    said = _said(v)
    name = cfg.name if cfg else "NAME"
    if (m := re.search(r"attempting to bind on address \('([^']*)', (\d+)", v.message)) is not None:
        return [f"Everything loaded, then uvicorn could not bind {m.group(1)}:{m.group(2)}: {v.message}",
                "The address is --host's: one this host does not have (`ip -br addr`; a config copied from another "
                "node), or IPv6's `::` where IPv6 is off. 0.0.0.0 listens on every address."], \
            [_fix({"host": "0.0.0.0"}, "every address of this host (127.0.0.1: this host alone)")] if cfg else []
    if re.search(r"weight quantization block_[nk]|aligned with the quantized weight shape|min_thread_[nk]", said):
        tp = cfg.tp_size if cfg else v.figures.get("tp_size")
        say = [f"Tensor parallelism{f' over {tp} GPUs' if tp else ''} cuts a quantized weight across its "
               f"quantization blocks: {v.message}",
               "Each GPU's slice of every weight must be whole blocks (fp8 block 128, AWQ/GPTQ groups): use a smaller "
               "tp_size; for a MoE model, expert parallelism (--ep-size, extra_args) splits whole experts instead. A "
               "checkpoint converted to BF16 that still carries quantization_config in its config.json is read as "
               "quantized: delete that block."]
        return say, [_fix({"tp_size": tp // 2}, "whole quantization blocks on each GPU")] if tp and tp > 1 else []
    if (m := re.search(r"unrecognized arguments: (.+)", v.message)) is not None:
        flags = m.group(1).split()
        flag = next((f for f in flags if f.startswith("--")), flags[0] if flags else "?")
        return [f"This SGLang does not know {flag}: its argument parser refused the command line before loading "
                "anything (exit 2).",
                f"Flags change between releases; `svcdiag check {name}` names the replacement for the release the "
                "unit runs (set `sglang_version` in the config, or let svcdiag ask the unit's interpreter)."], []
    if (m := re.search(r"ambiguous option: (--[\w-]+)(?:=\S*)? could match (.+)", v.message)) is not None:
        return [f"This SGLang has no {m.group(1)} any more: argparse reads it as an abbreviation of "
                f"{m.group(2).strip()}, and refuses it (exit 2).",
                f"`svcdiag check {name}` renders the flag this release knows."], []
    if (m := re.search(r"argument (--[\w-]+)(?:/--[\w-]+)*: (.+)", v.message)) is not None:
        return [f"SGLang refused the value of {m.group(1)}: {m.group(2).strip()}.",
                f"`svcdiag render {name}` shows the ExecStart line as systemd runs it."], []
    if (m := re.search(r"context_length \((\d+)\) is greater than the derived context_length \((\d+)\)",
                       v.message)) is not None:
        asked, derived = int(m.group(1)), int(m.group(2))
        return [f"context_length {asked:,} is longer than the model's own {derived:,} (max_position_embeddings or its "
                "rope scaling), and SGLang refuses to stretch it unasked.",
                "Serve at most the model's length; or, if the model really takes longer inputs (YaRN rope scaling set "
                "with json_model_override_args), set SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN=1 in the unit's "
                "environment."], \
            [_fix({"context_length": derived}, "the length the model was built for")]
    if re.search(r"trust_remote_code|custom code which must be executed", said):
        return ["The model ships its own Python code (config or modelling files in the repo), and transformers runs it "
                "only when told to trust it.",
                "Read that code in the repo first; then set trust_remote_code (`--trust-remote-code`)."], \
            [_fix({"trust_remote_code": True}, "lets transformers run the model repo's own code")]
    if (m := re.search(r"model config \(([\w-]+)\) does not match the quantization method specified in the "
                       r"`quantization` argument \(([\w-]+)\)", said)) is not None:
        return [f"The checkpoint is quantized with {m.group(1)} (its config.json's quantization_config), but the "
                f"command line asks for {m.group(2)}.",
                "Leave quantization unset: SGLang reads the method from the checkpoint."], []
    if (m := re.search(r"Chat template (\S+) is not a built-in template name", said)) is not None:
        return [f"--chat-template {m.group(1)} names neither a template built into this release nor a file the "
                "server can read.",
                "Leave chat_template unset to use the model's own (tokenizer_config.json), or give the path of a "
                ".jinja file inside the unit's readable paths."], []
    if "host memory should be larger than the device memory" in said:
        return ["The hierarchical cache's host pool must be larger than the GPU's KV pool, and the flags make it "
                "smaller: --hicache-ratio at or below 1, or a --hicache-size under the KV pool's size.",
                "Use --hicache-ratio above 1 (the default is 2), or a --hicache-size (GB) larger than the KV pool the "
                "log's `KV Cache is allocated` line shows."], []
    if re.search(r"max_lora_dim|self\.scaling|--max-lora-rank|--lora-target-modules", said):
        return ["The LoRA adapters in lora_paths cannot be served together by this release: their ranks (r) or "
                "alphas differ (SGLang ≤ 0.4.3 takes one rank and scaling for all), or one exceeds --max-lora-rank "
                "or adapts modules outside --lora-target-modules.",
                "Read each adapter's adapter_config.json (r, lora_alpha, target_modules); serve adapters that agree, "
                "or raise --max-lora-rank / list the modules (a newer SGLang pads smaller ranks)."], []
    if re.search(r"object has no attribute '(?:set_embed|set_embed_and_head|hot_token_id)'", said):
        draft = v.figures.get("draft_model_path")
        return [f"The speculative draft model ({draft if draft else 'none given: SGLang loaded the target itself'}"
                f"{', class ' + str(v.figures['draft_model_type']) if v.figures.get('draft_model_type') else ''}) "
                "is not an EAGLE draft: it lacks the draft's methods ({}).".format(v.message.split(": ", 1)[-1]),
                "Set speculative_draft_model_path to a draft trained for this target (an EAGLE3 draft's class is "
                "…ForCausalLMEagle3); only a model with its own MTP layers (DeepSeek, Qwen3-Next) runs "
                "EAGLE/NEXTN without one."], []
    if any(FLAG_CHECK_FRAME_RE.search(e) for e in v.evidence):
        return [f"SGLang's own check of its flags refused this combination: {v.message}",
                f"Change the flags it names; `svcdiag render {name}` shows the ExecStart line as systemd runs it."], []
    if re.search(r"heads % tp_size|divisible", said):
        tp = cfg.tp_size if cfg else v.figures.get("tp_size")
        say = [f"tp_size {tp if tp else '(the one given)'} does not divide the model's attention heads, so the "
               "weights cannot be split evenly over the GPUs (SGLang asserts it while building the model).",
               "Use a tp_size that divides the number of attention (and KV) heads in config.json: 1, 2, 4 or 8 "
               "for most models."]
        return say, [_fix({"tp_size": max(1, tp // 2)}, "a divisor of the head count, as a rule")] if tp and tp > 1 else []
    return [f"SGLang refused its arguments: {v.message}"], []


def _warmup_failed(v: Verdict, cfg: ServiceConfig | None, _: list[str]) -> tuple[list[str], list[dict[str, Any]]]:
    said = _said(v)
    if "disaggregation mode warm Up Failed" in said:
        code = re.search(r"status code: (\d+)", said)
        status = code.group(1) if code else "?"
        say = [f"The PD server's own warmup request failed (HTTP {status}). SGLang prints 'ready' all the same, but "
               "marks itself unhealthy: /health answers 503, so a router never registers it or sends it a request."]
        vlm = re.search(r"ForConditionalGeneration|VL", f"{v.figures.get('model_type')} {v.figures.get('model_path')}")
        if status in ("400", "422") and vlm:
            say.append("A 400/422 on /v1/chat/completions is SGLang's own bug for a multimodal model in PD mode "
                       "(the warmup sends a /generate payload there: sgl-project/sglang#22871): a release with the "
                       "fix, or --skip-server-warmup, which marks the server up without the request.")
        else:
            say.append("The scheduler's lines just before the warmup say why (a KV transfer or bootstrap error, a "
                       "kernel failing on the first batch); restart it once that is fixed.")
        return say, []
    say = ["The server loaded and listened, then its own warmup request to itself failed, and SGLang shut down "
           "(`Initialization failed. warmup error`)."]
    fixes: list[dict[str, Any]] = []
    if (m := re.search(r"Response \[(\d{3})\]", said)) is not None and m.group(1) in ("502", "503", "403", "407"):
        say.append(f"It got HTTP {m.group(1)} from 127.0.0.1: that is a proxy answering, not SGLang. The unit's "
                   "environment sets http_proxy/https_proxy without no_proxy for the local address.")
        fixes.append(_fix({"env.no_proxy": "127.0.0.1,localhost", "env.NO_PROXY": "127.0.0.1,localhost"},
                          "the warmup then reaches the server directly"))
    else:
        say.append(f"It said: {v.message}")
    return say, fixes


def _unsupported_hardware(v: Verdict, cfg: ServiceConfig | None, _: list[str]) -> tuple[list[str], list[dict[str, Any]]]:
    if (soc := re.search(r"SocVersion = (\w+)|does not has any binary|Parse dynamic kernel config fail", _said(v))) \
            is not None:
        chip = f" (this one is {soc.group(1)})" if soc.group(1) else ""
        return [f"The Ascend CANN toolkit or its operator kernels were made for another NPU than this one{chip}: "
                f"{_short(v.message)}",
                "SGLang's Ascend images are per chip (`…-910b` for Atlas A2 / 910B, `…-a3` for A3 / 910C): use the one "
                "for this NPU (`npu-smi info` names it), or install the CANN toolkit and kernels package for its SoC "
                "and source its set_env.sh in the unit's environment."], []
    if re.search(r"invalid device function|InvalidDeviceFunction", _said(v)):
        return [f"A kernel has no build for this GPU's architecture: {v.message}",
                "The installed wheels (or docker image) were compiled for other GPUs: a ROCm image built for gfx942 "
                "(MI300) run on gfx908 (MI100), or CUDA kernels without this sm_. Use the image or wheels built for "
                "this GPU (`rocminfo | grep gfx`, `nvidia-smi --query-gpu=compute_cap --format=csv`), or rebuild the "
                "kernels for it (PYTORCH_ROCM_ARCH / TORCH_CUDA_ARCH_LIST)."], []
    if re.search(r"fp8e4nv not supported in this architecture", _said(v)):
        return ["A Triton kernel was asked for fp8 e4m3 (fp8e4nv), which GPUs before sm89 (Ada, Hopper) do not have: "
                "most often kv_cache_dtype fp8_e4m3 (or an fp8 checkpoint) with the triton attention backend on an "
                "A100 or older.",
                "Use kv_cache_dtype auto (or fp8_e5m2, which Triton has there), another attention backend, or a "
                "sm89+ GPU."], []
    return [f"This GPU cannot run what the config asks for: {v.message}",
            "Choose a quantization, attention backend or kernel this GPU's compute capability supports "
            "(`nvidia-smi --query-gpu=compute_cap --format=csv`), or run on a newer GPU."], []


def _torch_compile_failed(v: Verdict, cfg: ServiceConfig | None, _: list[str]) -> tuple[list[str], list[dict[str, Any]]]:
    when = " while capturing CUDA graphs" if v.phase == "cuda_graph" else ""
    return [f"torch.compile (--enable-torch-compile) could not compile the model{when}: {v.message}",
            "Start without --enable-torch-compile (SGLang serves the same model uncompiled, a little slower at small "
            "batches), or lower --torch-compile-max-bs; an inductor error is a torch/SGLang version mismatch or bug, "
            "so the torch release SGLang pins is the other way out."], []


def _ep_dispatch_timeout(v: Verdict, cfg: ServiceConfig | None, _: list[str]) -> tuple[list[str], list[dict[str, Any]]]:
    """DeepEP's dispatch waited for an expert-parallel rank that never came."""
    return [f"DeepEP's all-to-all timed out in phase {v.phase}: an expert-parallel rank never reached the dispatch "
            f"({v.message}).",
            "Look first for another rank's own error just before (it died, and this is the consequence). A rank that "
            "was only slow is most often compiling DeepGEMM kernels on a first start: `python3 -m "
            "sglang.compile_deep_gemm` with the server's flags beforehand, or SGL_ENABLE_JIT_DEEPGEMM=0; across nodes, "
            "the RDMA path between them (NVSHMEM/IB). `--deepep-mode auto` avoids the normal mode's timeout during "
            "capture."], []


def _pd_bootstrap_failed(v: Verdict, cfg: ServiceConfig | None, _: list[str]) -> tuple[list[str], list[dict[str, Any]]]:
    return [f"The PD prefill server could not register with its bootstrap server: {v.message}",
            "It says it is ready, but a decode server never finds it (every request then fails with `Could not fetch "
            "prefill parallel info`). The bootstrap server (--disaggregation-bootstrap-port, 8998 unless set) was not "
            "up yet or not reachable at that address: restart the prefill, give each prefill on a host its own "
            "bootstrap port, or upgrade to a release that retries the registration."], []


def _router_failed(v: Verdict, cfg: ServiceConfig | None, _: list[str]) -> tuple[list[str], list[dict[str, Any]]]:
    """sglang_router.launch_server gave up on its workers and killed them all: the service is down."""
    if (m := re.search(r"Timeout (\d+)s waiting for workers", v.message)) is not None:
        return [f"sglang_router waited {m.group(1)} s for its workers' /health and gave up, killing them all; the "
                f"workers had not failed, they were still starting (phase {v.phase}).",
                "Raise --router-worker-startup-timeout-secs above the workers' start-up time (torch.compile, a first "
                "kernel JIT and a large checkpoint take minutes), or start them faster. If the workers did print "
                "ready, the router could not reach them: an http_proxy in its environment without no_proxy for their "
                "addresses."], []
    return [f"sglang_router could not start, and killed its workers: {v.message}",
            "Its words name the router argument to change (the --router-* flags)."], []


def _unsupported_model(v: Verdict, cfg: ServiceConfig | None, _: list[str]) -> tuple[list[str], list[dict[str, Any]]]:
    said = _said(v)
    if "untagged enum" in said or re.search(r"Tokenizer class \w+ does not exist", said):
        return ["The installed tokenizers/transformers cannot read this model's tokenizer files: they were written by "
                "a newer release.",
                "Upgrade them in the unit's interpreter (`pip install -U tokenizers transformers`), within what the "
                "SGLang release pins."], []
    if (m := re.search(r"object has no attribute '(capture_aux_hidden_states|set_eagle3_layers_to_capture"
                       r"|get_embed_and_head)'", said)) is not None:
        kind = v.figures.get("model_type") or "the target model"
        return [f"This SGLang release's {kind} cannot be the target of this speculative algorithm: it lacks "
                f"{m.group(1)}, which the draft needs from its target.",
                "Upgrade SGLang to a release whose model class supports it (EAGLE3 needs the target to capture "
                "auxiliary hidden states), or serve without speculative decoding / with another algorithm."], []
    if (m := re.search(r"GGUF model with architecture (\w+) is not supported", said)) is not None:
        return [f"The installed transformers cannot read a GGUF file of architecture {m.group(1)!r}: its GGUF reader "
                "(which SGLang uses for the config and tokenizer) is older than the model.",
                "Upgrade transformers and gguf in the unit's interpreter, within what the SGLang release pins; or serve "
                "the model's safetensors release (with a --quantization of its own) instead of the .gguf."], []
    if (m := re.search(r"Unknown quantization method: ([\w-]+)", said)) is not None:
        return [f"The checkpoint's quantization method {m.group(1)!r} (quantization_config in config.json) is not one "
                "this SGLang release implements.",
                "Upgrade SGLang to a release that lists it, or serve a checkpoint quantized with a method this one "
                "lists (the error names them)."], []
    if "Transformers does not recognize" in said or "Unrecognized" in said or "model type" in said \
            or v.message.startswith("KeyError"):
        return ["The installed transformers does not know this model's `model_type`: the model is newer than the "
                "library.",
                "Upgrade transformers in the unit's interpreter (`pip install -U transformers`), or the SGLang "
                "release that ships the newer one."], []
    return [f"This SGLang release has no implementation of the model's architecture: {v.message}",
            "Upgrade SGLang to a release that lists the architecture, or check config.json's `architectures`."], []


#: the driver's and the device's own words (gpu_unavailable) → what they mean and the fix; {message}/{short}: the verdict's
DRIVER_TROUBLE: tuple[tuple[str, tuple[str, ...]], ...] = (
    (r"driver version is insufficient|driver on your system is too old|InsufficientDriver",
     ("The NVIDIA driver is older than the CUDA this PyTorch was built for, so CUDA cannot start at all.",
      "Upgrade the driver (`nvidia-smi` shows its CUDA version), or install the torch/SGLang build for the "
      "driver's CUDA (a cu121/cu124 wheel or image instead of cu128).")),
    (r"PTX was compiled with an unsupported toolchain|UnsupportedPtxVersion",
     ("CUDA started, but a kernel shipped as PTX was compiled by a newer CUDA toolkit than this NVIDIA driver "
      "can JIT: the driver is older than the CUDA the kernels (sgl_kernel, flashinfer, triton) were built with.",
      "Upgrade the driver to one whose CUDA version (`nvidia-smi`, top right) is at least the wheels' (a cu128 "
      "build needs a 570+ driver), or install the SGLang/torch build for the driver's CUDA.")),
    (r"Error 80[34]: |display driver / cuda driver combination|forward compatibility was attempted"
     r"|Driver/library version mismatch|NVML/RM version mismatch|LibRmVersionMismatch",
     ("CUDA refused to start: the driver library this process loaded (libcuda) and the NVIDIA kernel module "
      "are of different versions (Error 803/804; `nvidia-smi` says `Driver/library version mismatch`).",
      "Most often the driver was upgraded (unattended-upgrades) while the old module stayed loaded: reboot, "
      "or unload and reload the nvidia modules with every GPU process stopped "
      "(`cat /proc/driver/nvidia/version` shows the loaded one). In a container: its CUDA forward-compatibility "
      "libraries (/usr/local/cuda/compat on LD_LIBRARY_PATH) on a GPU or driver they do not support, or a "
      "libcuda copied into the image: use an image the host driver supports natively, run with the NVIDIA "
      "container runtime (it mounts the host's libcuda).")),
    (r"Error 802: |system not yet initialized",
     ("CUDA says the system is not yet initialized (Error 802): on an NVSwitch host (HGX/DGX A100, H100, "
      "H200) the GPUs cannot be used until nvidia-fabricmanager has set up the fabric.",
      "`systemctl status nvidia-fabricmanager`: start and enable it; its version must equal the driver's "
      "exactly (`nvidia-smi` vs `nv-fabricmanager --version`), an upgraded driver needs the matching "
      "fabric manager and a reboot.")),
    (r"c10_npu::SetDevice|Failed to start the device",
     ("The Ascend NPU would not open: {short}",
      "`npu-smi info` on the host says whether the NPU and its driver are healthy; the driver/firmware and "
      "the CANN toolkit must be versions that go together. In a container the NPU comes only with its "
      "devices (/dev/davinci*, /dev/davinci_manager, /dev/devmm_svm, /dev/hisi_hdc) and the driver folder "
      "(/usr/local/Ascend/driver) mounted; ASCEND_RT_VISIBLE_DEVICES picks among them.")),
    (r"CUDA unknown error|NVML: Unknown Error",
     ("The process lost (or never got) its GPUs: {message}",
      "In a container this is most often the host's `systemctl daemon-reload` (or a runtime update) "
      "revoking the container's device access under a cgroup driver: restart the container. On a host, after "
      "suspend/resume or without the nvidia_uvm module (`lsmod | grep nvidia_uvm`, `nvidia-modprobe -u`); "
      "a reboot settles it.")),
    (r"libcuda\.so|nvidia-smi not found",
     ("The NVIDIA driver's user-space files (libcuda, nvidia-smi) are not where this process looks: {message}",
      "In a container the driver's libraries come from the host only through the NVIDIA container runtime "
      "(`docker run --gpus all`, nvidia-container-toolkit; on Kubernetes a `nvidia.com/gpu` limit). On a "
      "host with libcuda.so.1 but no libcuda.so (Triton needs the latter), `ldconfig` or the driver's "
      "-dev package adds it; TRITON_LIBCUDA_PATH names its folder.")),
)


def _gpu_unavailable(v: Verdict, cfg: ServiceConfig | None, _: list[str]) -> tuple[list[str], list[dict[str, Any]]]:
    said = _said(v)
    unit = v.unit or (cfg.unit if cfg else "UNIT")
    if "invalid device ordinal" in said:
        tp = v.figures.get("tp_size") or (cfg.tp_size if cfg else None)
        return ["A rank asked for a GPU this process cannot see (CUDA: invalid device ordinal): tp_size"
                + (f" {tp}" if tp else "") + " × dp_size (+ base_gpu_id) is more GPUs than are visible to it.",
                "`nvidia-smi -L` lists the host's GPUs; CUDA_VISIBLE_DEVICES (the config's gpus) and the unit's "
                "DeviceAllow= narrow them. Give the unit as many GPUs as ranks, or lower tp_size."], \
            [_fix({"tp_size": tp // 2}, "half the ranks, if half the GPUs are what it sees")] if tp and tp > 1 else []
    if re.search(r"uncorrectable ECC error|fallen off the bus", said):
        return [f"A GPU failed in hardware: {v.message}",
                "`journalctl -k | grep -i xid` names the GPU and the Xid; it needs a reset (`nvidia-smi -r -i N`) or "
                "a reboot, and the start then runs without that GPU or after the repair."], []
    for pattern, say in DRIVER_TROUBLE:
        if re.search(pattern, said):
            return [line.format(message=v.message, short=_short(v.message)) for line in say], []
    return [f"The process saw no usable GPU in phase {v.phase}: {v.message}",
            "Under systemd that is the sandbox or the environment, not the hardware: PrivateDevices=yes or a "
            "DevicePolicy=/DeviceAllow= without /dev/nvidia*, a CUDA_VISIBLE_DEVICES naming GPUs that do not exist, or "
            "GPUs held in exclusive mode by another process. svcdiag's strict units allow the NVIDIA nodes (and "
            "`devices = [\"rocm\"]` the AMD ones); `hardening = \"off\"` tells a sandbox problem from a host one. "
            f"`systemctl show {unit} -p DeviceAllow -p PrivateDevices` shows what the unit gets.",
            "In a container: it was started without its GPUs (`docker run --gpus all`, or compose's `deploy.resources."
            "reservations.devices`; the NVIDIA container toolkit installed; on Kubernetes a `nvidia.com/gpu` limit), "
            "so torch.cuda.is_available() is False there however the host looks."], []


def _cuda_error(v: Verdict, cfg: ServiceConfig | None, _: list[str]) -> tuple[list[str], list[dict[str, Any]]]:
    if any("/custom_all_reduce" in e for e in v.evidence):
        return [f"SGLang's custom all-reduce failed in phase {v.phase}, registering its IPC buffers between the GPUs "
                f"(`invalid argument`): {v.message}",
                "Its memory-size advice does not apply. This is the GPUs' peer-to-peer IPC (a virtualised or "
                "partitioned host, MIG, --enable-memory-saver, a driver without P2P between these GPUs): start with "
                "--disable-custom-all-reduce (extra_args; NCCL then does the all-reduce), and check `nvidia-smi topo "
                "-m` for P2P between the ranks."], []
    say = [f"A CUDA kernel faulted in phase {v.phase} (not out of memory): {v.message}",
           "CUDA reports such faults late, so the traceback may point past the kernel that did it. A fault while "
           "capturing CUDA graphs or in a speculative draft is most often an attention backend or kernel bug for "
           "this model and GPU: try another attention_backend, or disable CUDA graphs to confirm."]
    return say, [_fix({"env.CUDA_LAUNCH_BLOCKING": "1"}, "the traceback then names the kernel that faulted")]


def _rendezvous(v: Verdict, cfg: ServiceConfig | None, _: list[str]) -> tuple[list[str], list[dict[str, Any]]]:
    said = _said(v)
    node = v.figures.get("node_rank")
    joined = re.search(r"(\d+)/(\d+) clients joined", said)
    if (iface := re.search(r"Unable to find address for: (\S+)", _said(v))) is not None:
        return [f"gloo (torch's CPU collectives) found no interface named {iface.group(1)} on this host, so it "
                "contacted nobody: GLOO_SOCKET_IFNAME (or NCCL_SOCKET_IFNAME, which SGLang copies) names an "
                "interface this node does not have (`ip -br link`).",
                "Set GLOO_SOCKET_IFNAME (and NCCL_SOCKET_IFNAME) per node to the interface that reaches the "
                "others; nodes often name it differently."], [_fix({"env.GLOO_SOCKET_IFNAME": "IFACE"},
                                                                   "an interface this node has")]
    say = [f"The ranks of a multi-node start never all met at dist_init_addr: {v.message}"]
    if joined:
        say.append(f"Only {joined.group(1)} of {joined.group(2)} ranks joined: the other node(s) were not started with "
                   "the same nnodes/dist_init_addr, or could not reach this one.")
    elif node:
        say.append(f"This is node {node}: it could not reach node 0's TCP store. Is node 0 running, and is its port "
                   "open from here (`nc -vz HOST PORT`; a firewall, a hostname that resolves differently)?")
    say.append("Start every node with the same nnodes and dist_init_addr, node 0 first or within the store's timeout.")
    return say, []


def _kv_transfer_failed(v: Verdict, cfg: ServiceConfig | None, _: list[str]) -> tuple[list[str], list[dict[str, Any]]]:
    name = cfg.name if cfg else "NAME"
    say = [f"The PD server's KV transfer engine could not start: {v.message}",
           "Most often it found no RDMA NIC it could open: --disaggregation-ib-device names one this host lacks "
           "(`ibv_devices` lists them), the NIC is down (`ibstat`), or the sandbox hides /dev/infiniband."]
    if re.search(r"NIXL_ERR_BACKEND|nixlBackendError", _said(v)):
        say.append("NIXL's UCX backend could not set up its transfers (UCX's own line above says on which device): "
                   "UCX_NET_DEVICES names the NICs it may use (`mlx5_0:1`), or run with "
                   "--disaggregation-transfer-backend mooncake.")
    fixes: list[dict[str, Any]] = []
    if cfg is None or (cfg.hardening == "strict" and "infiniband" not in cfg.devices):
        say.append(f"svcdiag's strict units open only the GPU nodes unless `devices` lists \"infiniband\" "
                   f"(then `svcdiag install {name}`).")
        fixes.append(_fix({"devices": [*(cfg.devices if cfg else ()), "infiniband"]},
                          "the RDMA devices (/dev/infiniband) opened in the sandbox"))
    return say, fixes


def _nvshmem_failed(v: Verdict, cfg: ServiceConfig | None, _: list[str]) -> tuple[list[str], list[dict[str, Any]]]:
    said = _said(v)
    say = [f"DeepEP's NVSHMEM (expert parallel's all-to-all over RDMA, --moe-a2a-backend deepep) could not connect "
           f"the ranks in phase {v.phase}: {v.message}"]
    if "ibv_modify_qp" in said or "ep_connect" in said:
        say.append("Its InfiniBand/RoCE queue pairs would not connect: on RoCE the GID index (NVSHMEM_IB_GID_INDEX), "
                   "the NIC each GPU uses (NVSHMEM_HCA_PE_MAPPING, NVSHMEM_HCA_LIST), a port down (`ibstat`).")
    else:
        say.append("Usual causes: no RDMA NIC it can open (`ibv_devices`), nvidia_peermem or GDRCopy not loaded, "
                   "the NIC each GPU uses (NVSHMEM_HCA_PE_MAPPING), or the sandbox hiding /dev/infiniband.")
    fixes = [_fix({"env.NVSHMEM_DEBUG": "INFO"}, "NVSHMEM then says which transport and NIC failed")]
    if cfg is not None and cfg.hardening == "strict" and "infiniband" not in cfg.devices:
        say.append("svcdiag's strict units open only the GPU nodes unless `devices` lists \"infiniband\".")
        fixes.append(_fix({"devices": [*cfg.devices, "infiniband"]}, "the RDMA devices (/dev/infiniband) in the sandbox"))
    return say, fixes


def _disk_full(v: Verdict, cfg: ServiceConfig | None, _: list[str]) -> tuple[list[str], list[dict[str, Any]]]:
    if re.search(r"/dev/shm|</torch_|shared memory\(shm\)", _said(v)):
        return [f"/dev/shm filled up in phase {v.phase}: {v.message}",
                "torch passes tensors between SGLang's processes through /dev/shm (and NCCL its buffers); a "
                "container's is 64 MB unless raised: `docker run --shm-size 16g` or `--ipc=host` (compose `shm_size:`, "
                "Kubernetes an `emptyDir: {medium: Memory}` at /dev/shm). On a host, `df -h /dev/shm` and what else "
                "fills it."], []
    caches = (("flashinfer", "FLASHINFER_WORKSPACE_BASE"), ("triton", "TRITON_CACHE_DIR"),
              ("deep_gemm", "DG_JIT_CACHE_DIR"), ("torchinductor", "TORCHINDUCTOR_CACHE_DIR"),
              ("torch_extensions", "TORCH_EXTENSIONS_DIR"), ("huggingface", "HF_HOME"))
    path = re.search(r"No space left on device: '([^']+)'", _said(v))
    if path and (env := next((e for word, e in caches if word in path.group(1)), None)):
        return [f"The disk under {path.group(1)!r} filled up in phase {v.phase}: {v.message}",
                f"`df -h {path.group(1).rsplit('/', 1)[0]}`; free space there, or move that cache to a larger disk "
                f"with {env} in [env] (a container's root filesystem is often a small overlay: mount a volume "
                "there)."], []
    return [f"A disk filled up in phase {v.phase}: {v.message}",
            "Downloads go to HF_HOME (default ~/.cache/huggingface) or download_dir, kernels compile to ~/.cache and "
            "/tmp; `df -h` on those, and remember a unit with PrivateTmp= or a container has its own /tmp. Free "
            "space, or point HF_HOME at a larger disk."], []


def _bad_checkpoint(v: Verdict, cfg: ServiceConfig | None, _: list[str]) -> tuple[list[str], list[dict[str, Any]]]:
    if "Attempted to load weight" in v.message:
        draft = v.figures.get("draft_model_path")
        if draft and v.figures.get("weights_gb") is not None:  # the target had loaded: this is the draft's
            return [f"The draft model {draft!r} does not fit the target: a tensor of its checkpoint has another shape "
                    f"than the draft layer built for this target ({v.message}).",
                    "An EAGLE/EAGLE3/MTP draft is trained for one target model (its hidden size and vocabulary): "
                    "use the draft published for this exact target, with the speculative_algorithm it was made for."], []
        return [f"A tensor of the checkpoint has another shape than the layer SGLang built for it: {v.message}",
                "config.json does not describe these weights (another model's config, a quantized checkpoint "
                "loaded without its quantization, or a tp_size the checkpoint was pre-split for)."], []
    if v.message.startswith("KeyError"):
        return [f"The checkpoint has a tensor the model class does not know: {v.message}",
                "The weights do not match the architecture SGLang builds from config.json: a quantized or merged "
                "checkpoint with another layout, a config.json from a different model, or a checkpoint newer than this "
                "SGLang release. Check `architectures` and `quantization_config` in config.json."], []
    return [f"A weights file is unreadable: {v.message}",
            "Most often a download that stopped half way (the file is shorter than its header says). Compare the "
            "file sizes with the hub's, delete the broken shard and download it again "
            "(`huggingface-cli download --force-download`)."], []


def _broken_install(v: Verdict, cfg: ServiceConfig | None, _: list[str]) -> tuple[list[str], list[dict[str, Any]]]:
    name = cfg.name if cfg else "NAME"
    if re.search(r"'ninja'|Ninja is required", v.message):
        return [f"A kernel is compiled at first use (FlashInfer, DeepGEMM, a torch extension) with ninja, and the unit's "
                f"PATH has no ninja: {v.message}",
                "Install it into the unit's interpreter (`pip install ninja`: the build calls the `ninja` next to that "
                "python only if its bin/ is on PATH), or put the venv's bin/ on PATH in [env]; prebuilt kernels "
                "(`pip install flashinfer-jit-cache`, SGLang's docker image) need no build at all."], []
    if re.search(r"Ninja build failed|Error building extension", v.message):
        return [f"A kernel compiled at first use (FlashInfer, DeepGEMM, a torch extension) failed to build: {v.message}",
                "The compiler's own line says why: most often a CUDA toolkit (nvcc) other than the one torch was "
                "built for, missing CUDA headers, or a half-built cache. Point CUDA_HOME in [env] at the matching "
                "toolkit, clear the cache it names (~/.cache/flashinfer, ~/.cache/torch_extensions), or install the "
                "prebuilt kernels (`pip install flashinfer-jit-cache`) / use SGLang's docker image."], []
    if "nvcc" in v.message:
        return [f"A kernel is compiled at first use (FlashInfer, DeepGEMM JIT) and the CUDA toolkit is missing: {v.message}",
                "Install the CUDA toolkit the torch build matches and set CUDA_HOME in [env], or use SGLang's docker "
                "image; a unit's PATH lacks /usr/local/cuda/bin unless [env] puts it there."], []
    if "Torch not compiled with CUDA enabled" in v.message:
        return ["The torch in the unit's interpreter is a CPU-only build (pip's default on some platforms, or a "
                "package that pulled `torch` in again without its CUDA index): it cannot use the GPU at all.",
                "Install the CUDA build SGLang's release pins (`pip install torch==X --index-url "
                "https://download.pytorch.org/whl/cu128`, or `pip install \"sglang[all]==X\"` into a fresh venv); "
                "`python -c 'import torch; print(torch.version.cuda)'` prints None for a CPU build."], []
    if re.search(r"C compiler|/usr/bin/(?:gcc|cc|g\+\+|c\+\+)'|Python\.h", _said(v)):
        return [f"Triton compiles a small C helper the first time a kernel runs, and could not: {v.message}",
                "It needs a C compiler and the Python headers on the unit's PATH (`apt install gcc python3-dev`, or "
                "CC= in [env]); a systemd unit's PATH is narrower than a login shell's."], []
    if (lib := _native_import(v.message, _said(v))) is not None:
        return lib
    return [f"The Python environment the unit runs cannot import what SGLang needs: {v.message}",
            "A missing package, or compiled kernels (sgl_kernel, flashinfer, vllm) built for another torch or CUDA "
            "than the installed one. Install the versions the SGLang release pins (`pip install \"sglang[all]==X\"` "
            f"in the unit's interpreter, shown by `svcdiag render {name}`), or use its docker image."], []


#: the compiled packages SGLang imports, named by the path of the .so that failed
_KERNEL_PACKAGES = ("sgl_kernel", "flashinfer", "vllm", "deep_gemm", "flash_attn", "xformers", "torchvision", "torchaudio",
                    "triton", "xgrammar", "torch")


def _native_import(msg: str, said: str) -> tuple[list[str], list[dict[str, Any]]] | None:
    """A compiled module that would not load, told by what the loader said: an older C++ runtime, a missing
    system or CUDA library, a symbol of another torch; or a grammar backend of another version. Each has its own fix."""
    pkg = next((p for p in _KERNEL_PACKAGES if re.search(rf"/{p}/|/{p}[.-]|\b{p}\b", msg)), None) \
        or next((p for p in _KERNEL_PACKAGES if re.search(rf"/{p}/", said)), None)  # the importing frame's path
    if (m := re.search(r"((?:GLIBCXX|CXXABI)_[\d.]+)' not found(?: \(required by (\S+?)\))?", msg)) is not None:
        stdcpp = re.search(r"(\S*libstdc\+\+\.so[.\d]*)", msg)
        return [f"{m.group(2) or 'A compiled module'} needs {m.group(1)}, and the C++ runtime this process loaded "
                f"({stdcpp.group(1) if stdcpp else 'libstdc++.so.6'}) is older than the compiler it was built with.",
                "Most often a conda env's own old libstdc++ shadowing the system's: `conda install -c conda-forge "
                "'libstdcxx-ng>=13'` in that env (or put the system's first: LD_PRELOAD=/usr/lib/x86_64-linux-gnu/"
                "libstdc++.so.6 in [env]); on an old distribution (Ubuntu 20.04, RHEL 8), SGLang's docker image or a "
                "newer OS."], []
    if (m := re.search(r"(lib(?:cudart|cublas(?:Lt)?|cudnn|nvrtc|cusparse|cufft|curand|nccl|nvJitLink)\.so\.(\d+))"
                       r"[^:]*: cannot open shared object file", msg)) is not None:
        return [f"{pkg or 'A compiled package'} was built for CUDA {m.group(2)} and this environment has no "
                f"{m.group(1)}: the installed torch (and its nvidia-* wheels) is built for another CUDA major than the "
                "kernels.",
                f"Install the build of each for one CUDA (`python -c 'import torch; print(torch.version.cuda)'`; the "
                f"SGLang release pins torch and sgl-kernel for it), or `pip install nvidia-cuda-runtime-cu{m.group(2)}`; "
                "SGLang's docker image has them matched."], []
    if (m := re.search(r"(lib[\w+-]+\.so[.\d]*): cannot open shared object file", msg)) is not None \
            and not m.group(1).startswith(("libc10", "libtorch", "libcuda")):
        name = m.group(1)
        apt = {"libnuma": "libnuma1", "libibverbs": "libibverbs1", "libgomp": "libgomp1", "libGL": "libgl1",
               "libgl": "libgl1", "libmlx5": "ibverbs-providers", "librdmacm": "librdmacm1"}
        pkg_name = next((a for k, a in apt.items() if name.startswith(k + ".")), None)
        return [f"{pkg or 'A compiled package'} links {name}, a system library this host (or image) lacks: "
                "reinstalling the Python package does not help.",
                f"Install it with the OS's package manager (`apt install {pkg_name or 'PACKAGE'}`"
                + (f", `dnf install {'numactl-libs' if pkg_name == 'libnuma1' else 'PACKAGE'}`" if pkg_name else "")
                + f"; `apt-file search {name}` names it), in the image too if the server runs in a container."], []
    if "undefined symbol: " in msg:
        torch_abi = re.search(r"undefined symbol: _ZNK?(?:3c10|2at|5torch)", msg) is not None  # c10::, at::, torch::
        what = "another torch than the installed one (the symbol is torch's C++ API)" if torch_abi else \
            "other versions of its dependencies than the installed ones"
        return [f"{pkg or 'A compiled package'}'s binary was built against {what}: {_short(msg)}",
                f"Install the {pkg or 'package'} build made for this torch (`pip show torch {pkg or ''}`; each SGLang "
                "release pins torch, sgl-kernel and flashinfer together: `pip install \"sglang[all]==X\"` puts all back), "
                "or SGLang's docker image; upgrading torch alone (`pip install -U torch`) is the usual way to get here."], []
    if (g := re.search(r"\b(xgrammar|outlines|llguidance)\b", msg)) is not None:
        return [f"The grammar backend {g.group(1)} (structured output, --grammar-backend) is missing or not the "
                f"version this SGLang was written for: {msg}",
                f"Install the {g.group(1)} version the SGLang release pins (`pip install \"sglang[all]==X\"`), or start "
                "with another --grammar-backend (none, if no request asks for structured output)."], []
    return None


def _short(msg: str, limit: int = 160) -> str:
    """A long loader message cut for a sentence (the evidence keeps it whole)."""
    return msg if len(msg) <= limit else msg[:limit] + "…"


def _access_denied(v: Verdict, cfg: ServiceConfig | None, _: list[str]) -> tuple[list[str], list[dict[str, Any]]]:
    name = cfg.name if cfg else "NAME"
    if (m := re.search(r"bind on address \('[^']*', (\d+)\)", v.message)) is not None:
        port = int(m.group(1))
        return [f"uvicorn may not bind port {port}: below 1024 that takes CAP_NET_BIND_SERVICE, which the unit does not "
                "have (svcdiag's strict sandbox keeps no capability, even as root).",
                "Serve on a port above 1024 and put a proxy in front if clients need the low one."], \
            [_fix({"port": 30000}, "an unprivileged port")] if port < 1024 else []
    m = re.search(r"\[Errno (?:13|30)\][^']*'(/[^']+)'", v.message)
    path = m.group(1) if m else None
    say = [(f"The server may not write {path!r}" if path else "The server was refused a file") + ": the unit's "
           "sandbox keeps the file system read-only outside its writable paths (ProtectSystem=strict, "
           "ProtectHome=read-only), or its user lacks the permission.",
           f"svcdiag's strict units may write ~/.cache, ~/.triton, /dev/shm, working_directory and the cache "
           f"folders [env] names (docs/security.md#the-hardened-unit); a --download-dir or any other folder goes in "
           f"`read_write_paths` (then `svcdiag install {name}`). Check the owner too: `ls -ld` the folder as the unit's User=.",
           "In a container: a read-only root (`--read-only`, Kubernetes readOnlyRootFilesystem) or a volume mounted "
           ":ro; mount the HF cache writable (`-v ~/.cache/huggingface:/root/.cache/huggingface`) or set HF_HOME to a "
           "writable volume."]
    if path:
        folder = path.rstrip("/").rsplit("/", 1)[0] or path
        folder = re.sub(r"/(?:\.locks|\.cache|models--[^/]+|blobs|snapshots)(?:/.*)?$", "", folder) or folder
        return say, [_fix({"read_write_paths": [folder]}, "the folder it writes to, writable in the sandbox")]
    return say, []


def _host_oom(v: Verdict, cfg: ServiceConfig | None, _: list[str]) -> tuple[list[str], list[dict[str, Any]]]:
    unit = v.unit or (cfg.unit if cfg else "UNIT")
    if (m := re.search(r"Requesting ([\d.]+) GB but only have ([\d.]+) GB free", v.message)) is not None \
            or "HiCache host memory" in v.message:
        asked = f" ({m.group(1)} GB asked, {m.group(2)} GB free)" if m else ""
        return [f"The hierarchical cache's host pool (--enable-hierarchical-cache) is larger than the RAM this rank "
                f"may take{asked}: SGLang sizes it as --hicache-ratio × the GPU's KV pool (default 2), or "
                "--hicache-size GB, for every rank on the host, and keeps some RAM back for everything else.",
                "Set --hicache-size to what the host (or the container's memory limit) holds divided by the ranks on "
                "it, or lower --hicache-ratio (it must stay above 1); a smaller KV pool (mem_fraction_static) shrinks "
                "the host pool with it."], []
    return [f"The host ran out of memory (RAM, not GPU memory) in phase {v.phase}: {v.message}",
            "safetensors are read through host memory once per rank; `journalctl -k | grep -i -e oom -e 'out of "
            f"memory'` shows the kernel's account, and `systemctl show -p MemoryMax {unit}` the unit's limit."], []


#: NCCL's WARN line (the nccl_error's message ends with it) → what it means, and the fix: (pattern, say, env fix)
NCCL_WARNS = (
    (r"socketPollConnect: Connect to ([\d.]+)\S* returned 113|No route to host",
     "this node has no route to the other node's address {0}: NCCL chose an interface that does not reach it, or a "
     "firewall drops its ports", {"env.NCCL_SOCKET_IFNAME": "IFACE"}),
    (r"socketStartConnect: Connect to ([\d.]+)\S* failed|Connection (?:reset|abort|refused)|Software caused connection abort",
     "the connection to {0} broke: the other node's process most often died first (read that node's log for its own "
     "error), or the link between the nodes dropped", None),
    (r"ibv_modify_qp failed|local GID",
     "the RDMA queue pair would not connect: on RoCE the GID index NCCL picked is not the one the fabric routes (most "
     "often 3 for RoCE v2)", {"env.NCCL_IB_GID_INDEX": "3"}),
    (r"NET/IB : Got completion from peer ([\d.]+)\S* with status=\d+",
     "an RDMA transfer to {0} failed on the fabric (a link, a switch, a NIC's firmware): `ibstat`, `ibv_devinfo` and the "
     "NICs' error counters on both nodes", None),
    (r"no socket interface found|Bootstrap : no socket interface",
     "NCCL found no network interface to use: NCCL_SOCKET_IFNAME names one this host does not have (`ip -br link`)",
     {"env.NCCL_SOCKET_IFNAME": "IFACE"}),
)


def _nccl(v: Verdict, cfg: ServiceConfig | None, _: list[str]) -> tuple[list[str], list[dict[str, Any]]]:
    warn = re.search(r"\(NCCL WARN (.+)\)$", v.message)
    for pattern, meaning, env in NCCL_WARNS if warn else ():
        if (m := re.search(pattern, warn.group(1))) is not None:
            say = [f"NCCL failed in phase {v.phase}: {meaning.format(m.group(1) if m.groups() else '')}.",
                   f"NCCL's own words: {warn.group(1)}"]
            return say, [_fix(env, "the interface (or GID) that reaches the other nodes: set it")] if env else []
    if re.search(r"shared memory segment|/dev/shm", _said(v)):
        return [f"NCCL could not create its shared-memory segments in /dev/shm: {v.message}",
                "In a container /dev/shm is 64 MB unless raised (`docker run --shm-size 16g` or `--ipc=host`); on a "
                "host, `df -h /dev/shm`. NCCL_SHM_DISABLE=1 works around it at some speed."], \
            [_fix({"env.NCCL_SHM_DISABLE": "1"}, "NCCL then uses sockets/P2P instead of /dev/shm")]
    return [f"NCCL failed in phase {v.phase}: {v.message}",
            "Usual causes: a GPU in the list that another job uses, P2P/IB trouble, or a mismatch of tp_size and GPUs."], \
        [_fix({"env.NCCL_DEBUG": "INFO"}, "NCCL then says which rank and transport failed")]


def _mamba_small(v: Verdict, cfg: ServiceConfig | None, _: list[str]) -> tuple[list[str], list[dict[str, Any]]]:
    m = memory(v, cfg)
    req = m.requested or 1
    return [v.message, f"Each request takes {m.slots_per_req} Mamba state slots."], \
        [_fix({"max_mamba_cache_size": req * m.slots_per_req}, f"{req} request(s) × {m.slots_per_req} slots")]


def _watchdog_timeout(v: Verdict, cfg: ServiceConfig | None, _: list[str]) -> tuple[list[str], list[dict[str, Any]]]:
    m = re.search(r"watchdog_timeout=(\d+(?:\.\d+)?)", _said(v))
    secs = f"{float(m.group(1)):g} s" if m else "watchdog_timeout seconds"
    return [f"SGLang's own watchdog saw no progress on a batch for {secs} in phase {v.phase}, dumped the stacks "
            "and killed the server: the `Received sigquit` after it is the consequence, the hang the cause.",
            "A first batch that compiles kernels (FlashInfer or DeepGEMM JIT, torch.compile) can take that long once: "
            "warm their caches, or give SGLang `--watchdog-timeout` (extra_args) above it. A batch that never ends is "
            "a hang: ranks waiting on each other in a collective (NCCL, DP attention, expert parallel) or a kernel "
            "that does not return; the py-spy dump printed above the line shows where each rank waits."], []


#: the time a phase gets beyond its deadline for what the log announced in it (readiness._allow): figure, why
ALLOWANCES = (("precompile_extra_s", "the kernel compile SGLang announced"),
              ("draft_extra_s", "the speculative draft's load and capture"),
              ("pool_extra_s", "pinning the hierarchical cache's host pool"))


def _timed_out(v: Verdict, cfg: ServiceConfig | None, _: list[str]) -> tuple[list[str], list[dict[str, Any]]]:
    limit = cfg.timeout.get(v.phase) if cfg else None
    name = cfg.name if cfg else "NAME"
    if (total := v.figures.get("systemd_timeout_s")) is not None:
        unit = v.unit or (cfg.unit if cfg else "UNIT")
        return [f"systemd stopped the start after {total:.0f} s, in phase {v.phase}, before svcdiag's deadline for "
                f"it: the unit's TimeoutStartSec= (`systemctl show -p TimeoutStartUSec {unit}`) ran out; SGLang "
                "itself reported no error.",
                "A daemon-reload during a start (any `systemctl daemon-reload`, or an install that makes one) "
                "re-arms that limit from the start's beginning and forgets every EXTEND_TIMEOUT_USEC: a unit whose "
                "limit is shorter than the start is killed at once. Units svcdiag renders now set it to the whole "
                f"start's deadlines; re-render this one (`svcdiag install {name}`) while none of its starts runs, or "
                f"raise TimeoutStartSec= in {unit} by hand. `svcdiag history {name} --advise` says what the "
                "recorded starts need."], []
    extra = (v.figures.get("precompile_extra_s") or {}).get(v.phase)
    more = [f" + {s:.0f} s for {why}" for figure, why in ALLOWANCES
            if (s := (v.figures.get(figure) or {}).get(v.phase))]
    allowed = f" (its deadline is {limit:.0f} s{''.join(more)})" if limit else ""
    left = "svcdiag supervise stopped the server (the unit ends failed, exit status 3)" \
        if cfg is not None and cfg.readiness == "notify" else "the service is left running"
    say = [f"No progress in phase {v.phase} for {v.stalled_s or 0:.0f} s" + allowed + f"; {left}.",
           f"Last line seen: {v.last_line!r}." if v.last_line else "No line at all since the phase began.",
           f"If that line still changes, the start is slow, not stuck: `svcdiag wait {name}` waits longer. If it "
           "does not, look inside: `py-spy dump --pid $(systemctl show -p MainPID --value "
           f"{cfg.unit if cfg else 'UNIT'})`."]
    if _at_rendezvous(v):
        say.insert(1, "The ranks are waiting for each other at dist_init_addr: a node of this multi-node start has not "
                      "joined (not started, another nnodes or dist_init_addr, or a firewall between the nodes).")
    elif (work := _last_work(v)) is not None:
        say.insert(2, f"So {work[1]}: {work[2]}.")
    fixes = [_fix({f"timeouts.{v.phase}": round((limit or 300) * 2)}, "if this phase is merely slow on this host")] \
        if v.phase in PHASE_TIMEOUTS else []
    if extra:
        said = " ".join(v.evidence)
        say.insert(2, "SGLang said it was entering DeepGEMM's JIT pre-compile (10-20 min the first time on a host): "
                      "`python3 -m sglang.compile_deep_gemm` with the server's own flags fills the cache beforehand, and "
                      "the next start reads it." if "DeepGEMM" in said else
                      "ROCm's AITER was building its JIT modules (minutes each on a fresh container): keep its build "
                      "folder (aiter/jit) on a volume across starts, or use an image with them prebuilt." if "[aiter]" in said
                      else "torch.compile (--enable-torch-compile) compiles while CUDA graphs are captured, minutes per "
                      "batch size the first time: TORCHINDUCTOR_CACHE_DIR kept across starts (in [env]), or a lower "
                      "--torch-compile-max-bs, makes it short.")
        fixes = [_fix({"timeouts.jit_compile": round(extra * 2)}, "if the compile is merely slow on this host")]
    return say, fixes


def _degraded(v: Verdict, cfg: ServiceConfig | None) -> dict[str, Any]:
    """Healthy, but short of what was asked: say what, and the memory fix when there is one."""
    say = [f"The server is up, but degraded: {d['message']}." for d in v.degraded]
    fixes: list[dict[str, Any]] = []
    below = next((d for d in v.degraded if d["reason"] == "kv_below_context"), None)
    if below is not None:
        m = memory(v, cfg)
        ctx = below["figures"]["context_length"]
        p = m.plan(1, ctx)
        if p is not None and p["fits"]:
            fixes.append(_fix({"mem_fraction_static": p["fraction"]}, f"holds one full {_n(ctx)}-token request"))
        limit = (below["figures"]["kv_tokens"] // 1024) * 1024
        if limit >= 1024:
            fixes.append(_fix({"context_length": limit}, f"what {_n(below['figures']['kv_tokens'])} KV tokens hold"))
    return {"cause": "degraded", "explanation": say, "fixes": fixes}


#: what a start was doing when its log stopped, told by the last line: (pattern, what it means, how to tell a hang)
LAST_WORK = (
    (re.compile(r"\.(?:safetensors|bin|pt|gguf)[\w.]*: +\d+%\||Downloading|Fetching \d+ files"),
     "it was downloading the weights from the hub", "if the byte count no longer grows, the download is stuck "
     "(network, proxy, a full disk); `HF_HUB_OFFLINE=1` with a pre-downloaded model avoids it on every start"),
    (re.compile(r"AUTOTUNE|torch\._inductor|torch\._dynamo|torch_compile|[Dd]ynamo"),
     "it was in torch.compile (--enable-torch-compile): tracing and autotuning", "that takes minutes per batch size "
     "the first time; TORCHINDUCTOR_CACHE_DIR kept across starts makes it seconds"),
    (re.compile(r"DeepGEMM|deep_gemm|JIT|[Nn]inja|flashinfer\.jit|Compiling|nvcc"),
     "it was compiling kernels at first use (JIT)", "a first start compiles for minutes (DeepGEMM 10-20 min for a "
     "large MoE) and later starts read the cache; a hang shows no CPU in the compiler (`top`)"),
    (re.compile(r"Registering \d+ cuda graph addresses"),
     "it was registering the custom all-reduce's CUDA-graph buffers between the GPUs", "a stop right there is the "
     "GPUs' peer-to-peer IPC: start with --disable-custom-all-reduce (extra_args) and see `nvidia-smi topo -m`"),
    (re.compile(r"Capturing (?:batches|num tokens)|Capture (?:cuda|CUDA) graph"),
     "it was capturing CUDA graphs", "capture takes seconds per batch size; several minutes with no new bar on any "
     "rank is a hang (often a collective waiting for a rank that died: see the other ranks' lines)"),
    (re.compile(r"Init torch distributed begin|Init nccl begin|NCCL INFO"),
     "its ranks were setting up NCCL on this host", "a hang there is most often GPU peer-to-peer (an IOMMU, a "
     "virtualised host: try NCCL_P2P_DISABLE=1) or a GPU another process holds (`nvidia-smi`)"),
    (re.compile(r"checkpoint shards: +100% Completed"),
     "this rank had read every shard of its checkpoint and was finishing the load", "on a multi-node or TP start, "
     "every rank then waits for the slowest: look at the other ranks' and nodes' logs for one still reading, or one "
     "that never started"),
    (re.compile(r"Loading (?:\w+ )?checkpoint shards|Multi-thread loading"),
     "it was reading the checkpoint shards", "a slow disk or network filesystem reads large models for minutes; a "
     "bar that does not move for long is a stalled read"),
)


def _at_rendezvous(v: Verdict) -> bool:
    """A multi-node start whose last line is its ranks meeting at dist_init_addr: waiting for a node."""
    return v.phase == "starting" and (v.figures.get("nnodes") or 1) > 1 and v.last_line is not None \
        and re.search(r"Init torch distributed begin|c10d", v.last_line) is not None


def _last_work(v: Verdict) -> tuple[re.Pattern[str], str, str] | None:
    """What the start was doing when its last line was printed (LAST_WORK), if that line says."""
    return next((w for w in LAST_WORK if w[0].search(v.last_line)), None) if v.last_line else None


def _incomplete(v: Verdict, cfg: ServiceConfig | None, _: list[str]) -> tuple[list[str], list[dict[str, Any]]]:
    """Not a failure: the input ended while the start was still going."""
    say = [f"The log ends in phase {v.phase} with no verdict in sight: it shows no error, and no ready line yet."]
    if v.last_line:
        say.append(f"Last line seen: {v.last_line!r}.")
    if _at_rendezvous(v):
        say.append("It stops where the ranks wait for each other at dist_init_addr: if it stayed there, a node of this "
                   "multi-node start never joined (not started, another nnodes or dist_init_addr, a firewall).")
    elif (work := _last_work(v)) is not None:
        say.append(f"So {work[1]}: {work[2]}.")
    say.append("A saved log may be cut short; for a live unit, `svcdiag wait NAME` follows it to its verdict.")
    return say, []


def _stopped(v: Verdict, cfg: ServiceConfig | None, _: list[str]) -> tuple[list[str], list[dict[str, Any]]]:
    return [f"The unit was stopped from outside in phase {v.phase}, before it was ready (systemctl stop, a "
            "conflicting unit, or another svcdiag)."], []


def _died_after_ready(v: Verdict, cfg: ServiceConfig | None, _: list[str]) -> tuple[list[str], list[dict[str, Any]]]:
    name = cfg.name if cfg else "NAME"
    say = [f"{v.message[:1].upper()}{v.message[1:]}.",
           f"What it printed last is in `svcdiag logs {name}` (this invocation only); `svcdiag up {name} --wait-ready` "
           "starts it afresh and judges the new start."]
    if v.figures.get("unit_result") == "watchdog":
        limit = f" ({cfg.watchdog_s:g} s)" if cfg is not None and cfg.watchdog_s else ""
        say.insert(1, f"/ready stopped answering for longer than watchdog_s{limit}: the server hung or stopped "
                      "serving (a stuck scheduler, a dead rank, NCCL waiting on a peer).")
    return say, []


def _http(v: Verdict, cfg: ServiceConfig | None, _: list[str]) -> tuple[list[str], list[dict[str, Any]]]:
    return [v.message], []


def _generic(v: Verdict, cfg: ServiceConfig | None, _: list[str]) -> tuple[list[str], list[dict[str, Any]]]:
    where = next((e for e in v.evidence if e.startswith("File ")), None)
    say = [f"The start failed in phase {v.phase}: {v.message}"]
    if where:
        say.append(f"Raised at {where}.")
    return say, []


_BY_CAUSE = {
    "max_running_zero": _max_running_zero,
    "not_enough_memory": _not_enough_memory,
    "cuda_oom": _cuda_oom,
    "torch_compile_failed": _torch_compile_failed,
    "router_failed": _router_failed,
    "ep_dispatch_timeout": _ep_dispatch_timeout,
    "pd_bootstrap_failed": _pd_bootstrap_failed,
    "killed_by_signal": _killed,
    "exited": _exited,
    "port_in_use": _port_in_use,
    "model_not_found": _model_not_found,
    "hub_unreachable": _hub_unreachable,
    "nccl_error": _nccl,
    "bad_arguments": _bad_arguments,
    "warmup_failed": _warmup_failed,
    "unsupported_hardware": _unsupported_hardware,
    "unsupported_model": _unsupported_model,
    "host_oom": _host_oom,
    "gpu_unavailable": _gpu_unavailable,
    "access_denied": _access_denied,
    "cuda_error": _cuda_error,
    "rendezvous_failed": _rendezvous,
    "kv_transfer_failed": _kv_transfer_failed,
    "nvshmem_failed": _nvshmem_failed,
    "disk_full": _disk_full,
    "bad_checkpoint": _bad_checkpoint,
    "broken_install": _broken_install,
    "mamba_cache_too_small": _mamba_small,
    "watchdog_timeout": _watchdog_timeout,
    "timed_out": _timed_out,
    "incomplete": _incomplete,
    "stopped": _stopped,
    "http_unreachable": _http,
    "http_mismatch": _http,
    "died_after_ready": _died_after_ready,
}
