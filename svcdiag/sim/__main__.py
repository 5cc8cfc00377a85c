"""SGLang stand-in: `python -m svcdiag.sim SCENARIO [--sglang-version V] [--time-scale X] [sglang flags]`.

It replaces only the GPU. It takes launch_server's flags as the release `--sglang-version`
(default 0.5.23; `--old-format`: 0.4.6's shape) parses them, prints that release's start-up
lines (docs/sglang.md#start-up-milestones) with realistic timings compressed by --time-scale,
serves that release's HTTP endpoints once bound, and dies the way SGLang dies.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime as dt
import itertools
import json
import os
import signal
import socket
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from .model import DENSE_8B, HYBRID_27B, Figures, compute, gpu_total_gib
from .release import DEFAULT_VERSION, OLD_FORMAT_VERSION, Release, parse_launch_args
from .scenarios import LOADED_HEALTH_S, SCENARIOS, Scenario

SITE = "/opt/sglang/.venv/lib/python3.11/site-packages"


class Clock:
    """Wall clock that sleeps scaled, or a virtual one that only advances (for example logs)."""

    def __init__(self, scale: float, virtual_start: dt.datetime | None):
        self.scale = scale
        self.virtual = virtual_start
        self.nominal = 0.0  # nominal seconds slept so far (the startup timings' clock)

    def sleep(self, nominal: float) -> None:
        self.nominal += max(0.0, nominal)
        if self.virtual is not None:
            self.virtual += dt.timedelta(seconds=nominal)
        elif nominal > 0:
            time.sleep(nominal * self.scale)

    def now(self) -> dt.datetime:
        return self.virtual if self.virtual is not None else dt.datetime.now()


class Log:
    def __init__(self, clock: Clock, *, tp: int, tags_always: bool, ms: bool):
        self.clock, self.tp, self.old, self.ms = clock, tp, tags_always, ms
        self.out = sys.stdout

    def _ts(self) -> str:
        now = self.clock.now()
        base = now.strftime("%Y-%m-%d %H:%M:%S")
        return f"{base}.{now.microsecond // 1000:03d}" if self.ms else base

    def raw(self, text: str) -> None:
        self.out.write(text + "\n")
        self.out.flush()

    def main(self, msg: str) -> None:
        """A line of the HTTP/engine process: no rank prefix."""
        self.raw(f"[{self._ts()}] {msg}")

    def rank(self, r: int, msg: str) -> None:
        prefix = f" TP{r}" if (self.old or self.tp > 1) else ""
        self.raw(f"[{self._ts()}{prefix}] {msg}")

    def all_ranks(self, msg: str) -> None:
        for r in range(self.tp):
            self.rank(r, msg)

    def uvicorn(self, msg: str) -> None:
        self.raw(f"[{self._ts()}] {msg}")


def parse_args(argv: list[str]) -> tuple[argparse.Namespace, list[str]]:
    """The stand-in's own options, and the rest: launch_server's flags, for the release to parse."""
    p = argparse.ArgumentParser(prog="python -m svcdiag.sim", description=__doc__.splitlines()[0],
                                allow_abbrev=False)
    p.add_argument("scenario", choices=sorted(SCENARIOS))
    p.add_argument("--sglang-version", metavar="V",
                   help=f"the SGLang release to play: its line shapes, flags and endpoints (default {DEFAULT_VERSION})")
    p.add_argument("--old-format", action="store_true",
                   help=f"an old release's shape (TP0 tag even at tp=1, `Capture cuda graph` lines); alone it "
                        f"means --sglang-version {OLD_FORMAT_VERSION}")
    p.add_argument("--time-scale", type=float, default=1.0, help="multiply every delay (0.05 = 20× faster)")
    p.add_argument("--virtual-clock", metavar="ISO", help="no sleeping; timestamps start here (example logs)")
    p.add_argument("--decode-lines", type=int, default=0, help="after ready, print N decode batch lines")
    p.add_argument("--no-http", action="store_true", help="do not bind the port; exit once ready")
    p.add_argument("--gpu-free-gb", type=float, help="the simulated GPU's free memory before loading")
    return p.parse_known_args(argv)


def release_of(own: argparse.Namespace) -> Release:
    version = own.sglang_version or (OLD_FORMAT_VERSION if own.old_format else DEFAULT_VERSION)
    return Release(version, old_format=own.old_format)


def server_args_line(a: argparse.Namespace, fig: Figures, rel: Release) -> str:
    """`server_args=ServerArgs(k=v, …)`, or 0.5.23's dict `server_args={'k': v, …}` (engine.py
    `_server_args_for_logging`), with the release's field names."""
    def q(v: object) -> str:
        return repr(v)

    fields = [
        ("model_path", q(a.model_path)), ("tokenizer_path", q(a.model_path)), ("tokenizer_mode", "'auto'"),
        ("trust_remote_code", q(a.trust_remote_code)), ("context_length", q(a.context_length)),
        ("served_model_name", q(a.served_model_name or a.model_path)), ("host", q(a.host)), ("port", q(a.port)),
        ("mem_fraction_static", q(fig.mem_fraction_static)), ("max_running_requests", q(a.max_running_requests)),
        ("chunked_prefill_size", q(a.chunked_prefill_size)), ("cuda_graph_max_bs", q(a.cuda_graph_max_bs)),
        ("tp_size", q(a.tp_size)), ("dp_size", q(a.dp_size)), ("max_mamba_cache_size", q(a.max_mamba_cache_size)),
        ("mamba_full_memory_ratio", "0.9"), ("speculative_algorithm", q(a.speculative_algorithm)),
        ("speculative_draft_model_path", q(a.speculative_draft_model_path)),
        ("speculative_num_steps", q(a.speculative_num_steps)), ("speculative_eagle_topk", q(a.speculative_eagle_topk)),
        ("speculative_num_draft_tokens", q(a.speculative_num_draft_tokens)), ("log_level", "'info'"),
    ]
    if a.nnodes > 1:  # a multi-node start: each node's rank, as SGLang logs them
        fields += [("dist_init_addr", q(a.dist_init_addr)), ("nnodes", q(a.nnodes)), ("node_rank", q(a.node_rank))]
    if rel.new:
        renamed = {"cuda_graph_max_bs": "cuda_graph_max_bs_decode"}
        fields = [(renamed.get(k, k), v) for k, v in fields]
        fields.insert(13, ("pp_size", "1"))
        fields.insert(14, ("attn_dp_size", "1"))
        return "server_args={" + ", ".join(f"{k!r}: {v}" for k, v in fields) + "}"
    return "server_args=ServerArgs(" + ", ".join(f"{k}={v}" for k, v in fields) + ")"


def traceback_text(frames: list[tuple[str, int, str, str]], final: str) -> str:
    lines = ["Traceback (most recent call last):"]
    for path, line, func, code in frames:
        lines.append(f'  File "{path}", line {line}, in {func}')
        lines.append(f"    {code}")
    lines.append(final)
    return "\n".join(lines)


SCHEDULER_FRAMES = [
    (f"{SITE}/sglang/srt/managers/scheduler.py", 3012, "run_scheduler_process",
     "scheduler = Scheduler(server_args, port_args, gpu_id, tp_rank, moe_ep_rank, pp_rank, dp_rank)"),
    (f"{SITE}/sglang/srt/managers/scheduler.py", 339, "__init__", "self.init_model_worker()"),
    (f"{SITE}/sglang/srt/managers/scheduler.py", 512, "init_model_worker", "self.tp_worker = TpModelWorker("),
]


class Server:
    """The HTTP side, by release. Every release: /health and /health_generate (503 until ready),
    /get_model_info, /get_server_info. 0.5.20 on (0.5.23's http_server.py): /ready (503 until
    ready, then 200), /server_info and /model_info; /get_server_info and /get_model_info still
    answer but log a deprecation warning on every call; /health* sleep 1 s before answering.
    Older releases answer 404 to /ready, /server_info and /model_info."""

    def __init__(self, a: argparse.Namespace, fig: Figures, scenario: Scenario, rel: Release, log: Log,
                 launch_command: str):
        self.ready = threading.Event()
        self.loaded = threading.Event()  # fault loaded_serving: /health* answer slowly, batches go on
        info = {
            "model_path": a.model_path, "tokenizer_path": a.model_path, "is_generation": True,
            "preferred_sampling_params": None, "weight_version": "default",
        }
        tokens = fig.kv_tokens + scenario.server_info_tokens_delta
        kv_gb = round(fig.k_gb + fig.v_gb, 2)
        server_info: dict[str, object] = {
            "model_path": a.model_path, "tp_size": a.tp_size, "port": a.port,
            "context_length": a.context_length, "mem_fraction_static": fig.mem_fraction_static,
            "max_total_num_tokens": tokens,
            "max_running_requests": fig.max_running if not rel.new else a.max_running_requests,
            "speculative_algorithm": a.speculative_algorithm,
            "internal_states": [{"max_total_num_tokens": tokens}],
            "version": rel.version,
        }
        if rel.new:  # 0.5.23: the top-level max_running_requests is the CLI value, not the effective cap
            server_info.update({
                "max_req_input_len": min(fig.context_len - 1, tokens - 1) - 5,
                "startup_time": None, "launch_command": launch_command,
                "internal_states": [{
                    "max_total_num_tokens": tokens,
                    "effective_max_running_requests_per_dp": fig.max_running,
                    "memory_usage": {
                        "weight": round(fig.weights_gb, 2), "kvcache": kv_gb,
                        "startup_available": round(fig.pre_load_free_gb, 2), "token_capacity": tokens,
                        "token_capacity_swa": 0, "graph": {"verify" if a.speculative_algorithm else "decode": 1.21},
                    },
                }],
            })
        outer = self
        sleep_s = 1.0 * (log.clock.scale if log.clock.virtual is None else 0.0)

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: object) -> None:  # SGLang's own access lines are printed by Log
                pass

            def _send(self, code: int, body: object) -> None:
                data = json.dumps(body).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def _deprecated(self, old: str, new: str) -> None:
                log.main(f"Endpoint '{old}' is deprecated and will be removed in a future version. "
                         f"Please use '{new}' instead.")

            def do_GET(self) -> None:
                path = self.path.split("?")[0]
                up = outer.ready.is_set()
                if path in ("/health", "/health_generate"):
                    if up and outer.loaded.is_set():  # a queue ahead of the health check's token
                        time.sleep(LOADED_HEALTH_S * log.clock.scale)
                    if up and rel.new:
                        time.sleep(sleep_s)  # 0.5.23 sleeps 1 s before the check (and generates a token)
                    self._send(200 if up else 503, {} if up else {"error": "starting"})
                elif path == "/ready" and rel.new:
                    self._send(200 if up else 503, {"status": "ready" if up else "starting"})
                elif path == "/get_model_info" or (path == "/model_info" and rel.new):
                    if path == "/get_model_info" and rel.new:
                        self._deprecated("/get_model_info", "/model_info")
                    self._send(200, info)
                elif path == "/get_server_info" or (path == "/server_info" and rel.new):
                    if path == "/get_server_info" and rel.new:
                        self._deprecated("/get_server_info", "/server_info")
                    self._send(200, server_info)
                else:
                    self._send(404, {"detail": "Not Found"})

        self.handler = Handler
        self.httpd: ThreadingHTTPServer | None = None

    def bind(self, host: str, port: int) -> None:
        ThreadingHTTPServer.allow_reuse_address = True
        self.httpd = ThreadingHTTPServer((host, port), self.handler)
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()


def die_like_sglang(log: Log, tp: int, final: str, frames: list[tuple[str, int, str, str]]) -> None:
    """Every rank's scheduler prints its traceback; the parent gets SIGQUIT and kills the tree."""
    for r in range(tp):
        log.rank(r, "Scheduler hit an exception: " + traceback_text(frames, final))
    log.raw("")
    log.main("Received sigquit from a child process. It usually means the child failed.")
    os.kill(os.getpid(), signal.SIGKILL)


def precompile(log: Log, clock: Clock, seconds: float, avail_gb: float) -> None:
    """DeepGEMM's JIT pre-compile, as 0.5.23 logs it on a first start (deep_gemm_wrapper/compile_utils.py):
    once for each kernel shape, a warning, the group, its memory, and a tqdm bar over every M."""
    shapes = (("GEMM_NT_F8F8BF16", 24576, 1536), ("GEMM_NT_F8F8BF16", 7168, 16384), ("GEMM_NT_F8F8BF16", 4096, 7168))
    for kind, n, k in shapes:
        log.main("Entering DeepGEMM JIT Pre-Compile session. It may take a long time (typically 10-20 mins) if you "
                 "have not run `sglang.compile_deep_gemm`. It is recommended to run `sglang.compile_deep_gemm` with "
                 "same args as `sglang.launch_server` for pre-compilation to reduce the overhead if you have not run "
                 "it before. For example: `python3 -m sglang.compile_deep_gemm --model deepseek-ai/DeepSeek-V3 --tp 8 "
                 "--trust-remote-code`")
        log.main(f"Try DeepGEMM JIT Compiling for <{kind}> N={n}, K={k}, num_groups=1 with all Ms. It only takes a "
                 "little time (typically 1 sec) if you have run `python3 -m sglang.compile_deep_gemm`. ")
        log.main(f"Required memory for warmup: 0.86GB, Available memory: {avail_gb:.2f}GB")
        for step in range(1, 5):
            clock.sleep(seconds / len(shapes) / 4)
            log.raw(f"DeepGEMM warmup: {25 * step:3d}%|{'█' * step}| {4096 * step // 4}/4096")


#: what the forward pass needs beside CUDA graphs and the draft model in the (1 − mem_fraction_static) reserve
ACTIVATIONS_GB = 1.0


def graphs_do_not_fit(fig: Figures) -> bool:
    """Too much static memory: the reserve left after the pools cannot hold the CUDA graphs (and,
    before 0.5.19, the draft model loaded after them) and the activations: graph capture runs
    out of memory, as SGLang's does."""
    return fig.final_avail_gb < ACTIVATIONS_GB  # after the graphs (and a draft loaded after them)


def hybrid_too_small(fig: Figures) -> str:
    """0.5.23's resolve_max_num_reqs, when the Mamba cap leaves no request (the text after
    `mamba_ratio=` is the stand-in's: the sources elide it)."""
    return ("RuntimeError: Hybrid (mamba/linear-attention) state cache is too small to serve any requests. "
            f"max_mamba_cache_size={fig.mamba_slots}, mamba_ratio=0.9, {fig.slots_per_req} state slots per request. "
            "Raise --max-mamba-cache-size or --mamba-full-memory-ratio, or halve the state size with "
            "--mamba-ssm-dtype bfloat16.")


def run(own: argparse.Namespace, launch_argv: list[str]) -> int:
    rel = release_of(own)
    virtual = dt.datetime.fromisoformat(own.virtual_clock) if own.virtual_clock else None
    clock = Clock(own.time_scale, virtual)
    clock.sleep(5.8)  # python -m sglang.launch_server: imports, then prepare_server_args parses the flags
    a = argparse.Namespace(**vars(own), **parse_launch_args(rel, launch_argv))  # exit 2 as argparse does

    scenario = SCENARIOS[a.scenario]
    if a.gpu_free_gb:
        scenario = dataclasses.replace(scenario, gpu_free_gb=a.gpu_free_gb)
    profile = DENSE_8B if scenario.dense else HYBRID_27B
    spec = bool(a.speculative_algorithm)
    fig = compute(profile, scenario, tp=a.tp_size, mem_fraction_static=a.mem_fraction_static,
                  max_mamba_cache_size=a.max_mamba_cache_size, max_running_requests=a.max_running_requests,
                  context_length=a.context_length, speculative=spec, kv_context_limit=not rel.new,
                  new=rel.new, draft_tokens=a.speculative_num_draft_tokens or 16)
    log = Log(clock, tp=a.tp_size, tags_always=rel.tags_always, ms=os.environ.get("SGLANG_LOG_MS") == "1")
    fault = scenario.fault
    launch_command = " ".join(["python3", "-m", "sglang.launch_server", *launch_argv])
    server = Server(a, fig, scenario, rel, log, launch_command)
    blocker = None
    if fault == "port_in_use" and not a.no_http:
        # Stands in for another server already listening there (a leftover of an earlier run).
        blocker = socket.socket()
        blocker.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        blocker.bind((a.host, a.port))
        blocker.listen()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))

    log.main(server_args_line(a, fig, rel))
    if fault == "model_missing":
        frames = [("<frozen runpy>", 198, "_run_module_as_main", "return _run_code(code, main_globals, None,"),
                  (f"{SITE}/sglang/launch_server.py", 24, "<module>", "server_args = prepare_server_args(sys.argv[1:])"),
                  (f"{SITE}/transformers/utils/hub.py", 511, "cached_files", "raise OSError(")]
        log.raw(traceback_text(frames, f"OSError: Incorrect path_or_model_id: '{a.model_path}'. Please provide either "
                               "the path to a local folder or the repo_id of a model on the Hub."))
        return 1
    log.main("Ignore import error when loading sglang.srt.models.mllama4: No module named 'flash_attn_interface'")
    clock.sleep(2.9)
    if not rel.new:  # 0.5.23 logs no distributed init
        log.all_ranks("Init torch distributed begin.")
    clock.sleep(0.9)
    if fault == "nccl_error":
        die_like_sglang(log, a.tp_size, "torch.distributed.DistBackendError: NCCL error in: "
                        "/pytorch/torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:3356, unhandled cuda error "
                        "(run with NCCL_DEBUG=INFO for details), NCCL version 2.27.3", SCHEDULER_FRAMES)
    if not rel.new:
        log.all_ranks("Init torch distributed ends. elapsed=0.85 s, mem usage=0.09 GB")
    log.all_ranks(f"Load weight begin. avail mem={fig.pre_load_free_gb:.2f} GB")
    shards = 12
    for i in range(1, shards + 1):
        clock.sleep(scenario.weight_load_s / shards)
        done = int(scenario.weight_load_s * i / shards)
        log.raw(f"Loading safetensors checkpoint shards: {100 * i // shards:3d}% Completed | {i}/{shards} "
                f"[00:{done:02d}<00:{int(scenario.weight_load_s) - done:02d},  3.48s/it]")
        if i == shards // 2 and scenario.chatter_lines:
            log.out.write("".join(f"UserWarning: TypedStorage is deprecated ({n})\n" for n in range(scenario.chatter_lines)))
            log.out.flush()
        if i == 5 and fault == "segfault":
            os.kill(os.getpid(), signal.SIGSEGV)
        if i == 7 and fault == "sigkill":
            os.kill(os.getpid(), signal.SIGKILL)
        if i == 3 and fault == "hang":
            while True:
                signal.pause()
    dtype = "" if rel.new else "dtype=torch.bfloat16, "  # 0.5.11 on: no dtype= in the weight lines
    log.all_ranks(f"Load weight end. elapsed={scenario.weight_load_s:.2f} s, type={profile.arch}, "
                  f"{dtype}avail mem={fig.after_weights_gb:.2f} GB, mem usage={fig.weights_gb:.2f} GB.")
    clock.sleep(0.4)
    if fault == "exit_early":
        return 1
    if fig.not_enough_memory or fault == "not_enough_memory":
        die_like_sglang(log, a.tp_size, "RuntimeError: Not enough memory. Please try to increase "
                        f"--mem-fraction-static. Current value: mem_fraction_static={fig.mem_fraction_static}",
                        SCHEDULER_FRAMES)
    if fig.mamba_slots is not None:
        extra = ""
        if spec:
            extra = (f"intermediate_ssm_state_cache size: {fig.intermediate_gb:.2f}GB "
                     f"intermediate_conv_window_cache size: {0.0:.2f}GB ")
        log.all_ranks(f"Mamba Cache is allocated. max_mamba_cache_size: {fig.mamba_slots}, conv_state size: "
                      f"{fig.conv_gb:.2f}GB, ssm_state size: {fig.ssm_gb:.2f}GB {extra}")
    log.all_ranks(f"KV Cache is allocated. dtype: torch.bfloat16, #tokens: {fig.kv_tokens}, "
                  f"K size: {fig.k_gb:.2f} GB, V size: {fig.v_gb:.2f} GB")
    log.all_ranks(f"Memory pool end. avail mem={fig.pool_end_avail_gb:.2f} GB")
    kv_alloc_s = 0.4
    if rel.new and fig.mamba_cap is not None and fig.mamba_cap <= 0:
        frames = [*SCHEDULER_FRAMES, (f"{SITE}/sglang/srt/mem_cache/kv_cache_configurator.py", 412,
                                      "resolve_max_num_reqs", "raise RuntimeError(")]
        die_like_sglang(log, a.tp_size, hybrid_too_small(fig), frames)
    if fig.mamba_slots is not None and fig.requested_max_running and fig.max_running < fig.requested_max_running:
        log.all_ranks(f"max_running_requests is capped to {fig.mamba_slots // fig.slots_per_req} by the mamba state "
                      f"cache (max_mamba_cache_size={fig.mamba_slots}, {fig.slots_per_req} state slots per request). "
                      "To raise it: increase --mamba-full-memory-ratio or --max-mamba-cache-size, or halve the "
                      "state size with --mamba-ssm-dtype bfloat16.")
    bs = list(range(1, min(a.cuda_graph_max_bs, 8) + 1))
    name = "target verify" if spec else "target decode"
    ntok = (a.speculative_num_draft_tokens or 16) if spec else 1
    if rel.old_capture:
        log.all_ranks(f"Capture cuda graph begin. This can take up to several minutes. avail mem={fig.pool_end_avail_gb:.2f} GB")
        log.all_ranks(f"Capture cuda graph bs {bs}")
    elif rel.new:  # 0.5.23: bs= moved to the end line
        log.all_ranks(f"Capture {name} CUDA graph begin. backend=full, num_tokens_per_req={ntok}, "
                      f"avail mem={fig.pool_end_avail_gb:.2f} GB")
    else:
        log.all_ranks(f"Capture {name} CUDA graph begin. backend=full, num_tokens_per_req={ntok}, bs={bs}, "
                      f"avail mem={fig.pool_end_avail_gb:.2f} GB")
    if scenario.precompile_s:
        precompile(log, clock, scenario.precompile_s, fig.pool_end_avail_gb)
    while fault == "hang_in_graphs":
        signal.pause()
    for b in reversed(bs):
        clock.sleep(2.4)
        log.raw(f"Capturing batches (bs={b} avail_mem={fig.pool_end_avail_gb - 0.1 * (len(bs) - b + 1):.2f} GB): "
                f"{100 * (len(bs) - b + 1) // len(bs):3d}%|{'█' * (len(bs) - b + 1)}| {len(bs) - b + 1}/{len(bs)}")
    if fault == "cuda_oom" or graphs_do_not_fit(fig):
        total = gpu_total_gib(fig.pre_load_free_gb)
        die_like_sglang(log, a.tp_size, "Exception: Capture cuda graph failed: CUDA out of memory. Tried to allocate "
                        f"2.00 GiB. GPU 0 has a total capacity of {total:.2f} GiB of which 1.19 GiB "
                        f"is free. Including non-PyTorch memory, this process has {total - 1.19:.2f} GiB memory in use.\n"
                        "Possible solutions:\n1. set --mem-fraction-static to a smaller value (e.g., 0.8 or 0.7)\n"
                        "2. set --cuda-graph-max-bs to a smaller value (e.g., 16)\n"
                        "3. disable torch compile by not using --enable-torch-compile\n"
                        "4. disable CUDA graph by --disable-cuda-graph. (Not recommended. Huge performance loss)",
                        [*SCHEDULER_FRAMES, (f"{SITE}/sglang/srt/model_executor/cuda_graph_runner.py", 391, "__init__",
                                             "raise Exception(")])
    elapsed = 2.4 * len(bs)
    if rel.old_capture:
        log.all_ranks(f"Capture cuda graph end. Time elapsed: {elapsed:.2f} s. mem usage={1.21:.2f} GB. "
                      f"avail mem={fig.graph_end_avail_gb:.2f} GB.")
    elif rel.new:
        log.all_ranks(f"Capture {name} CUDA graph end. bs={bs}, elapsed={elapsed:.2f} s, mem usage={1.21:.2f} GB, "
                      f"avail mem={fig.graph_end_avail_gb:.2f} GB.")
    else:
        log.all_ranks(f"Capture {name} CUDA graph end. elapsed={elapsed:.2f} s, mem usage={1.21:.2f} GB, "
                      f"avail mem={fig.graph_end_avail_gb:.2f} GB.")
    # TpModelWorker asserts once its ModelRunner (pools, then CUDA graphs) is built (before 0.5.20)
    if fig.max_running <= 0 and not rel.new:
        frames = [*SCHEDULER_FRAMES, (f"{SITE}/sglang/srt/managers/tp_worker.py", 247, "__init__",
                                      'assert self.model_runner.max_running_requests > 0, "max_running_request is zero"')]
        die_like_sglang(log, a.tp_size, "AssertionError: max_running_request is zero", frames)
    if spec:
        log.all_ranks(f"Load weight begin. avail mem={fig.graph_end_avail_gb:.2f} GB")
        clock.sleep(3.1)
        log.all_ranks(f"Load weight end. elapsed=3.05 s, type={profile.draft_arch}, {dtype}"
                      f"avail mem={fig.final_avail_gb:.2f} GB, mem usage={fig.draft_weights_gb:.2f} GB.")
        if a.speculative_algorithm.upper() == "DFLASH":
            log.all_ranks(f"Initialized DFLASH draft runner. attention_backend=fa3, model={a.speculative_draft_model_path}, "
                          f"block_size={ntok}")
            log.all_ranks("DFLASH draft runner ready. mask_token=<|MASK|>, mask_token_id=151669")
    if a.node_rank >= 1:  # a worker node: its schedulers are up; no summary, no HTTP
        while not (a.no_http or virtual is not None):
            signal.pause()
        return 0
    clock.sleep(1.2)
    if rel.new and fig.kv_tokens < fig.context_len:  # tp_worker.get_worker_info, every rank; the start goes on
        log.all_ranks(f"KV pool holds {fig.kv_tokens} tokens, fewer than --context-length {fig.context_len}. One "
                      "full-length request cannot fit, so long requests will be refused or truncated at serving "
                      "time. Lower --context-length, raise --mem-fraction-static, or free memory taken before "
                      "the pool is sized.")
    log.rank(0, f"max_total_num_tokens={fig.kv_tokens}, chunked_prefill_size={a.chunked_prefill_size}, "
                f"max_prefill_tokens=16384, max_running_requests={fig.max_running}, context_len={fig.context_len}, "
                f"available_gpu_mem={fig.final_avail_gb:.2f} GB")
    if rel.new:  # engine.py _set_startup_time: the critical path across ranks
        scheduler_e2e = clock.nominal - 5.8
        graph = f"{'verify' if spec else 'decode'}={elapsed:.2f}"
        log.main(f"Engine startup timings (s): load_weight={scenario.weight_load_s:.2f}, "
                 f"kv_cache_allocation={kv_alloc_s:.2f}, scheduler_e2e={scheduler_e2e:.2f}, cuda_graph={{{graph}}}, "
                 f"tokenizer_e2e={clock.nominal + 1.6:.2f}")
    clock.sleep(1.6)
    pid = 61848 if virtual is not None else os.getpid()
    log.uvicorn(f"INFO:     Started server process [{pid}]")
    log.uvicorn("INFO:     Waiting for application startup.")
    log.uvicorn("INFO:     Application startup complete.")
    if not a.no_http or fault == "port_in_use":
        try:
            if a.no_http:  # an example log: the bind failure as the real one reads
                raise OSError(98, "Address already in use")
            server.bind(a.host, a.port)
        except OSError as e:
            log.uvicorn(f"ERROR:    [Errno {e.errno}] error while attempting to bind on address "
                        f"('{a.host}', {a.port}): {(e.strerror or '').lower()}")
            log.uvicorn("INFO:     Waiting for application shutdown.")
            log.uvicorn("INFO:     Application shutdown complete.")
            return 1
    log.uvicorn(f"INFO:     Uvicorn running on http://{a.host}:{a.port} (Press CTRL+C to quit)")
    clock.sleep(1.0)
    warmup_info = "/model_info" if rel.new else "/get_model_info"  # 0.5.9 on polls /model_info
    log.uvicorn(f'INFO:     127.0.0.1:51234 - "GET {warmup_info} HTTP/1.1" 200 OK')
    clock.sleep(3.5)
    if rel.new:
        log.rank(0, "Prefill batch, #new-seq: 1, #new-token: 6, #cached-token: 0, token usage: 0.00, #running-req: 0, "
                    "#queue-req: 0, ")
    else:
        log.rank(0, "Prefill batch. #new-seq: 1, #new-token: 6, #cached-token: 0, token usage: 0.00, #running-req: 0, "
                    "#queue-req: 0,")
    log.uvicorn('INFO:     127.0.0.1:51240 - "POST /generate HTTP/1.1" 200 OK')
    server.ready.set()
    log.main("The server is fired up and ready to roll!")
    if fault == "killed_after_ready" and not a.no_http and virtual is None:
        server.ready.clear()  # the first batch never comes back: /ready and /health say 503 until the kill
    for i in range(a.decode_lines):
        if i % 40 == 0:
            clock.sleep(1.0)
        log.rank(0, f"Decode batch. #running-req: 4, #token: {1000 + i % 9000}, token usage: 0.01, "
                    f"cuda graph: True, gen throughput (token/s): {180 + i % 50:.2f}, #queue-req: 0,")
    if a.no_http or virtual is not None:
        return 0
    if fault == "stops_serving":  # a wedged scheduler: the process lives on, silent, and answers 503
        clock.sleep(scenario.serving_s)
        server.ready.clear()
    if fault == "killed_after_ready":  # a scheduler SIGKILLed (the OOM killer's way); the launcher ends itself
        clock.sleep(scenario.serving_s)
        child = os.getpid() + 1  # the stand-in has no scheduler process: the pid it would have had
        if rel.new:
            log.main(f"Subprocess scheduler_0 (pid={child}) crashed with exit code -9. Triggering SIGQUIT for cleanup...")
        else:
            log.main(f"Child process unexpectedly failed with an exit code 9. pid={child}")
        log.main("Received sigquit from a child process. It usually means the child failed.")
        os.kill(os.getpid(), signal.SIGKILL)  # kill_process_tree of itself
    if fault == "loaded_serving":  # busy, not wedged: slow /health, a decode batch every second
        clock.sleep(scenario.serving_s)
        server.loaded.set()
        for i in itertools.count():
            clock.sleep(1.0)
            log.rank(0, f"Decode batch. #running-req: 64, #token: {90000 + i % 9000}, token usage: 0.93, "
                        f"cuda graph: True, gen throughput (token/s): {2400 + i % 50:.2f}, #queue-req: 212,")
    while True:
        signal.pause()


def main(argv: list[str] | None = None) -> int:
    own, launch_argv = parse_args(sys.argv[1:] if argv is None else argv)
    try:
        return run(own, launch_argv)
    except BrokenPipeError:
        return 0


if __name__ == "__main__":
    sys.exit(main())
