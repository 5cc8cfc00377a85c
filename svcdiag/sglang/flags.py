"""SGLang's launch_server command line, built from a config (flag names from server_args.py),
spelled for the SGLang release that will run it. Pure: the release is given (the config's
`sglang_version`, or what svcdiag.ops.host.sglang_version found out); unknown, the newest bundled
flag table stands in."""

from __future__ import annotations

import sys

from svcdiag.config.service import ServiceConfig
from svcdiag.sglang.flag_tables import FlagTable, known_versions, table_for

SGLANG_MODULE = "sglang.launch_server"
SIM_MODULE = "svcdiag.sim"


def newest_version() -> str:
    """The newest release with a bundled flag table: what an unknown release is taken for."""
    return known_versions()[-1]


def render_version(cfg: ServiceConfig, version: str | None = None) -> str:
    """The release the flags are spelled for: `version`, else the config's, else the newest bundled."""
    return version or cfg.sglang_version or newest_version()


def _spelling(table: FlagTable, *names: str) -> str:
    """The first of `names` (newest spelling first) the release takes without a deprecation
    warning, else the first it takes at all, else the newest."""
    for name in names:
        spec = table.lookup(name)
        if spec is not None and not spec.deprecated and not spec.error:
            return name
    return next((n for n in names if n in table), names[0])


def sglang_args(cfg: ServiceConfig, version: str | None = None) -> list[str]:
    """The flags, in server_args.py's spelling for `version` (see `render_version`); unset
    fields are left to SGLang's defaults. `--cuda-graph-max-bs` became
    `--cuda-graph-max-bs-decode` (0.5.13 added it, 0.5.20 removed the old one): the old
    spelling only where the release's table knows it and not the new one."""
    table = table_for(render_version(cfg, version))
    a: list[str] = ["--model-path", cfg.model_path]
    if cfg.served_model_name:
        a += ["--served-model-name", cfg.served_model_name]
    a += ["--tp-size", str(cfg.tp_size)]
    if cfg.dp_size != 1:
        a += ["--dp-size", str(cfg.dp_size)]
    if cfg.nnodes > 1 and cfg.node_rank is not None:  # one node's unit of a multi-node start
        a += ["--nnodes", str(cfg.nnodes), "--node-rank", str(cfg.node_rank)]
        if cfg.dist_init_addr:
            a += ["--dist-init-addr", cfg.dist_init_addr]
    a += ["--host", cfg.host, "--port", str(cfg.port)]
    opt = (
        ("--mem-fraction-static", cfg.mem_fraction_static),
        ("--max-running-requests", cfg.max_running_requests),
        ("--context-length", cfg.context_length),
        ("--chunked-prefill-size", cfg.chunked_prefill_size),
        (_spelling(table, "--cuda-graph-max-bs-decode", "--cuda-graph-max-bs"), cfg.cuda_graph_max_bs),
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


def exec_argv(cfg: ServiceConfig, version: str | None = None) -> list[str]:
    """The unit's ExecStart argv, its flags spelled for `version` (see `sglang_args`). With
    `simulate`, the stand-in runs under the interpreter svcdiag itself runs on (it has
    svcdiag importable), playing that release (`--sglang-version`); every SGLang flag is kept."""
    if cfg.simulate:
        gpu = ["--gpu-free-gb", repr(cfg.gpu_memory_gb)] if cfg.gpu_memory_gb else []
        return [sys.executable, "-m", SIM_MODULE, cfg.simulate, "--sglang-version", render_version(cfg, version),
                "--time-scale", repr(cfg.sim_time_scale), *gpu, *sglang_args(cfg, version)]
    return [cfg.python, "-m", SGLANG_MODULE, *sglang_args(cfg, version)]
