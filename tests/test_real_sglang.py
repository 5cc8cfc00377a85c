"""Real SGLang, every version: start-up logs in the shapes releases 0.3.6 … 0.5.23 print
(tests/fixtures/sglang/, one case each in cases.toml), judged as an operator would.

Each fixture is a class of its own (old KV figures, pasted fragments, root cause before
consequence, recovered errors, start-up failure forms, cause ids, 0.5.23 shapes, node and
rank variants, healthy starts full of noise, PD, LoRA and VLM failures, logs that stop in a
kernel compile, the host's, image's and venv's faults and the fix each names); the hypothesis tests below put the same fatal and recovered lines, and any mix
of harmless noise, into healthy logs that no fixture spelt out.
"""

from __future__ import annotations

import io
import json
import re
import tomllib
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from svcdiag.judge.diagnosis import diagnose
from svcdiag.ops.offline.replay import NoStartFound, replay

FIXTURES = Path(__file__).parent / "fixtures" / "sglang"
CASES = tomllib.loads((FIXTURES / "cases.toml").read_text())["case"]
#: the cases judged right today: one whose class is not fixed yet (`xfail`) joins the shape tests below when it is
JUDGED = [c for c in CASES if "xfail" not in c]
SMOKE = (Path(__file__).resolve().parents[1] / "svcdiag" / "examples" / "dflash-smoke.log").read_text().splitlines()


def judge(text: str | bytes, name: str = "t.log"):
    data = text.encode() if isinstance(text, str) else text
    return replay(io.BytesIO(data), name).verdict


def test_every_fixture_has_a_case_and_every_case_a_fixture() -> None:
    assert {c["file"] for c in CASES} == {p.name for p in FIXTURES.glob("*.log")}


@pytest.mark.parametrize("case", CASES, ids=[c["file"].removesuffix(".log") for c in CASES])
def test_real_sglang_start(case: dict) -> None:
    """Each fixture judged as its case says. A case with `xfail` (a class not fixed yet: `issue 28 §3.N: why`) must
    still fail; the day it passes this fails, so that its xfail is removed."""
    if "xfail" not in case:
        _check_case(case)
        return
    try:
        _check_case(case)
    except (AssertionError, NoStartFound, pytest.fail.Exception):
        pytest.xfail(case["xfail"])
    pytest.fail(f"{case['file']} is judged right now: remove its `xfail = {case['xfail']!r}` from cases.toml")


def _check_case(case: dict) -> None:
    data = (FIXTURES / case["file"]).read_bytes()
    if case["verdict"] == "no_start":
        with pytest.raises(NoStartFound, match="no SGLang start found"):
            judge(data, case["file"])
        return
    v = judge(data, case["file"])
    assert (v.verdict, v.cause) == (case["verdict"], case.get("cause")), (v.message, v.evidence)
    if "kv_tokens" in case:
        assert v.figures.kv_tokens == case["kv_tokens"], v.figures
    if "max_running_requests" in case:
        assert v.figures.max_running_requests == case["max_running_requests"], v.figures
    if "context_len" in case:
        assert v.figures.context_len == case["context_len"], v.figures
    if "sglang_version" in case:  # the releases the log's line shapes point to (the wheels' format strings)
        assert v.figures.sglang_version == case["sglang_version"], v.figures
    if "phase" in case:
        assert v.phase == case["phase"], (v.phase, v.message)
    if "detail" in case:  # the cause's sub-case in the registry ("" for the cause's own row)
        assert v.detail == case["detail"], (v.detail, v.message)
    if "fixes" in case:  # the settings the diagnosis's fixes change, in order
        assert [k for f in diagnose(v)["fixes"] for k in f["set"]] == case["fixes"], diagnose(v)["fixes"]
    # a phase that ran past its deadline is named; one within it (an allowance SGLang announced) is not
    assert sorted(v.figures.overran_deadlines_s or {}) == case.get("overran", []), v.figures
    for name in case.get("absent", []):  # a figure the start does not have (a router's second worker is no draft)
        assert getattr(v.figures, name) is None, (name, getattr(v.figures, name))
    if case.get("evidence") and v.verdict == "failed":
        said = [v.message, *v.evidence[:4]]
        assert any(case["evidence"] in s for s in said), said
    assert sorted(d["reason"] for d in v.degraded) == sorted(case.get("degraded", [])), v.degraded
    if "signal" in case:  # the signal that ended it, named (BUS, FPE, KILL)
        assert v.figures.signal == case["signal"], v.figures
    if "signal_after_ready" in case:  # a healthy start whose process was killed while serving: the incident said
        assert case["signal_after_ready"] in (v.figures.killed_after_ready or ""), v.figures
        assert "post-ready incident" in v.message, v.message
    else:
        assert v.figures.killed_after_ready is None, v.figures.killed_after_ready
    if "diagnosis" in case:  # words the diagnosis must say (the fix, where to look)
        d = diagnose(v)
        assert d is not None and any(case["diagnosis"] in line for line in d["explanation"]), d
    if "other_starts" in case:  # a log of several starts: the note says what the others came to
        res = replay(io.BytesIO(data), case["file"])
        assert f"other starts: {case['other_starts']}" in res.describe(), res.describe()


# ---------------------------------------------------------------- fatal and recovered lines in healthy logs

FATAL = [  # (lines, cause): what SGLang prints when a start dies, root line first or last
    (["Traceback (most recent call last):", '  File "/x/model_runner.py", line 9, in load', "    x()",
      "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB."], "cuda_oom"),
    (["[2026-05-23 09:42:40 TP0] Scheduler hit an exception: Traceback (most recent call last):",
      '  File "/x/scheduler.py", line 3012, in run_scheduler_process', "    s = Scheduler()",
      "RuntimeError: NCCL error: unhandled system error (run with NCCL_DEBUG=INFO for details)"], "nccl_error"),
    (["[2026-05-23 09:42:40] Received sigquit from a child process. It usually means the child failed.",
      "Traceback (most recent call last):", '  File "/x/loader.py", line 3, in f', "    g()",
      "OSError: [Errno 12] Cannot allocate memory"], "host_oom"),
    (["usage: launch_server.py [-h] --model-path MODEL_PATH",
      "launch_server.py: error: unrecognized arguments: --enable-magic"], "bad_arguments"),
    (["[2026-05-23 09:42:40] Rank 0 scheduler is dead. Please check if there are relevant logs.",
      "[2026-05-23 09:42:40] Exit code: -9"], "killed_by_signal"),
    (["[2026-05-23 09:42:40 TP0] Scheduler hit an exception: Traceback (most recent call last):",
      '  File "/x/cuda_graph_runner.py", line 9, in capture', "    run_once()",
      "RuntimeError: CUDA error: an illegal memory access was encountered",
      "CUDA kernel errors might be asynchronously reported at some other API call, so the stacktrace below might "
      "be incorrect.", "For debugging consider passing CUDA_LAUNCH_BLOCKING=1"], "cuda_error"),
    (["[2026-05-23 09:42:40 TP0] Scheduler hit an exception: Traceback (most recent call last):",
      '  File "/x/weight_utils.py", line 456, in safetensors_weights_iterator', "    with safe_open(f) as f:",
      "safetensors_rust.SafetensorError: Error while deserializing header: MetadataIncompleteBuffer"], "bad_checkpoint"),
    (["[2026-05-23 09:42:40 TP0] Scheduler hit an exception: Traceback (most recent call last):",
      '  File "/x/flashinfer_backend.py", line 3, in <module>', "    import flashinfer",
      "ModuleNotFoundError: No module named 'flashinfer'"], "broken_install"),
    (["Traceback (most recent call last):", '  File "/x/triton/runtime/jit.py", line 347, in run', "    k()",
      "triton.runtime.errors.OutOfResources: out of resource: shared memory, Required: 116736, Hardware limit: 101376."],
     "unsupported_hardware"),
    (["[2026-05-23 09:42:40 TP0] Scheduler hit an exception: Traceback (most recent call last):",
      '  File "/x/weight_utils.py", line 118, in get_lock', "    os.makedirs(d)",
      "OSError: [Errno 30] Read-only file system: '/data/hf/.locks'"], "access_denied"),
    (["[2026-05-23 09:42:40 TP0] Scheduler hit an exception: Traceback (most recent call last):",
      '  File "/x/gptq.py", line 212, in process_weights_after_loading', "    ops.gptq_shuffle(w)",
      "RuntimeError: HIP error: invalid device function",
      "HIP kernel errors might be asynchronously reported at some other API call, so the stacktrace below might be "
      "incorrect."], "unsupported_hardware"),
    (["[2026-05-23 09:42:40 TP0] Scheduler hit an exception: Traceback (most recent call last):",
      '  File "/x/flashinfer/jit/core.py", line 280, in build', "    run_ninja(d)",
      "RuntimeError: Ninja build failed. Ninja output:", "FAILED: batch_prefill.cuda.o",
      "batch_prefill.cu:1:10: fatal error: curand_kernel.h: No such file or directory"], "broken_install"),
    (["[2026-05-23 09:42:40 TP0] Scheduler hit an exception: Traceback (most recent call last):",
      '  File "/x/huggingface_hub/_snapshot_download.py", line 164, in snapshot_download', "    api.repo_info()",
      "huggingface_hub.errors.HfHubHTTPError: 429 Client Error: Too Many Requests for url: "
      "https://huggingface.co/api/models/Qwen/Qwen3-8B/revision/main"], "hub_unreachable"),
    (["[2026-05-23 09:42:40 TP0] Scheduler watchdog timeout (self.watchdog_timeout=300, self.soft=False)",
      "[2026-05-23 09:42:45] Received sigquit from a child process. It usually means the child failed."],
     "watchdog_timeout"),
    (["[2026-05-23 09:42:40] Child process unexpectedly failed with exitcode=9. pid=4242"], "killed_by_signal"),
    (["Traceback (most recent call last):", '  File "/x/sglang/srt/hf_transformers_utils.py", line 38, in get_config',
      "    config = AutoConfig.from_pretrained(",
      '  File "/x/transformers/models/auto/configuration_auto.py", line 734, in __getitem__', "    raise KeyError(key)",
      "KeyError: 'qwen2'"], "unsupported_model"),  # transformers older than the model (sglang#6732's kind)
    (["Traceback (most recent call last):", '  File "/x/sglang/srt/model_executor/model_runner.py", line 9, in f',
      "    torch.cuda.set_device(0)", "AssertionError: Torch not compiled with CUDA enabled"], "broken_install"),
    # the shell's word for the signal that ended the server: alone, from a script, in zh_CN
    (["Segmentation fault (core dumped)"], "killed_by_signal"),
    (["./serve.sh: line 7: 48211 Killed                  python3 -m sglang.launch_server --model-path Qwen/Qwen3-8B"],
     "host_oom"),
    (["段错误 (核心已转储)"], "killed_by_signal"),
    (["[2026-05-23 09:42:40 TP0] Scheduler hit an exception: Traceback (most recent call last):",
      '  File "/x/transformers/utils/hub.py", line 456, in cached_files', "    raise EnvironmentError(",
      "OSError: /models/Qwen3-8B does not appear to have a file named tokenizer_config.json. Checkout "
      "'https://huggingface.co//models/Qwen3-8B/tree/None' for available files."], "model_not_found"),
    (["/sgl-workspace/nvshmem/src/modules/transport/ibrc/ibrc.cpp:420: non-zero status: 22 ibv_modify_qp failed",
      "/sgl-workspace/nvshmem/src/host/init/init.cu:1007: non-zero status: 7 nvshmem setup connections failed",
      "[2026-05-23 09:42:44] Rank 0 scheduler is dead. Please check if there are relevant logs.",
      "[2026-05-23 09:42:44] Exit code: 255"], "nvshmem_failed"),
    (["Traceback (most recent call last):", '  File "/usr/local/bin/torchrun", line 8, in <module>', "    main()",
      "torch.distributed.elastic.multiprocessing.errors.ChildFailedError: ",
      "============================================================", "serve.py FAILED",
      "Root Cause (first observed failure):", "[0]:", "  rank      : 0 (local_rank: 0)",
      "  exitcode  : -11 (pid: 4187)", "  traceback : Signal 11 (SIGSEGV) received by PID 4187"], "killed_by_signal"),
    (["已杀死"], "host_oom"),
    (["Memory access fault by GPU node-2 (Agent handle: 0x56) on address 0x7fe. Reason: Page not present or "
      "supervisor privilege.",
      "[2026-05-23 09:42:40] Received sigquit from a child process. It usually means the child failed."], "cuda_error"),
    # a PD server: the KV transfer engine cannot open its RDMA NIC; the PD warmup answered 500 (ready all the same)
    (["[2026-05-23 09:42:40 TP0] Scheduler hit an exception: Traceback (most recent call last):",
      '  File "/x/disaggregation/mooncake/transfer_engine.py", line 84, in initialize',
      '    raise RuntimeError("Mooncake Transfer Engine initialization failed.")',
      "RuntimeError: Mooncake Transfer Engine initialization failed."], "kv_transfer_failed"),
    (["[2026-05-23 09:42:40] Prefill disaggregation mode warm Up Failed, status code: 500",
      "[2026-05-23 09:42:40] The server is fired up and ready to roll!"], "warmup_failed"),
    # the main process's own traceback (no prefix): a flag naming what is not there
    (["Traceback (most recent call last):", '  File "/x/openai_api/adapter.py", line 131, in load_chat_template',
      "    raise RuntimeError(",
      "RuntimeError: Chat template qwen3 is not a built-in template name or a valid chat template file path."],
     "bad_arguments"),
    (["Traceback (most recent call last):", '  File "/x/transformers/image_processing_base.py", line 341, in get',
      "    raise EnvironmentError(", "OSError: Can't load image processor for '/models/vl-sft'. If you were trying to "
      "load it from 'https://huggingface.co/models', make sure you don't have a local directory with the same name."],
     "model_not_found"),
    (["[2026-05-23 09:42:40 TP0] Scheduler hit an exception: Traceback (most recent call last):",
      '  File "/x/sglang/srt/lora/lora_manager.py", line 168, in init_loras',
      '    assert all(x.hf_config["r"] == self.max_lora_dim for x in self.configs.values())', "AssertionError"],
     "bad_arguments"),
    (["Traceback (most recent call last):", '  File "/x/disaggregation/mooncake/conn.py", line 3, in <module>',
      "    raise ImportError(", "ImportError: Please install mooncake by following the instructions at "
      "https://kvcache-ai.github.io/Mooncake/getting_started/build.html to run SGLang with MooncakeConnector."],
     "broken_install"),
]
#: the host, the image, the venv: (lines, cause, words the diagnosis must say: the fix, not a generic reinstall)
ENVIRONMENT = [
    (["Traceback (most recent call last):", '  File "/x/sgl_kernel/load_utils.py", line 188, in _load_ops',
      "    raise ImportError(error_msg)", "ImportError: ",
      "[sgl_kernel] CRITICAL: Could not load any common_ops library!", "Error details from previous import attempts:",
      "- ImportError: libnuma.so.1: cannot open shared object file: No such file or directory"],
     "broken_install", "apt install libnuma1"),
    (["Traceback (most recent call last):", '  File "/x/sgl_kernel/__init__.py", line 5, in <module>',
      "    from sgl_kernel import common_ops", "ImportError: /opt/conda/envs/s/lib/libstdc++.so.6: version "
      "`GLIBCXX_3.4.32' not found (required by /opt/conda/envs/s/lib/python3.11/site-packages/sgl_kernel/common_ops.abi3.so)"],
     "broken_install", "libstdcxx-ng"),
    (["Traceback (most recent call last):", '  File "/x/flashinfer/__init__.py", line 18, in <module>',
      "    from . import _kernels", "ImportError: /x/flashinfer/_kernels.cpython-310-x86_64-linux-gnu.so: undefined "
      "symbol: _ZNK3c105Error4whatEv"], "broken_install", "built against another torch"),
    (["[2026-05-23 09:42:40 TP0] Scheduler hit an exception: Traceback (most recent call last):",
      '  File "/x/sgl_kernel/elementwise.py", line 44, in rmsnorm', "    torch.ops.sgl_kernel.rmsnorm.default(out)",
      "RuntimeError: CUDA error: the provided PTX was compiled with an unsupported toolchain."],
     "gpu_unavailable", "Upgrade the driver"),
    (["[2026-05-23 09:42:40 TP0] Scheduler hit an exception: Traceback (most recent call last):",
      '  File "/x/torch/cuda/__init__.py", line 372, in _lazy_init', "    torch._C._cuda_init()",
      "RuntimeError: Unexpected error from cudaGetDeviceCount(). Did you run some cuda functions before calling "
      "NumCudaDevices() that might have already set an error? Error 802: system not yet initialized"],
     "gpu_unavailable", "nvidia-fabricmanager"),
    (["[2026-05-23 09:42:40 TP0] Scheduler hit an exception: Traceback (most recent call last):",
      '  File "/x/triton/backends/nvidia/driver.py", line 23, in libcuda_dirs', "    assert any(ok), msg",
      "AssertionError: libcuda.so cannot found!", "Possible files are located at ['/usr/local/nvidia/lib64/libcuda.so.1']."
      "Please create a symlink of libcuda.so to any of the files."], "gpu_unavailable", "--gpus all"),
    (["Bus error (core dumped)"], "killed_by_signal", "--shm-size"),
    (["[2026-05-23 09:42:40 TP0] Scheduler hit an exception: Traceback (most recent call last):",
      '  File "/x/sglang/srt/constrained/llguidance_backend.py", line 21, in <module>',
      "    import llguidance", "ModuleNotFoundError: No module named 'llguidance'"], "broken_install",
     "--grammar-backend"),
    (["Traceback (most recent call last):", '  File "/x/torch/cuda/__init__.py", line 310, in _lazy_init',
      '    raise AssertionError("Torch not compiled with CUDA enabled")', "AssertionError: Torch not compiled with CUDA "
      "enabled"], "broken_install", "CPU-only build"),
    (["[2026-05-23 09:42:40 TP1] Scheduler hit an exception: Traceback (most recent call last):",
      '  File "/x/torch/multiprocessing/reductions.py", line 607, in reduce_storage', "    fd, size = storage._share_fd_cpu_()",
      "RuntimeError: unable to allocate shared memory(shm) for file </torch_3121_1784303457_0>: Success (0)"],
     "disk_full", "--shm-size"),
    (["[2026-05-23 09:42:40 TP0] Scheduler hit an exception: Traceback (most recent call last):",
      '  File "/x/torch/distributed/rendezvous.py", line 189, in _create_c10d_store', "    return TCPStore(",
      "torch.distributed.DistNetworkError: The server socket has failed to listen on any local network address. "
      "port: 29500, useIpv6: 0, code: -98, name: EADDRINUSE, message: address already in use"],
     "port_in_use", "--nccl-port"),
    (["[2026-05-23 09:42:40 TP0] Scheduler hit an exception: Traceback (most recent call last):",
      '  File "/x/sglang/srt/utils.py", line 1352, in get_zmq_socket', "    socket.bind(endpoint)",
      "zmq.error.ZMQError: Address already in use (addr='tcp://10.0.0.5:5002')"], "port_in_use", "ZMQ"),
    (["[2026-05-23 09:42:40 TP0] Scheduler hit an exception: Traceback (most recent call last):",
      '  File "/x/sglang/srt/mem_cache/memory_pool_host.py", line 196, in __init__', "    raise ValueError(",
      "ValueError: Not enough host memory available. Requesting 69.63 GB but only have 41.87 GB free. Please reduce "
      "the size of the hierarchical cache."], "host_oom", "--hicache-size"),
    (["[2026-05-23 09:42:40 TP2] Scheduler hit an exception: Traceback (most recent call last):",
      '  File "/x/sglang/srt/model_loader/weight_utils.py", line 118, in default_weight_loader',
      "    param.data.copy_(loaded_weight)", "RuntimeError: NPU out of memory. Tried to allocate 1.16 GiB (NPU 2; 60.96 "
      "GiB total capacity; 59.30 GiB already allocated; 391.52 MiB free)"], "cuda_oom", "The NPU ran out of memory"),
]
FATAL += [(lines, cause) for lines, cause, _ in ENVIRONMENT]
RECOVERED = [  # a traceback SGLang goes on from
    ["Traceback (most recent call last):", '  File "/x/utils.py", line 1, in retry', "    f()",
     "ConnectionError: HTTPSConnectionPool(host='huggingface.co', port=443): Read timed out.",
     "[2026-05-23 09:42:40] retry() failed once (0th try, maximum 2 retries). Will delay 0.84s and retry. Error: x"],
    ["[2026-05-23 09:42:40] Can not initialize OpenAIServingResponses, error: Traceback (most recent call last):",
     '  File "/x/serving.py", line 3, in init', "    import mcp", "ModuleNotFoundError: No module named 'mcp'"],
    ["E1210 21:05:33.118402 88123 rdma_context.cpp:203] Failed to register memory 0x7f: Input/output error [5]"],
    ["Exception ignored in: <function _Probe.__del__ at 0x7f3a2c1e5da0>", "Traceback (most recent call last):",
     '  File "/x/common.py", line 1490, in __del__', "    self.close()", "OSError: [Errno 9] Bad file descriptor"],
    ["[2026-05-23 09:42:40] Warning: Target model's context_length (8192) is greater than the derived context_length "
     "(2048). This may lead to incorrect model outputs or CUDA errors."],
    ["[W523 09:42:40.118820034 TCPStore.cpp:358] [c10d] TCP client failed to connect/validate to host head:20000 - "
     "retrying (try=0, timeout=600000ms, delay=9837ms): The client socket has failed to connect to any network address"],
    ["ERROR:    [Errno 13] Permission denied: '/root/.triton/cache/3f/matmul.json'"],  # uvicorn's ERROR, no bind: not fatal
    # 0.5.11+ falls back to torch when nvidia-smi is missing or fails (MIG, a container without it): a warning
    ["nvidia-smi not found. Ensure NVIDIA drivers are installed and accessible. Falling back to "
     "torch.cuda.mem_get_info(). Reported total GPU memory per device (MiB): [81079], using min: 81079 MiB."],
    ["[2026-05-23 09:42:40] nvidia-smi failed (exit code 255: Failed to initialize NVML: Unknown Error). Falling back "
     "to torch.cuda.mem_get_info(). Reported total GPU memory per device (MiB): [81079], using min: 81079 MiB."],
    # a PD decode server's runtime note on one request's offload (not --hicache's start-up refusal)
    ["[2026-05-23 09:42:40 TP0] Not enough host memory for request 8f2c7d1e"],
    # SGLang's SIGCHLD handler on a child that exited 1 (raw wait status 256): a JIT compiler's, the start goes on
    ["[2026-05-23 09:42:40] Child process unexpectedly failed with an exit code 256. pid=32885"],
]
#: where a line may go in the smoke start: after its weights are loaded, before it is ready
MIDDLE = [i for i, ln in enumerate(SMOKE) if "] Load weight end" in ln or "] KV Cache is allocated" in ln
          or "] Capture" in ln]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(FATAL), st.sampled_from(MIDDLE), st.booleans())
def test_a_fatal_line_in_a_healthy_log_is_found(fatal: tuple[list[str], str], at: int, cut: bool) -> None:
    """Put the fatal lines into the smoke start; the log then stops there (the server died), or
    goes on with lines that are no progress for a moment: either way the cause is the root's."""
    lines, cause = fatal
    after = [] if cut else ["Capturing batches (bs=4 avail_mem=3.10 GB):  50%|#####     | 2/4 [00:01<00:01]",
                            "[2026-05-23 09:42:50] INFO:     127.0.0.1:5 - \"GET /health HTTP/1.1\" 503"]
    v = judge("\n".join(SMOKE[:at + 1] + lines + after) + "\n")
    assert (v.verdict, v.cause) == ("failed", cause), (v.message, v.evidence)


@pytest.mark.parametrize("fatal", FATAL, ids=[f"{c}-{i}" for i, (_, c) in enumerate(FATAL)])
def test_each_fatal_line_is_found_after_the_weights(fatal: tuple[list[str], str]) -> None:
    """Every entry once, at the first place it may go (the sampled test above visits only some)."""
    lines, cause = fatal
    v = judge("\n".join(SMOKE[:MIDDLE[0] + 1] + lines) + "\n")
    assert (v.verdict, v.cause) == ("failed", cause), (v.message, v.evidence)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(RECOVERED), st.sampled_from(MIDDLE))
def test_a_recovered_traceback_in_a_healthy_log_is_not_a_failure(lines: list[str], at: int) -> None:
    v = judge("\n".join(SMOKE[:at + 1] + lines + SMOKE[at + 1:]) + "\n")
    assert v.verdict == "healthy", (v.message, v.evidence)


def test_a_death_waits_for_its_cause_and_the_cause_is_the_root() -> None:
    """`Rank 0 scheduler is dead` printed before the traceback that explains it."""
    v = judge("\n".join(SMOKE[:MIDDLE[0] + 1] + [
        "[2026-05-23 09:42:45] Rank 0 scheduler is dead. Please check if there are relevant logs.",
        "[2026-05-23 09:42:45] Exit code: -3",
        "[2026-05-23 09:42:45 TP0] Scheduler hit an exception: Traceback (most recent call last):",
        '  File "/x/scheduler.py", line 1, in f', "    g()",
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 MiB."]) + "\n")
    assert (v.verdict, v.cause) == ("failed", "cuda_oom")
    assert any("scheduler is dead" in e for e in v.evidence)


def test_a_death_alone_is_a_failure_with_its_own_cause_once_its_grace_is_over() -> None:
    lines = SMOKE[:MIDDLE[0] + 1] + ["[2026-05-23 09:42:45] Exit code: -9", "[2026-05-23 09:42:49] Killed"]
    v = judge("\n".join(lines) + "\n")
    assert (v.verdict, v.cause, v.figures.signal) == ("failed", "killed_by_signal", "KILL")


def test_a_suspect_is_cleared_when_the_start_goes_on() -> None:
    """A bare traceback, then the next milestone: SGLang carried on, so it was not the cause."""
    at = MIDDLE[0]
    lines = SMOKE[:at + 1] + ["Traceback (most recent call last):", '  File "/x/a.py", line 1, in f', "    g()",
                              "ValueError: something optional failed"] + SMOKE[at + 1:]
    assert judge("\n".join(lines) + "\n").verdict == "healthy"


def test_an_exception_python_ignored_is_no_suspect_even_long_before_the_next_milestone() -> None:
    """`Exception ignored in: …` then its traceback, and nothing for a minute (a long warmup): still healthy."""
    at = MIDDLE[-1]
    lines = SMOKE[:at + 1] + ["Exception ignored in: <function _Probe.__del__ at 0x7f3a2c1e5da0>",
                              "Traceback (most recent call last):", '  File "/x/a.py", line 1, in __del__', "    g()",
                              "OSError: [Errno 9] Bad file descriptor"]
    v = judge("\n".join(lines) + "\n")
    assert v.verdict == "incomplete", (v.verdict, v.message)


SYSTEMD_TIMEOUT = """\
Dec 03 10:00:00 gpu1 systemd[1]: Starting sglang-qwen.service - SGLang qwen...
Dec 03 10:00:05 gpu1 python3[1234]: [2026-12-03 10:00:05] server_args=ServerArgs(model_path='Qwen/Qwen3-32B', tp_size=1)
Dec 03 10:00:11 gpu1 python3[1234]: [2026-12-03 10:00:11] Load weight begin. avail mem=78.68 GB
Dec 03 10:01:30 gpu1 systemd[1]: sglang-qwen.service: start operation timed out. Terminating.
Dec 03 10:01:30 gpu1 python3[1234]: [2026-12-03 10:01:30] Received sigquit from a child process. It usually means \
the child failed.
Dec 03 10:01:30 gpu1 systemd[1]: sglang-qwen.service: Main process exited, code=killed, status=15/TERM
Dec 03 10:01:30 gpu1 systemd[1]: sglang-qwen.service: Failed with result 'timeout'.
"""


def test_systemds_own_start_timeout_is_told_apart_from_ours() -> None:
    """A unit written by hand keeps systemd's TimeoutStartSec (90 s): it ends the start long before
    our deadline. The verdict says so, on systemd's clock, and the fix is that setting."""
    from svcdiag.judge.diagnosis import diagnose

    v = judge(SYSTEMD_TIMEOUT)
    assert (v.verdict, v.phase, v.figures.systemd_timeout_s) == ("timed_out", "loading_weights", 90.0)
    assert "TimeoutStartSec" in v.message
    d = diagnose(v)
    assert d is not None and "TimeoutStartSec=" in d["explanation"][0] and "900" not in " ".join(d["explanation"])


def test_incomplete_is_worded_as_unfinished_not_as_a_failure() -> None:
    from svcdiag.judge.diagnosis import diagnose

    v = judge("\n".join(SMOKE[:MIDDLE[0] + 1]) + "\n")
    assert v.verdict == "incomplete"
    d = diagnose(v)
    assert d is not None and "failed" not in " ".join(d["explanation"]).lower()


@pytest.mark.parametrize("case", JUDGED, ids=[c["file"].removesuffix(".log") for c in JUDGED])
def test_replay_command_on_each_fixture(cli, case: dict) -> None:
    """What the operator runs: JSON Lines, the verdict last, exactly one failure record for a
    failed start and none for one that recovered; exit code by verdict."""
    r = cli("replay", "--json", str(FIXTURES / case["file"]))
    if case["verdict"] == "no_start":
        assert r.exit_code == 4 and "no SGLang start found" in r.output
        return
    records = [json.loads(line) for line in r.output.splitlines()]
    assert records[-1]["event"] == "verdict" and records[-1]["verdict"] == case["verdict"]
    failures = [x for x in records if x["event"] == "failure"]
    # a healthy start's one failure record is the process killed while serving (a post-ready incident)
    assert len(failures) == (1 if case["verdict"] == "failed" or "signal_after_ready" in case else 0), failures
    if failures and "signal_after_ready" in case:  # the incident's record: the kill, said as it happened
        assert failures[0]["signal"] == "KILL" and case["signal_after_ready"] in failures[0]["message"], failures
    elif failures:  # a death while serving: the failure record is the server's own, the verdict says when
        own = records[-1]["figures"].get("died_of") if case["cause"] == "died_after_ready" else case["cause"]
        assert failures[0]["cause"] == own
    assert r.exit_code == {"healthy": 0, "failed": 1, "timed_out": 3, "incomplete": 4}[case["verdict"]]


PLAIN = [c for c in JUDGED if c["verdict"] != "no_start" and c.get("format", "plain") == "plain"]


@pytest.mark.parametrize("prefix", ["sglang-1  | ", "\x1b[36msglang-1  |\x1b[0m ", "sglang_server | ", "2025-03-14T10:22:31.123456789Z ",
                                    "[2025-03-14T10:22:31.123Z] ", "(SGLangEngine pid=23901) ",
                                    "\x1b[36m(WorkerDict pid=616, ip=10.0.0.5)\x1b[0m ",
                                    "2025-03-14 10:22:31,531 - __main__ - INFO - ",
                                    "2025-03-14 10:22:31 | INFO | stdout | ", "[pod/sglang-0/server] ", "0: ",
                                    "ERROR 2025-03-14T10:22:31.123456789Z ",
                                    "2025-03-14T10:22:31.123456Z  INFO scheduler.run_scheduler_process: "],
                         ids=["compose", "compose-coloured", "compose-underscore", "kubectl-timestamps", "jenkins-timestamper", "ray-actor",
                              "ray-actor-coloured", "logging-formatter", "fastchat-logger", "kubectl-prefix",
                              "srun-label", "gcp-cloud-logging", "dynamo-tracing"])
@pytest.mark.parametrize("case", PLAIN, ids=[c["file"].removesuffix(".log") for c in PLAIN])
def test_container_runtime_prefixes_change_nothing(case: dict, prefix: str) -> None:
    """What `docker compose logs`, `kubectl logs --timestamps`, a CI's timestamper, Ray and a launcher's
    logger put before each line: the same start, the same verdict."""
    text = (FIXTURES / case["file"]).read_text(errors="replace")
    plain, wrapped = judge(text), judge("".join(prefix + ln + "\n" for ln in text.splitlines()))
    assert (wrapped.verdict, wrapped.cause, wrapped.figures.kv_tokens) == \
        (plain.verdict, plain.cause, plain.figures.kv_tokens)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(PLAIN), st.lists(st.sampled_from(["DEFAULT", "INFO", "WARNING", "ERROR"]), min_size=1),
       st.integers(1, 10**6))
def test_a_console_copy_newest_line_first_is_read_in_print_order(case: dict, severities: list[str], step: int) -> None:
    """Cloud Logging's console (and a copy of it) lists the newest line first, each line under its severity
    and the runtime's stamp: the same start, judged as if printed in order (sgl-project/sglang#5096)."""
    text = (FIXTURES / case["file"]).read_text(errors="replace")
    lines = text.splitlines()
    stamped = [f"{severities[i % len(severities)]} 2025-04-05T00:01:19.{(10**8 + i * step) % 10**9:09d}Z {ln}"
               for i, ln in enumerate(lines)]
    if len(lines) > 1 and (10**8 + (len(lines) - 1) * step) >= 10**9:
        return  # the made-up stamps wrapped around: no longer one clock
    plain, copied = judge(text), judge("\n".join(reversed(stamped)) + "\n")
    assert (copied.verdict, copied.cause, copied.figures.kv_tokens) == \
        (plain.verdict, plain.cause, plain.figures.kv_tokens)


@pytest.mark.parametrize("case", [c for c in JUDGED if c["verdict"] != "no_start"],
                         ids=[c["file"].removesuffix(".log") for c in JUDGED if c["verdict"] != "no_start"])
def test_colour_codes_change_nothing(case: dict) -> None:
    """uvicorn colours its levels on a TTY (`docker run -t`); a captured terminal keeps the codes."""
    text = (FIXTURES / case["file"]).read_text(errors="replace")
    coloured = text.replace("INFO:", "\x1b[32mINFO\x1b[0m:").replace("ERROR:", "\x1b[31mERROR\x1b[0m:")
    plain, wrapped = judge(text), judge(coloured)
    assert (wrapped.verdict, wrapped.cause, wrapped.figures.kv_tokens) == \
        (plain.verdict, plain.cause, plain.figures.kv_tokens)


def test_a_coloured_port_in_use_line_is_still_port_in_use() -> None:
    lines = SMOKE[:MIDDLE[-1] + 1] + [
        "[2026-05-23 09:43:10] \x1b[31mERROR\x1b[0m:    [Errno 98] error while attempting to bind on address "
        "('0.0.0.0', 30000): address already in use"]
    v = judge("\n".join(lines) + "\n")
    assert (v.verdict, v.cause) == ("failed", "port_in_use")


OLD_STAMP_RE = re.compile(r"^\[\d{4}-\d\d-\d\d (\d\d:\d\d:\d\d)(?:\.\d+)?", re.M)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(FATAL + [None]), st.sampled_from(MIDDLE), st.booleans())
def test_a_release_before_the_dated_prefix_is_judged_alike(fatal: tuple[list[str], str] | None, at: int,
                                                          gpu_id: bool) -> None:
    """0.3.0 stamped a time of day only (`[09:42:40 TP0] `), 0.2 the GPU only (`[gpu_id=0] `): the same
    start in those prefixes reaches the same verdict, cause and phase."""
    lines = SMOKE[:at + 1] + fatal[0] if fatal else SMOKE
    dated = "\n".join(lines) + "\n"
    old = OLD_STAMP_RE.sub(r"[\1", dated)
    if gpu_id:
        old = re.sub(r"^\[\d\d:\d\d:\d\d(?: TP(\d+))?\] ", lambda m: f"[gpu_id={m.group(1) or 0}] ", old, flags=re.M)
    a, b = judge(dated), judge(old)
    assert (b.verdict, b.cause) == (a.verdict, a.cause), (b.message, b.evidence)
    if not gpu_id:  # a time of day keeps the clock, so the phase a failure came in too
        assert b.phase == a.phase


def test_a_multi_node_log_cut_at_the_rendezvous_says_where_it_waits() -> None:
    """A node's log that stops at `Init torch distributed begin`: unfinished, and the place it waits is named."""
    from svcdiag.judge.diagnosis import diagnose

    v = judge("[2025-05-10 10:00:00] server_args=ServerArgs(model_path='deepseek-ai/DeepSeek-V3', tp_size=16, "
              "nnodes=2, node_rank=0, port=30000)\n[2025-05-10 10:00:12 TP0] Init torch distributed begin.\n")
    d = diagnose(v)
    assert v.verdict == "incomplete" and d is not None
    said = " ".join(d["explanation"])
    assert "dist_init_addr" in said and "failed" not in said.lower()


# ---------------------------------------------------------------- harmless noise in a healthy start

STAMP = "[2026-05-23 09:43:08] "
HARMLESS = [  # what a healthy start may print between its milestones: warnings, compiler chatter, a refused request
    [STAMP + "Error in request: The input (41237 tokens) is longer than the model's context length (40960 tokens).",
     "Traceback (most recent call last):", '  File "/x/serving_base.py", line 42, in handle_request',
     "    return await self._handle_non_streaming_request(",
     "ValueError: The input (41237 tokens) is longer than the model's context length (40960 tokens)."],
    [STAMP + "ERROR:    Exception in ASGI application", "Traceback (most recent call last):",
     '  File "/x/uvicorn/protocols/http/httptools_impl.py", line 409, in run_asgi', "    result = await app(",
     "RuntimeError: Response content shorter than Content-Length"],
    [STAMP + "Task exception was never retrieved",
     "future: <Task finished name='Task-7' coro=<TokenizerManager.handle_loop() done> exception=OSError(9)>",
     "Traceback (most recent call last):", '  File "/x/tokenizer_manager.py", line 1, in handle_loop', "    f()",
     "OSError: [Errno 9] Bad file descriptor"],
    ["/x/torch/_dynamo/variables/functions.py:1575: UserWarning: Dynamo detected a call to a `functools.lru_cache`-"
     "wrapped function.", "  torch._dynamo.utils.warn_once(msg)"],
    ["AUTOTUNE mm(32x2048, 2048x4608)", "  mm 0.0113 ms 100.0% ",
     "SingleProcess AUTOTUNE benchmarking takes 1.9182 seconds and 0.0003 seconds precompiling for 19 choices"],
    ["W0523 09:43:08.511000 5121 torch/_dynamo/convert_frame.py:964] [0/8] torch._dynamo hit config.recompile_limit (8)"],
    ["node1:4242:4300 [0] NCCL INFO NET/Plugin: Plugin load returned 2 : libnccl-net.so: cannot open shared object "
     "file: No such file or directory : when loading libnccl-net.so"],
    ["[rank0]:[W523 09:43:08.118820034 ProcessGroupNCCL.cpp:4561] [PG ID 0 PG GUID 0 Rank 0]  using GPU 0 to perform "
     "barrier as devices used by this process are currently unknown."],
    [STAMP + "Using default MoE kernel config. Performance might be sub-optimal! Config file not found at /x/E=128,"
     "N=384,device_name=NVIDIA_H100_80GB_HBM3.json"],
    [STAMP + "Entering DeepGEMM JIT Pre-Compile session. It may take a long time (typically 10-20 mins)",
     "DeepGEMM warmup: 100%|██████████| 16384/16384 [00:12<00:00, 1310.72it/s]"],
    ["2026-05-23 09:43:08,410 - INFO - flashinfer.jit: Loading JIT ops: batch_prefill_with_kv_cache_dtype_q_bf16"],
    [STAMP + "Using a slow image processor as `use_fast` is unset and a slow processor was saved with this model."],
    ["I0523 09:43:08.101378  7990 transfer_engine.cpp:44] Transfer Engine starting. Server: 10.0.0.5, Metadata: "
     "P2PHANDSHAKE, ip_or_host_name: , rpc_port: 0"],
    [STAMP + "Mooncake's tensor allocator requires mooncake >= 0.3.8.post1. Please upgrade Mooncake by 'pip install "
     "mooncake-transfer-engine --upgrade'. Fallback to use default allocator."],
    # another process in the same terminal: a script polling /health before the server listens
    ["Traceback (most recent call last):", '  File "/home/u/wait_and_bench.py", line 12, in <module>',
     '    r = requests.get("http://localhost:30000/health")',
     "requests.exceptions.ConnectionError: HTTPConnectionPool(host='localhost', port=30000): Max retries exceeded "
     "with url: /health (Caused by NewConnectionError('<urllib3.connection.HTTPConnection object at 0x7f1c>: "
     "Failed to establish a new connection: [Errno 111] Connection refused'))"],
    ["Traceback (most recent call last):", '  File "/home/u/bench.py", line 40, in main', "    await session.post(u)",
     "aiohttp.client_exceptions.ClientConnectorError: Cannot connect to host 127.0.0.1:30000 ssl:default "
     "[Connect call failed ('127.0.0.1', 30000)]"],
    ["192-168-183-165:132677:132677 [3] NVSHMEM INFO nvshmemi_common_init failed, continuing"],
]
UP = next(i for i, ln in enumerate(SMOKE) if "Uvicorn running" in ln)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.sampled_from(HARMLESS), min_size=1, max_size=5))
def test_a_healthy_start_with_any_mix_of_harmless_noise_and_a_slow_warmup_stays_healthy(blocks: list[list[str]]) -> None:
    """The noise goes between uvicorn's start and a warmup that takes a minute (a first batch compiling kernels),
    longer than a suspect's grace: a request refused meanwhile, and its logged traceback, fail nothing."""
    late = [ln.replace("[2026-05-23 09:43:", "[2026-05-23 09:44:") for ln in SMOKE[UP + 1:]]
    v = judge("\n".join(SMOKE[:UP + 1] + [ln for b in blocks for ln in b] + late) + "\n")
    assert (v.verdict, v.figures.kv_tokens) == ("healthy", 649789), (v.message, v.evidence)


def test_a_bare_traceback_in_the_same_place_is_still_a_suspect() -> None:
    """The counterpart: the same traceback with no record that logged it is a process's, and the long wait
    then makes it the cause."""
    block = HARMLESS[0][1:]
    late = [ln.replace("[2026-05-23 09:43:", "[2026-05-23 09:44:") for ln in SMOKE[UP + 1:]]
    v = judge("\n".join(SMOKE[:UP + 1] + [STAMP + "INFO:     127.0.0.1:5 - \"GET /health HTTP/1.1\" 503"] + block
                        + late) + "\n")
    assert (v.verdict, v.cause) == ("failed", "exception")


def test_a_log_that_stops_in_a_kernel_compile_says_so() -> None:
    from svcdiag.judge.diagnosis import diagnose

    v = judge((FIXTURES / "v049-deepgemm-jit-log-stops-in-capture.log").read_text())
    d = diagnose(v)
    assert v.verdict == "incomplete" and v.phase == "cuda_graph" and d is not None
    assert "compiling kernels" in " ".join(d["explanation"])


def test_a_missing_lora_adapter_is_named_and_not_taken_for_the_model() -> None:
    from svcdiag.judge.diagnosis import diagnose

    v = judge((FIXTURES / "v043-lora-adapter-path-missing.log").read_text())
    first = diagnose(v)["explanation"][0]
    assert "'/data/loras/llama31-sql-lora'" in first and "LoRA adapter" in first, first


def test_a_kv_transfer_failure_in_a_strict_unit_opens_the_rdma_devices() -> None:
    from svcdiag.config.service import ServiceConfig
    from svcdiag.judge.diagnosis import diagnose

    v = judge((FIXTURES / "v056-pd-decode-mooncake-engine-init-failed.log").read_text())
    d = diagnose(v, ServiceConfig(name="pd-decode", path=Path("/u/pd-decode.toml"), model_path="/m"))
    assert d is not None and d["fixes"][0]["set"] == {"devices": ["infiniband"]}
    assert not diagnose(v, ServiceConfig(name="pd-decode", path=Path("/u/pd-decode.toml"), model_path="/m",
                                                      devices=("infiniband",)))["fixes"]


def test_a_second_traceback_after_a_logged_one_is_a_suspect_again() -> None:
    """The record logs one traceback; a crash printed straight after it is the process's own."""
    crash = ["Traceback (most recent call last):", '  File "/x/launch_server.py", line 14, in <module>', "    f()",
             "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB."]
    v = judge("\n".join(SMOKE[:UP + 1] + HARMLESS[0] + crash) + "\n")
    assert (v.verdict, v.cause) == ("failed", "cuda_oom"), (v.message, v.evidence)


def test_another_programs_error_lines_hold_no_sglang_start() -> None:
    """`Error …`, `Exception …` start lines of any program: without SGLang's prefix they are not its lines."""
    with pytest.raises(NoStartFound, match="no SGLang start found"):
        judge("Error response from daemon: driver failed programming external connectivity\n"
              "Exception in thread \"main\" java.lang.RuntimeException\nFutureWarning: x is deprecated\n"
              "Task exception handler installed\n")


def _shifted(lines: list[str], at: int, gap: int) -> list[str]:
    """The smoke start with every stamp from line `at` on `gap` seconds later: one phase that long."""
    from datetime import datetime, timedelta

    out = []
    for i, line in enumerate(lines):
        m = re.match(r"\[(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d)\]", line)
        if m and i >= at:
            t = datetime.fromisoformat(m.group(1)) + timedelta(seconds=gap)
            out.append(f"[{t:%Y-%m-%d %H:%M:%S}]" + line[m.end():])
        else:
            out.append(line)
    return out


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.integers(2, len(SMOKE) - 1), st.integers(2000, 6000))
def test_a_phase_far_past_its_deadline_that_then_ends_is_slow_not_stuck(at: int, gap: int) -> None:
    """Any one gap in a healthy start longer than every deadline (a first start's kernel compile, a
    checkpoint on slow storage; the longest here is scheduler's 300 s plus the draft's load and capture,
    1500 s): the whole log still says healthy, naming the phase that overran;
    the same log cut after the first line past the gap is timed_out, in the phase before the gap."""
    lines = _shifted(SMOKE, at, gap)
    first_late = next(i for i in range(at, len(lines)) if lines[i].startswith("[2026-"))
    v = judge("\n".join(lines) + "\n")
    assert v.verdict == "healthy", v.message
    assert len(v.figures.overran_deadlines_s) == 1 and "past its" in v.message
    (phase, limit), = v.figures.overran_deadlines_s.items()
    assert v.phase_seconds[phase] > limit
    before = judge("\n".join(lines[:first_late]) + "\n")  # the last line before the gap: still going
    cut = judge("\n".join(lines[:first_late] + ["[2026-05-24 23:59:59] a line, not a milestone"]) + "\n")
    assert cut.verdict == "timed_out" and cut.phase == before.phase == phase


# ---------------------------------------------------------------- the shapes operators paste

PASTE_STAMP_RE = re.compile(r"^\[(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d)")


def _journal_shape(text: str, shape: str) -> str:
    """A plain log as journalctl prints it in `shape`, each line on SGLang's own time (the last one stated)."""
    from datetime import UTC, datetime

    t = datetime(2025, 8, 12, 14, 30, tzinfo=UTC)
    out = ["-- Logs begin at Mon 2025-08-11 09:00:01 UTC, end at Tue 2025-08-12 15:00:00 UTC. --"]
    for ln in text.splitlines():
        if (m := PASTE_STAMP_RE.match(ln)) is not None:
            t = datetime.fromisoformat(m.group(1)).replace(tzinfo=UTC)
        stamp = {"short": f"{t:%b %d %H:%M:%S}", "short-precise": f"{t:%b %d %H:%M:%S}.123456",
                 "short-iso": f"{t:%Y-%m-%dT%H:%M:%S}+0000", "short-full": f"{t:%a %Y-%m-%d %H:%M:%S} UTC",
                 "short-unix": f"{t.timestamp():.6f}"}.get(shape)
        if shape == "json":
            out.append(json.dumps({"__REALTIME_TIMESTAMP": str(int(t.timestamp() * 1e6)), "_PID": "48211",
                                   "SYSLOG_IDENTIFIER": "python3", "MESSAGE": ln}))
        else:
            out.append(f"{stamp} gpu-node-07 python3[48211]: {ln}")
    return "\r\n".join(out[1:] if shape == "json" else out) + "\r\n"


#: every plain fixture, a wrapper's (Ray, a CI's stamp, a logging formatter) too: a unit whose ExecStart
#: runs SGLang under one logs the wrapper's prefix inside journalctl's
UNWRAPPED = PLAIN


@pytest.mark.parametrize("shape", ["short", "short-precise", "short-iso", "short-full", "short-unix", "json"])
@pytest.mark.parametrize("case", UNWRAPPED, ids=[c["file"].removesuffix(".log") for c in UNWRAPPED])
def test_journalctl_shapes_change_nothing(case: dict, shape: str) -> None:
    """`journalctl -u X` in each of its short outputs (header, host, `python3[pid]:`, CRLF as a Windows
    paste leaves it) and `-o json`: the same start, the same verdict."""
    text = (FIXTURES / case["file"]).read_text(errors="replace")
    plain, wrapped = judge(text), judge(_journal_shape(text, shape))
    assert (wrapped.verdict, wrapped.cause, wrapped.figures.kv_tokens) == \
        (plain.verdict, plain.cause, plain.figures.kv_tokens)


ONE_START = [c for c in UNWRAPPED if c["verdict"] in ("healthy", "failed") and "other_starts" not in c]


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(ONE_START), st.sampled_from(ONE_START),
       st.sampled_from(["", "sglang-1  | ", "\x1b[36msglang-1  |\x1b[0m ", "2025-03-14T10:22:31.123456789Z ", "short"]))
def test_a_restarted_server_is_two_starts_the_last_judged(first: dict, last: dict, shape: str) -> None:
    """A crash then a restart in one paste (a container's restart, a wrapper's loop, `journalctl -t`):
    the last start is the verdict, the note says what the one before it came to."""
    texts = [(FIXTURES / c["file"]).read_text(errors="replace") for c in (first, last)]
    if not all(PASTE_STAMP_RE.match(t) and "] server_args=" in t.split("\n", 1)[0] for t in texts):
        return  # a fragment, or a log whose start is not its first line: where one ends is not told
    if shape == "short":
        data = "".join(_journal_shape(t, "short").split("\r\n", 1)[1] for t in texts)
    else:
        data = "".join(shape + ln + "\n" for t in texts for ln in t.splitlines())
    res = replay(io.BytesIO(data.encode()), "t.log")
    alone = [judge(t) for t in texts]
    assert len(res.starts) == 2, res.describe()
    assert (res.verdict.verdict, res.verdict.cause) == (alone[1].verdict, alone[1].cause)
    before = f"{alone[0].verdict} ({alone[0].cause})" if alone[0].cause else alone[0].verdict
    assert f"other starts: 1 {before}" in res.describe()


PEER_GONE = ["[2026-05-23 09:42:39 TP0] Scheduler hit an exception: Traceback (most recent call last):",
             '  File "/x/torch/distributed/distributed_c10d.py", line 2501, in all_reduce',
             "    work = group.allreduce([tensor], opts)",
             "torch.distributed.DistBackendError: NCCL error in: /pytorch/torch/csrc/distributed/c10d/"
             "ProcessGroupNCCL.cpp:3356, remote process exited or there was a network error, NCCL version 2.21.5",
             "ncclRemoteError: A call failed possibly due to a network error or a remote process exiting prematurely."]
ROOTS = [f for f in FATAL if f[0][0].endswith("Scheduler hit an exception: Traceback (most recent call last):")]


@pytest.mark.parametrize("fatal", ROOTS, ids=[f"{c}-{i}" for i, (_, c) in enumerate(ROOTS)])
def test_a_rank_whose_peer_went_away_waits_for_the_peers_own_error(fatal: tuple[list[str], str]) -> None:
    """Rank 0's NCCL error that its peer exited comes first, the dead rank's own traceback a second later:
    the verdict is the dead rank's cause; with nothing after it, the NCCL error stands."""
    lines, cause = fatal
    at = next(i for i, ln in enumerate(SMOKE) if "] KV Cache is allocated" in ln) + 1
    assert judge("\n".join(SMOKE[:at] + PEER_GONE + lines) + "\n").cause == cause
    assert judge("\n".join(SMOKE[:at] + PEER_GONE) + "\n").cause == "nccl_error"


# ---------------------------------------------------------------- sglang_router's workers in one log

def _router_worker(d: int, port: int, fails: bool) -> list[list[tuple[str, str]]]:
    """One worker of `sglang_router.launch_server --dp-size N` as (ranks, message) blocks, in order."""
    r = f"DP{d} TP0"
    head = [[("", f"server_args=ServerArgs(model_path='/m/llama-8b', tokenizer_path='/m/llama-8b', host='127.0.0.1', "
                  f"port={port}, mem_fraction_static=0.88, tp_size=1, dp_size=1, base_gpu_id={d})")],
            [(r, "Load weight begin. avail mem=78.58 GB")],
            [(r, "Load weight end. type=LlamaForCausalLM, dtype=torch.bfloat16, avail mem=63.52 GB, mem usage=15.06 GB.")],
            [(r, "KV Cache is allocated. #tokens: 451014, K size: 27.53 GB, V size: 27.53 GB")],
            [(r, "Memory pool end. avail mem=7.62 GB")],
            [(r, "Capture cuda graph begin. This can take up to several minutes. avail mem=7.09 GB")]]
    if fails:
        return [*head, [(r, "Scheduler hit an exception: Traceback (most recent call last):"),
                        ("-", '  File "/x/cuda_graph_runner.py", line 269, in __init__'), ("-", "    self.capture()"),
                        ("-", "RuntimeError: CUDA error: an illegal memory access was encountered"), ("-", "")],
                [("", "Received sigquit from a child process. It usually means the child failed.")]]
    return [*head, [(r, "Capture cuda graph end. Time elapsed: 18.20 s")],
            [(r, "max_total_num_tokens=451014, max_prefill_tokens=16384, max_running_requests=4097, context_len=8192")],
            [("", f"INFO:     Uvicorn running on http://127.0.0.1:{port} (Press CTRL+C to quit)")],
            [("", "The server is fired up and ready to roll!")]]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(2, 4), st.data())
def test_a_routers_workers_are_one_start_ready_when_all_are(n: int, data: st.DataObject) -> None:
    """`python -m sglang_router.launch_server --dp-size N`: N servers in one log, each with its server_args
    and its ready line, interleaved as they print. One start; healthy only at the last worker's ready line,
    failed if any worker fails before (the others' ready lines are not the service's)."""
    failing = data.draw(st.sampled_from([None, *range(n)]))
    blocks = [_router_worker(d, 31000 + 500 * d, d == failing) for d in range(n)]
    order = data.draw(st.permutations([d for d in range(n) for _ in blocks[d]]))
    lines = [f"[Router (Python)] 2025-03-07 10:00:00 - INFO - Launching DP server process {d} on port {31000 + 500 * d}"
             " - launch_server.py:177" for d in range(n)]
    readies = []
    for i, d in enumerate(order):
        for ranks, msg in blocks[d].pop(0):
            lines.append(msg if ranks == "-" else f"[2025-03-07 10:{i // 60:02d}:{i % 60:02d}{' ' + ranks if ranks else ''}] {msg}")
            if msg.startswith("The server is fired up"):
                readies.append(len(lines))
    res = replay(io.BytesIO(("\n".join(lines) + "\n").encode()), "t.log")
    assert len(res.starts) == 1, res.describe()
    if failing is None:
        assert res.verdict.verdict == "healthy"
        assert judge("\n".join(lines[:readies[-1] - 1]) + "\n").verdict != "healthy"  # n-1 of n workers up: not yet
    else:
        assert (res.verdict.verdict, res.verdict.cause) == ("failed", "cuda_error"), res.describe()


@pytest.mark.parametrize(("file", "words"), [
    ("v056-eagle3-draft-capture-oom.log", "capturing the draft model's CUDA graphs"),
    ("v056-journal-ray-unit-eagle3-draft-capture-oom.log", "capturing the draft model's CUDA graphs"),
    ("v0523-qwen3next-mamba-alloc-oom-gpu-shared.log", "Process 9121, not this server"),
    ("v043-router-timeout-while-workers-compile.log", "--router-worker-startup-timeout-secs"),
    ("v056-eagle3-no-draft-path-target-as-draft.log", "none given: SGLang loaded the target itself"),
    ("v0523-swa-pool-below-one-window.log", "--swa-full-tokens-ratio"),
    ("v049-torch-compile-inductor-lowering-failed.log", "without --enable-torch-compile"),
    ("v049-triton-fp8e4nv-not-on-this-arch.log", "kv_cache_dtype auto"),
    ("v0511-sgl-kernel-libnuma-missing-slim-image.log", "apt install libnuma1"),
    ("v0523-conda-libstdcxx-glibcxx-too-old.log", "libstdcxx-ng"),
    ("v046-sgl-kernel-libcudart12-on-cu118-torch.log", "sgl_kernel was built for CUDA 12"),
    ("v046-compose-without-gpus-no-driver-found.log", "--gpus all"),
    ("v049-cuda-error-803-driver-library-mismatch.log", "reboot"),
    ("v045-docker-bus-error-shm-64mb-tp4.log", "--shm-size"),
    ("v056-torch-shm-unable-to-allocate-tp2.log", "/dev/shm filled up"),
    ("v046-second-server-same-nccl-port-eaddrinuse.log", "not the HTTP port"),
    ("v0410-two-node-zmq-port-held-by-leftover.log", "tcp://192.168.0.136:5002"),
    ("v0511-hicache-ratio-one-host-pool-not-larger.log", "--hicache-ratio above 1"),
    ("v046-gguf-qwen3moe-transformers-too-old.log", "Upgrade transformers and gguf"),
    ("v0410-ascend-a3-image-on-910b-socversion.log", "`…-910b` for Atlas A2"),
    ("v059-ascend-npu-graph-capture-oom.log", "The NPU ran out of memory while capturing NPU graphs"),
    ("v046-container-nvidia-smi-not-found.log", "NVIDIA container runtime"),
    ("v043-nvidia-smi-nvml-driver-library-mismatch.log", "reboot"),
    ("v0511-hf-hub-offline-mode-is-enabled.log", "HF_HUB_OFFLINE=1"),
    ("v059-xpu-ur-out-of-device-memory-kv.log", "The XPU ran out of memory while allocating the KV cache"),
    ("v0511-node0-restart-dist-init-port-held.log", "by pid 40311 (sglang::scheduler_TP0)"),
    ("v049-flashinfer-jit-cache-no-space-container.log", "FLASHINFER_WORKSPACE_BASE"),
    ("v043-deepseek-r1-bf16-tp32-block-n-576.log", "delete that block"),
    ("v053-qwen3next-fp8-tp8-gate-up-64-block-n.log", "expert parallelism"),
    ("v051-llama4-tp8-custom-allreduce-capture-invalid-argument.log", "--disable-custom-all-reduce"),
    ("v0512-custom-allreduce-v2-cuh37-invalid-argument-memory-saver.log", "--disable-custom-all-reduce"),
    ("v053-dp-attention-capture-stops-after-registering-0-addresses.log", "--disable-custom-all-reduce"),
    ("v054-kimik2-tp16-node0-loaded-waits-for-node1.log", "waits for the slowest"),
    ("v043-node1-nccl-socketpollconnect-no-route.log", "no route to the other node's address 10.0.0.4"),
    ("v0511-node0-nccl-ibv-modify-qp-gid-index.log", "GID index"),
    ("v046-node1-nccl-bootstrap-no-socket-interface.log", "NCCL_SOCKET_IFNAME names one this host does not have"),
    ("v046-node1-gloo-socket-ifname-unable-to-find-address.log", "GLOO_SOCKET_IFNAME"),
    ("v0510-pd-prefill-bootstrap-port-in-use-server-error.log", "its own --disaggregation-bootstrap-port"),
    ("v0523-pd-prefill-nixl-ucx-createbackend-err-backend.log", "UCX_NET_DEVICES"),
    ("v046-dp-attention-deepep-normal-cpu-recv-timeout-capture.log", "sglang.compile_deep_gemm"),
])
def test_the_diagnosis_names_what_to_change(file: str, words: str) -> None:
    """Where an OOM or a refusal happened decides the knob: the draft's capture, a GPU another process
    holds, the router's worker timeout, the draft path, the SWA ratio, torch.compile, the fp8 KV dtype."""
    from svcdiag.judge.diagnosis import diagnose

    d = diagnose(judge((FIXTURES / file).read_bytes()))
    assert d is not None and any(words in line for line in d["explanation"]), d


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(ENVIRONMENT), st.sampled_from(MIDDLE),
       st.sampled_from(["", "sglang-1  | ", "2025-03-14T10:22:31.123456789Z ", "[pod/sglang-0/server] "]))
def test_an_environment_failure_is_named_with_its_fix_in_any_paste(env: tuple[list[str], str, str], at: int,
                                                                   prefix: str) -> None:
    """The host, the image or the venv at fault (a system library, the C++ runtime, the driver, /dev/shm, a
    port another process holds, host RAM, an NPU): wherever it stops the start and however the log was
    pasted, its cause is named and the diagnosis says the fix for that environment, not a generic one."""
    from svcdiag.judge.diagnosis import diagnose

    lines, cause, words = env
    v = judge("\n".join(prefix + ln for ln in SMOKE[:at + 1] + lines) + "\n")
    assert (v.verdict, v.cause) == ("failed", cause), (v.message, v.evidence)
    d = diagnose(v)
    assert d is not None and any(words in line for line in d["explanation"]), d


# ---------------------------------------------------------------- another formatter's level prefix on every line

_DATED = re.compile(r"^\[(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d)(\.\d+)?((?: [^\]]*)?)\] (.*)$")
FORMATTERS = {  # SGLang's dated line, as another logging setup or launcher writes it (issue 28 §3.1)
    "uvicorn": lambda ts, ms, ranks, msg: f"[{ts}{ms}{ranks}] INFO:     {msg}",
    "bracket": lambda ts, ms, ranks, msg: f"[{ts}{ms}{ranks}] [INFO] {msg}",
    "python": lambda ts, ms, ranks, msg: f"{ts},123 - sglang - INFO - {msg}",
    "loguru": lambda ts, ms, ranks, msg: f"{ts}.123 | INFO     | sglang.srt:run:12 - {msg}",
    "launcher": lambda ts, ms, ranks, msg: f"{ts} INFO [{ts}{ms}{ranks}] {msg}",
}


def _formatted(lines: list[str], name: str) -> list[str]:
    fmt = FORMATTERS[name]
    return [fmt(m[1], m[2] or "", m[3], m[4]) if (m := _DATED.match(ln)) else ln for ln in lines]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(sorted(FORMATTERS)), st.sampled_from([f for f in FATAL if not any(
    _DATED.match(ln) and " TP" in ln.split("]")[0] and "Traceback" in ln for ln in f[0])] + [None]))
def test_a_start_under_another_formatter_is_judged_alike(name: str, fatal: tuple[list[str], str] | None) -> None:
    """Every dated line under the formatter's prefix: a healthy start stays healthy, a fatal line keeps its cause
    (a rank's bare `Traceback` record loses its ranks under some formatters, and is left out)."""
    lines = SMOKE if fatal is None else SMOKE[:MIDDLE[0] + 1] + fatal[0]
    v = judge("\n".join(_formatted(lines, name)) + "\n")
    assert (v.verdict, v.cause) == (("healthy", None) if fatal is None else ("failed", fatal[1])), (v.message, name)


def test_a_set_up_failure_after_a_ready_line_is_a_failed_start_not_a_death_while_serving() -> None:
    """A failure the scheduler's own set-up raised (init_disaggregation's frame) after a ready line (another
    worker's, in one paste) is a failed start in phase scheduler, never died_after_ready."""
    lines = (FIXTURES / "v0523-pd-decode-ascend-transfer-engine-init-failed.log").read_text().splitlines()
    at = next(i for i, ln in enumerate(lines) if "max_total_num_tokens=" in ln) + 1
    ready = ["[2026-04-14 11:56:58] The server is fired up and ready to roll!"]
    v = judge("\n".join(lines[:at] + ready + lines[at:]) + "\n")
    assert (v.verdict, v.cause, v.phase, v.detail) == ("failed", "kv_transfer_failed", "scheduler", "ascend"), v.message
