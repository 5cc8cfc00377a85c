"""#31 §1 without a cluster, the parts that need no pod: a config from SGLang's own command line,
its deadlines from the environment or a mounted file, and a fix in a container's words."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from svcdiag.config.from_argv import ARGV_SOURCE, config_name
from svcdiag.config.service import DEFAULT_TIMEOUTS, ServiceConfig, Speculative
from svcdiag.errors import ConfigError
from svcdiag.ops.containers.container import PodConfig, fix_words, from_argv, read_argv, with_server_args
from svcdiag.sglang.events import ServerArgs
from svcdiag.sglang.flags import exec_argv, sglang_args
from svcdiag.sglang.grammar import LineParser

from .conftest import assert_one_line_error, run_svcdiag

SGLANG_FIELDS = ("model_path", "served_model_name", "tp_size", "dp_size", "host", "port", "mem_fraction_static",
                 "max_running_requests", "context_length", "chunked_prefill_size", "cuda_graph_max_bs",
                 "trust_remote_code", "max_mamba_cache_size", "speculative")

configs = st.builds(
    ServiceConfig, name=st.just("x"), path=st.just(Path("/u/x.toml")),
    model_path=st.sampled_from(["/models/Qwen3-8B", "Qwen/Qwen3.6-27B", "/dev/shm/m"]),
    served_model_name=st.none() | st.sampled_from(["qwen", "a.b-c"]),
    tp_size=st.integers(1, 8), dp_size=st.integers(1, 4),
    host=st.sampled_from(["127.0.0.1", "0.0.0.0", "::"]), port=st.integers(1, 65535),
    mem_fraction_static=st.none() | st.floats(0.05, 0.95).map(lambda f: round(f, 3)),
    max_running_requests=st.none() | st.integers(1, 4096), context_length=st.none() | st.integers(1, 1 << 20),
    chunked_prefill_size=st.none() | st.integers(-1, 16384), cuda_graph_max_bs=st.none() | st.integers(1, 512),
    trust_remote_code=st.booleans(), max_mamba_cache_size=st.none() | st.integers(1, 64),
    speculative=st.none() | st.builds(Speculative, algorithm=st.sampled_from(["EAGLE", "DFLASH"]),
                                      draft_model_path=st.none() | st.just("/models/draft"),
                                      num_steps=st.none() | st.integers(1, 8),
                                      num_draft_tokens=st.none() | st.integers(1, 16)),
    extra_args=st.sampled_from([(), ("--enable-metrics",), ("--attention-backend", "fa3", "--disable-radix-cache")]),
)


@settings(max_examples=150, deadline=None)
@given(configs, st.sampled_from(["0.5.23", "0.5.12", "0.4.6"]), st.booleans())
def test_the_command_line_a_unit_runs_gives_back_the_config_that_rendered_it(cfg: ServiceConfig, version: str,
                                                                              stand_in: bool) -> None:
    argv = exec_argv(cfg.__class__(**{**cfg.__dict__, "simulate": "healthy-dense" if stand_in else None}), version) \
        if stand_in else ["python3", "-m", "sglang.launch_server", *sglang_args(cfg, version)]
    back = from_argv(argv, {})
    for field in SGLANG_FIELDS:
        assert getattr(back, field) == getattr(cfg, field), field
    assert back.readiness == "notify" and back.timeout == DEFAULT_TIMEOUTS
    assert back.name == config_name({"served_model_name": cfg.served_model_name, "model_path": cfg.model_path}, {})


def test_deadlines_from_the_environment_over_a_mounted_file(tmp_path: Path) -> None:
    mounted = tmp_path / "svcdiag.toml"
    mounted.write_text('description = "pod"\n[timeouts]\nloading_weights = 1800\ncuda_graph = 900\n')
    cfg = from_argv(["sglang", "serve", "--model-path", "/m/Qwen3-8B"],
                    {"SVCDIAG_CONFIG": str(mounted), "SVCDIAG_TIMEOUT_CUDA_GRAPH": "1200",
                     "SVCDIAG_TIMEOUT_JIT_COMPILE": "3600", "SVCDIAG_NAME": "qwen-pod"})
    assert cfg.name == "qwen-pod" and cfg.description == "pod"
    assert cfg.timeout["loading_weights"] == 1800 and cfg.timeout["cuda_graph"] == 1200
    assert cfg.timeout["jit_compile"] == 3600 and cfg.timeout["starting"] == DEFAULT_TIMEOUTS["starting"]


def test_a_wrapper_scripts_command_line_is_judged_with_sglangs_defaults() -> None:
    cfg = from_argv(["/entrypoint.sh", "--verbose"], {})
    assert (cfg.name, cfg.model_path, cfg.port, cfg.tp_size) == ("sglang", "unknown", 30000, 1)


def test_a_multi_node_pods_command_line_is_one_node_of_the_start() -> None:
    cfg = from_argv(["sglang", "serve", "--model-path", "/m", "--tp", "16", "--nnodes", "2", "--node-rank", "1",
                     "--dist-init-addr", "leader:5000"], {})
    assert (cfg.nnodes, cfg.node_rank, cfg.dist_init_addr, cfg.multinode) == (2, 1, "leader:5000", False)


@pytest.mark.parametrize(("argv", "env", "where", "says"), [
    (["--model-path", "/m"], {"SVCDIAG_TIMEOUT_LOADING_WIEGHTS": "9"}, "environment: SVCDIAG_TIMEOUT_LOADING_WIEGHTS",
     "did you mean 'loading_weights'"),
    (["--model-path", "/m"], {"SVCDIAG_TIMEOUT_HTTP": "soon"}, "environment: SVCDIAG_TIMEOUT_HTTP",
     "must be seconds > 0, got 'soon'"),
    (["bash", "-c", "sglang serve --tp $TP"], {"SVCDIAG_TIMEOUT_HTTP": "0"}, "environment: SVCDIAG_TIMEOUT_HTTP",
     "must be seconds > 0, got '0'"),
])
def test_a_bad_svcdiag_setting_is_one_error_naming_it(argv: list[str], env: dict[str, str], where: str, says: str) -> None:
    with pytest.raises(ConfigError) as e:
        from_argv(argv, env)
    assert str(e.value).startswith(where) and says in str(e.value), str(e.value)


@pytest.mark.parametrize(("argv", "says"), [
    (["--model-path", "/m", "--tp-size", "four"], f"{ARGV_SOURCE}: --tp-size: must be an integer, got 'four'"),
    (["--model-path", "/m", "--port"], f"{ARGV_SOURCE}: --port: needs a value"),
    (["--model-path", "/m", "--mem-fraction-static", "1.5"], f"{ARGV_SOURCE}: mem_fraction_static: "),
    (["bash", "-c", "python3 -m sglang.launch_server --model-path /m --tp $TP --port 31000; echo done"],
     "bash -c: the shell expands its words"),
    (["/bin/sh", "-ec", "exec sglang serve --model-path /m --port ${PORT}"], "sh -c: the shell expands its words"),
    (["bash", "-c", "sglang serve --model-path '/m"], "cannot read the command line: No closing quotation"),
])
def test_sglang_arguments_that_do_not_read_leave_them_to_its_log_never_refusing_the_start(argv: list[str],
                                                                                           says: str) -> None:
    """#42 §5: a pod that refused to start on `--tp $TP` crash-looped; SGLang's own server_args line
    says what the shell or SGLang made of them (SGLang judges a bad value itself, in its log)."""
    pod = read_argv(argv, {"SVCDIAG_NAME": "wrapped"})
    assert pod.from_log and pod.unread is not None and pod.unread.startswith(says), pod.unread
    assert (pod.cfg.name, pod.cfg.model_path, pod.cfg.port, pod.cfg.tp_size) == ("wrapped", "unknown", 30000, 1)


def test_a_launch_command_it_reads_is_not_second_guessed_by_the_log() -> None:
    assert read_argv(["sglang", "serve", "--model-path", "/m", "--port", "31000"], {}) == \
        PodConfig(from_argv(["sglang", "serve", "--model-path", "/m", "--port", "31000"], {}), None, False)
    assert read_argv(["/entrypoint.sh", "--port", "31000"], {}).from_log  # what a wrapper script passes on may change


_HOSTS = st.sampled_from(["127.0.0.1", "0.0.0.0", "::", "sglang-0.sglang.ns.svc"])


@settings(max_examples=100, deadline=None)
@given(_HOSTS, st.integers(1, 65535), st.integers(1, 16), st.integers(1, 4), st.booleans(),
       st.sampled_from(["0.5.23", "0.5.12"]))
def test_a_wrappers_config_takes_what_sglangs_server_args_line_says(host: str, port: int, tp: int, nnodes: int,
                                                                    dict_form: bool, version: str) -> None:
    fields = {"model_path": "/models/Qwen3-8B", "host": host, "port": port, "tp_size": tp, "context_length": 32768,
              "mem_fraction_static": 0.83, "nnodes": nnodes, "node_rank": nnodes - 1}
    body = ("{" + ", ".join(f"{k!r}: {v!r}" for k, v in fields.items()) + "}" if dict_form
            else "ServerArgs(" + ", ".join(f"{k}={v!r}" for k, v in fields.items()) + ")")
    (ev,) = [e for e in LineParser().feed_line(f"[2026-12-06 04:00:00] server_args={body}", None) if isinstance(e, ServerArgs)]
    cfg = with_server_args(read_argv(["bash", "-c", "exec $SGLANG"], {}).cfg, ev)
    assert (cfg.host, cfg.port, cfg.tp_size, cfg.model_path, cfg.context_length, cfg.mem_fraction_static) == \
        (host, port, tp, "/models/Qwen3-8B", 32768, 0.83)
    assert (cfg.nnodes, cfg.node_rank) == ((nnodes, nnodes - 1) if nnodes > 1 else (1, None))


def test_a_mounted_config_says_which_file_and_key_are_wrong(tmp_path: Path) -> None:
    mounted = tmp_path / "m.toml"
    mounted.write_text('user = "sglang"\n')
    with pytest.raises(ConfigError, match=rf"^{mounted}: user: describes a systemd unit, not a container"):
        from_argv(["--model-path", "/m"], {"SVCDIAG_CONFIG": str(mounted)})
    mounted.write_text("[timeouts]\nloading_wieghts = 3\n")
    with pytest.raises(ConfigError, match=rf"^{mounted}: timeouts.loading_wieghts: unknown key"):
        from_argv(["--model-path", "/m"], {"SVCDIAG_CONFIG": str(mounted)})


def test_the_cli_reports_a_command_that_does_not_run_in_one_line() -> None:
    assert_one_line_error(run_svcdiag("supervise", "--", "no-such-sglang", "--model-path", "/m"),
                          "cannot run 'no-such-sglang': No such file or directory")


def test_a_fix_is_said_in_the_flags_and_variables_a_pod_spec_takes() -> None:
    assert fix_words({"set": {"mem_fraction_static": 0.8, "max_mamba_cache_size": 5, "trust_remote_code": True},
                      "reason": "fits"}) == "--mem-fraction-static 0.8 --max-mamba-cache-size 5 --trust-remote-code (fits)"
    assert fix_words({"set": {"timeouts.loading_weights": 1800.0, "speculative.num_steps": 2}}) == \
        "SVCDIAG_TIMEOUT_LOADING_WEIGHTS=1800 --speculative-num-steps 2"


def test_probe_says_when_no_supervisor_answers() -> None:
    r = run_svcdiag("probe", "startup", "--port", "1")
    assert r.returncode == 1 and b"does not answer" in r.stderr


def test_container_options_with_a_notify_units_config_are_one_error() -> None:
    assert_one_line_error(run_svcdiag("supervise", "--config", "demo-smoke", "--probe-port", "8081", "--", "true"),
                          "--probe-port: a container's option")
    assert_one_line_error(run_svcdiag("supervise", "--node-rank", "1", "--", "true"), "--node-rank needs --config")


def test_a_mounted_config_takes_the_top_level_keys_sglangs_flags_set() -> None:
    from svcdiag.config.from_argv import MOUNTED_KEYS
    from svcdiag.config.service import TOP_LEVEL
    from svcdiag.sglang.command import FIELDS, SIM_FIELDS

    set_by_flags = {key for key, _ in (*FIELDS.values(), *SIM_FIELDS.values()) if key in TOP_LEVEL}
    assert set(MOUNTED_KEYS) == set_by_flags | {"description", "timeouts", "health_interval_s", "health_failures"}  # + the watch (#42)
