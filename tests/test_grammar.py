"""The grammar on lines in SGLang's real formats (reference §0–§12), old and new."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from svcdiag.judge.readiness import Readiness
from svcdiag.judge.unit_lines import parse_systemd
from svcdiag.sglang.events import (
    CudaGraph,
    DistInit,
    DraftRunner,
    Failure,
    KVCache,
    MambaCache,
    MaxRunningLimited,
    PoolEnd,
    Ready,
    SchedulerInfo,
    ServerArgs,
    Uvicorn,
    WeightsBegin,
    WeightsEnd,
)
from svcdiag.sglang.grammar import LineParser, classify

PREFIXES = ["[2026-08-27 03:46:30] ", "[2026-08-27 03:46:30.123] ", "[2024-12-13 01:44:59 TP0] ",
            "[2026-08-27 03:46:30 DP0 TP0 EP0] ", "[2026-08-27 03:46:30.001 PP0 TP0] "]


def one(line: str):
    events = LineParser().feed(line)
    assert len(events) == 1, (line, events)
    return events[0]


@pytest.mark.parametrize("prefix", PREFIXES)
def test_prefix_is_parsed_not_assumed(prefix: str) -> None:
    ev = one(prefix + "Load weight begin. avail mem=54.64 GB")
    assert isinstance(ev, WeightsBegin) and ev.avail_gb == 54.64
    assert ev.ranks == prefix[prefix.index(":") + 6:].split("]", maxsplit=1)[0].lstrip(".0123456789 ").strip()
    assert ev.ts is not None


def test_milestones_without_any_prefix_parse_the_same() -> None:
    """SGLANG_LOGGING_CONFIG_PATH can drop the `[time]` prefix; the journal still has the time."""
    p = LineParser()
    kv = p.feed("KV Cache is allocated. dtype: torch.bfloat16, #tokens: 2125056, K size: 10.13 GB, V size: 10.13 GB",
                ts=1.0)
    assert isinstance(kv[0], KVCache) and kv[0].tokens == 2125056 and kv[0].ts == 1.0
    assert isinstance(p.feed("The server is fired up and ready to roll!", ts=2.0)[0], Ready)
    # a tqdm bar is progress within the phase, not a milestone (tests/test_progress.py)
    assert [e.kind for e in p.feed("Loading safetensors checkpoint shards:  50% Completed | 6/12")] == ["progress"]


def test_weight_load_end_new_old_oldest_and_quantized() -> None:
    new = one("[2026-08-17 16:52:10] Load weight end. elapsed=100.59 s, type=BailingMoeV3ForCausalLM, "
              "avail mem=97.27 GB, mem usage=15.47 GB.")
    assert (new.elapsed_s, new.model_type, new.avail_gb, new.mem_usage_gb, new.dtype) == \
        (100.59, "BailingMoeV3ForCausalLM", 97.27, 15.47, None)
    old = one("[2024-12-13 01:45:10 TP0] Load weight end. type=LlamaForCausalLM, dtype=torch.bfloat16, "
              "avail mem=63.45 GB, mem usage=14.99 GB.")
    assert old.elapsed_s is None and old.dtype == "torch.bfloat16" and old.ranks == "TP0"
    q = one("[2026-08-17 16:52:10] Load weight end. elapsed=20.00 s, type=Qwen3ForCausalLM, quant=fp8, "
            "avail mem=60.00 GB, mem usage=8.00 GB.")
    assert q.quant == "fp8"
    draft = one("[2026-08-17 16:52:40] Load weight end. elapsed=3.05 s, type=DFlash2DraftModel, avail mem=32.06 GB, "
                "mem usage=1.66 GB.")
    assert isinstance(draft, WeightsEnd) and draft.model_type == "DFlash2DraftModel"


def test_kv_cache_variants() -> None:
    mha = one("[2026-08-27 03:46:29] KV Cache is allocated. dtype: torch.bfloat16, #tokens: 2125056, "
              "K size: 10.13 GB, V size: 10.13 GB")
    assert isinstance(mha, KVCache) and (mha.tokens, mha.k_gb, mha.v_gb, mha.dtype) == (2125056, 10.13, 10.13, "torch.bfloat16")
    mla = one("[2026-08-27 03:46:29 TP3] KV Cache is allocated. #tokens: 540000, KV size: 35.12 GB")
    assert (mla.tokens, mla.kv_gb, mla.dtype, mla.ranks) == (540000, 35.12, None, "TP3")
    full = one("[2026-08-27 03:46:29] Full KV Cache is allocated. dtype: torch.bfloat16, #tokens: 100000, K size: 1.00 GB, V size: 1.00 GB")
    swa = one("[2026-08-27 03:46:29] SWA KV Cache is allocated. dtype: torch.bfloat16, #tokens: 400000, K size: 4.00 GB, V size: 4.00 GB")
    assert full.label == "Full" and swa.label == "SWA"
    ub = one("[2026-08-27 03:46:29] KV Cache VA upper bound. dtype: torch.bfloat16, #tokens: 900000, KV size: 9.00 GB")
    assert ub.upper_bound
    post = one("[2026-08-27 03:47:29] Post-capture KV sizing: KV cache allocated. dtype: torch.bfloat16, #tokens: 812345, "
               "KV size: 8.10 GB, avail mem=3.00 GB")
    assert post.post_capture and not post.draft and post.tokens == 812345
    dpost = one("[2026-08-27 03:47:29] Post-capture KV sizing: draft KV cache allocated. dtype: torch.bfloat16, "
                "#tokens: 812345, KV size: 0.80 GB")
    assert dpost.draft


def test_mamba_cache_plain_and_speculative() -> None:
    plain = one("[2026-08-27 03:46:29] Mamba Cache is allocated. max_mamba_cache_size: 614, conv_state size: 0.38GB, "
                "ssm_state size: 10.81GB ")
    assert isinstance(plain, MambaCache) and (plain.slots, plain.conv_gb, plain.ssm_gb, plain.intermediate_ssm_gb) == (614, 0.38, 10.81, None)
    spec = one("[2026-08-27 03:46:29] Mamba Cache is allocated. max_mamba_cache_size: 24, conv_state size: 0.07GB, "
               "ssm_state size: 3.52GB intermediate_ssm_state_cache size: 11.25GB intermediate_conv_window_cache size: 0.04GB ")
    assert (spec.intermediate_ssm_gb, spec.intermediate_conv_gb) == (11.25, 0.04)


def test_scheduler_line_new_and_older() -> None:
    new = one("[2026-08-27 03:46:30] max_total_num_tokens=392920, chunked_prefill_size=8192, max_prefill_tokens=16384, "
              "max_running_requests=4096, context_len=40960, available_gpu_mem=10.54 GB")
    assert isinstance(new, SchedulerInfo)
    assert (new.max_total_num_tokens, new.chunked_prefill_size, new.max_prefill_tokens, new.max_running_requests,
            new.context_len, new.available_gpu_mem_gb) == (392920, 8192, 16384, 4096, 40960, 10.54)
    old = one("[2024-12-13 01:45:30 TP0] max_total_num_tokens=100000, max_prefill_tokens=16384, max_running_requests=2049, context_len=8192")
    assert old.chunked_prefill_size is None and old.available_gpu_mem_gb is None and old.context_len == 8192


def test_cuda_graph_both_formats() -> None:
    b = one("[2026-08-27 03:46:31] Capture target decode CUDA graph begin. backend=full, num_tokens_per_req=1, bs=[1, 2], avail mem=73.10 GB")
    e = one("[2026-08-27 03:46:41] Capture target verify CUDA graph end. elapsed=9.60 s, mem usage=1.21 GB, avail mem=33.72 GB.")
    assert isinstance(b, CudaGraph) and (b.stage, b.name, b.avail_gb) == ("begin", "target decode", 73.10)
    assert (e.stage, e.name, e.elapsed_s, e.mem_usage_gb) == ("end", "target verify", 9.60, 1.21)
    ob = one("[2024-12-13 01:45:12 TP0] Capture cuda graph begin. This can take up to several minutes. avail mem=60.05 GB")
    oe = one("[2024-12-13 01:45:22 TP0] Capture cuda graph end. Time elapsed: 10.12 s. mem usage=0.85 GB. avail mem=59.20 GB.")
    assert (ob.stage, ob.name) == ("begin", "target decode")
    assert (oe.stage, oe.elapsed_s, oe.mem_usage_gb, oe.avail_gb) == ("end", 10.12, 0.85, 59.20)
    d = one("[2026-08-27 03:46:50] Capture draft decode CUDA graph begin. backend=full, num_tokens_per_bs=1, bs=[1], avail mem=30.00 GB")
    assert d.name == "draft decode"


def test_distributed_pool_draft_runner_uvicorn_ready() -> None:
    dist = one("[2026-05-28 05:58:14] Init torch distributed ends. elapsed=0.85 s, mem usage=0.09 GB")
    assert isinstance(dist, DistInit) and (dist.stage, dist.elapsed_s, dist.mem_usage_gb) == ("end", 0.85, 0.09)
    assert one("[2024-12-13 01:44:59 TP0] Init torch distributed ends. mem usage=0.09 GB").elapsed_s is None
    assert isinstance(one("[2026-05-28 05:58:14] Memory pool end. avail mem=34.93 GB"), PoolEnd)
    dr = one("[2026-05-28 05:59:00] Initialized DFLASH draft runner. attention_backend=fa3, model=/m/d, block_size=16, "
             "draft_window_size=None, compact_cache=False")
    assert isinstance(dr, DraftRunner) and dr.algorithm == "DFLASH" and dr.stage == "initialized"
    assert one("[2026-05-28 05:59:00] DFLASH draft runner ready. mask_token=<|MASK|>, mask_token_id=151669").stage == "ready"
    up = one("[2026-05-28 05:59:02] INFO:     Uvicorn running on http://0.0.0.0:30000 (Press CTRL+C to quit)")
    assert isinstance(up, Uvicorn) and up.url == "http://0.0.0.0:30000"
    assert isinstance(one("[2026-05-28 05:59:05] The server is fired up and ready to roll!"), Ready)


def test_server_args_line() -> None:
    ev = one("[2026-05-28 05:58:00] server_args=ServerArgs(model_path='/dev/shm/Qwen3.6-27B', tokenizer_path='/dev/shm/Qwen3.6-27B', "
             "tp_size=4, mem_fraction_static=0.75, max_running_requests=None, context_length=32768, "
             "speculative_algorithm='DFLASH', max_mamba_cache_size=24, port=30002, served_model_name='a, b')")
    assert isinstance(ev, ServerArgs)
    assert (ev.model_path, ev.tp_size, ev.mem_fraction_static, ev.max_running_requests, ev.context_length,
            ev.speculative_algorithm, ev.max_mamba_cache_size, ev.port) == \
        ("/dev/shm/Qwen3.6-27B", 4, 0.75, None, 32768, "DFLASH", 24, 30002)


def test_max_running_warnings_are_not_failures() -> None:
    capped = one("[2026-05-28 05:58:30] max_running_requests is capped to 4 by the mamba state cache (max_mamba_cache_size=24, "
                 "5 state slots per request). To raise it: increase --mamba-full-memory-ratio or --max-mamba-cache-size, or "
                 "halve the state size with --mamba-ssm-dtype bfloat16.")
    assert isinstance(capped, MaxRunningLimited) and (capped.value, capped.mamba_slots, capped.slots_per_req) == (4, 24, 5)
    red = one("[2026-05-28 05:58:30] max_running_requests was reduced from the requested 64 to 12 (per dp worker) due to the "
              "available KV cache capacity.")
    assert (red.by, red.requested, red.value) == ("kv", 64, 12)


ALARMING_BUT_FINE = [
    "[2026-05-28 05:58:00] Ignore import error when loading sglang.srt.models.mllama4: No module named 'flash_attn_interface'",
    "[2026-05-28 05:58:00] WARNING: error-prone setting: --enable-torch-compile may fail on some GPUs",
    "/opt/venv/lib/python3.11/site-packages/torch/cuda/__init__.py:63: FutureWarning: The pynvml package is deprecated.",
    "  warnings.warn(",
    "[2026-05-28 05:58:00 TP0] Decode batch. #running-req: 1, #token: 20, token usage: 0.00, gen throughput (token/s): 10.0, #queue-req: 0,",
    "Loading safetensors checkpoint shards:  50% Completed | 6/12 [00:20<00:20,  3.48s/it]",
    "[2026-05-28 05:58:00] INFO:     127.0.0.1:51234 - \"GET /health HTTP/1.1\" 503 Service Unavailable",
    "[2026-05-28 05:58:00] ERROR:    Exception in ASGI application",
]


@pytest.mark.parametrize("line", ALARMING_BUT_FINE)
def test_lines_that_only_look_alarming_are_not_failures(line: str) -> None:
    assert not [e for e in LineParser().feed(line) if isinstance(e, Failure)]


def failures(lines: list[str]) -> list[Failure]:
    p = LineParser()
    out = [e for line in lines for e in p.feed(line)] + p.close()
    return [e for e in out if isinstance(e, Failure)]


def scheduler_tb(final: str, ranks: str = " TP0") -> list[str]:
    return [f"[2026-05-28 05:58:40{ranks}] Scheduler hit an exception: Traceback (most recent call last):",
            '  File "/x/sglang/srt/managers/scheduler.py", line 3012, in run_scheduler_process',
            "    scheduler = Scheduler(server_args, port_args, gpu_id, tp_rank, moe_ep_rank, pp_rank, dp_rank)",
            '  File "/x/sglang/srt/managers/tp_worker.py", line 247, in __init__',
            '    assert self.model_runner.max_running_requests > 0, "max_running_request is zero"', final, ""]


@pytest.mark.parametrize("final,cause", [
    ("AssertionError: max_running_request is zero", "max_running_zero"),
    ("RuntimeError: Not enough memory. Please try to increase --mem-fraction-static. Current value: mem_fraction_static=0.3",
     "not_enough_memory"),
    ("RuntimeError: Not enough memory. Please try to increase --mem-fraction-static. Current value: "
     "self.server_args.mem_fraction_static=0.88", "not_enough_memory"),
    ("RuntimeError: Loaded weights leave no GPU memory for the KV cache under --mem-fraction-static=0.5. Raise "
     "--mem-fraction-static above 0.612", "not_enough_memory"),
    ("RuntimeError: Hybrid (mamba/linear-attention) state cache is too small to serve any requests. max_mamba_cache_size=2, "
     "mamba_ratio=0.9", "mamba_cache_too_small"),
    ("RuntimeError: Not enough GPU memory for hybrid (mamba/linear-attention) state cache. Computed max_mamba_cache_size=0 (x). Try: y",
     "mamba_cache_too_small"),
    ("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 79.11 GiB",
     "cuda_oom"),
    ("torch.distributed.DistBackendError: NCCL error in: ProcessGroupNCCL.cpp:3356, unhandled cuda error", "nccl_error"),
    ("OSError: Incorrect path_or_model_id: '/dev/shm/nope'. Please provide either the path to a local folder or the repo_id",
     "model_not_found"),
    ("huggingface_hub.errors.HFValidationError: Repo id must be in the form 'repo_name' or 'namespace/repo_name': '/x'",
     "model_not_found"),
    ("KeyError: 'qwen3_5'", "exception"),
    ("ZeroDivisionError: division by zero", "exception"),
])
def test_failures_are_classified_from_the_final_exception_line(final: str, cause: str) -> None:
    got = failures(scheduler_tb(final))
    assert got and got[0].cause == cause, got
    assert got[0].message == final and final in got[0].evidence


def test_traceback_without_the_word_error_is_still_a_failure() -> None:
    got = failures(["Traceback (most recent call last):", '  File "/x/launch_server.py", line 9, in <module>',
                    "    main()", "KeyboardInterrupt"])
    assert got[0].cause == "exception" and got[0].message == "KeyboardInterrupt"


def test_port_in_use_and_dead_schedulers_and_segfault_line() -> None:
    (port,) = failures(["[2026-05-28 05:59:02] ERROR:    [Errno 98] error while attempting to bind on address "
                        "('0.0.0.0', 30000): address already in use"])
    assert port.cause == "port_in_use"
    (dead,) = failures(["[2026-05-28 05:59:02] Rank 0 scheduler died during initialization (exit code: -9). If exit "
                        "code is -9 (SIGKILL), a likely cause is the OS OOM killer."])
    assert (dead.cause, dead.signal) == ("killed_by_signal", "KILL")
    (old,) = failures(["[2024-12-13 01:45:00] Exit code: 1"])
    assert (old.cause, old.status) == ("exited", 1)
    (seg,) = failures(["Fatal Python error: Segmentation fault", "", "Current thread 0x00007f (most recent call first):"])
    assert (seg.cause, seg.signal) == ("killed_by_signal", "SEGV")


def test_interleaved_ranks_tracebacks_give_one_cause() -> None:
    lines = []
    for r in range(8):
        lines.append(f"[2026-05-28 05:58:40 TP{r}] Load weight end. elapsed=10.00 s, type=X, avail mem=1.00 GB, mem usage=9.00 GB.")
    tbs = [scheduler_tb("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB.", f" TP{r}") for r in range(8)]
    for i in range(len(tbs[0])):  # rank lines interleave line by line
        lines += [tb[i] for tb in tbs]
    got = failures(lines)
    assert got[0].cause == "cuda_oom"


def test_systemd_lines() -> None:
    seg = parse_systemd("Main process exited, code=killed, status=11/SEGV")
    assert (seg.state, seg.code, seg.status) == ("exited", "killed", "11/SEGV")
    assert parse_systemd("Main process exited, code=dumped, status=6/ABRT").code == "dumped"
    assert parse_systemd("Failed with result 'signal'.").result == "signal"
    assert parse_systemd("Started dflash-smoke.service - SGLang.").state == "started"
    assert parse_systemd("Stopping x.service...").state == "stopping"
    assert parse_systemd("A process of this unit has been killed by the OOM killer.").state == "oom"
    assert parse_systemd("Consumed 1.2s CPU time.") is None


@settings(max_examples=500, deadline=None)
@given(st.lists(st.one_of(
    st.text(max_size=200),
    st.sampled_from(PREFIXES).flatmap(lambda p: st.text(max_size=120).map(lambda t: p + t)),
    st.sampled_from(["Traceback (most recent call last):", "  File \"x\"", "[2026-05-28 05:58:40 TP0] Scheduler hit an "
                     "exception: Traceback (most recent call last):", "[2026-05-28 05:58:40] KV Cache is allocated. #tokens: x",
                     "[2026-05-28 05:58:40] max_total_num_tokens=1, max_running_requests=x", "[9999-99-99 99:99:99] Load weight begin."]),
), max_size=30))
def test_parser_and_state_machine_never_raise_on_arbitrary_text(lines: list[str]) -> None:
    p = LineParser()
    machine = Readiness()
    for line in lines:
        for ev in p.feed(line):
            machine.feed(ev)
    for ev in p.close():
        machine.feed(ev)
    assert machine.finish().verdict in ("healthy", "failed", "timed_out", "incomplete")


@pytest.mark.parametrize(("line", "cause"), [
    ("RuntimeError: CUDA error: out of memory", "cuda_oom"),  # a CUDA error that is OOM stays OOM
    ("RuntimeError: CUDA error: no kernel image is available for execution on the device", "unsupported_hardware"),
    ("RuntimeError: CUDA error: an illegal memory access was encountered", "cuda_error"),
    ("RuntimeError: CUDA error: device-side assert triggered", "cuda_error"),
    ("RuntimeError: Found no NVIDIA driver on your system.", "gpu_unavailable"),
    ("RuntimeError: CUDA error: CUDA-capable device(s) is/are busy or unavailable", "gpu_unavailable"),
    ("OSError: libcuda.so.1: cannot open shared object file: No such file or directory", "gpu_unavailable"),
    ("ImportError: libcudart.so.12: cannot open shared object file: No such file or directory", "broken_install"),
    ("ImportError: cannot import name 'awq_dequantize' from 'sgl_kernel'", "broken_install"),
    ("RuntimeError: NCCL error: unhandled cuda error (run with NCCL_DEBUG=INFO for details)", "nccl_error"),
    ("torch.distributed.DistNetworkError: The client socket has timed out after 600000ms", "rendezvous_failed"),
    ("OSError: [Errno 28] No space left on device", "disk_full"),
    ("OSError: Can't load tokenizer for '/models/x'.", "model_not_found"),
    ("PermissionError: [Errno 13] Permission denied: '/var/cache/sglang'", "access_denied"),
    ("OSError: [Errno 30] Read-only file system: '/data/hf/.locks'", "access_denied"),
    ("RuntimeError: Failed to find C compiler. Please specify via CC environment variable.", "broken_install"),
    ("Exception: data did not match any variant of untagged enum ModelWrapper at line 1 column 2", "unsupported_model"),
    ("AssertionError: Attempted to load weight (torch.Size([8, 2])) into parameter (torch.Size([4, 2]))",
     "bad_checkpoint"),
])
def test_causes_beyond_memory_and_their_priority(line: str, cause: str) -> None:
    assert classify(line) == cause


@pytest.mark.parametrize("final", [
    "triton.runtime.errors.OutOfResources: out of resource: shared memory, Required: 116736",
    "torch._dynamo.exc.BackendCompilerFailed: backend='inductor' raised:",
])
def test_a_qualified_exception_not_named_error_ends_its_traceback(final: str) -> None:
    """Its class name is no *Error, yet it is the final line: the traceback is not `cut off`."""
    p = LineParser()
    lines = ["[2026-05-23 09:42:40 TP0] Scheduler hit an exception: Traceback (most recent call last):",
             '  File "/x/jit.py", line 3, in run', "    k()", final]
    evs = [e for ln in lines for e in p.feed_line(ln)] + p.close()
    fail = next(e for e in evs if isinstance(e, Failure))
    assert fail.message == final


@given(rank=st.sampled_from(["", "[rank:3]:"]), pid=st.sampled_from(["", "[1537] "]),
       level=st.sampled_from(["DEBUG", "INFO", "WARNING"]))
def test_torch_npu_logger_lines_are_read_at_error_and_chatter_below(rank: str, pid: str, level: str) -> None:
    """torch_npu's own logger (`[… :mmm] torch_npu.memory: [ERROR] [pid] msg`): its ERROR line says the failure,
    its lower levels say nothing, and either one ends a traceback past its final line."""
    stamp = f"{rank}[2026-05-29 16:30:21:955] torch_npu.memory: "
    (oom,) = failures([f"{stamp}[ERROR] {pid}NPU out of memory. Tried to allocate 450.00 MiB (NPU 0; 61.27 GiB total)"])
    assert oom.cause == "cuda_oom" and oom.message.startswith("NPU out of memory")
    assert failures([f"{stamp}[{level}] {pid}NPU out of memory, retrying after freeing the cache"]) == []
    (exc,) = failures([*scheduler_tb("ValueError: bad shape"), f"{stamp}[{level}] {pid}a later line of its own"])
    assert exc.message == "ValueError: bad shape"


CAPTURE_FRAMES = [
    '  File "/sgl/python/sglang/srt/model_executor/model_runner.py", line 1825, in init_device_graphs',
    "    self.graph_runner = graph_runners[self.device](self)",
    '  File "/sgl/python/sglang/srt/model_executor/cuda_graph_runner.py", line 393, in __init__',
    "    raise Exception(",
]


@pytest.mark.parametrize("final", ["Exception: Capture cuda graph failed: ", "_remote.<locals>.Derived: boom"])
def test_a_traceback_cut_at_its_top_speaks_before_a_bare_head(final: str) -> None:
    """A paste that starts among a traceback's frames: they open it, its first unindented line is its final one
    (whatever its class looks like), its frames say the phase, and a later bare handler head only confirms it."""
    got = failures([*CAPTURE_FRAMES, final, "Possible solutions:", "",
                    "[2025-10-04 02:29:36 DP7 TP7] Scheduler hit an exception:"])
    assert [(f.role, f.message.split(" Possible")[0].rstrip()) for f in got] == [
        ("suspect", final.rstrip()), ("death", "Scheduler hit an exception:")]
    assert got[0].raised_in == "cuda_graph" and got[1].raised_in == ""


def test_frames_alone_are_no_failure_and_other_frames_say_no_phase() -> None:
    """A stack printed, not raised (`traceback.print_stack`, logging's stack_info), ends with no exception line."""
    for then in ("[2025-10-04 02:29:36] Load weight begin. avail mem=70.00 GB", "INFO:     Started server process [7]"):
        assert failures([*CAPTURE_FRAMES, then, "a later line of its own"]) == []
    (f,) = failures(scheduler_tb("ValueError: bad shape"))
    assert f.raised_in == ""


@pytest.mark.parametrize("lone,cause", [("RuntimeError: Error occurred when running GEMM! (numBatches: 256)", "cuda_error"),
                                        ("ValueError: shapes do not match", "exception"),
                                        ("CUDA Error: an illegal memory access was encountered (700)", "cuda_error")])
def test_a_lone_exception_line_speaks_for_the_cut_traceback_right_after_it(lone: str, cause: str) -> None:
    """Audit R13a: another rank's final line pasted alone, then a scheduler's traceback cut before its own: the
    lone line is what it failed of; a complete traceback, or one a SGLang line later, keeps its own words."""
    cut = scheduler_tb("")[:3]
    got = failures([lone, "", *cut])
    assert got[-1].cause == cause and got[-1].message == lone
    later = failures([lone, "[2026-05-28 05:58:39 TP0] Load weight begin. avail mem=70.00 GB", *cut])
    assert later[-1].cause == "exception" and later[-1].message.endswith("its traceback cut off")
    whole = failures([lone, *scheduler_tb("KeyError: 'k_scale'")])
    assert whole[-1].message.startswith("KeyError: 'k_scale'")


@given(st.text(alphabet="abcdefghij:,._ ", min_size=1, max_size=40).filter(str.strip))
@settings(max_examples=50, deadline=None)
def test_sglang_prefix_glued_after_another_writers_line_is_read(head: str) -> None:
    """Audit R13c: two writers on one stream leave SGLang's dated line glued to another's unfinished one."""
    got = failures([head + "[2026-02-23 23:52:47 TP5] Scheduler hit an exception: Traceback (most recent call last):",
                    '  File "/x/sglang/srt/managers/scheduler.py", line 3160, in run_scheduler_process'])
    assert [f.message for f in got] == ["[TP5] Scheduler hit an exception: its traceback cut off"]


@pytest.mark.parametrize("lines", [
    ["RuntimeError: Error in function 'run' at /workspace/csrc/trtllm_batched_gemm_runner.cu:276:",
     "Error occurred when running GEMM! (numBatches: 256)"],
    ["Exception: Capture cuda graph failed: Error in function 'run' at",
     "  /workspace/csrc/trtllm_batched_gemm_runner.cu:276:", "  Error occurred when running GEMM! (numBatches: 256,"]])
def test_a_lone_message_over_several_lines_is_read_with_its_continuation(lines: list[str]) -> None:
    """Audit R14c: a kernel library's message wrapped over physical lines, pasted alone: the words that name the
    cause are on a continuation line (indented, or after a line left unfinished)."""
    (f,) = failures(lines)
    assert (f.role, f.cause) == ("suspect", "cuda_error") and "Error occurred when running GEMM!" in f.message
    cut = scheduler_tb("")[:3]  # and it speaks, whole, for a scheduler's traceback cut right after it
    assert failures([*lines, *cut])[-1].cause == "cuda_error"


def test_a_lone_line_without_a_cause_takes_no_unrelated_line() -> None:
    """A finished lone line, then another unindented line: each is read on its own, not their words together."""
    assert failures(["ValueError: shapes do not match.", "Error occurred when running GEMM! (x)"])[0].message \
        == "Error occurred when running GEMM! (x)"
    assert failures(["ValueError: shapes do not match.", "some other line"]) == []


@given(st.integers(min_value=1, max_value=10), st.sampled_from(["", ".816"]), st.sampled_from(["", " TP3", " DP0 TP0 EP0"]))
@settings(max_examples=60, deadline=None)
def test_sglang_prefix_cut_at_its_head_in_a_paste_is_read(cut: int, ms: str, ranks: str) -> None:
    """Fresh logs (2026-12-06): a paste whose selection began inside SGLang's prefix (`026-05-28 00:11:09.816 DP0 TP0
    EP0] Scheduler hit an exception: …`, the `[2` lost): its message and ranks are read as the whole prefix's."""
    whole = f"[2026-05-28 00:11:09{ms}{ranks}] Scheduler hit an exception: Traceback (most recent call last):"
    got = failures([whole[cut:], '  File "/x/sglang/srt/managers/scheduler.py", line 3985, in run_scheduler_process'])
    assert [(f.ranks, f.message) for f in got] == [(ranks.strip(), f"[{ranks.strip()}] Scheduler hit an exception: "
                                                    "its traceback cut off" if ranks else
                                                    "Scheduler hit an exception: its traceback cut off")]


def test_sglang_prefix_cut_at_its_ranks_is_read() -> None:
    """The selection began at the ranks (sgl-project/sglang#4618: `DP2 TP2] Scheduler hit an exception: …`)."""
    got = failures(["DP2 TP2] Scheduler hit an exception: Traceback (most recent call last):",
                    '  File "/x/sglang/srt/managers/scheduler.py", line 1906, in run_scheduler_process',
                    "    scheduler.event_loop_overlap()"])
    assert [(f.ranks, f.message, f.raised_in) for f in got] == [
        ("DP2 TP2", "[DP2 TP2] Scheduler hit an exception: its traceback cut off", "http")]


@pytest.mark.parametrize("text", ["2026-05-28 00:11:09 worker 3] bar", "05-28 00:11:09 worker[3] started",
                                  "12 00:00:01 x] y", "INFO] started", "3] foo", "Loading [1/2] done"])
def test_a_time_and_a_bracket_that_are_no_sglang_prefix_stay_unread(text: str) -> None:
    """Only SGLang's own prefix shapes lose their head: another program's level or words before the `]` are not one."""
    p = LineParser()
    assert p.feed(text) == [] and p.sglang_lines == 0


@pytest.mark.parametrize("steps,phase", [
    (['  File "/x/sglang/srt/model_executor/model_runner.py", line 417, in load_model', "    raise ValueError("],
     "loading_weights"),
    (['  File "/x/sglang/srt/model_executor/model_runner.py", line 176, in initialize', "    self.load_model()"],
     "loading_weights"),
    (['  File "/x/sglang/srt/model_executor/model_runner.py", line 260, in initialize',
      "    self.init_memory_pool(min_per_gpu_memory, server_args.max_running_requests)"], "kv_cache"),
    (['  File "/x/sglang/srt/managers/scheduler.py", line 3616, in run_scheduler_process',
      "    scheduler.run_event_loop()"], "http"),
    (['  File "/x/sglang/srt/managers/scheduler.py", line 745, in event_loop_overlap',
      "    batch = self.get_next_batch_to_run()"], "http"),
    (['  File "/x/sglang/srt/managers/scheduler.py", line 240, in __init__', "    self.tp_worker = TpWorkerClass("], ""),
    (['  File "/x/sglang/srt/layers/vocab_parallel_embedding.py", line 468, in weight_loader',
      "    param[: loaded_weight.shape[0]].data.copy_(loaded_weight)"], "loading_weights"),
    # a serving server's new weights (RL's weight sync): no start's step
    (['  File "/x/sglang/srt/managers/tp_worker.py", line 300, in update_weights_from_disk',
      '  File "/x/sglang/srt/layers/vocab_parallel_embedding.py", line 468, in weight_loader'], ""),
])
def test_a_cut_tracebacks_frames_and_calls_say_the_step_it_was_raised_in(steps: list[str], phase: str) -> None:
    """Fresh logs (2026-12-06): a paste that begins at the traceback has no milestone; its frames, and the calls
    under them, say how far the start had got (the event loop: its set-up was done)."""
    (f,) = failures(["[2025-03-17 17:15:55 TP1] Scheduler hit an exception: Traceback (most recent call last):",
                     '  File "/x/sglang/srt/managers/scheduler.py", line 1748, in run_scheduler_process', *steps])
    assert f.raised_in == phase


def test_a_capture_failure_pasted_without_its_traceback_was_raised_capturing() -> None:
    (f,) = failures(["Exception: Capture cuda graph failed: CUDA out of memory.", "Tried to allocate 672.00 MiB."])
    assert (f.cause, f.raised_in) == ("cuda_oom", "cuda_graph")


@pytest.mark.parametrize("gap", [1, 46, 300])
def test_rank_dead_then_its_exit_code_however_late_names_the_signal(gap: int) -> None:
    """Fresh logs (2026-12-06): the launcher joins the dead scheduler before it prints `Exit code: -9`; on a host
    thrashing for RAM that is tens of seconds after `Rank 0 scheduler is dead.`, past the death's grace."""
    from svcdiag.judge.pipeline import Judge

    pipe = Judge()
    for line in ["[2026-01-26 23:15:00] Load weight begin. avail mem=70.00 GB",
                 "[2026-01-26 23:15:21] Rank 0 scheduler is dead.",
                 f"[2026-01-26 23:{15 + (21 + gap) // 60:02d}:{(21 + gap) % 60:02d}] Exit code: -9"]:
        pipe.line(line)
    v = pipe.readiness.finish() if pipe.verdict is None else pipe.verdict
    assert (v.verdict, v.cause, v.figures.signal, v.phase) == ("failed", "killed_by_signal", "KILL", "loading_weights")


def test_a_traceback_cut_at_its_top_with_its_frame_at_the_margin_is_one() -> None:
    """A paste that lost its indentation: the frame at the margin opens the cut traceback as an indented one does."""
    (f,) = failures(['File "sglang/srt/layers/vocab_parallel_embedding.py", line 468, in weight_loader',
                     "    param[: loaded_weight.shape[0]].data.copy_(loaded_weight)",
                     "RuntimeError: Native API failed. Native API returns: 39 (UR_RESULT_ERROR_OUT_OF_DEVICE_MEMORY)"])
    assert (f.cause, f.raised_in) == ("cuda_oom", "loading_weights")


@pytest.mark.parametrize("line,phase", [
    ("[2025-08-02 19:24:30 TP3] Watchdog timeout (self.watchdog_timeout=300)", "http"),
    ("[2026-05-23 09:42:40 TP0] Scheduler watchdog timeout (self.watchdog_timeout=300, self.soft=False)", "http")])
def test_the_watchdogs_timeout_was_raised_in_the_event_loop(line: str, phase: str) -> None:
    """The watchdog times a batch the event loop runs: pasted without its start, the start had got that far."""
    (f,) = failures([line])
    assert (f.cause, f.raised_in) == ("watchdog_timeout", phase)


def test_a_paste_whose_newlines_were_lost_is_split_at_rays_actor_prefix() -> None:
    """Text outside a code block, rendered as Markdown: a Ray worker's lines joined at its `(Actor pid=N) ` prefix."""
    line = ('x (W pid=7) File "/x/sglang/srt/model_executor/model_runner.py", line 314, in initialize (W pid=7) '
            'self.init_cuda_graphs() (W pid=7) RuntimeError: CUDA out of memory. Tried to allocate 2.00 GiB')
    (f,) = failures([line])
    assert (f.cause, f.raised_in) == ("cuda_oom", "cuda_graph")
    assert failures(["one (W pid=7) mention of a worker"]) == []  # one prefix mid-line is no flattened paste
