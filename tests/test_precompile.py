"""A first start that compiles DeepGEMM kernels (SGLang: "typically 10-20 mins") is slow, not stuck:
the phase SGLang announces the pre-compile in gets `timeouts.jit_compile` more, once, on the live
clock and in a saved log alike; past that, the timed_out names the compile and its fix."""

from __future__ import annotations

import io
import subprocess
import sys

import pytest

from svcdiag.config.service import UnitsDir
from svcdiag.judge.diagnosis import diagnose
from svcdiag.judge.pipeline import Judge
from svcdiag.ops.offline.replay import replay
from svcdiag.sglang.flags import SIM_MODULE, sglang_args
from svcdiag.systemd.notify import slice_s

from .conftest import UNITS, assert_one_line_error

U = UnitsDir(UNITS, "t")
ANNOUNCE = b"Entering DeepGEMM JIT Pre-Compile session"


@pytest.fixture(scope="module")
def first_start() -> bytes:
    """The stand-in's first start on a host: ~15 min of DeepGEMM compile inside CUDA-graph capture."""
    cfg = U.load("demo-dense")
    cmd = [sys.executable, "-m", SIM_MODULE, "deepgemm-first-start", "--virtual-clock", "2026-12-04T00:00:00",
           "--no-http", *sglang_args(cfg, "0.5.23")]
    out = subprocess.run(cmd, capture_output=True, check=True).stdout
    assert out.count(ANNOUNCE) == 3  # once per kernel shape, as compile_utils.py prints it
    return out


def test_a_saved_first_start_is_healthy_within_the_allowance(first_start: bytes) -> None:
    v = replay(io.BytesIO(first_start), "x", U.load("demo-dense")).verdict
    assert (v.verdict, v.phase) == ("healthy", "ready"), v.message
    assert v.phase_seconds["cuda_graph"] > 600  # past the phase's own deadline...
    assert v.figures.overran_deadlines_s is None  # ...and within what SGLang said it would take
    assert v.figures.precompile_extra_s == {"cuda_graph": 1800.0}  # once, not once per kernel shape


def test_without_the_announcement_the_same_start_overran(first_start: bytes) -> None:
    quiet = b"\n".join(ln for ln in first_start.split(b"\n") if ANNOUNCE not in ln)
    v = replay(io.BytesIO(quiet), "x", U.load("demo-dense")).verdict
    assert v.verdict == "healthy" and v.figures.overran_deadlines_s == {"cuda_graph": 600.0}


def live(lines: list[str], ticks: list[float]):
    """A live follower: each line at its own time, then the wall clock's ticks (seconds after the last line)."""
    j = Judge(U.load("demo-dense"), unit="demo-dense.service", start_ts=0.0)
    for i, line in enumerate(lines):
        j.service_line(line, float(i))
    for t in ticks:
        if (v := j.readiness.tick(len(lines) + t)) is not None:
            return v
    return j.verdict


CAPTURE = ["[2026-12-04 00:00:00] Load weight begin. avail mem=94.50 GB",
           "[2026-12-04 00:00:01] Load weight end. elapsed=1.00 s, type=DeepseekV3ForCausalLM, avail mem=20.00 GB, "
           "mem usage=74.50 GB.",
           "[2026-12-04 00:00:02] KV Cache is allocated. #tokens: 100000, K size: 3.00 GB, V size: 3.00 GB",
           "[2026-12-04 00:00:03] Memory pool end. avail mem=10.00 GB",
           "[2026-12-04 00:00:04] Capture cuda graph begin. This can take up to several minutes. avail mem=10.00 GB"]
ENTER = ("[2026-12-04 00:00:05 TP0] Entering DeepGEMM JIT Pre-Compile session. It may take a long time (typically "
         "10-20 mins) if you have not run `sglang.compile_deep_gemm`.")


def test_live_the_clock_waits_out_the_allowance_then_names_the_compile() -> None:
    assert live(CAPTURE, [650.0]).verdict == "timed_out"  # no announcement: the phase's 600 s
    assert live([*CAPTURE, ENTER], [650.0, 2000.0]) is None  # announced: 600 + 1800 s
    v = live([*CAPTURE, ENTER], [2400.0])
    assert (v.verdict, v.phase) == ("timed_out", "cuda_graph")
    d = diagnose(v, U.load("demo-dense"))
    said = " ".join(d["explanation"])
    assert "600 s + 1800 s" in said and "sglang.compile_deep_gemm" in said
    assert d["fixes"][0]["set"] == {"timeouts.jit_compile": 3600}


def test_the_allowance_is_a_timeout_key_but_never_systemds_slice(cli, units) -> None:
    (units / "dg.toml").write_text('extends = "demo-dense"\n[timeouts]\njit_compile = 1\ncuda_graph = 30\n')
    cfg = UnitsDir(units, "t").load("dg")
    assert cfg.timeout["jit_compile"] == 1.0
    assert slice_s(cfg.timeout) == 30.0  # an addition to a deadline, not the shortest deadline itself
    (units / "bad.toml").write_text('extends = "demo-dense"\n[timeouts]\njit_compil = 60\n')
    assert_one_line_error(cli("render", "bad"), "bad.toml: timeouts.jit_compil", "did you mean 'jit_compile'")


ARGS = "[2026-12-04 00:00:00] server_args=ServerArgs(model_path='m', tp_size=1, {})"
GRAPHS_DONE = ["[2026-12-04 00:00:05] Capture cuda graph end. Time elapsed: 1.00 s. mem usage=0.50 GB. avail mem=9.50 GB."]
DRAFT = "[2026-12-04 00:00:06] Load weight begin. avail mem=9.50 GB"
SUMMARY = ("[2026-12-04 00:00:06] max_total_num_tokens=100000, chunked_prefill_size=8192, max_prefill_tokens=16384, "
           "max_running_requests=64, context_len=32768, available_gpu_mem=9.50 GB")
HOST_POOL = "[2026-12-04 00:00:07 TP0] Allocating 120.00 GB host memory for hierarchical KV cache."


@pytest.mark.parametrize(("args", "after", "waits"), [
    ("enable_torch_compile=True", [], 2400.0),  # compiling while capturing: cuda_graph's 600 s + jit_compile
    ("enable_torch_compile=False", [], 600.0),
    ("speculative_algorithm='EAGLE3'", [*GRAPHS_DONE, DRAFT], 1800.0),  # the draft's load and capture, in scheduler
    ("speculative_algorithm=None", [*GRAPHS_DONE, DRAFT], 300.0),  # a router's next worker, not a draft
    ("speculative_algorithm=None", [*GRAPHS_DONE, SUMMARY, HOST_POOL], 600.0),  # pinning the hicache's host pool
    ("speculative_algorithm=None", [*GRAPHS_DONE, SUMMARY], 300.0),
])
def test_what_server_args_turns_on_gets_its_time(args: str, after: list[str], waits: float) -> None:
    # the deadline of the phase the start is in once these lines are read, on the live clock
    lines = [ARGS.format(args), *CAPTURE, *after]
    assert live(lines, [waits - 10.0]) is None
    v = live(lines, [waits + 10.0])
    assert v is not None and v.verdict == "timed_out", v
