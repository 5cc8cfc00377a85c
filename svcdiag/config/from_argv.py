"""A config from SGLang's own command line, for a container that has no units folder.

`svcdiag supervise -- python -m sglang.launch_server --model-path … --tp-size 4` (or
`sglang serve …`, or the stand-in `python -m svcdiag.sim SCENARIO …`): svcdiag.sglang.command
reads the flags the judge and the diagnosis care about into config keys, and `from_keys` makes
them a config; every other word is left to SGLang. Deadlines come, each overriding the one
before, from the defaults, an optional mounted config file ($SVCDIAG_CONFIG: the units folder's
TOML schema, its keys checked the same way; the command line wins over it for SGLang's flags) and
$SVCDIAG_TIMEOUT_<PHASE> (seconds); the serving watch's cadence from $SVCDIAG_HEALTH_INTERVAL_S and
$SVCDIAG_HEALTH_FAILURES. The config's name: $SVCDIAG_NAME, else the served model name,
else the model path's last part.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from svcdiag.config.service import TIMEOUT_KEYS, ConfigError, ServiceConfig, check_raw, config_from_keys, did_you_mean, read_toml

#: where the keys of a config built from the command line come from, in error messages
ARGV_SOURCE = "the command line after --"

#: keys of the mounted config that a container may set (the rest describe a systemd unit): the
#: top-level keys SGLang's flags set (sglang.command.FIELDS, the stand-in's too), and a description
MOUNTED_KEYS = ("description", "timeouts", "sglang_version", "gpu_memory_gb", "model_path", "served_model_name",
                "tp_size", "dp_size", "host", "port", "mem_fraction_static", "max_running_requests",
                "context_length", "chunked_prefill_size", "cuda_graph_max_bs", "max_mamba_cache_size",
                "trust_remote_code", "nnodes", "dist_init_addr", "health_interval_s", "health_failures")
ENV_TIMEOUT = "SVCDIAG_TIMEOUT_"
#: the model path of a command line that names none (a wrapper script): SGLang's defaults stand
UNKNOWN_MODEL = "unknown"
_NAME_BAD = re.compile(r"[^A-Za-z0-9:_.\-]+")


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


#: the serving watch's cadence in a container: env name → (config key, whole number?)
ENV_WATCH = {"SVCDIAG_HEALTH_INTERVAL_S": ("health_interval_s", False), "SVCDIAG_HEALTH_FAILURES": ("health_failures", True)}


def env_watch(environ: Mapping[str, str]) -> dict[str, float | int]:
    """$SVCDIAG_HEALTH_INTERVAL_S (seconds > 0) and $SVCDIAG_HEALTH_FAILURES (a whole number ≥ 1): the
    serving watch's /health cadence and how many failures in a row it takes (docs/kubernetes.md)."""
    out: dict[str, float | int] = {}
    for name, (key, whole) in ENV_WATCH.items():
        text = environ.get(name)
        if text is None:
            continue
        try:
            value: float | int = int(text) if whole else float(text)
        except ValueError:
            value = 0
        if not value > 0:
            raise ConfigError("environment", name, f"must be {'a whole number ≥ 1' if whole else 'seconds > 0'}, "
                                                   f"got {text!r}")
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


def from_keys(keys: Mapping[str, Any], environ: Mapping[str, str]) -> ServiceConfig:
    """The config of the server whose command line set `keys` (svcdiag.sglang.command's, dotted
    for [speculative]): see the module's docstring."""
    mounted = environ.get("SVCDIAG_CONFIG")
    path = Path(mounted) if mounted else Path(ARGV_SOURCE)
    raw: dict[str, Any] = _mounted(path) if mounted else {}
    keys = dict(keys)
    if "model_path" not in keys and "model_path" not in raw:  # a wrapper script's: the log alone is judged
        keys["model_path"] = UNKNOWN_MODEL
    spec = {k.split(".", 1)[1]: v for k, v in keys.items() if k.startswith("speculative.")}
    raw.update({k: v for k, v in keys.items() if not k.startswith("speculative.")})
    if spec:
        raw["speculative"] = {**(raw.get("speculative") or {}), **spec}
    node = {k: raw.pop(k) for k in ("nnodes", "node_rank") if k in raw}
    check_raw(Path(ARGV_SOURCE), {k: v for k, v in raw.items() if k != "timeouts"})
    raw["timeouts"] = {**raw.get("timeouts", {}), **env_timeouts(environ)}
    raw.update(env_watch(environ))
    raw["readiness"] = "notify"
    cfg = config_from_keys(config_name(raw, environ), path, raw)
    if node.get("nnodes", 1) > 1:  # one node of a multi-node start (a LeaderWorkerSet's pod): this one's own
        cfg = dataclasses.replace(cfg, nnodes=node["nnodes"], node_rank=node.get("node_rank", 0))
    return cfg
