"""SGLang's launch_server command line, built from a config (flag names from server_args.py)."""

from __future__ import annotations

import sys

from svcdiag.config.service import ServiceConfig

SGLANG_MODULE = "sglang.launch_server"
SIM_MODULE = "svcdiag.sim"


def sglang_args(cfg: ServiceConfig) -> list[str]:
    """The flags, in server_args.py's spelling; unset fields are left to SGLang's defaults."""
    a: list[str] = ["--model-path", cfg.model_path]
    if cfg.served_model_name:
        a += ["--served-model-name", cfg.served_model_name]
    a += ["--tp-size", str(cfg.tp_size)]
    if cfg.dp_size != 1:
        a += ["--dp-size", str(cfg.dp_size)]
    a += ["--host", cfg.host, "--port", str(cfg.port)]
    opt = (
        ("--mem-fraction-static", cfg.mem_fraction_static),
        ("--max-running-requests", cfg.max_running_requests),
        ("--context-length", cfg.context_length),
        ("--chunked-prefill-size", cfg.chunked_prefill_size),
        ("--cuda-graph-max-bs", cfg.cuda_graph_max_bs),
        ("--max-mamba-cache-size", cfg.max_mamba_cache_size),
    )
    for flag, value in opt:
        if value is not None:
            a += [flag, str(value)]
    if cfg.trust_remote_code:
        a.append("--trust-remote-code")
    s = cfg.speculative
    if s is not None:
        a += ["--speculative-algorithm", s.algorithm]
        for flag, value in (
            ("--speculative-draft-model-path", s.draft_model_path),
            ("--speculative-num-steps", s.num_steps),
            ("--speculative-eagle-topk", s.eagle_topk),
            ("--speculative-num-draft-tokens", s.num_draft_tokens),
        ):
            if value is not None:
                a += [flag, str(value)]
    return a + list(cfg.extra_args)


def exec_argv(cfg: ServiceConfig) -> list[str]:
    """The unit's ExecStart argv. With `simulate`, the stand-in runs under the interpreter
    svcdiag itself runs on (it has svcdiag importable); every SGLang flag is kept."""
    if cfg.simulate:
        gpu = ["--gpu-free-gb", repr(cfg.gpu_memory_gb)] if cfg.gpu_memory_gb else []
        return [sys.executable, "-m", SIM_MODULE, cfg.simulate,
                "--time-scale", repr(cfg.sim_time_scale), *gpu, *sglang_args(cfg)]
    return [cfg.python, "-m", SGLANG_MODULE, *sglang_args(cfg)]
