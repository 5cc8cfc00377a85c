"""SGLang's milestone lines read into their events: each reader takes a message (what follows the prefix)
and returns its event with the figures the line carries, or None when the line is not that milestone.

Pure and stateless: the grammar (`LineParser`) dispatches to these by a message's first six characters
and keeps what a milestone says about the state of the log (the release a line's shape points to).
Formats: docs/sglang.md#start-up-milestones.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from svcdiag.sglang import lazy_re
from svcdiag.sglang.causes import UNNAMED, Place
from svcdiag.sglang.events import (
    CudaGraph,
    DistInit,
    DraftRunner,
    Event,
    Failure,
    HiCacheStorage,
    HostPool,
    KernelPrecompile,
    KVBelowContext,
    KVCache,
    MambaCache,
    MaxRunningLimited,
    PoolEnd,
    PortMoved,
    ProgressBar,
    SchedulerInfo,
    ServerArgs,
    SlidingWindowPool,
    StartupTimings,
    UnifiedMemoryPool,
    WeightsBegin,
    WeightsEnd,
)
from svcdiag.sglang.registry import classify

_F = r"(-?\d+(?:\.\d+)?)"
ELAPSED_RE = lazy_re.compile(r"elapsed=" + _F + r" s")
CAPTURE_IN_RE = lazy_re.compile(r"capture in " + _F + " s")  # `Load weight end … Committed real weights …`
TIME_ELAPSED_RE = lazy_re.compile(r"Time elapsed: " + _F + " s")  # a capture's end, in other words
DRAFT_INITIALIZED_RE = lazy_re.compile(r"Initialized (\w+) draft runner\. ?(.*)")
DRAFT_READY_RE = lazy_re.compile(r"(\w+) draft runner ready\. ?(.*)")
AVAIL_RE = lazy_re.compile(r"avail mem=" + _F + r" ?GB")
USAGE_RE = lazy_re.compile(r"mem usage=" + _F + r" ?GB")
TYPE_RE = lazy_re.compile(r"type=([\w.]+)")
DTYPE_RE = lazy_re.compile(r"dtype[=:] ?([\w.]+)")
QUANT_RE = lazy_re.compile(r"quant=([\w.\-]+)")
TOKENS_RE = lazy_re.compile(r"#tokens: (\d+)")
K_RE = lazy_re.compile(r"(?<!\w)K size: " + _F + r" GB")
V_RE = lazy_re.compile(r"(?<![\w])V size: " + _F + r" GB")  # not MLA's `KV size:` (K and V in one)
KV_RE = lazy_re.compile(r"KV size: " + _F + r" GB")
MAMBA_RE = lazy_re.compile(
    r"max_mamba_cache_size: (\d+), conv_state size: " + _F + r" ?GB, ssm_state size: " + _F + r" ?GB"
    r"(?: intermediate_ssm_state_cache size: " + _F + r" ?GB)?(?: intermediate_conv_window_cache size: " + _F + r" ?GB)?")
SCHED_RE = lazy_re.compile(r"(\w+)=(-?[\d.]+)")
#: a number a terminal wrapped in a paste, the break padded with spaces to the window's width
#: (`context_len=262<spaces>144`): SGLang never puts 8 spaces inside its summary
WRAP_GAP_RE = lazy_re.compile(r"(?<=\d) {8,}(?=\d)")
CAPPED_RE = lazy_re.compile(r"capped to (\d+) by the mamba state cache \(max_mamba_cache_size=(\d+), (\d+) state slots")
REDUCED_RE = lazy_re.compile(r"reduced from the requested (\d+) to (\d+)")
#: `Capture cuda graph begin`, 0.5.14+'s `Capture target decode CUDA graph begin`; on other devices (0.5.2+) the
#: graph is the device's: `Capture cpu graph begin`, `Capture npu graph begin` (Ascend), `Capture target decode NPU graph`
CAPTURE_NAME_RE = lazy_re.compile(r"^Capture (?:(target|draft) (?:(decode|verify|prefill|extend) )?|(piecewise) )?"
                             r"(?:CUDA|cuda|CPU|cpu|NPU|npu|XPU|xpu|HPU|hpu|MUSA|musa) graph")
#: DeepGEMM's JIT pre-compile session, a WARNING from 0.4.6 on (what follows varies: `It may takes`/`It may take`)
PRECOMPILE_RE = lazy_re.compile(r"Entering DeepGEMM JIT Pre-?Compile session", re.I)
#: ROCm's AITER building a JIT module it has no cache of: `[aiter] start build [module_mha_fwd] under /…/build/…`
AITER_BUILD = "[aiter] start build ["
SWA_POOL_RE = lazy_re.compile(r"Use sliding window memory pool\. full_layer_tokens=(\d+), swa_layer_tokens=(\d+)")
HOST_POOL_RE = lazy_re.compile(r"Allocating " + _F + r" GB host memory for hierarchical KV cache")
#: HiCache's storage backend (--hicache-storage-backend) set up by the scheduler after the host pool: 0.5.x's
#: `Creating storage backend 'mooncake' (…MooncakeStore)`, the Mooncake store's `Mooncake Configuration loaded from
#: env successfully.`, `Mooncake store setup successfully.`, `Mooncake store warmup successfully.`, and 0.4.x's
#: `Connect to Mooncake store successfully.`, 0.5.0's 3FS client
HICACHE_STORAGE_RE = lazy_re.compile(r"Creating storage backend '(\w+)'|(Mooncake) (?:store (?:setup|warmup)|"
                                     r"Configuration loaded)|Connect to (Mooncake) store successfully"
                                     # (0.5.0's 3FS backend, each rank: `[Rank 1] HiCacheHF3FS Client Initializing: …`)
                                     r"|\[Rank \d+\] HiCache(HF3FS) Client Initializing")
#: ≤ 0.3.2 moved to a free port when --port was taken: `WARNING: Port 30000 is not available. Use port 30005 instead.`
#: (0.1.x: `Use 10019 instead.`)
PORT_MOVED_RE = lazy_re.compile(r"WARNING: Port (\d+) is not available\. Use (?:port )?(\d+) instead")
STARTUP_TIMINGS_RE = lazy_re.compile(r"(\w+)=(\{[^}]*\}|[\d.]+)")
SERVER_ARG_RE = lazy_re.compile(r"(\w+)=('(?:[^'\\]|\\.)*'|\"[^\"]*\"|[^,()]+)")
DICT_ARG_RE = lazy_re.compile(r"'(\w+)': ('(?:[^'\\]|\\.)*'|\"[^\"]*\"|[^,{}]+)")
KV_BELOW_RE = lazy_re.compile(r"KV pool holds (\d+) tokens, fewer than --context-length (\d+)")
POST_CAPTURE_MR_RE = lazy_re.compile(r"max_running_requests (\d+) -> (\d+)")
UNIFIED_RE = lazy_re.compile(r"total_bytes=" + _F + r" GB")
#: tqdm's bars (no time prefix; updates joined by \r in one journal message), optionally after a rank prefix:
#: `Loading safetensors checkpoint shards:  25% Completed | 1/4 [00:04<00:12,  4.12s/it]` (SGLang's bar_format),
#: `Capturing batches (bs=4 avail_mem=56.61 GB): 75%|███████▌  | 3/4 [00:01<00:00,  2.1it/s]` (tqdm's default)
PROGRESS_RE = lazy_re.compile(
    r"(?:\[(?:rank(?P<rank>\d+)\]:?|[^\]]*?\bTP(?P<tp>\d+)\b[^\]]*\])\s*)?"
    r"(?P<label>Loading (?:\w+ )?checkpoint shards|Multi-thread loading shards|Capturing (?:batches|num tokens))"
    r"(?: \([^)]*\))?:\s*\d+%(?: Completed \||\|[^|]*\|)\s*(?P<done>\d+)/(?P<total>\d+)"
    r"(?: \[(?P<elapsed>[\d:]+)(?:<[\d:?]+)?(?:,\s*(?:(?P<rate>[\d.]+)(?P<unit>s/it|it/s)|\?it/s))?[^\]]*\])?")

SERVER_ARG_TYPES: dict[str, Callable[[str], object]] = {
    "model_path": str, "tp_size": int, "dp_size": int, "context_length": int, "mem_fraction_static": float,
    "max_running_requests": int, "max_mamba_cache_size": int, "cuda_graph_max_bs": int,
    "speculative_algorithm": str, "speculative_draft_model_path": str, "speculative_num_draft_tokens": int,
    "host": str, "port": int, "node_rank": int, "nnodes": int, "enable_torch_compile": lambda v: v.lower() == "true",
}


def _f(m: re.Match[str] | None, group: int | str = 1) -> float | None:
    if m is None:
        return None
    v = m.group(group)
    return float(v) if v is not None else None


def server_args(msg: str, ranks: str, ts: float | None) -> ServerArgs | None:
    """`server_args=ServerArgs(…)`, or 0.5.15+'s dict (`server_args={…}`): the settings the judge compares."""
    if msg.startswith("server_args=ServerArgs("):
        pairs = SERVER_ARG_RE.findall(msg[len("server_args=ServerArgs("):])
    elif msg.startswith("server_args={"):  # 0.5.23 logs a dict
        pairs = DICT_ARG_RE.findall(msg[len("server_args={"):])
    else:
        return None
    kw: dict[str, object] = {}
    for key, raw in pairs:
        conv = SERVER_ARG_TYPES.get(key)
        if conv is None or key in kw:
            continue
        value = raw.strip()
        if value == "None":
            continue
        try:
            kw[key] = conv(value.strip("'\"")) if conv is not str else value.strip("'\"")
        except ValueError:
            continue
    return ServerArgs(ts=ts, ranks=ranks, line=msg, **kw)  # type: ignore[arg-type]


def dist(msg: str, ranks: str, ts: float | None) -> Event | None:
    if msg.startswith(("Init torch distributed begin", "Init nccl begin")):  # the latter ≤ 0.3.0
        return DistInit(ts=ts, ranks=ranks, line=msg, stage="begin")
    if msg.startswith("Init torch distributed ends"):
        return DistInit(ts=ts, ranks=ranks, line=msg, stage="end", elapsed_s=_f(ELAPSED_RE.search(msg)),
                        mem_usage_gb=_f(USAGE_RE.search(msg)))
    return None


def weights(msg: str, ranks: str, ts: float | None) -> Event | None:
    if msg.startswith("Load weight begin"):
        avail = _f(AVAIL_RE.search(msg))
        return WeightsBegin(ts=ts, ranks=ranks, line=msg, avail_gb=avail if avail is not None else -1.0)
    if msg.startswith("Load weight end"):
        t = TYPE_RE.search(msg)
        committed = "Committed real weights" in msg
        return WeightsEnd(
            ts=ts, ranks=ranks, line=msg, model_type=t.group(1) if t else None,
            elapsed_s=_f(ELAPSED_RE.search(msg)) or _f(CAPTURE_IN_RE.search(msg)) if committed
            else _f(ELAPSED_RE.search(msg)),
            dtype=(m.group(1) if (m := DTYPE_RE.search(msg)) else None),
            quant=(m.group(1) if (m := QUANT_RE.search(msg)) else None),
            avail_gb=_f(AVAIL_RE.search(msg)), mem_usage_gb=_f(USAGE_RE.search(msg)))
    return None


def kv(msg: str, ranks: str, ts: float | None) -> KVCache | None:
    """`KV Cache is allocated. #tokens: …, K size: … GB, V size: … GB` and its kin (a hybrid model's full and
    sliding-window pools, a draft's, the VA upper bound, 0.5.23's post-capture sizing)."""
    tokens = TOKENS_RE.search(msg)  # none before 0.4.3.post3, nor on some EAGLE pools: the summary says it then
    post = msg.startswith("Post-capture KV sizing:")
    body = msg.split(": ", 1)[1] if post else msg
    head = body.split(".", 1)[0]  # "KV Cache is allocated", "Full KV Cache is allocated", ...
    upper = "VA upper bound" in head
    if not upper and "is allocated" not in head and "allocated" not in head:
        return None
    label = head.split(" KV Cache")[0] if not head.startswith(("KV Cache", "draft", "KV cache")) else None
    dtype = DTYPE_RE.search(msg)
    return KVCache(ts=ts, ranks=ranks, line=msg, tokens=int(tokens.group(1)) if tokens else None,
                   dtype=dtype.group(1) if dtype else None, k_gb=_f(K_RE.search(msg)),
                   v_gb=_f(V_RE.search(msg)), kv_gb=_f(KV_RE.search(msg)), label=label,
                   upper_bound=upper, draft=head.startswith("draft"), post_capture=post)


def kv_releases(kv: KVCache) -> str | None:
    """The releases a target pool's line shape points to (None for a draft's or the VA bound's: all say it alike)."""
    if kv.upper_bound or kv.draft:
        return None
    # the wheels: no line in 0.4.0; K/V sizes alone 0.4.1.post6 – 0.4.3.post2; `#tokens:` from 0.4.3.post3;
    # `dtype: ` first from 0.5.13 (0.5.12's has none)
    return (">= 0.5.13" if "dtype: " in kv.line else "0.4.3.post3 – 0.5.12" if kv.tokens is not None
            else "0.4.1 – 0.4.3.post2")


def mamba(msg: str, ranks: str, ts: float | None) -> Event | None:
    m = MAMBA_RE.search(msg)
    if not msg.startswith("Mamba Cache is allocated") or m is None:
        return None
    return MambaCache(ts=ts, ranks=ranks, line=msg, slots=int(m.group(1)), conv_gb=_f(m, 2),
                      ssm_gb=_f(m, 3), intermediate_ssm_gb=_f(m, 4), intermediate_conv_gb=_f(m, 5))


def pool_end(msg: str, ranks: str, ts: float | None) -> Event | None:
    if msg.startswith("Memory pool end"):
        avail = _f(AVAIL_RE.search(msg))
        return PoolEnd(ts=ts, ranks=ranks, line=msg, avail_gb=avail if avail is not None else -1.0)
    return None


def max_running(msg: str, ranks: str, ts: float | None) -> Event | None:
    if (m := CAPPED_RE.search(msg)) is not None:
        return MaxRunningLimited(ts=ts, ranks=ranks, line=msg, value=int(m.group(1)), by="mamba",
                                 mamba_slots=int(m.group(2)), slots_per_req=int(m.group(3)))
    if (m := REDUCED_RE.search(msg)) is not None:
        return MaxRunningLimited(ts=ts, ranks=ranks, line=msg, value=int(m.group(2)), by="kv",
                                 requested=int(m.group(1)))
    return None


def scheduler(msg: str, ranks: str, ts: float | None) -> Event | None:
    kv = dict(SCHED_RE.findall(WRAP_GAP_RE.sub("", msg) if "        " in msg else msg))
    total = kv.get("max_total_num_tokens") or kv.get("max_total_num_token")  # ≤ 0.1.16: singular
    if total is None and "the profiled value" in msg and (cause := classify(msg, Place.MESSAGE)) is not None:
        # `max_total_tokens=131072 is larger than the profiled value -561981.`: the weights took more than
        # mem_fraction_static's share, so no KV pool at all (0.4.x ROCm with DP attention went on to fault)
        return Failure(ts=ts, ranks=ranks, line=msg, cause=cause, message=msg, evidence=(msg,))
    if total is None or ("max_running_requests" not in kv and "context_len" not in kv):
        return None
    try:  # ≤ 0.1.20 the summary has no max_running_requests
        return SchedulerInfo(
            ts=ts, ranks=ranks, line=msg, max_total_num_tokens=int(total),
            max_running_requests=int(kv["max_running_requests"]) if "max_running_requests" in kv else None,
            chunked_prefill_size=int(kv["chunked_prefill_size"]) if "chunked_prefill_size" in kv else None,
            max_prefill_tokens=int(kv["max_prefill_tokens"]) if "max_prefill_tokens" in kv else None,
            context_len=int(kv["context_len"]) if "context_len" in kv else None,
            available_gpu_mem_gb=float(kv["available_gpu_mem"]) if "available_gpu_mem" in kv
            else float(kv["available_cpu_mem"]) if "available_cpu_mem" in kv else None)
    except ValueError:
        return None


def capture(msg: str, ranks: str, ts: float | None) -> Event | None:
    if msg.startswith("Capture cuda graph failed"):
        cause = classify(msg, Place.MESSAGE) or UNNAMED
        return Failure(ts=ts, ranks=ranks, line=msg, cause=cause, message=msg, evidence=(msg,))
    m = CAPTURE_NAME_RE.match(msg)
    if m is None:
        return None
    # ≤ 0.5.x: `Capture draft cuda graph`; 0.5.6+'s piecewise graphs (torch.compile'd prefill), after the decode ones
    name = f"{m.group(1)} {m.group(2) or 'decode'}" if m.group(1) else "target piecewise" if m.group(3) \
        else "target decode"
    rest = msg[m.end():]
    if rest.startswith(" begin"):
        return CudaGraph(ts=ts, ranks=ranks, line=msg, stage="begin", name=name, avail_gb=_f(AVAIL_RE.search(msg)))
    if rest.startswith(" end"):
        elapsed = ELAPSED_RE.search(msg) or TIME_ELAPSED_RE.search(msg)
        return CudaGraph(ts=ts, ranks=ranks, line=msg, stage="end", name=name, elapsed_s=_f(elapsed),
                         mem_usage_gb=_f(USAGE_RE.search(msg)), avail_gb=_f(AVAIL_RE.search(msg)))
    return None


def draft_initialized(msg: str, ranks: str, ts: float | None) -> Event | None:
    m = DRAFT_INITIALIZED_RE.match(msg)
    if m:
        return DraftRunner(ts=ts, ranks=ranks, line=msg, algorithm=m.group(1), stage="initialized",
                           details=m.group(2))
    return None


def draft_ready(msg: str, ranks: str, ts: float | None) -> Event | None:
    m = DRAFT_READY_RE.match(msg)
    if m:
        return DraftRunner(ts=ts, ranks=ranks, line=msg, algorithm=m.group(1), stage="ready", details=m.group(2))
    return None


def sliding_window(msg: str, ranks: str, ts: float | None) -> Event | None:
    m = SWA_POOL_RE.match(msg)
    return SlidingWindowPool(ts=ts, ranks=ranks, line=msg, full_tokens=int(m.group(1)),
                             swa_tokens=int(m.group(2))) if m else None


def host_pool(msg: str, ranks: str, ts: float | None) -> Event | None:
    m = HOST_POOL_RE.match(msg)
    return HostPool(ts=ts, ranks=ranks, line=msg, gb=float(m.group(1))) if m else None


def hicache_storage(msg: str, ranks: str, ts: float | None) -> Event | None:
    m = HICACHE_STORAGE_RE.match(msg)
    if m is None:
        return None
    return HiCacheStorage(ts=ts, ranks=ranks, line=msg, backend=(m.group(1) or m.group(2) or m.group(3) or m.group(4)).lower())


def port_moved(msg: str, ranks: str, ts: float | None) -> Event | None:
    m = PORT_MOVED_RE.match(msg)
    return PortMoved(ts=ts, line=msg, requested=int(m.group(1)), port=int(m.group(2))) if m else None


def precompile(msg: str, ranks: str, ts: float | None) -> Event | None:
    """`Entering DeepGEMM JIT Pre-Compile session. It may take a long time (typically 10-20 mins) if you
    have not run `sglang.compile_deep_gemm`…`: printed for each new kernel shape, on a first start."""
    if msg.startswith(AITER_BUILD):  # ROCm's AITER JIT-builds a module on a fresh container (minutes each)
        return KernelPrecompile(ts=ts, ranks=ranks, line=msg, what="AITER")
    if PRECOMPILE_RE.match(msg) is None:
        return None
    return KernelPrecompile(ts=ts, ranks=ranks, line=msg, what="DeepGEMM")


def kv_below_context(msg: str, ranks: str, ts: float | None) -> KVBelowContext | None:
    """0.5.23+: `KV pool holds N tokens, fewer than --context-length M`."""
    m = KV_BELOW_RE.match(msg)
    if m is None:
        return None
    return KVBelowContext(ts=ts, ranks=ranks, line=msg, tokens=int(m.group(1)), context_length=int(m.group(2)))


def post_capture_limit(msg: str, ranks: str, ts: float | None) -> MaxRunningLimited | None:
    """0.5.23's post-capture sizing that lowered the request cap (`max_running_requests 48 -> 8`)."""
    if (m := POST_CAPTURE_MR_RE.search(msg)) is not None:
        return MaxRunningLimited(ts=ts, ranks=ranks, line=msg, value=int(m.group(2)), by="post_capture",
                                 requested=int(m.group(1)))
    return None


def startup_timings(msg: str, ranks: str, ts: float | None) -> StartupTimings | None:
    """0.5.23+: `Engine startup timings: …`, each phase's seconds (a nested group's summed)."""
    if not msg.startswith("Engine startup timings"):
        return None
    seconds: dict[str, float] = {}
    for key, raw in STARTUP_TIMINGS_RE.findall(msg.split(":", 1)[-1]):
        if raw.startswith("{"):
            inner = dict(STARTUP_TIMINGS_RE.findall(raw[1:-1]))
            seconds[key] = round(sum(float(v) for v in inner.values() if not v.startswith("{")), 3)
        else:
            seconds[key] = float(raw)
    return StartupTimings(ts=ts, ranks=ranks, line=msg, seconds=seconds)


def unified_memory(msg: str, ranks: str, ts: float | None) -> Event | None:
    if not msg.startswith("[unified-memory-pool] UnifiedKVPool"):
        return None
    return UnifiedMemoryPool(ts=ts, ranks=ranks, line=msg, total_gb=_f(UNIFIED_RE.search(msg)))


def bar(m: re.Match[str], seg: str, ts: float | None) -> ProgressBar:
    """A tqdm bar's PROGRESS_RE match: how far, how fast (items a second), for how long."""
    rate = float(m["rate"]) if m["rate"] else None
    if rate is not None and m["unit"] == "s/it":
        rate = 1.0 / rate if rate > 0 else None
    elapsed = None
    if m["elapsed"]:
        elapsed = 0.0
        for part in m["elapsed"].split(":"):
            elapsed = elapsed * 60 + int(part or 0)
    rank = m["rank"] or m["tp"]
    label = m["label"]
    return ProgressBar(ts=ts, ranks=f"TP{rank}" if rank is not None else "", line=seg[:m.end()], label=label,
                       what="cuda_graph" if label.startswith("Capturing") else "shards",
                       done=int(m["done"]), total=int(m["total"]), elapsed_s=elapsed, rate=rate)
