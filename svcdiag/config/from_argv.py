"""A config from SGLang's own command line, for a container that has no units folder.

`svcdiag supervise -- python -m sglang.launch_server --model-path … --tp-size 4` (or
`sglang serve …`, or the stand-in `python -m svcdiag.sim SCENARIO …`): the flags the judge
and the diagnosis care about become config keys (`flag_keys`), every other word is left to
SGLang. Deadlines come, each overriding the one before, from the defaults, an optional
mounted config file ($SVCDIAG_CONFIG: the units folder's TOML schema, its keys checked the
same way; the command line wins over it for SGLang's flags) and $SVCDIAG_TIMEOUT_<PHASE>
(seconds). The config's name: $SVCDIAG_NAME, else the served model name, else the model
path's last part.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from svcdiag.config.service import TIMEOUT_KEYS, TOP_LEVEL, ConfigError, ServiceConfig, _build, check_raw, did_you_mean, read_toml

#: where the keys of a config built from the command line come from, in error messages
ARGV_SOURCE = "the command line after --"

#: SGLang's flags (and aliases) → (config key, how the value is read); the newest spelling first
FLAGS: dict[str, tuple[str, Any]] = {
    "--model-path": ("model_path", str), "--model": ("model_path", str),
    "--served-model-name": ("served_model_name", str),
    "--tp-size": ("tp_size", int), "--tp": ("tp_size", int), "--tensor-parallel-size": ("tp_size", int),
    "--dp-size": ("dp_size", int), "--dp": ("dp_size", int), "--data-parallel-size": ("dp_size", int),
    "--host": ("host", str), "--port": ("port", int),
    "--mem-fraction-static": ("mem_fraction_static", float),
    "--max-running-requests": ("max_running_requests", int),
    "--context-length": ("context_length", int),
    "--chunked-prefill-size": ("chunked_prefill_size", int),
    "--cuda-graph-max-bs-decode": ("cuda_graph_max_bs", int), "--cuda-graph-max-bs": ("cuda_graph_max_bs", int),
    "--max-mamba-cache-size": ("max_mamba_cache_size", int),
    "--trust-remote-code": ("trust_remote_code", bool),
    "--nnodes": ("nnodes", int), "--node-rank": ("node_rank", int), "--dist-init-addr": ("dist_init_addr", str),
    "--speculative-algorithm": ("speculative.algorithm", str),
    "--speculative-draft-model-path": ("speculative.draft_model_path", str),
    "--speculative-draft-model": ("speculative.draft_model_path", str),
    "--speculative-num-steps": ("speculative.num_steps", int),
    "--speculative-eagle-topk": ("speculative.eagle_topk", int),
    "--speculative-num-draft-tokens": ("speculative.num_draft_tokens", int),
    # the stand-in's own (svcdiag.sim): the release it plays, the GPU it pretends to have
    "--sglang-version": ("sglang_version", str), "--gpu-free-gb": ("gpu_memory_gb", float),
}
#: keys of the mounted config that a container may set (the rest describe a systemd unit)
MOUNTED_KEYS = ("description", "timeouts", "sglang_version", "gpu_memory_gb", *(
    k for k in TOP_LEVEL if k in {v[0] for v in FLAGS.values()}))
ENV_TIMEOUT = "SVCDIAG_TIMEOUT_"
#: the model path of a command line that names none (a wrapper script): SGLang's defaults stand
UNKNOWN_MODEL = "unknown"
_NAME_BAD = re.compile(r"[^A-Za-z0-9:_.\-]+")


def flag_keys(argv: Sequence[str]) -> dict[str, Any]:
    """The config keys SGLang's flags in `argv` set (`--flag value` or `--flag=value`); flags
    svcdiag does not model are SGLang's business and are skipped. A value that does not read as
    its type is a one-line error naming the flag."""
    out: dict[str, Any] = {}
    words = list(argv)
    i = 0
    while i < len(words):
        word = words[i]
        i += 1
        if not word.startswith("--"):
            continue
        flag, eq, inline = word.partition("=")
        known = FLAGS.get(flag)
        if known is None:
            continue
        key, kind = known
        if kind is bool:
            out[key] = inline.lower() not in ("false", "0", "no") if eq else True
            continue
        if eq:
            text = inline
        elif i < len(words) and not words[i].startswith("--"):
            text, i = words[i], i + 1
        else:
            raise ConfigError(ARGV_SOURCE, flag, "needs a value")
        try:
            out[key] = kind(text)
        except ValueError:
            raise ConfigError(ARGV_SOURCE, flag, f"must be {'an integer' if kind is int else 'a number'}, "
                                                 f"got {text!r}") from None
    return out


def env_timeouts(environ: Mapping[str, str]) -> dict[str, float]:
    """$SVCDIAG_TIMEOUT_<KEY> (LOADING_WEIGHTS=1200, JIT_COMPILE=3600): seconds, > 0."""
    out: dict[str, float] = {}
    for name, text in environ.items():
        if not name.startswith(ENV_TIMEOUT):
            continue
        key = name[len(ENV_TIMEOUT):].lower()
        if key not in TIMEOUT_KEYS:
            raise ConfigError("environment", name, f"is not a deadline svcdiag knows{did_you_mean(key, TIMEOUT_KEYS)} "
                                                   f"(one of {', '.join(k.upper() for k in TIMEOUT_KEYS)})")
        try:
            value = float(text)
        except ValueError:
            value = -1.0
        if not value > 0:
            raise ConfigError("environment", name, f"must be seconds > 0, got {text!r}")
        out[key] = value
    return out


def _mounted(path: Path) -> dict[str, Any]:
    raw = read_toml(path)
    check_raw(path, raw)
    for key in raw:
        if key not in MOUNTED_KEYS:
            raise ConfigError(path, key, "describes a systemd unit, not a container: a container's config "
                                         f"takes only {', '.join(sorted(MOUNTED_KEYS))}")
    return raw


def config_name(keys: Mapping[str, Any], environ: Mapping[str, str]) -> str:
    """$SVCDIAG_NAME, else the served model name, else the model path's last part: the name
    history and the events carry."""
    if environ.get("SVCDIAG_NAME"):
        return environ["SVCDIAG_NAME"]
    model = str(keys.get("model_path", ""))
    base = keys.get("served_model_name") or ("" if model == UNKNOWN_MODEL else model.rstrip("/").rsplit("/", 1)[-1])
    return _NAME_BAD.sub("-", base).strip("-") or "sglang"


def from_argv(argv: Sequence[str], environ: Mapping[str, str]) -> ServiceConfig:
    """The config of the server `argv` starts: see the module's docstring."""
    mounted = environ.get("SVCDIAG_CONFIG")
    path = Path(mounted) if mounted else Path(ARGV_SOURCE)
    raw: dict[str, Any] = _mounted(path) if mounted else {}
    keys = flag_keys(argv)
    if "model_path" not in keys and "model_path" not in raw:  # a wrapper script's: the log alone is judged
        keys["model_path"] = UNKNOWN_MODEL
    spec = {k.split(".", 1)[1]: v for k, v in keys.items() if k.startswith("speculative.")}
    raw.update({k: v for k, v in keys.items() if not k.startswith("speculative.")})
    if spec:
        raw["speculative"] = {**(raw.get("speculative") or {}), **spec}
    node = {k: raw.pop(k) for k in ("nnodes", "node_rank") if k in raw}
    check_raw(Path(ARGV_SOURCE), {k: v for k, v in raw.items() if k != "timeouts"})
    raw["timeouts"] = {**raw.get("timeouts", {}), **env_timeouts(environ)}
    raw["readiness"] = "notify"
    name = config_name(raw, environ)
    cfg = _build(name, path, raw)
    if node.get("nnodes", 1) > 1:  # one node of a multi-node start (a LeaderWorkerSet's pod): this one's own
        import dataclasses

        cfg = dataclasses.replace(cfg, nnodes=node["nnodes"], node_rank=node.get("node_rank", 0))
    return cfg
