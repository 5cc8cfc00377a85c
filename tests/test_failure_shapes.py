"""The shapes of issue 28 §3.1-3.4 and 3.8, each in every form it takes: a level prefix of any
formatter, an entry point's bare argparse error, the process's own word for its fatal signal, a
fatal line glued to a progress bar, a fragment that holds only a known fatal line."""

from __future__ import annotations

import io

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from svcdiag.ops.offline.replay import replay
from svcdiag.sglang.events import Failure, ProgressBar, Ready
from svcdiag.sglang.grammar import LineParser

READY = "The server is fired up and ready to roll!"
TS = "2026-05-23 09:43:08"


def judge(text: str):
    return replay(io.BytesIO(text.encode()), "t.log").verdict


def failures(*lines: str) -> list[Failure]:
    p = LineParser()
    out = [e for ln in lines for e in p.feed(ln)] + p.close()
    return [e for e in out if isinstance(e, Failure)]


# ---------------------------------------------------------------- §3.1 a level prefix of any shape

LEVELS = ["INFO:     ", "INFO: ", "[INFO] ", "INFO ", "INFO - ", "WARNING:  ", "INFO:sglang.srt.entrypoints:",
          "\x1b[32mINFO\x1b[0m:     "]
WRAPPERS = ["[{ts}] {lv}{msg}", "[{ts} TP0] {lv}{msg}", "{lv}{msg}", "{lv}[{ts}] {msg}", "{ts},123 - INFO - {msg}",
            "{ts},123 - sglang.srt.managers - INFO - {msg}", "{ts}.123 | INFO     | sglang.srt:run:12 - {msg}",
            "{ts} INFO {msg}", "{ts} INFO 228 [http_server.py:301] {msg}", "{ts} INFO [{ts}] {msg}"]


@pytest.mark.parametrize("level", LEVELS)
@pytest.mark.parametrize("shape", WRAPPERS)
def test_a_ready_line_under_any_level_prefix_is_ready(shape: str, level: str) -> None:
    line = shape.format(ts=TS, lv=level, msg=READY)
    assert any(isinstance(e, Ready) for e in LineParser().feed(line)), line


@settings(max_examples=60, deadline=None)
@given(st.sampled_from(["DEBUG", "INFO", "WARNING", "WARN", "ERROR", "CRITICAL"]),
       st.sampled_from([":", ": ", ":     ", "] ", " - ", " ", ":root:"]), st.booleans())
def test_any_level_word_and_separator_wraps_the_line(level: str, sep: str, bracket: bool) -> None:
    head = ("[" if bracket and sep.startswith("]") else "") + level + sep
    events = LineParser().feed(f"[{TS}] {head}Load weight begin. avail mem=54.64 GB")
    assert [e.kind for e in events] == ["weights_begin"], (head, events)


def test_access_lines_under_a_level_prefix_stay_quiet_and_the_fast_path_agrees() -> None:
    """replay's fast path skips what the parser would ignore, and reads what it would not."""
    p = LineParser()
    pat = p.interesting_re()
    assert pat.match(f'\n[{TS}] INFO:     127.0.0.1:5000 - "GET /health HTTP/1.1" 200 OK'.encode()) is None
    assert pat.match(f"\n[{TS}] [INFO] {READY}".encode()) is not None
    assert pat.match(f"\n[{TS}] ERROR - Scheduler hit an exception: Traceback".encode()) is not None
    assert p.feed(f'[{TS}] INFO:     127.0.0.1:5000 - "GET /health HTTP/1.1" 200 OK') == []


def test_a_root_failure_under_a_level_prefix_is_the_failure() -> None:
    got = failures(f"[{TS} TP0] ERROR:    Scheduler hit an exception: Traceback (most recent call last):",
                   '  File "/x/model_runner.py", line 9, in load', "    x()",
                   "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB.")
    assert [(f.cause, f.role) for f in got] == [("cuda_oom", "root")]


# ---------------------------------------------------------------- §3.2 entry points without a program name

@pytest.mark.parametrize("line", [
    "error: unrecognized arguments: --mem-fraction-static 0.85 --tp-size 2",
    "error: the following arguments are required: --model-path",
    "error: argument --tp-size: invalid int value: 'auto'",
    "sglang serve: error: unrecognized arguments: --foo",
    "sglang generate: error: argument --num-gpus: invalid int value: 'x'",
])
def test_argparse_errors_of_every_entry_point_are_bad_arguments(line: str) -> None:
    v = judge("usage: sglang serve [-h] --model-path MODEL_PATH\n" + line + "\n")
    assert (v.verdict, v.cause) == ("failed", "bad_arguments"), v.message


def test_a_bare_error_line_of_another_program_is_not_argparse() -> None:
    assert failures("error: externally-managed-environment") == []


# ---------------------------------------------------------------- §3.3 the process's own word for its signal

@pytest.mark.parametrize(("what", "sig"), [("Segmentation fault", "SEGV"), ("Bus error", "BUS"), ("Aborted", "ABRT"),
                                           ("Floating point exception", "FPE"), ("Illegal instruction", "ILL")])
def test_faulthandler_names_the_signal(what: str, sig: str) -> None:
    v = judge(f"[{TS}] Load weight begin. avail mem=78.21 GB\nFatal Python error: {what}\n\n"
              "Current thread 0x00007f2d5c5b6480 (most recent call first):\n"
              '  File "/x/sglang/srt/model_loader/weight_utils.py", line 456 in safetensors_weights_iterator\n')
    assert (v.verdict, v.cause, v.figures.signal) == ("failed", "killed_by_signal", sig), v.message


@pytest.mark.parametrize(("what", "cause"), [
    ("CUDA error: out of memory", "cuda_oom"), ("HIP error: out of memory", "cuda_oom"),
    ("NPU out of memory. Tried to allocate 2.00 GiB", "cuda_oom"),
    ("CUDA error: an illegal memory access was encountered", "cuda_error"),
    ("[PG 0 Rank 3] Process group watchdog thread terminated with exception: [Rank 3] Watchdog caught collective "
     "operation timeout: WorkNCCL(SeqNum=5, OpType=ALLREDUCE)", "nccl_error"),
])
def test_a_cpp_abort_is_judged_by_what_it_says(what: str, cause: str) -> None:
    got = failures("terminate called after throwing an instance of 'c10::Error'", f"  what():  {what}",
                   "Exception raised from c10_cuda_check_implementation at /pytorch/c10/cuda/CUDAException.cpp:42",
                   "Fatal Python error: Aborted")
    assert got[0].cause == cause and got[0].role == "root", got
    assert "terminate called" in got[0].evidence[0]


def test_a_cpp_abort_that_names_no_cause_is_sigabrt() -> None:
    v = judge(f"[{TS}] Load weight begin. avail mem=78.21 GB\n"
              "terminate called after throwing an instance of 'std::runtime_error'\n  what():  basic_string::_M_create\n")
    assert (v.verdict, v.cause, v.figures.signal) == ("failed", "killed_by_signal", "ABRT"), v.message
    assert "what(): basic_string::_M_create" in v.message


# ---------------------------------------------------------------- §3.4 a fatal line glued to a progress bar

BARS = ["Capturing batches (bs=480 avail_mem=31.47 GB):   4%|▍         | 2/52 [00:01<00:38,  1.29it/s]",
        "Loading safetensors checkpoint shards:  50% Completed | 2/4 [00:04<00:04,  2.01s/it]",
        "Fetching 4 files:  50%|█████     | 2/4 [00:01<00:01,  1.52it/s]"]
GLUED = [("Failed: Cuda error /sgl-kernel/csrc/allreduce/custom_all_reduce.cuh:384 'an illegal memory access was "
          "encountered'", "cuda_error"),
         ("Failed: NCCL error /x/custom_all_reduce.cuh:99 'unhandled system error'", "nccl_error"),
         ("RuntimeError: CUDA error: an illegal memory access was encountered", "cuda_error"),
         ("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 MiB.", "cuda_oom")]


@pytest.mark.parametrize(("fatal", "cause"), GLUED)
@pytest.mark.parametrize("bar", BARS)
@pytest.mark.parametrize("glue", ["", "\r"])
def test_a_fatal_line_glued_to_a_bar_is_the_root_cause(bar: str, fatal: str, cause: str, glue: str) -> None:
    text = (f"[{TS} TP0] Capture cuda graph begin. This can take up to several minutes. avail mem=31.9 GB\n"
            f"{bar.replace('2/', '1/')}\r{bar}{glue}{fatal}\n"
            f"[{TS}] Rank 0 scheduler is dead. Please check if there are relevant logs.\n[{TS}] Exit code: 1\n"
            "Traceback (most recent call last):\n  File \"/x/engine.py\", line 9, in launch\n    raise EOFError\nEOFError\n")
    v = judge(text)
    assert (v.verdict, v.cause) == ("failed", cause), (v.message, v.evidence)


def test_the_bar_itself_is_still_read_when_a_line_is_glued() -> None:
    events = LineParser().feed(BARS[0] + GLUED[0][0])
    assert isinstance(events[0], ProgressBar) and events[0].done == 2
    assert isinstance(events[1], Failure) and events[1].cause == "cuda_error"


# ---------------------------------------------------------------- §3.8 a fragment that holds only a fatal line

@pytest.mark.parametrize(("fragment", "cause"), [
    ("Cannot access gated repo for url https://huggingface.co/meta-llama/Llama-3.1-8B-Instruct/resolve/main/"
     "config.json.\nAccess to model meta-llama/Llama-3.1-8B-Instruct is restricted.", "model_not_found"),
    ("Failed to initialize NVML: Driver/library version mismatch\nNVML library version: 570.133", "gpu_unavailable"),
    ("CUDA error: out of memory", "cuda_oom"),
    ("No CUDA GPUs are available", "gpu_unavailable"),
    ("/x/torch/cuda/__init__.py:128: UserWarning: CUDA initialization: CUDA unknown error - this may be due to an "
     "incorrectly set up environment", "gpu_unavailable"),
])
def test_a_fragment_with_only_a_fatal_line_is_judged_by_it(fragment: str, cause: str) -> None:
    v = judge(fragment + "\n")
    assert (v.verdict, v.cause) == ("failed", cause), v.message


@pytest.mark.parametrize("chatter", [
    "node1:4242:4300 [0] NCCL INFO NET/Plugin: Plugin load returned 2 : libnccl-net.so: cannot open shared object file",
    "I0523 09:43:08.101378  7990 transfer_engine.cpp:44] No such file or directory: 'ninja' (ignored)",
])
def test_a_librarys_info_line_is_never_fatal_alone(chatter: str) -> None:
    assert failures(chatter) == []


@pytest.mark.parametrize(("line", "sig"), [
    ("*** SIGSEGV received at time=1733300000 on cpu 12 ***", "SEGV"), ("*** SIGBUS received at time=1733300000 ***", "BUS"),
    ("!!!!!!! Segfault encountered !!!!!!!", "SEGV"), ("terminate called without an active exception", "ABRT"),
    ("free(): invalid pointer", "ABRT"), ("double free or corruption (!prev)", "ABRT"),
    ("malloc(): unaligned tcache chunk detected", "ABRT"), ("*** stack smashing detected ***: terminated", "ABRT"),
])
def test_a_native_runtimes_word_for_its_signal_names_it(line: str, sig: str) -> None:
    v = judge(f"[{TS}] Load weight begin. avail mem=78.21 GB\n{line}\n")
    assert (v.verdict, v.cause, v.figures.signal) == ("failed", "killed_by_signal", sig), v.message


@pytest.mark.parametrize(("fragment", "cause", "detail"), [
    ("NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. Make sure that the latest NVIDIA "
     "driver is installed and running.", "gpu_unavailable", "no_driver"),
    ("nvidia-container-cli: initialization error: load library failed: libnvidia-ml.so.1: cannot open shared object "
     "file: no such file or directory: unknown", "gpu_unavailable", "container_runtime"),
    ("Access to model google/gemma-3-27b-it is restricted and you are not in the authorized list.", "model_not_found",
     ""),
])
def test_the_hosts_and_the_hubs_own_words_alone(fragment: str, cause: str, detail: str) -> None:
    v = judge(fragment + "\n")
    assert (v.verdict, v.cause, v.detail) == ("failed", cause, detail), v.message


def test_a_custom_all_reduce_kernel_fault_names_the_flag_that_avoids_it() -> None:
    from svcdiag.judge.diagnosis import diagnose

    v = judge(f"[{TS} TP0] Capture cuda graph begin. This can take up to several minutes. avail mem=31.9 GB\n"
              f"{BARS[0]}{GLUED[0][0]}\n")
    d = diagnose(v)
    assert (v.cause, v.detail) == ("cuda_error", "custom_all_reduce_kernel")
    assert d is not None and "--disable-custom-all-reduce" in " ".join(d["explanation"])


@pytest.mark.parametrize("fragment", [
    "404 Client Error. (Request ID: Root=1-6821d0b3)\n\nEntry Not Found for url: "
    "https://huggingface.co/Qwen/Qwen3-8B/resolve/main/config.json.",
    "huggingface_hub.errors.RevisionNotFoundError: 404 Client Error. Revision Not Found for url: "
    "https://huggingface.co/api/models/Qwen/Qwen3-8B/revision/v9.",
    "Repository Not Found for url: https://huggingface.co/api/models/Qwen/Qwen3-8X/revision/main.",
])
def test_the_hubs_not_found_words_alone_are_model_not_found(fragment: str) -> None:
    v = judge(fragment + "\n")
    assert (v.verdict, v.cause) == ("failed", "model_not_found"), v.message


def test_a_cpp_abort_right_after_a_traceback_is_not_its_tail() -> None:
    """A rank's bare traceback (a suspect), then another process's abort: the abort's what() is read on its own."""
    got = failures("Traceback (most recent call last):", '  File "/x/loader.py", line 3, in f', "    g()",
                   "KeyboardInterrupt", "terminate called after throwing an instance of 'c10::Error'",
                   "  what():  CUDA error: out of memory")
    assert [f.cause for f in got] == ["exception", "cuda_oom"], got
