"""The one reader of SGLang's launch command line (svcdiag.sglang.command): what `svcdiag import`
and a pod's `svcdiag supervise -- …` both read a command's flags with."""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from svcdiag.config.service import UnitsDir
from svcdiag.errors import ConfigError, SvcdiagError
from svcdiag.sglang.command import FIELDS, FLAG_OF, SIM_FIELDS, find_launch, read_command, read_flags
from svcdiag.sglang.flags import exec_argv

from .conftest import UNITS


def test_both_flag_spellings_and_aliases_are_read() -> None:
    cmd = read_command(["sglang", "serve", "--model=/m", "--tp", "2", "--trust-remote-code", "--enable-x",
                        "--cuda-graph-max-bs", "16", "--speculative-draft-model", "/d", "--port=8000",
                        "--speculative-algorithm=eagle"])
    assert cmd.keys == {"model_path": "/m", "tp_size": 2, "trust_remote_code": True, "cuda_graph_max_bs": 16,
                        "speculative.draft_model_path": "/d", "port": 8000, "speculative.algorithm": "EAGLE"}
    assert cmd.extra_args == ["--enable-x"] and cmd.python is None


def test_other_flags_keep_their_order_and_as_many_values_as_the_release_takes() -> None:
    cmd = read_flags(["--model-path", "/m", "--log-level=debug", "--chunked-prefill-size", "-1", "--enable-metrics",
                      "--attention-backend", "fa3", "--trust-remote-code=false", "--lora-paths", "a", "b"],
                     "0.5.23")
    assert cmd.keys == {"model_path": "/m", "chunked_prefill_size": -1, "trust_remote_code": False}
    assert cmd.extra_args == ["--log-level=debug", "--enable-metrics", "--attention-backend", "fa3",
                              "--lora-paths", "a", "b"]


@pytest.mark.parametrize("words", [
    ["/v/bin/python", "-m", "sglang.launch_server", "--port", "1"],
    ["env", "A=1", "/v/bin/python", "-m", "sglang.launch_server", "--port", "1"],
    ["bash", "-c", "exec /v/bin/python -m sglang.launch_server --port 1"],
    ["/usr/bin/svcdiag", "supervise", "--config", "x", "--", "/v/bin/python", "-m", "sglang.launch_server",
     "--port", "1"],
])
def test_the_launcher_is_found_behind_what_stands_in_front(words: list[str]) -> None:
    cmd = read_command(words)
    assert (cmd.python, cmd.keys) == ("/v/bin/python", {"port": 1})


def test_the_stand_ins_scenario_and_own_flags_are_read_as_its_own() -> None:
    launch = find_launch(["/py", "-m", "svcdiag.sim", "healthy-dense", "--sglang-version", "0.5.12", "--port", "9"])
    assert launch is not None and launch.args[0] == "--sglang-version"
    cmd = read_flags(launch.args, sim=True)
    assert cmd.keys == {"sglang_version": "0.5.12", "port": 9} and not cmd.warnings
    with pytest.raises(SvcdiagError, match="not an SGLang launch command"):  # import: not SGLang's
        read_command(["/py", "-m", "svcdiag.sim", "healthy-dense", "--port", "9"])
    assert read_flags(["--sglang-version", "0.5.12"]).extra_args == ["--sglang-version", "0.5.12"]  # SGLang's: not
    assert find_launch(["/entrypoint.sh", "--port", "9"]) is None


@pytest.mark.parametrize(("args", "flag", "says"), [
    (["--tp-size", "four"], "--tp-size", "must be an integer, got 'four'"),
    (["--mem-fraction-static", "lots"], "--mem-fraction-static", "must be a number, got 'lots'"),
    (["--port"], "--port", "needs a value"),
    (["--port", "--host", "h"], "--port", "needs a value"),
    (["--nnodes", "2"], "--nnodes", "a multi-node start is one config with [[nodes]]"),
    (["--nccl-init-addr", "h:5"], "--nccl-init-addr", "[[nodes]]"),
])
def test_a_bad_flag_is_one_error_naming_the_source_and_the_flag(args: list[str], flag: str, says: str) -> None:
    with pytest.raises(ConfigError) as e:
        read_command(["/py", "-m", "sglang.launch_server", "--model-path", "/m", *args], source="start.sh")
    assert str(e.value).startswith(f"start.sh: {flag}: ") and says in str(e.value) and "\n" not in str(e.value)


def test_one_nodes_flags_are_read_where_a_pod_is_one_node() -> None:
    cmd = read_flags(["--nnodes", "2", "--node-rank", "1", "--nccl-init-addr", "leader:5000"], nodes=True)
    assert cmd.keys == {"nnodes": 2, "node_rank": 1, "dist_init_addr": "leader:5000"}


def test_an_unknown_speculative_algorithm_keeps_its_flags_in_extra_args() -> None:
    cmd = read_flags(["--speculative-algorithm", "MEDUSA", "--speculative-num-steps", "3"])
    assert cmd.keys == {} and cmd.extra_args == ["--speculative-algorithm", "MEDUSA", "--speculative-num-steps", "3"]
    assert "MEDUSA" in cmd.warnings[0]
    assert read_flags(["--speculative-algorithm", "eagle3"]).keys == {"speculative.algorithm": "EAGLE3"}


def test_not_a_launch_command_is_one_error() -> None:
    with pytest.raises(SvcdiagError, match=r"^not an SGLang launch command .*vllm serve /m"):
        read_command(["vllm", "serve", "/m"])


def test_each_key_is_fixed_in_the_newest_spelling() -> None:
    assert FLAG_OF["cuda_graph_max_bs"] == "--cuda-graph-max-bs-decode" and FLAG_OF["tp_size"] == "--tp-size"
    assert FLAG_OF["dist_init_addr"] == "--dist-init-addr" and FLAG_OF["sglang_version"] == "--sglang-version"
    assert set(FLAG_OF) == {key for key, _ in (*FIELDS.values(), *SIM_FIELDS.values())}


@settings(max_examples=100, deadline=None)
@given(tp=st.integers(1, 8), port=st.integers(1024, 65535), mem=st.none() | st.floats(0.1, 0.95),
       mr=st.none() | st.integers(1, 512), ctx=st.none() | st.integers(1, 1 << 20), trust=st.booleans(),
       chunk=st.none() | st.integers(-1, 16384),
       extra=st.sampled_from([[], ["--enable-metrics"], ["--attention-backend", "fa3"], ["--log-level=debug"]]))
def test_a_rendered_command_reads_back_to_its_keys(tp, port, mem, mr, ctx, trust, chunk, extra) -> None:
    base = UnitsDir(UNITS, "t").load("nospec-tp1")
    cfg = dataclasses.replace(base, tp_size=tp, gpus=None, port=port, mem_fraction_static=mem, max_running_requests=mr,
                              context_length=ctx, trust_remote_code=trust, chunked_prefill_size=chunk,
                              extra_args=tuple(extra))
    got = read_command(exec_argv(cfg))
    for key in ("tp_size", "port", "mem_fraction_static", "max_running_requests", "context_length",
                "chunked_prefill_size"):
        assert got.keys.get(key) == getattr(cfg, key) or (getattr(cfg, key) is None and key not in got.keys), key
    assert got.keys.get("trust_remote_code", False) == trust and got.extra_args == extra
    assert got.python == cfg.python


KNOWN = st.sampled_from([("--tp", "tp_size", 2), ("--tensor-parallel-size", "tp_size", 4), ("--port", "port", 8000),
                         ("--mem-fraction-static", "mem_fraction_static", 0.8), ("--model", "model_path", "/m"),
                         ("--chunked-prefill-size", "chunked_prefill_size", -1),
                         ("--cuda-graph-max-bs", "cuda_graph_max_bs", 16)])
OTHER = st.tuples(st.sampled_from(["--enable-metrics", "--zz-unknown", "--attention-backend", "--log-level"]),
                  st.none() | st.from_regex(r"[a-z0-9][a-z0-9._/]{0,8}", fullmatch=True))


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.booleans(), KNOWN, OTHER, st.booleans()), max_size=6))
def test_flags_read_back_in_either_spelling_and_the_rest_keep_their_order(parts) -> None:
    args, keys, extra = [], {}, []
    for is_known, (flag, key, value), (other, word), inline in parts:
        if is_known:
            words = [f"{flag}={value}"] if inline else [flag, str(value)]
            keys[key] = value
        else:
            takes = other != "--enable-metrics"  # a store_true flag takes no value
            words = [other] + ([word or "x"] if takes else [])
            if takes and inline:
                words = [f"{other}={word or 'x'}"]
        args += words
        if not is_known:
            extra += words
    got = read_flags(args, "0.5.12")
    assert got.keys == keys and got.extra_args == extra and not got.warnings
