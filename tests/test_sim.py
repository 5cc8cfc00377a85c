"""The stand-in plays a release: `--sglang-version` picks its line shapes, flags and endpoints."""

from __future__ import annotations

import json
import subprocess
import sys
import time
import urllib.error
import urllib.request

import pytest

from .ports import free_port

SMOKE = ["--model-path", "/dev/shm/Qwen3.6-27B", "--served-model-name", "qwen3.6-27b", "--tp-size", "1",
         "--mem-fraction-static", "0.75", "--max-running-requests", "4", "--context-length", "32768",
         "--chunked-prefill-size", "8192", "--max-mamba-cache-size", "24", "--trust-remote-code",
         "--speculative-algorithm", "DFLASH", "--speculative-draft-model-path", "/dev/shm/Qwen3.6-27B-DFlash",
         "--speculative-num-draft-tokens", "16"]
NEW, OLD = "0.5.23", "0.5.12"  # OLD: a pre-0.5.20 release that knows the seed's flags
GRAPH_BS = {NEW: ["--cuda-graph-max-bs-decode", "4"], OLD: ["--cuda-graph-max-bs", "4"]}
READY = "The server is fired up and ready to roll!"


def sim(scenario: str, *args: str, http: bool = False, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    clock = [] if http else ["--virtual-clock", "2026-12-01T10:00:00", "--no-http"]
    return subprocess.run([sys.executable, "-m", "svcdiag.sim", scenario, *clock, *args],
                          capture_output=True, text=True, timeout=timeout, check=False)


def smoke(version: str, *extra: str) -> list[str]:
    return ["--sglang-version", version, *SMOKE, *GRAPH_BS[version], *extra]


def messages(out: str) -> list[str]:
    """The messages of prefixed lines (`[ts RANKS] msg`), in order."""
    return [ln.split("] ", 1)[1] for ln in out.splitlines() if ln.startswith("[") and "] " in ln]


def test_0523_and_an_old_release_print_their_own_shapes() -> None:
    new, old = sim("healthy-hybrid-dflash", *smoke(NEW)), sim("healthy-hybrid-dflash", *smoke(OLD))
    assert new.returncode == old.returncode == 0, (new.stderr, old.stderr)
    n, o = messages(new.stdout), messages(old.stdout)
    assert n[0].startswith("server_args={'model_path': '/dev/shm/Qwen3.6-27B', ")
    assert "'cuda_graph_max_bs_decode': 4" in n[0]
    assert o[0].startswith("server_args=ServerArgs(model_path='/dev/shm/Qwen3.6-27B', ")
    assert not any(m.startswith("Init torch distributed") for m in n)
    assert "Init torch distributed ends. elapsed=0.85 s, mem usage=0.09 GB" in o
    load_new = next(m for m in n if m.startswith("Load weight end."))
    load_old = next(m for m in o if m.startswith("Load weight end."))
    assert load_new.startswith("Load weight end. elapsed=41.90 s, type=Qwen3_5ForCausalLM, avail mem=")
    assert "dtype=torch.bfloat16, avail mem=" in load_old
    assert any(m.startswith("KV Cache is allocated. dtype: torch.bfloat16, #tokens: ") for m in n)
    assert any(m.startswith("Capture target verify CUDA graph end. bs=[1, 2, 3, 4], elapsed=") for m in n)
    assert any(m.startswith("Capture target verify CUDA graph begin. backend=full, num_tokens_per_req=16, bs=[1, 2, 3, 4]")
               for m in o)
    timings = [m for m in n if m.startswith("Engine startup timings (s): load_weight=41.90, kv_cache_allocation=")]
    assert len(timings) == 1 and "cuda_graph={verify=9.60}" in timings[0]
    assert not any(m.startswith("Engine startup timings") for m in o)
    assert 'INFO:     127.0.0.1:51234 - "GET /model_info HTTP/1.1" 200 OK' in n
    assert 'INFO:     127.0.0.1:51234 - "GET /get_model_info HTTP/1.1" 200 OK' in o
    assert n[-1] == o[-1] == READY
    # the 96 GB RTX PRO 6000: 94.5 GB free before loading
    assert "Load weight begin. avail mem=94.50 GB" in n
    summary = next(m for m in n if m.startswith("max_total_num_tokens="))
    assert "max_running_requests=4, context_len=32768" in summary  # 24 Mamba slots // 5 = 4; T > context


def test_old_format_is_0_4_6s_shape_tp0_even_at_tp1() -> None:
    dense = ["--model-path", "/dev/shm/Qwen3-8B", "--tp-size", "1", "--context-length", "32768"]
    p = sim("healthy-dense", "--old-format", *dense)
    assert p.returncode == 0, p.stderr
    lines = p.stdout.splitlines()
    assert any(ln.endswith(" TP0] Capture cuda graph bs [1, 2, 3, 4, 5, 6, 7, 8]") for ln in lines)
    assert any(" TP0] Load weight begin. avail mem=" in ln for ln in lines)
    assert lines[0].split("] ", 1)[1].startswith("server_args=ServerArgs(")


@pytest.mark.parametrize("version, argv, prog, error", [
    (NEW, ["--foo", "3"], "sglang serve", "unrecognized arguments: --foo 3"),
    # argparse's prefix matching (allow_abbrev, as SGLang's parser has it): the removed flag is a
    # prefix of its two replacements
    (NEW, ["--cuda-graph-max-bs", "4"], "sglang serve",
     "ambiguous option: --cuda-graph-max-bs could match --cuda-graph-max-bs-decode, --cuda-graph-max-bs-prefill"),
    ("0.5.6", ["--cuda-graph-max-bs-decode", "4"], "launch_server.py",
     "unrecognized arguments: --cuda-graph-max-bs-decode 4"),
    ("0.4.6", ["--max-mamba-cache-size", "24"], "launch_server.py",
     "unrecognized arguments: --max-mamba-cache-size 24"),
    (NEW, ["--tp-size", "auto"], "sglang serve", "argument --tp-size/--tensor-parallel-size: invalid int value: 'auto'"),
])
def test_a_flag_the_release_does_not_take_ends_the_start_as_argparse_does(version: str, argv: list[str], prog: str,
                                                                          error: str) -> None:
    p = sim("healthy-dense", "--sglang-version", version, "--model-path", "/dev/shm/Qwen3-8B", *argv)
    assert p.returncode == 2
    assert p.stdout == ""  # before any log line
    err = p.stderr.splitlines()
    assert err[0].startswith(f"usage: {prog} [-h] --model-path MODEL_PATH")
    assert err[-1] == f"{prog}: error: {error}"


def test_both_cuda_graph_spellings_where_the_release_has_them() -> None:
    for flag in ("--cuda-graph-max-bs", "--cuda-graph-max-bs-decode"):
        p = sim("healthy-dense", "--sglang-version", "0.5.19", "--model-path", "/m", flag, "2")
        assert p.returncode == 0 and "bs=[1, 2]" in p.stdout, (flag, p.stderr)


def test_kv_below_context_warns_and_serves_on_0523_but_asserts_on_an_old_release() -> None:
    # dflash-smoke's flags with 93 GB free on 0.5.23 (the draft's weights and KV, 24 + 1 Mamba slots and
    # (4 + 1) × 16 intermediate states first) and 87 GB on the old release: a KV pool below the 32,768 context
    new = sim("healthy-hybrid-dflash", "--gpu-free-gb", "93", *smoke(NEW))
    n = messages(new.stdout)
    assert new.returncode == 0, new.stderr
    tokens = int(next(m for m in n if m.startswith("max_total_num_tokens=")).split(",")[0].split("=")[1])
    assert tokens < 32768
    assert (f"KV pool holds {tokens} tokens, fewer than --context-length 32768. One full-length request cannot fit, "
            "so long requests will be refused or truncated at serving time. Lower --context-length, raise "
            "--mem-fraction-static, or free memory taken before the pool is sized.") in n
    assert n[-1] == READY
    old = sim("healthy-hybrid-dflash", "--gpu-free-gb", "87", *smoke(OLD))
    assert old.returncode == -9  # SGLang kills its own tree
    assert "AssertionError: max_running_request is zero" in old.stdout.splitlines()
    assert READY not in old.stdout and "KV pool holds" not in old.stdout


def test_the_seeds_config_asserts_on_an_old_release_and_hits_the_mamba_cap_on_0523() -> None:
    mr8 = ["--max-running-requests", "8", "--max-mamba-cache-size", "2"]
    old = sim("max-running-zero", *smoke(OLD), *mr8)
    assert old.returncode == -9
    assert any(m.startswith("KV Cache is allocated. dtype: torch.bfloat16, #tokens: 11893,") for m in messages(old.stdout))
    assert "AssertionError: max_running_request is zero" in old.stdout.splitlines()
    new = sim("max-running-zero", *smoke(NEW), *mr8)  # 2 Mamba slots // 5 per request = 0
    assert new.returncode == -9 and "max_running_request is zero" not in new.stdout
    assert any(ln.startswith("RuntimeError: Hybrid (mamba/linear-attention) state cache is too small to serve any "
                             "requests. max_mamba_cache_size=2, mamba_ratio=0.9") for ln in new.stdout.splitlines())


def get(url: str) -> tuple[int, object]:
    try:
        with urllib.request.urlopen(url, timeout=30) as r:
            return r.status, json.loads(r.read() or b"null")
    except urllib.error.HTTPError as e:
        return e.code, None
    except OSError:
        return -1, None


def serve(version: str, port: int) -> subprocess.Popen[str]:
    argv = ["--sglang-version", version, "--time-scale", "0.02", "--port", str(port), *SMOKE, *GRAPH_BS[version]]
    return subprocess.Popen([sys.executable, "-m", "svcdiag.sim", "healthy-hybrid-dflash", *argv],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def wait_bound(port: int, proc: subprocess.Popen[str], path: str) -> list[int]:
    """Codes of `path` from the bind until 200 (or 60 s)."""
    codes: list[int] = []
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and proc.poll() is None:
        code, _ = get(f"http://127.0.0.1:{port}{path}")
        if code != -1:
            codes.append(code)
        if code == 200:
            break
        time.sleep(0.005)
    return codes


def test_0523_endpoints_ready_503_then_200_and_server_info() -> None:
    # from the bind to ready is ~90 ms at this scale: a loaded machine may stall this test past all of it (its
    # first answer already 200). Each such start is ended and another made, up to 5; /ready never 503 fails
    for attempt in range(5):
        port = free_port()
        proc = serve(NEW, port)
        codes = wait_bound(port, proc, "/ready")
        if 503 in codes or attempt == 4:
            break
        proc.terminate()
        proc.communicate(timeout=60)
    try:
        assert codes and codes[-1] == 200 and 503 in codes, codes
        code, info = get(f"http://127.0.0.1:{port}/server_info")
        assert code == 200 and isinstance(info, dict)
        assert info["version"] == NEW and "sglang.launch_server" in info["launch_command"]
        state = info["internal_states"][0]
        assert state["effective_max_running_requests_per_dp"] == 4
        assert state["memory_usage"]["token_capacity"] == info["max_total_num_tokens"] > 32768
        t = time.monotonic()
        assert get(f"http://127.0.0.1:{port}/health")[0] == 200
        assert time.monotonic() - t >= 0.02 * 0.9  # 0.5.23 sleeps 1 s (scaled) before answering
        assert get(f"http://127.0.0.1:{port}/get_server_info")[0] == 200
        assert get(f"http://127.0.0.1:{port}/model_info")[0] == 200
    finally:
        proc.terminate()
        out, _ = proc.communicate(timeout=60)
    assert ("Endpoint '/get_server_info' is deprecated and will be removed in a future version. "
            "Please use '/server_info' instead.") in messages(out)


def test_old_release_endpoints_have_no_ready_nor_server_info() -> None:
    port = free_port()
    proc = serve(OLD, port)
    try:
        codes = wait_bound(port, proc, "/health")
        assert codes and codes[-1] == 200, codes
        assert get(f"http://127.0.0.1:{port}/ready")[0] == 404
        assert get(f"http://127.0.0.1:{port}/server_info")[0] == 404
        code, info = get(f"http://127.0.0.1:{port}/get_server_info")
        assert code == 200 and isinstance(info, dict) and info["version"] == OLD
        assert get(f"http://127.0.0.1:{port}/get_model_info")[0] == 200
    finally:
        proc.terminate()
        out, _ = proc.communicate(timeout=60)
    assert "deprecated" not in out
