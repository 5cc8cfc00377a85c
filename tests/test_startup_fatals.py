"""SGLang's own start-up fatal messages (issue #28 §2: the message catalogue's `worth_a_cause`,
`flag_combination` and `unsupported` groups), each as the journal shows a start that dies of it:
the cause and sub-case svcdiag names, and a diagnosis that quotes SGLang's words with the fix."""

from __future__ import annotations

import io

import pytest
from hypothesis import given
from hypothesis import strategies as st

from svcdiag.judge.diagnosis import diagnose
from svcdiag.ops.offline.replay import replay
from svcdiag.sglang.failures import classify

SITE = "/usr/local/lib/python3.12/dist-packages/sglang/"
TS = "2026-05-23 09:43:08"
START = f"[{TS}] server_args=ServerArgs(model_path='/models/Qwen3-8B', tp_size=1)"


def scheduler_dies(file: str, fn: str, final: str):
    """A start whose scheduler raises `final` in `fn` of `file` (a path under sglang/), as 0.5.2x prints it."""
    text = "\n".join([
        START,
        f"[{TS} TP0] Scheduler hit an exception: Traceback (most recent call last):",
        f'  File "{SITE}srt/managers/scheduler.py", line 3000, in run_scheduler_process',
        "    scheduler = Scheduler(server_args, port_args, gpu_id, tp_rank, moe_ep_rank, pp_rank, dp_rank)",
        f'  File "{SITE}{file}", line 412, in {fn}',
        "    raise",
        final, "",
        f"[{TS}] Received sigquit from a child process. It usually means the child failed.", ""])
    return replay(io.BytesIO(text.encode()), "t.log").verdict


def launcher_dies(file: str, fn: str, final: str):
    """A start whose launching process raises `final` in `fn` of `file` (the flag checks, the launcher)."""
    text = "\n".join([
        START, "Traceback (most recent call last):",
        f'  File "{SITE}launch_server.py", line 14, in <module>', "    run_server(server_args)",
        f'  File "{SITE}{file}", line 88, in {fn}', "    raise", final, ""])
    return replay(io.BytesIO(text.encode()), "t.log").verdict


def _judged(v, cause: str, detail: str) -> str:
    assert (v.verdict, v.cause, v.detail) == ("failed", cause, detail), v.message
    d = diagnose(v)
    assert d is not None and all(d["explanation"])
    return " ".join(d["explanation"])


# ---------------------------------------------------------------- words a cause already describes

@pytest.mark.parametrize(("file", "fn", "final", "cause", "detail"), [
    ("srt/model_loader/loader.py", "_prepare_weights", "RuntimeError: Cannot find any model weights with "
     "`/models/Qwen3-8B`", "model_not_found", "no_weights"),
    ("srt/model_loader/loader.py", "_get_weight_files", "RuntimeError: No model weights found in: `/models/Qwen3-8B`",
     "model_not_found", "no_weights"),
    ("srt/model_loader/loader.py", "load_model", "ValueError: Could not find checkpoint files "
     "'/ckpt/model-rank-0-part-*.safetensors', only pre-sharded checkpoints are currently supported!",
     "model_not_found", "no_weights"),
    ("srt/model_loader/weight_utils.py", "filter_duplicate_safetensors_files", "RuntimeError: "
     "model.safetensors.index.json references 2 shard file(s) missing from /models/Qwen3-8B (incomplete download?): "
     "['model-00003-of-00004.safetensors', 'model-00004-of-00004.safetensors']", "model_not_found", "missing_shards"),
    ("srt/model_loader/weight_utils.py", "get_quant_config", "ValueError: Cannot find the config file for awq",
     "model_not_found", "no_quant_config"),
    # it names a flag too: the checkpoint's words come first
    ("srt/model_loader/loader.py", "_verify_rank_checksum", "RuntimeError: Rank-3 checksum mismatch for presharded "
     "checkpoint at /ckpt/rank3: expected 9f1c, got 07aa. The checkpoint files may be corrupted; re-dump or skip "
     "verification with --model-loader-extra-config '{\"verify_checksum\": false}'.", "bad_checkpoint",
     "presharded_checksum"),
    ("srt/mem_cache/memory_pool_host.py", "__init__", "ValueError: Not enough host memory for V4 paged pool c4. "
     "Requesting 120.00 GB but only have 80.50 GB free.", "host_oom", "hicache_host_pool"),
    ("srt/mem_cache/pool_host/unified.py", "__init__", "ValueError: Not enough host memory for unified page-envelope "
     "backing. Requesting 64.00 GB but only have 31.20 GB free.", "host_oom", "hicache_host_pool"),
    ("srt/model_executor/pool_configurator.py", "calculate_pool_sizes", "ValueError: SWA pool cap (8192 tokens, "
     "1.20 GiB) leaves no room for the full KV pool within the available 1.10 GiB. Reduce --max-running-requests, "
     "lower SGLANG_SWA_EVICTION_INTERVAL or raise --mem-fraction-static.", "not_enough_memory", ""),
    ("srt/mem_cache/unified_memory_pool.py", "__init__", "ValueError: UnifiedKVPool: sub-pool 'swa' fits only 1 "
     "slots in 4096 bytes, but min_slot_index=1 leaves no room for real data. Increase total_bytes.",
     "not_enough_memory", ""),
    ("srt/model_executor/model_runner.py", "_publish_modelexpress_metadata", "ImportError: ModelExpress support "
     "requires the 'modelexpress' package. Install it with: pip install modelexpress", "broken_install",
     "optional_package"),
    ("srt/model_loader/loader.py", "_autoround_quantization_workflow", "ImportError: auto-round library not found. "
     "Please install it using `pip install auto-round` to use AutoRound quantization.", "broken_install",
     "optional_package"),
    ("srt/model_loader/loader.py", "_standard_quantization_workflow", "ImportError: NVIDIA Model Optimizer "
     "(modelopt) library not found. Please install it to use ModelOpt quantization.", "broken_install",
     "optional_package"),
    ("srt/mem_cache/storage/mooncake_store/mooncake_store.py", "__init__", "RuntimeError: MooncakeStore with "
     "standalone_storage=True requires MooncakeHostTensorAllocator. Please set standalone_storage=False or upgrade "
     "Mooncake by 'pip install mooncake-transfer-engine --upgrade'.", "broken_install", "optional_package"),
    ("srt/mem_cache/storage/npu_memcache/npu_memcache_store.py", "__init__", "ImportError: Ascend MemCache HiCache "
     "backend requires `memcache_hybrid`. Install it with `pip install memcache_hybrid` and deploy "
     "MetaService/LocalService.", "broken_install", "optional_package"),
    ("srt/model_executor/breakable_cuda_graph/breakable_cuda_graph.py", "_check_cuda_bindings", "RuntimeError: "
     "Breakable CUDA graph requires the 'cuda-python' package. Install it with: pip install cuda-python",
     "broken_install", "optional_package"),
    ("srt/distributed/device_communicators/pynccl_wrapper.py", "__init__", "RuntimeError: Failed to load NCCL "
     "library from libnccl.so.2 . It is expected if you are not running on NVIDIA/AMD GPUs. Otherwise, the nccl library"
     " might not exist, be corrupted or it does not support the current platform Linux-6.8.0-x86_64.",
     "broken_install", ""),
    ("srt/configs/model_config.py", "_verify_quantization", "ValueError: gptq_marlin quantization is currently not "
     "supported in ROCm.", "unsupported_hardware", "rocm"),
    ("srt/configs/load_config.py", "_verify_load_format", "ValueError: load format 'fastsafetensors' is not supported "
     "in ROCm. Supported load formats are ['auto', 'safetensors', 'pt']", "unsupported_hardware", "rocm"),
    ("srt/model_executor/cuda_graph_runner.py", "_create_device_graph", "RuntimeError: Breakable CUDA graph is not "
     "supported on ROCm/HIP", "unsupported_hardware", "rocm"),
])
def test_a_fatal_an_operator_can_fix_names_its_cause(file: str, fn: str, final: str, cause: str, detail: str) -> None:
    said = _judged(scheduler_dies(file, fn, final), cause, detail)
    assert final.split(": ", 1)[1][:40] in said or cause in ("not_enough_memory", "host_oom"), said


def test_the_launchers_pip_advice_is_an_install_not_a_flag() -> None:
    """Raised in launch_server.py (a flag-check frame), but what is missing is a package."""
    v = launcher_dies("launch_server.py", "run_server",
                      "ImportError: Ray is required for --use-ray mode. Install it with: pip install 'sglang[ray]'")
    assert "pip install 'sglang[ray]'" in _judged(v, "broken_install", "optional_package")


def test_a_pd_decode_servers_note_about_a_request_is_no_host_oom() -> None:
    assert classify("Not enough host memory for request 7f3a. Requesting 2.00 GB but only have 1.00 GB free.") is None


# ---------------------------------------------------------------- SGLang refusing its flags

@pytest.mark.parametrize(("file", "fn", "final"), [
    ("srt/arg_groups/model_overrides/iquest_q1.py", "_iquest_q1_overrides",
     "ValueError: IQuest Q1 does not support DP attention."),
    ("srt/arg_groups/fields/__init__.py", "collect_input_fields",
     "ValueError: 'page_size' is declared by both cache and runtime; a field belongs to exactly one namespace"),
    ("cli/serve_backends.py", "resolve_backend", "ValueError: backend 'x' needs a model path"),
    ("srt/server_args_config_parser.py", "_validate_yaml_file", "ValueError: Config file must be YAML format, got: .json"),
])
def test_a_check_in_any_flag_check_frame_is_bad_arguments(file: str, fn: str, final: str) -> None:
    v = launcher_dies(file, fn, final)
    assert final.split(": ", 1)[1] in _judged(v, "bad_arguments", "flag_check")


@pytest.mark.parametrize(("file", "fn", "final"), [
    ("srt/model_loader/loader.py", "_parse_quantization", "ValueError: Invalid quantization choice: 'fp9'. Available "
     "choices: ['awq', 'fp8', 'gptq']"),
    ("srt/model_executor/model_runner.py", "init_memory_pool", "ValueError: Unsupported kv_cache_dtype: fp4_e9."),
    ("srt/configs/device_config.py", "__init__", "RuntimeError: Not supported device type: tpu"),
])
def test_a_flag_value_the_release_does_not_know_is_bad_arguments(file: str, fn: str, final: str) -> None:
    assert final.split(": ", 1)[1] in _judged(scheduler_dies(file, fn, final), "bad_arguments", "")


def test_a_raise_that_names_a_flag_outside_the_checks_is_bad_arguments() -> None:
    final = ("ValueError: --enable-unified-memory only supports hybrid Mamba and hybrid sliding-window-attention "
             "models (DeepSeek-V4 excluded); the current model (Qwen3ForCausalLM) is neither.")
    said = _judged(scheduler_dies("srt/mem_cache/kv_cache_configurator.py", "configure", final),
                   "bad_arguments", "names_a_flag")
    assert final.split(": ", 1)[1] in said and "Change the flags named in it" in said


def test_a_raise_that_names_an_sglang_variable_is_bad_arguments() -> None:
    final = "AssertionError: SGLANG_OPT_USE_ONLINE_COMPRESS does not support speculative decode (MTP) yet"
    said = _judged(scheduler_dies("srt/model_executor/pool_configurator.py", "__init__", final),
                   "bad_arguments", "names_a_variable")
    assert "SGLANG_OPT_USE_ONLINE_COMPRESS" in said and "[env]" in said


FLAGS = st.from_regex(r"--[a-z]{2,10}(?:-[a-z0-9]{1,8}){0,3}", fullmatch=True)
WORDS = st.lists(st.sampled_from(["the", "pool", "requires", "mode", "this", "model", "cache", "a", "value", "=",
                                  "1", "-1", "x-y", "dp", "(", ")", "got"]), min_size=1, max_size=8).map(" ".join)


@given(FLAGS, WORDS, WORDS)
def test_any_flag_named_in_a_raise_is_refused_flags(flag: str, before: str, after: str) -> None:
    final = f"ValueError: {before} {flag} {after}"
    v = scheduler_dies("srt/mem_cache/memory_pool.py", "__init__", final)
    assert (v.cause, v.detail) == ("bad_arguments", "names_a_flag"), v.message


@given(WORDS)
def test_a_raise_that_names_no_flag_outside_the_checks_stays_generic(words: str) -> None:
    v = scheduler_dies("srt/mem_cache/memory_pool.py", "__init__", f"RuntimeError: {words}")
    assert v.cause == "exception", v.message


# ---------------------------------------------------------------- what the release cannot serve

@pytest.mark.parametrize(("file", "fn", "final", "cause", "detail"), [
    ("srt/model_loader/loader.py", "_load_weights", "ValueError: Model Qwen3ForCausalLM does not support "
     "BitsAndBytes quantization yet.", "unsupported_model", "feature"),
    ("srt/model_executor/model_runner.py", "__init__", "AssertionError: Pipeline Parallel is not compatible with this "
     "model.", "unsupported_model", "feature"),
    ("srt/model_executor/model_runner.py", "load_model_cls_srt", "ValueError: Unsupported architectures: "
     "FooForCausalLM. Supported list: ['LlamaForCausalLM', 'Qwen3ForCausalLM']", "unsupported_model", ""),
    ("srt/model_loader/loader.py", "_get_gguf_weights_map", "RuntimeError: Unknown gguf model_type: qwen9",
     "unsupported_model", ""),
    ("srt/model_loader/utils.py", "resolve_transformers_arch", "ValueError: FooForCausalLM has no SGlang "
     "implementation and the Transformers implementation is not compatible with SGLang.", "unsupported_model", ""),
    ("srt/mem_cache/memory_pool.py", "__init__", "AssertionError: FP4 is not supported on NPU yet.",
     "unsupported_hardware", "platform"),
    ("srt/mem_cache/kv_cache_configurator.py", "configure", "RuntimeError: CPU FP8 KV cache requires Intel AMX "
     "support.", "unsupported_hardware", "platform"),
    ("srt/mem_cache/unified_memory_pool.py", "__init__", "RuntimeError: UnifiedKVPool post-capture backing requires "
     "a CUDA device", "unsupported_hardware", "platform"),
    ("srt/model_executor/model_runner_components/load_model_utils.py", "maybe_downgrade_dtype_for_legacy_gpu",
     "RuntimeError: SGLang only supports sm75 and above.", "unsupported_hardware", ""),
])
def test_what_the_release_cannot_serve_names_model_or_hardware(file: str, fn: str, final: str, cause: str,
                                                                detail: str) -> None:
    assert final.split(": ", 1)[1] in _judged(scheduler_dies(file, fn, final), cause, detail)


@pytest.mark.parametrize(("file", "final", "detail"), [
    ("srt/disaggregation/mooncake/conn.py", "RuntimeError: Mooncake Transfer Engine initialization failed.", ""),
    ("srt/disaggregation/ascend/transfer_engine.py", "RuntimeError: Ascend Transfer Engine initialization failed.",
     "ascend"),
    ("srt/disaggregation/nixl/conn.py", "nixl._bindings.nixlBackendError: NIXL_ERR_BACKEND", "nixl"),
    ("srt/disaggregation/nixl/conn.py", "ValueError: NIXL backend 'UCX' not found. Available: ['GDS']. Please install "
     "the required NIXL plugin or choose from: ['GDS']", "nixl_plugin"),
    ("srt/utils/common.py", "RuntimeError: NIXL create_backend('UCX', {'num_threads': '8'}) did not return within 120s "
     "on gpu-node-07", "init_timeout"),
    ("srt/utils/common.py", "RuntimeError: Mooncake TransferEngine.initialize('10.0.0.21', 'rdma', 'mlx5_0') did not "
     "return within 120s on gpu-node-07", "init_timeout"),
    ("srt/utils/common.py", "RuntimeError: Mori IOEngine('io-prefill-dp0-tp0-pid4242-10.0.0.21-9f1c2d3e', "
     "host='10.0.0.21') did not return within 120s on gpu-node-07", "init_timeout"),
])
def test_every_transfer_engines_failed_set_up_is_kv_transfer_failed(file: str, final: str, detail: str) -> None:
    """Mooncake's, Ascend's, NIXL's and Mori's transfer engine failing (or never finishing) its set-up in the
    scheduler's init_disaggregation: kv_transfer_failed, each with its sub-case, in phase scheduler (issue 41 §4)."""
    text = "\n".join([
        START, f"[{TS} TP0] max_total_num_tokens=433702, chunked_prefill_size=8192, max_prefill_tokens=16384, "
        "max_running_requests=4096, context_len=40960, available_gpu_mem=4.53 GB",
        f"[{TS} TP0] Scheduler hit an exception: Traceback (most recent call last):",
        f'  File "{SITE}srt/managers/scheduler.py", line 6362, in run_scheduler_process',
        "    scheduler = Scheduler(server_args, port_args)",
        f'  File "{SITE}srt/managers/scheduler.py", line 689, in __init__', "    self.init_disaggregation()",
        f'  File "{SITE}srt/managers/scheduler.py", line 1625, in init_disaggregation',
        "    self.disagg_prefill_bootstrap_queue = PrefillBootstrapQueue(",
        f'  File "{SITE}{file}", line 84, in initialize', "    raise", final, "",
        f"[{TS}] Received sigquit from a child process. It usually means the child failed.", ""])
    v = replay(io.BytesIO(text.encode()), "t.log").verdict
    assert (v.verdict, v.cause, v.detail, v.phase) == ("failed", "kv_transfer_failed", detail, "scheduler"), v.message
    d = diagnose(v)
    assert d is not None and d["explanation"], d
