"""SGLang stand-in: `python -m svcdiag.sim SCENARIO [--port P] [--time-scale X] [sglang flags]`.

It replaces only the GPU. It takes launch_server's flags, prints SGLang's real start-up
lines (docs/sglang.md#start-up-milestones; new by default, `--old-format` for the TP0 style) with
realistic timings compressed by --time-scale, serves /health, /health_generate,
/get_model_info and /get_server_info once bound, and dies the way SGLang dies.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime as dt
import json
import os
import signal
import socket
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from .model import DENSE_8B, HYBRID_27B, Figures, compute
from .scenarios import SCENARIOS, Scenario

SGLANG_VERSION = "0.5.23"
SITE = "/opt/sglang/.venv/lib/python3.11/site-packages"


class Clock:
    """Wall clock that sleeps scaled, or a virtual one that only advances (for example logs)."""

    def __init__(self, scale: float, virtual_start: dt.datetime | None):
        self.scale = scale
        self.virtual = virtual_start

    def sleep(self, nominal: float) -> None:
        if self.virtual is not None:
            self.virtual += dt.timedelta(seconds=nominal)
        elif nominal > 0:
            time.sleep(nominal * self.scale)

    def now(self) -> dt.datetime:
        return self.virtual if self.virtual is not None else dt.datetime.now()


class Log:
    def __init__(self, clock: Clock, *, tp: int, old_format: bool, ms: bool):
        self.clock, self.tp, self.old, self.ms = clock, tp, old_format, ms
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


def parse_args(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m svcdiag.sim", description=__doc__.splitlines()[0])
    p.add_argument("scenario", choices=sorted(SCENARIOS))
    p.add_argument("--time-scale", type=float, default=1.0, help="multiply every delay (0.05 = 20× faster)")
    p.add_argument("--old-format", action="store_true", help="older SGLang: TP0 prefix even at tp=1")
    p.add_argument("--virtual-clock", metavar="ISO", help="no sleeping; timestamps start here (example logs)")
    p.add_argument("--decode-lines", type=int, default=0, help="after ready, print N decode batch lines")
    p.add_argument("--no-http", action="store_true", help="do not bind the port; exit once ready")
    p.add_argument("--gpu-free-gb", type=float, help="the simulated GPU's free memory before loading")
    # launch_server's flags (server_args.py spelling)
    p.add_argument("--model-path", "--model", default="/dev/shm/Qwen3.6-27B")
    p.add_argument("--served-model-name")
    p.add_argument("--tp-size", "--tensor-parallel-size", type=int, default=1)
    p.add_argument("--dp-size", type=int, default=1)
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=30000)
    p.add_argument("--mem-fraction-static", type=float)
    p.add_argument("--max-running-requests", type=int)
    p.add_argument("--context-length", type=int)
    p.add_argument("--chunked-prefill-size", type=int, default=8192)
    p.add_argument("--cuda-graph-max-bs", type=int, default=8)
    p.add_argument("--max-mamba-cache-size", type=int)
    p.add_argument("--trust-remote-code", action="store_true")
    p.add_argument("--speculative-algorithm")
    p.add_argument("--speculative-draft-model-path", "--speculative-draft-model")
    p.add_argument("--speculative-num-steps", type=int)
    p.add_argument("--speculative-eagle-topk", type=int)
    p.add_argument("--speculative-num-draft-tokens", type=int)
    args, _unknown = p.parse_known_args(argv)
    return args


def server_args_line(a: argparse.Namespace, fig: Figures) -> str:
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
    """The HTTP side: /health* are 503 until ready, as SGLang's are."""

    def __init__(self, a: argparse.Namespace, fig: Figures, scenario: Scenario):
        self.ready = threading.Event()
        info = {
            "model_path": a.model_path, "tokenizer_path": a.model_path, "is_generation": True,
            "preferred_sampling_params": None, "weight_version": "default",
        }
        server_info = {
            "model_path": a.model_path, "tp_size": a.tp_size, "port": a.port,
            "context_length": a.context_length, "mem_fraction_static": fig.mem_fraction_static,
            "max_total_num_tokens": fig.kv_tokens + scenario.server_info_tokens_delta,
            "max_running_requests": fig.max_running, "speculative_algorithm": a.speculative_algorithm,
            "internal_states": [{"max_total_num_tokens": fig.kv_tokens + scenario.server_info_tokens_delta}],
            "version": SGLANG_VERSION,
        }
        outer = self

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

            def do_GET(self) -> None:
                path = self.path.split("?")[0]
                if path in ("/health", "/health_generate"):
                    self._send(200 if outer.ready.is_set() else 503, {} if outer.ready.is_set() else {"error": "starting"})
                elif path in ("/get_model_info", "/model_info"):
                    self._send(200, info)
                elif path in ("/get_server_info", "/server_info"):
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


def run(a: argparse.Namespace) -> int:
    scenario = SCENARIOS[a.scenario]
    if a.gpu_free_gb:
        scenario = dataclasses.replace(scenario, gpu_free_gb=a.gpu_free_gb)
    profile = DENSE_8B if scenario.dense else HYBRID_27B
    spec = bool(a.speculative_algorithm)
    fig = compute(profile, scenario, tp=a.tp_size, mem_fraction_static=a.mem_fraction_static,
                  max_mamba_cache_size=a.max_mamba_cache_size, max_running_requests=a.max_running_requests,
                  context_length=a.context_length, speculative=spec)
    virtual = dt.datetime.fromisoformat(a.virtual_clock) if a.virtual_clock else None
    clock = Clock(a.time_scale, virtual)
    log = Log(clock, tp=a.tp_size, old_format=a.old_format, ms=os.environ.get("SGLANG_LOG_MS") == "1")
    fault = scenario.fault
    server = Server(a, fig, scenario)
    blocker = None
    if fault == "port_in_use" and not a.no_http:
        # Stands in for another server already listening there (a leftover of an earlier run).
        blocker = socket.socket()
        blocker.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        blocker.bind((a.host, a.port))
        blocker.listen()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))

    clock.sleep(5.8)  # python -m sglang.launch_server: imports
    log.main(server_args_line(a, fig))
    if fault == "model_missing":
        frames = [("<frozen runpy>", 198, "_run_module_as_main", "return _run_code(code, main_globals, None,"),
                  (f"{SITE}/sglang/launch_server.py", 24, "<module>", "server_args = prepare_server_args(sys.argv[1:])"),
                  (f"{SITE}/transformers/utils/hub.py", 511, "cached_files", "raise OSError(")]
        log.raw(traceback_text(frames, f"OSError: Incorrect path_or_model_id: '{a.model_path}'. Please provide either "
                               "the path to a local folder or the repo_id of a model on the Hub."))
        return 1
    log.main("Ignore import error when loading sglang.srt.models.mllama4: No module named 'flash_attn_interface'")
    clock.sleep(2.9)
    log.all_ranks("Init torch distributed begin.")
    clock.sleep(0.9)
    if fault == "nccl_error":
        die_like_sglang(log, a.tp_size, "torch.distributed.DistBackendError: NCCL error in: "
                        "/pytorch/torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:3356, unhandled cuda error "
                        "(run with NCCL_DEBUG=INFO for details), NCCL version 2.27.3", SCHEDULER_FRAMES)
    log.all_ranks("Init torch distributed ends. elapsed=0.85 s, mem usage=0.09 GB")
    log.all_ranks(f"Load weight begin. avail mem={fig.pre_load_free_gb:.2f} GB")
    shards = 12
    for i in range(1, shards + 1):
        clock.sleep(scenario.weight_load_s / shards)
        done = int(scenario.weight_load_s * i / shards)
        log.raw(f"Loading safetensors checkpoint shards: {100 * i // shards:3d}% Completed | {i}/{shards} "
                f"[00:{done:02d}<00:{int(scenario.weight_load_s) - done:02d},  3.48s/it]")
        if i == 5 and fault == "segfault":
            os.kill(os.getpid(), signal.SIGSEGV)
        if i == 7 and fault == "sigkill":
            os.kill(os.getpid(), signal.SIGKILL)
        if i == 3 and fault == "hang":
            while True:
                signal.pause()
    log.all_ranks(f"Load weight end. elapsed={scenario.weight_load_s:.2f} s, type={profile.arch}, "
                  f"dtype=torch.bfloat16, avail mem={fig.after_weights_gb:.2f} GB, mem usage={fig.weights_gb:.2f} GB.")
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
    if fig.mamba_slots is not None and fig.requested_max_running and fig.max_running < fig.requested_max_running:
        log.all_ranks(f"max_running_requests is capped to {fig.mamba_slots // fig.slots_per_req} by the mamba state "
                      f"cache (max_mamba_cache_size={fig.mamba_slots}, {fig.slots_per_req} state slots per request). "
                      "To raise it: increase --mamba-full-memory-ratio or --max-mamba-cache-size, or halve the "
                      "state size with --mamba-ssm-dtype bfloat16.")
    bs = list(range(1, min(a.cuda_graph_max_bs, 8) + 1))
    name = "target verify" if spec else "target decode"
    ntok = (a.speculative_num_draft_tokens or 16) if spec else 1
    if a.old_format:
        log.all_ranks(f"Capture cuda graph begin. This can take up to several minutes. avail mem={fig.pool_end_avail_gb:.2f} GB")
        log.all_ranks(f"Capture cuda graph bs {bs}")
    else:
        log.all_ranks(f"Capture {name} CUDA graph begin. backend=full, num_tokens_per_req={ntok}, bs={bs}, "
                      f"avail mem={fig.pool_end_avail_gb:.2f} GB")
    for b in reversed(bs):
        clock.sleep(2.4)
        log.raw(f"Capturing batches (bs={b} avail_mem={fig.pool_end_avail_gb - 0.1 * (len(bs) - b + 1):.2f} GB): "
                f"{100 * (len(bs) - b + 1) // len(bs):3d}%|{'█' * (len(bs) - b + 1)}| {len(bs) - b + 1}/{len(bs)}")
    if fault == "cuda_oom":
        die_like_sglang(log, a.tp_size, "Exception: Capture cuda graph failed: CUDA out of memory. Tried to allocate "
                        "2.00 GiB. GPU 0 has a total capacity of 139.81 GiB of which 1.19 GiB "
                        "is free. Including non-PyTorch memory, this process has 138.62 GiB memory in use.\n"
                        "Possible solutions:\n1. set --mem-fraction-static to a smaller value (e.g., 0.8 or 0.7)\n"
                        "2. set --cuda-graph-max-bs to a smaller value (e.g., 16)\n"
                        "3. disable torch compile by not using --enable-torch-compile\n"
                        "4. disable CUDA graph by --disable-cuda-graph. (Not recommended. Huge performance loss)",
                        [*SCHEDULER_FRAMES, (f"{SITE}/sglang/srt/model_executor/cuda_graph_runner.py", 391, "__init__",
                                             "raise Exception(")])
    elapsed = 2.4 * len(bs)
    if a.old_format:
        log.all_ranks(f"Capture cuda graph end. Time elapsed: {elapsed:.2f} s. mem usage={1.21:.2f} GB. "
                      f"avail mem={fig.graph_end_avail_gb:.2f} GB.")
    else:
        log.all_ranks(f"Capture {name} CUDA graph end. elapsed={elapsed:.2f} s, mem usage={1.21:.2f} GB, "
                      f"avail mem={fig.graph_end_avail_gb:.2f} GB.")
    # TpModelWorker asserts once its ModelRunner (pools, then CUDA graphs) is built
    if fig.max_running <= 0:
        frames = [*SCHEDULER_FRAMES, (f"{SITE}/sglang/srt/managers/tp_worker.py", 247, "__init__",
                                      'assert self.model_runner.max_running_requests > 0, "max_running_request is zero"')]
        die_like_sglang(log, a.tp_size, "AssertionError: max_running_request is zero", frames)
    if spec:
        log.all_ranks(f"Load weight begin. avail mem={fig.graph_end_avail_gb:.2f} GB")
        clock.sleep(3.1)
        log.all_ranks(f"Load weight end. elapsed=3.05 s, type={profile.draft_arch}, dtype=torch.bfloat16, "
                      f"avail mem={fig.final_avail_gb:.2f} GB, mem usage={fig.draft_weights_gb:.2f} GB.")
        if a.speculative_algorithm.upper() == "DFLASH":
            log.all_ranks(f"Initialized DFLASH draft runner. attention_backend=fa3, model={a.speculative_draft_model_path}, "
                          f"block_size={ntok}")
            log.all_ranks("DFLASH draft runner ready. mask_token=<|MASK|>, mask_token_id=151669")
    clock.sleep(1.2)
    log.rank(0, f"max_total_num_tokens={fig.kv_tokens}, chunked_prefill_size={a.chunked_prefill_size}, "
                f"max_prefill_tokens=16384, max_running_requests={fig.max_running}, context_len={fig.context_len}, "
                f"available_gpu_mem={fig.final_avail_gb:.2f} GB")
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
    log.uvicorn('INFO:     127.0.0.1:51234 - "GET /get_model_info HTTP/1.1" 200 OK')
    clock.sleep(3.5)
    log.rank(0, "Prefill batch. #new-seq: 1, #new-token: 6, #cached-token: 0, token usage: 0.00, #running-req: 0, #queue-req: 0,")
    log.uvicorn('INFO:     127.0.0.1:51240 - "POST /generate HTTP/1.1" 200 OK')
    server.ready.set()
    log.main("The server is fired up and ready to roll!")
    for i in range(a.decode_lines):
        if i % 40 == 0:
            clock.sleep(1.0)
        log.rank(0, f"Decode batch. #running-req: 4, #token: {1000 + i % 9000}, token usage: 0.01, "
                    f"cuda graph: True, gen throughput (token/s): {180 + i % 50:.2f}, #queue-req: 0,")
    if a.no_http or virtual is not None:
        return 0
    while True:
        signal.pause()


def main(argv: list[str] | None = None) -> int:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    try:
        return run(args)
    except BrokenPipeError:
        return 0


if __name__ == "__main__":
    sys.exit(main())
