"""Service configs: TOML files in a units folder, one per SGLang server, with `extends`.

Each file is checked on its own first (unknown keys, types, ranges), so an error names
the file that wrote the bad value; then the chain of `extends` is merged and the
cross-field rules (tp_size vs. GPU list) are checked on the effective config.
"""

from __future__ import annotations

import dataclasses
import os
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from svcdiag.config.phases import ALLOWANCES, DEFAULT_TIMEOUTS, PHASE_TIMEOUTS, PHASES  # noqa: F401  (the one list)
from svcdiag.errors import ConfigError, SvcdiagError
from svcdiag.files import NotRegular, read_regular


class _Pattern:
    """A regular expression compiled when first used, not at import: most commands check only
    some of these, and compiling them all costs ~1 ms of the start-up `status` is allowed."""

    __slots__ = ("_args", "_re")

    def __init__(self, pattern: str, flags: int = 0):
        self._args = (pattern, flags)
        self._re: re.Pattern[str] | None = None

    def __getattr__(self, name: str) -> Any:  # match, search, fullmatch, pattern...
        if self._re is None:
            self._re = re.compile(*self._args)
        return getattr(self._re, name)


DEFAULT_UNITS_DIRS = ("./units", "/etc/svcdiag/units")
#: A config's name, and so its unit's (NAME.service): the one rule, the same as the polkit rule's in
#: contrib/polkit/50-svcdiag.rules (a test compares them). Letters, digits, '_', ':', '.', '-'; not first
#: a '.' or '-' (a hidden file, an option to a command); no '\\' (systemd's escapes), no '@' (templates).
UNIT_NAME_RE = _Pattern(r"^[A-Za-z0-9_:][A-Za-z0-9:_.-]*$")
#: the longest `description` (systemd's Description=, one line in `systemctl status`; a 1 MB one is a unit
#: systemd cannot load)
DESCRIPTION_MAX = 1024
#: the longest name: NAME.service fits systemd's 255 characters, with room for a node's suffix
NAME_MAX = 240
ENV_KEY_RE = _Pattern(r"^[A-Za-z_][A-Za-z0-9_]*$")
FORBIDDEN_CHARS = _Pattern(r"[\x00-\x08\x0a-\x1f\x7f]")

#: How systemd learns the server is ready: "notify" wraps SGLang in `svcdiag supervise` (Type=notify,
#: READY=1 once judged healthy, per-phase deadlines as EXTEND_TIMEOUT_USEC); "journal" runs it bare
#: (Type=exec) and only svcdiag's follower judges the start from the journal.
READINESS_MODES = ("notify", "journal")
#: An unset `readiness` resolves to this when the config is loaded (`default_readiness`), so that
#: the rendered unit, `diff`, the hash and the history all see the mode the unit really runs in.
DEFAULT_READINESS = "notify"
#: ...a multi-node config's too: each node's unit runs `svcdiag supervise --node-rank R` (node 0 is
#: READY=1 once its HTTP agrees, which SGLang serves only when every rank has joined; a worker
#: node, rank ≥ 1, once its own log says ready).
MULTINODE_READINESS = "notify"
#: The mode every config had before `readiness` existed: a config in it keeps the hash it had then.
LEGACY_READINESS = "journal"
#: An [env] name that looks like this holds a secret: refused, it belongs in [secrets] (docs/security.md).
SECRET_NAME_RE = _Pattern(r"TOKEN|KEY|SECRET|PASSWORD|CREDENTIAL", re.I)
#: systemd's Restart= values (systemd.service(5))
def restart_of(restart: str | None, watchdog_s: float | None) -> str:
    """systemd's Restart= of a unit: the config's own `restart`, else on-failure with a watchdog (it
    restarts a wedged server), else no (a crash loop would bury the first failure's evidence)."""
    return restart if restart is not None else ("on-failure" if watchdog_s else "no")


RESTART_POLICIES = ("no", "on-success", "on-failure", "on-abnormal", "on-watchdog", "on-abort", "always")
#: The unit's sandbox (docs/security.md#hardening): "strict" (the default) or "off".
HARDENING_MODES = ("strict", "off")
DEFAULT_HARDENING = "strict"
#: Device families `devices = [...]` may add to the NVIDIA nodes every unit gets (or a /dev path).
DEVICE_FAMILIES = ("nvidia", "rocm", "infiniband")
SPEC_ALGORITHMS = ("EAGLE", "EAGLE3", "NEXTN", "STANDALONE", "NGRAM", "DFLASH", "DSPARK")

#: Keys whose change moves GPU memory: `svcdiag diff` marks them.
MEMORY_KEYS = frozenset(
    {
        "model_path",
        "tp_size",
        "dp_size",
        "gpus",
        "mem_fraction_static",
        "max_running_requests",
        "context_length",
        "chunked_prefill_size",
        "cuda_graph_max_bs",
        "max_mamba_cache_size",
        "speculative.algorithm",
        "speculative.draft_model_path",
        "speculative.num_steps",
        "speculative.eagle_topk",
        "speculative.num_draft_tokens",
        "extra_args",
    }
)


# ---------------------------------------------------------------- typed configs


@dataclass(frozen=True)
class Speculative:
    """The speculative-decoding settings, kept together: the sizing and the flags read them as one."""

    algorithm: str
    draft_model_path: str | None = None
    num_steps: int | None = None
    eagle_topk: int | None = None
    num_draft_tokens: int | None = None


@dataclass(frozen=True)
class Node:
    """One node of a multi-node start (`[[nodes]]`): where it runs, its rank, its GPUs."""

    node_rank: int
    host: str | None = None  # [user@]HOST[:port] reached over SSH (svcdiag.systemd.remote); None: this host
    gpus: tuple[int, ...] | None = None
    simulate: str | None = None  # the stand-in's scenario for this node (default: the config's)


@dataclass(frozen=True)
class ServiceConfig:
    """The effective config of one service, after `extends`. Mirrors launch_server flags."""

    name: str
    path: Path
    model_path: str
    extends: str | None = None
    description: str | None = None
    served_model_name: str | None = None
    tp_size: int = 1
    dp_size: int = 1
    gpus: tuple[int, ...] | None = None
    host: str = "127.0.0.1"
    port: int = 30000
    mem_fraction_static: float | None = None
    max_running_requests: int | None = None
    context_length: int | None = None
    chunked_prefill_size: int | None = None
    cuda_graph_max_bs: int | None = None
    trust_remote_code: bool = False
    max_mamba_cache_size: int | None = None
    speculative: Speculative | None = None
    extra_args: tuple[str, ...] = ()
    env: tuple[tuple[str, str], ...] = ()
    python: str = "/usr/bin/python3"
    user: str | None = None
    group: str | None = None
    working_directory: str | None = None
    timeouts: tuple[tuple[str, float], ...] = tuple(DEFAULT_TIMEOUTS.items())
    baseline: bool = False
    simulate: str | None = None
    sim_time_scale: float = 1.0
    #: GPU memory free per GPU before loading (GB), for preflight; with `simulate`, the stand-in's GPU
    gpu_memory_gb: float | None = None
    #: the SGLang release `python` runs ("0.5.23"): flags are rendered and checked for it;
    #: unset, svcdiag asks the interpreter (svcdiag.ops.host.sglang_version)
    sglang_version: str | None = None
    #: "notify" | "journal" (READINESS_MODES; docs/config.md#readiness); a loaded config that did not
    #: set it holds default_readiness(nnodes), never a placeholder
    readiness: str = DEFAULT_READINESS
    #: notify mode, after ready: WATCHDOG=1 every watchdog_s/2 while the serving watch says serving
    #: (WatchdogSec=), WATCHDOG=trigger once it says wedged; with it, Restart=on-failure unless
    #: `restart` says otherwise (restart = "no": the unit fails with result watchdog and stays failed)
    watchdog_s: float | None = None
    #: the serving watch (svcdiag.judge.watch): /health every health_interval_s; wedged after
    #: health_failures failures in a row with a silent log (None: WatchPolicy's defaults, 10 s and 3)
    health_interval_s: float | None = None
    health_failures: int | None = None
    #: [secrets]: env name → a file path or "credstore:NAME" (svcdiag.config.secrets; values never in a unit)
    secrets: tuple[tuple[str, str], ...] = ()
    #: "strict" | "off" (HARDENING_MODES), and what a strict unit may also write and open
    hardening: str = DEFAULT_HARDENING
    #: systemd's Restart= and RestartSec= (svcdiag.systemd.notify.restart_policy): None is "no", or
    #: "on-failure" with watchdog_s, and 10 s; an imported unit's own policy is kept here (`svcdiag import`)
    restart: str | None = None
    restart_sec: float | None = None
    read_write_paths: tuple[str, ...] = ()
    devices: tuple[str, ...] = ()
    #: the GPU host this service runs on, over SSH ([user@]HOST[:port]; docs/remote.md); None: here
    remote_host: str | None = None
    #: multi-node (docs/remote.md#multi-node): N nodes, each a `[[nodes]]` table; a node's own
    #: config (node_configs()) has node_rank set and no nodes
    nnodes: int = 1
    nodes: tuple[Node, ...] = ()
    node_rank: int | None = None
    dist_init_addr: str | None = None

    @property
    def unit(self) -> str:
        return f"{self.name}.service"

    @property
    def timeout(self) -> dict[str, float]:
        return dict(self.timeouts)

    @property
    def hybrid(self) -> bool:
        """Whether this config asks for a Mamba/linear-attention state cache."""
        return self.max_mamba_cache_size is not None

    @property
    def gpu_count(self) -> int:
        """The GPUs its ranks use: tp_size × dp_size, or tp_size under DP attention, whose
        `--enable-dp-attention --dp-size N` splits the tp ranks into N attention groups
        (0.5.23 turns it into --attn-dp-size N, dp_size 1); next to --attn-dp-size, dp_size
        counts whole replicas again."""
        dp_attention = "--enable-dp-attention" in self.extra_args and not any(
            a.split("=", 1)[0] == "--attn-dp-size" for a in self.extra_args)
        return self.tp_size if dp_attention else self.tp_size * self.dp_size

    @property
    def multinode(self) -> bool:
        """A config of several nodes (not one node's own config)."""
        return self.nnodes > 1 and self.node_rank is None

    def node_configs(self) -> list[ServiceConfig]:
        """Each node's own config, rank order: unit `NAME-nodeR`, its GPUs, host and rank, the
        rank-0 node's address as --dist-init-addr. A single-node config is its own only node."""
        if not self.multinode:
            return [self]
        first = sorted(self.nodes, key=lambda n: n.node_rank)
        addr = self.dist_init_addr or f"{_bare_host(first[0].host)}:{DIST_INIT_PORT}"
        return [dataclasses.replace(self, name=f"{self.name}-node{n.node_rank}", nodes=(), node_rank=n.node_rank,
                                    gpus=n.gpus if n.gpus is not None else self.gpus,
                                    remote_host=n.host if n.host is not None else self.remote_host,
                                    simulate=n.simulate or self.simulate, dist_init_addr=addr)
                for n in first]

    def flat(self) -> dict[str, Any]:
        """Effective settings as dotted keys: the form `diff` and hashing work on."""
        out: dict[str, Any] = {}
        for f in dataclasses.fields(self):
            if f.name in ("name", "path", "baseline", "extends"):
                continue
            if (f.name, getattr(self, f.name)) in (("watchdog_s", None),
                                                   ("health_interval_s", None), ("health_failures", None),
                                                   ("hardening", DEFAULT_HARDENING), ("secrets", ()),
                                                   ("restart", None), ("restart_sec", None),
                                                   ("read_write_paths", ()), ("devices", ()),
                                                   ("remote_host", None), ("nnodes", 1), ("nodes", ()),
                                                   ("node_rank", None), ("dist_init_addr", None)):
                continue  # the defaults leave the hash of a config that never set them unchanged
            value = getattr(self, f.name)
            if f.name == "speculative":
                if value is not None:
                    for sf in dataclasses.fields(Speculative):
                        out[f"speculative.{sf.name}"] = getattr(value, sf.name)
            elif f.name == "nodes":
                out["nodes"] = [dataclasses.asdict(n) | {"gpus": list(n.gpus) if n.gpus else n.gpus} for n in value]
            elif f.name in ("env", "timeouts", "secrets"):
                for k, v in value:
                    out[f"{f.name}.{k}"] = v
            elif isinstance(value, tuple):
                out[f.name] = list(value)
            else:
                out[f.name] = value
        return out

    @property
    def config_hash(self) -> str:
        """The effective config's hash (the unit's X-SvcdiagConfigHash): a config that resolves to the
        legacy "journal" mode hashes as it did before `readiness` existed; one that runs in notify
        mode, set or by default, hashes differently, so an old Type=exec unit shows as drift."""
        flat = self.flat()
        if flat.get("readiness") == LEGACY_READINESS:
            del flat["readiness"]
        import json  # here, not at the top: `replay` and `--help` read no config, and `status` hashes none
        try:  # CPython's own SHA-256 (~0.3 ms to load): hashlib loads OpenSSL for the same digest (~3 ms)
            from _sha256 import sha256
        except ImportError:  # a Python that names it otherwise (3.12: _sha2)
            from hashlib import sha256

        blob = json.dumps(flat, sort_keys=True, separators=(",", ":"))
        return sha256(blob.encode()).hexdigest()[:16]


# ---------------------------------------------------------------- schema


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _check_text(v: Any) -> str | None:
    if not isinstance(v, str):
        return f"must be a string, not {_tname(v)}"
    bad = FORBIDDEN_CHARS.search(v)
    if bad:
        return f"contains a control character {bad.group()!r}; newlines and NUL are not allowed"
    return None


def _tname(v: Any) -> str:
    return {bool: "a boolean", int: "an integer", float: "a number", str: "a string",
            list: "a list", dict: "a table"}.get(type(v), type(v).__name__)


def _nonempty_str(v: Any) -> str | None:
    return _check_text(v) or (None if v.strip() else "must not be empty")


def _abs_path(v: Any) -> str | None:
    return _nonempty_str(v) or (None if v.startswith("/") else f"must be an absolute path, got {v!r}")


def _bool(v: Any) -> str | None:
    return None if isinstance(v, bool) else f"must be true or false, not {_tname(v)}"


def _int_range(lo: int, hi: int | None = None) -> Callable[[Any], str | None]:
    def check(v: Any) -> str | None:
        if not _is_int(v):
            return f"must be an integer, not {_tname(v)}"
        if v < lo or (hi is not None and v > hi):
            return f"must be in {lo}–{hi}, got {v}" if hi is not None else f"must be ≥ {lo}, got {v}"
        return None

    return check


def _fraction(v: Any) -> str | None:
    if not (_is_int(v) or isinstance(v, float)):
        return f"must be a number, not {_tname(v)}"
    if not 0 < v < 1:
        return f"must be strictly between 0 and 1, got {v}"
    return None


def _positive_number(v: Any) -> str | None:
    if not (_is_int(v) or isinstance(v, float)):
        return f"must be a number, not {_tname(v)}"
    return None if v > 0 else f"must be > 0, got {v}"


def _gpus(v: Any) -> str | None:
    if not isinstance(v, list) or not v:
        return "must be a non-empty list of GPU indices, e.g. [0, 1, 2, 3]"
    for i in v:
        if not _is_int(i) or i < 0:
            return f"must hold non-negative integers, got {i!r}"
    if len(set(v)) != len(v):
        return "lists a GPU twice"
    return None


def _str_list(v: Any) -> str | None:
    if not isinstance(v, list):
        return f"must be a list of strings, not {_tname(v)}"
    for i, item in enumerate(v):
        err = _check_text(item)
        if err:
            return f"item {i}: {err}"
    return None


def _host(v: Any) -> str | None:
    err = _nonempty_str(v)
    if err:
        return err
    return None if re.fullmatch(r"[A-Za-z0-9.:\-\[\]]+", v) else f"is not a host name or address: {v!r}"


def _unit_name_ref(v: Any) -> str | None:
    err = _nonempty_str(v)
    if err:
        return err
    return None if UNIT_NAME_RE.match(v) else f"is not a valid config name: {v!r}"


def _user(v: Any) -> str | None:
    err = _nonempty_str(v)
    if err:
        return err
    return None if re.fullmatch(r"[A-Za-z0-9_][A-Za-z0-9_.\-]*\$?", v) else f"is not a valid user/group name: {v!r}"


#: A release as SGLang publishes them: 0.5.23, 0.4.6.post1, 0.5.0rc2, 0.5.1.dev3 (PEP 440's
#: shapes; svcdiag.sglang.flag_tables.version_key orders them)
VERSION_RE = _Pattern(r"^v?\d+(?:\.\d+)*(?:[-_.]?(?:a|b|rc|alpha|beta|c)[-_.]?\d*)?(?:[-_.]?post[-_.]?\d*)?"
                      r"(?:[-_.]?dev[-_.]?\d*)?(?:\+[a-z0-9.]+)?$", re.I)


def _version(v: Any) -> str | None:
    err = _nonempty_str(v)
    if err:
        return err
    return None if VERSION_RE.match(v.strip()) else f"is not a version like \"0.5.23\" or \"0.4.6.post1\": {v!r}"


def _readiness(v: Any) -> str | None:
    err = _nonempty_str(v)
    if err:
        return err
    return None if v in READINESS_MODES else \
        f"must be one of {', '.join(map(repr, READINESS_MODES))}, got {v!r}{did_you_mean(v, READINESS_MODES)}"


def _hardening(v: Any) -> str | None:
    err = _nonempty_str(v)
    if err:
        return err
    return None if v in HARDENING_MODES else \
        f"must be one of {', '.join(map(repr, HARDENING_MODES))}, got {v!r}{did_you_mean(v, HARDENING_MODES)}"


#: A path systemd takes as one word of a list setting: absolute, no blanks, quotes or backslashes.
_PLAIN_PATH = _Pattern(r"^/[^\s\"'\\]*$")


def _rw_paths(v: Any) -> str | None:
    err = _str_list(v)
    if err:
        return err
    for i, item in enumerate(v):
        if not _PLAIN_PATH.match(item):
            return f"item {i}: must be an absolute path without blanks, quotes or backslashes, got {item!r}"
    return None


def _devices(v: Any) -> str | None:
    err = _str_list(v)
    if err:
        return err
    for i, item in enumerate(v):
        if item not in DEVICE_FAMILIES and not (item.startswith("/dev/") and _PLAIN_PATH.match(item)):
            return (f"item {i}: must be one of {', '.join(map(repr, DEVICE_FAMILIES))} or a /dev/ path, "
                    f"got {item!r}{did_you_mean(item, DEVICE_FAMILIES)}")
    return None


def _algorithm(v: Any) -> str | None:
    err = _nonempty_str(v)
    if err:
        return err
    return None if v.upper() in SPEC_ALGORITHMS else f"must be one of {', '.join(SPEC_ALGORITHMS)}, got {v!r}"


#: The stand-in's scenarios (`simulate = NAME`). Named here so a config is checked without
#: importing the stand-in; svcdiag.sim defines each one and checks it has exactly these.
SIM_SCENARIOS = (
    "healthy-hybrid-dflash", "healthy-dense", "slow-start", "max-running-zero", "not-enough-memory", "cuda-oom",
    "segfault", "oom-kill", "exit-early", "hang", "port-in-use", "model-missing", "nccl-error", "http-mismatch",
    "deepgemm-first-start", "stops-serving", "chatty", "chatty-cuda-oom",
    "chatty-hang", "loaded-serving", "killed-while-serving",
)


def _scenario(v: Any) -> str | None:
    err = _nonempty_str(v)
    if err:
        return err
    if v not in SIM_SCENARIOS:
        return f"unknown scenario {v!r}{did_you_mean(v, SIM_SCENARIOS)}; known: {', '.join(SIM_SCENARIOS)}"
    return None


#: --dist-init-addr's port on the rank-0 node when `dist_init_addr` is unset (SGLang's docs use it)
DIST_INIT_PORT = 20000
#: [user@]HOST[:port], as ssh(1) and `systemctl -H` take it
REMOTE_HOST_RE = _Pattern(r"^(?:(?P<user>[A-Za-z0-9_][A-Za-z0-9_.\-]*)@)?(?P<host>[A-Za-z0-9][A-Za-z0-9.\-]*|\[[0-9A-Fa-f:.]+\])"
                          r"(?::(?P<port>\d{1,5}))?$")


def _bare_host(spec: str | None) -> str:
    """The host of [user@]HOST[:port] (127.0.0.1 for this host)."""
    if not spec or spec == "localhost":
        return "127.0.0.1"
    m = REMOTE_HOST_RE.match(spec)
    return m.group("host").strip("[]") if m else spec


def remote_host_error(v: Any) -> str | None:
    """Why `v` is not [user@]HOST[:port], or None."""
    err = _nonempty_str(v)
    if err:
        return err
    m = REMOTE_HOST_RE.match(v)
    if m is None:
        return f"is not [user@]HOST[:port]: {v!r}"
    if m.group("port") and not 1 <= int(m.group("port")) <= 65535:
        return f"port must be in 1–65535: {v!r}"
    return None


def _dist_addr(v: Any) -> str | None:
    err = _nonempty_str(v)
    if err:
        return err
    return None if re.fullmatch(r"[A-Za-z0-9.\-]+:\d{1,5}|\[[0-9A-Fa-f:.]+\]:\d{1,5}", v) else \
        f"must be HOST:PORT (the rank-0 node's address for torch.distributed), got {v!r}"


NODE_KEYS: dict[str, Callable[[Any], str | None]] = {
    "host": remote_host_error,
    "node_rank": _int_range(0, 63),
    "gpus": _gpus,
    "simulate": _scenario,
}


TOP_LEVEL: dict[str, Callable[[Any], str | None]] = {
    "extends": _unit_name_ref,
    "description": lambda v: _check_text(v) or (f"is {len(v):,} characters long; at most {DESCRIPTION_MAX:,} (systemd "
                                                 "shows it on one line)" if len(v) > DESCRIPTION_MAX else None),
    "model_path": _nonempty_str,
    "served_model_name": _nonempty_str,
    "tp_size": _int_range(1, 64),
    "dp_size": _int_range(1, 64),
    "gpus": _gpus,
    "host": _host,
    "port": _int_range(1, 65535),
    "mem_fraction_static": _fraction,
    "max_running_requests": _int_range(1),
    "context_length": _int_range(1),
    "chunked_prefill_size": _int_range(-1),
    "cuda_graph_max_bs": _int_range(1),
    "trust_remote_code": _bool,
    "max_mamba_cache_size": _int_range(1),
    "extra_args": _str_list,
    "python": _abs_path,
    "user": _user,
    "group": _user,
    "working_directory": _abs_path,
    "baseline": _bool,
    "simulate": _scenario,
    "sim_time_scale": _positive_number,
    "gpu_memory_gb": _positive_number,
    "sglang_version": _version,
    "readiness": _readiness,
    "watchdog_s": _positive_number,
    "health_interval_s": _positive_number,
    "health_failures": _int_range(1, 100),
    "hardening": _hardening,
    "restart": lambda v: None if v in RESTART_POLICIES else f"must be one of {', '.join(RESTART_POLICIES)} "
    f"(systemd's Restart=), got {v!r}",
    "restart_sec": _positive_number,
    "read_write_paths": _rw_paths,
    "devices": _devices,
    "remote_host": remote_host_error,
    "nnodes": _int_range(1, 64),
    "dist_init_addr": _dist_addr,
    "nodes": lambda v: None if isinstance(v, list) else "must be an array of tables: [[nodes]]",
    # tables, checked below
    "speculative": lambda v: None if isinstance(v, dict) or v is False else
    "must be a [speculative] table, or false to drop an inherited one",
    "env": lambda v: None,
    "secrets": lambda v: None,
    "timeouts": lambda v: None,
}
SPECULATIVE: dict[str, Callable[[Any], str | None]] = {
    "algorithm": _algorithm,
    "draft_model_path": _nonempty_str,
    "num_steps": _int_range(1),
    "eagle_topk": _int_range(1),
    "num_draft_tokens": _int_range(1),
}
TIMEOUT_KEYS = (*PHASE_TIMEOUTS, "http_check", "jit_compile")


def did_you_mean(key: str, known: Iterable[str]) -> str:
    import difflib

    close = difflib.get_close_matches(key, list(known), n=1, cutoff=0.6)
    return f" (did you mean {close[0]!r}?)" if close else ""


# ---------------------------------------------------------------- loading


def validate_name(name: str, path: object) -> None:
    if len(name) > NAME_MAX:
        raise ConfigError(path, "name", f"{name[:40]!r}… is {len(name)} characters long; a config name has at most "
                          f"{NAME_MAX}")
    if not UNIT_NAME_RE.match(name):
        raise ConfigError(path, "name", f"{name!r} is not a valid systemd unit name for svcdiag (letters, digits, ':', "
                          "'_', '.' and '-' only, not first a '.' or '-': the names its polkit rule lets operators start)")


def _check_table(path: Path, prefix: str, table: Any, schema: dict[str, Callable[[Any], str | None]]) -> None:
    if not isinstance(table, dict):
        raise ConfigError(path, prefix, f"must be a table, not {_tname(table)}")
    for key, value in table.items():
        dotted = f"{prefix}.{key}" if prefix else key
        check = schema.get(key)
        if check is None:
            raise ConfigError(path, dotted, f"unknown key{did_you_mean(key, schema)}")
        err = check(value)
        if err:
            raise ConfigError(path, dotted, err)


def check_raw(path: Path, raw: dict[str, Any]) -> None:
    """Per-file checks: every key known, every value of the right type and range."""
    _check_table(path, "", raw, TOP_LEVEL)
    spec = raw.get("speculative")
    if spec is not None and spec is not False:
        _check_table(path, "speculative", spec, SPECULATIVE)
    if "env" in raw:
        env = raw["env"]
        if not isinstance(env, dict):
            raise ConfigError(path, "env", f"must be a table, not {_tname(env)}")
        for k, v in env.items():
            if not ENV_KEY_RE.match(k):
                raise ConfigError(path, f"env.{k}", "is not a valid environment variable name")
            if SECRET_NAME_RE.search(k):
                raise ConfigError(path, f"env.{k}", "looks like a secret, and [env] is written into the unit for "
                                  f"anyone to read: move it to [secrets] as {k} = \"/path/to/0600-file\" or "
                                  f"\"credstore:NAME\" (docs/security.md)")
            err = _check_text(v)
            if err:
                raise ConfigError(path, f"env.{k}", err)
    if "secrets" in raw:
        from svcdiag.config.secrets import check_secrets_table

        check_secrets_table(path, raw["secrets"])
    if "timeouts" in raw:
        _check_table(path, "timeouts", raw["timeouts"], {k: _positive_number for k in TIMEOUT_KEYS})
    for i, node in enumerate(raw.get("nodes", [])):
        _check_table(path, f"nodes[{i}]", node, NODE_KEYS)
        if "node_rank" not in node:
            raise ConfigError(path, f"nodes[{i}].node_rank", "is required in each [[nodes]] table")


#: the most a config (or a campaign plan) may hold: the shipped ones are under 2 KB
CONFIG_MAX_BYTES = 1024 * 1024


def read_toml(path: Path) -> dict[str, Any]:
    """A regular file's TOML: a FIFO or a link to /dev/zero in the config folder is one line, never
    a `list` that hangs (files.read_regular)."""
    try:
        data = read_regular(path, CONFIG_MAX_BYTES)
    except FileNotFoundError:
        raise ConfigError(path, None, "no such config file") from None
    except NotRegular as e:
        raise ConfigError(path, None, e.why) from None
    except OSError as e:
        raise ConfigError(path, None, f"cannot read: {e.strerror}") from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise ConfigError(path, None, f"not UTF-8 (byte {e.start})") from None
    import tomllib  # here: a command that reads no config does not load the parser

    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise ConfigError(path, None, f"invalid TOML: {e}") from None


@dataclass(frozen=True)
class UnitsDir:
    """Where configs were found, and why there: `svcdiag list` reports it."""

    path: Path
    reason: str

    def names(self) -> list[str]:
        return sorted(p.stem for p in self.path.glob("*.toml"))

    def file(self, name: str) -> Path:
        return self.path / f"{name}.toml"

    def load(self, name: str) -> ServiceConfig:
        return load_config(self, name)

    def load_all(self) -> list[ServiceConfig]:
        return [self.load(n) for n in self.names()]

    def load_each(self) -> tuple[list[ServiceConfig], list[str]]:
        """Every config that loads, and a one-line error for each file that does not: one bad file
        (`a b.toml`, a typo) hides no other unit from `list`, `status` or `top`."""
        good: list[ServiceConfig] = []
        bad: list[str] = []
        read: dict[Path, dict[str, Any]] = {}  # each file parsed once: 20 configs extending one base read it once
        for n in self.names():
            try:
                good.append(load_config(self, n, read))
            except SvcdiagError as e:
                bad.append(str(e))
            except OSError as e:  # a name too long for the file system, a file that vanished
                bad.append(f"{self.file(n)}: {e.strerror or e}")
        return good, bad

    def listing(self) -> dict[str, Any]:
        """Every config in a line of figures: `svcdiag list`; `errors`: the files that do not load."""
        good, bad = self.load_each()
        rows = [{"name": c.name, "base": c.extends, "tp": c.tp_size,
                 "gpus": ",".join(map(str, c.gpus)) if c.gpus is not None else None, "port": c.port,
                 "speculative": c.speculative.algorithm if c.speculative else None, "baseline": c.baseline,
                 "simulate": c.simulate, "unit": c.unit} for c in good]
        return {"units_dir": str(self.path), "found_by": self.reason, "configs": rows, "errors": bad}

    def baseline(self) -> ServiceConfig:
        configs = self.load_all()
        marked = [c for c in configs if c.baseline]
        if not marked:
            names = ", ".join(c.name for c in configs) or "(none)"
            raise SvcdiagError(f"no config in {self.path} has `baseline = true`; name one of: {names}")
        if len(marked) > 1:
            raise SvcdiagError("several configs have `baseline = true`: "
                               + ", ".join(c.name for c in marked) + "; name the one to check")
        return marked[0]


def find_units_dir(option: str | None) -> UnitsDir:
    if option:
        return _existing(Path(option), "--units")
    env = os.environ.get("SVCDIAG_UNITS")
    if env:
        return _existing(Path(env), "$SVCDIAG_UNITS")
    for cand in DEFAULT_UNITS_DIRS:
        p = Path(cand)
        if p.is_dir():
            return UnitsDir(p.resolve(), f"default {cand}")
    raise SvcdiagError("no units folder: pass --units DIR or set $SVCDIAG_UNITS "
                       f"(looked in {', '.join(DEFAULT_UNITS_DIRS)})")


def _existing(p: Path, how: str) -> UnitsDir:
    if not p.is_dir():
        raise SvcdiagError(f"{how}: {p} is not a directory")
    return UnitsDir(p.resolve(), how)


def _merge(base: dict[str, Any], child: dict[str, Any]) -> dict[str, Any]:
    out = dict(base)
    out.pop("baseline", None)  # a variant of the baseline is not the baseline
    for key, value in child.items():
        tables = isinstance(out.get(key), dict) and (key in ("env", "secrets", "timeouts")
                                                     or (key == "speculative" and isinstance(value, dict)))
        if tables:
            out[key] = {**out[key], **value}
        else:
            out[key] = value
    return out


def load_config(units: UnitsDir, name: str, read: dict[Path, dict[str, Any]] | None = None) -> ServiceConfig:
    """`name`'s config, its bases merged in; `read`: the files already parsed (and checked) by path."""
    path = units.file(name)
    validate_name(name, path)
    chain: list[str] = []
    raw = _resolve(units, name, chain, read)
    return _build(name, path, raw)


def config_from_keys(name: str, path: Path, raw: dict[str, Any]) -> ServiceConfig:
    """A config that no units folder holds (a container's, from its command line): its keys
    checked as a file's are, errors naming `path`."""
    check_raw(path, raw)
    return _build(name, path, raw)


def _resolve(units: UnitsDir, name: str, chain: list[str], read: dict[Path, dict[str, Any]] | None = None) -> dict[str, Any]:
    path = units.file(name)
    if name in chain:
        cycle = " → ".join([*chain[chain.index(name):], name])
        raise ConfigError(units.file(chain[-1]), "extends", f"cycle: {cycle}")
    chain.append(name)
    raw = read.get(path) if read is not None else None
    if raw is None:
        raw = read_toml(path)
        check_raw(path, raw)
        if read is not None:
            read[path] = raw  # never changed after this: _merge and _build copy what they change
    base_name = raw.get("extends")
    if base_name is None:
        return raw
    if not units.file(base_name).exists():
        raise ConfigError(path, "extends", f"base config {base_name!r} not found in {units.path}"
                          f"{did_you_mean(base_name, units.names())}")
    base = _resolve(units, base_name, chain, read)
    return _merge(base, raw)


def _build(name: str, path: Path, raw: dict[str, Any]) -> ServiceConfig:
    if "model_path" not in raw:
        raise ConfigError(path, "model_path", "is required (here or in a base it extends)")
    kw: dict[str, Any] = {k: v for k, v in raw.items() if k not in ("speculative", "env", "secrets", "timeouts", "gpus", "extra_args",
                                                              "read_write_paths", "devices")}
    spec = raw.get("speculative")
    if isinstance(spec, dict) and spec:
        if "algorithm" not in spec:
            raise ConfigError(path, "speculative.algorithm", "is required when [speculative] is set")
        kw["speculative"] = Speculative(**{**spec, "algorithm": spec["algorithm"].upper()})
    if "gpus" in raw:
        kw["gpus"] = tuple(raw["gpus"])
    kw["extra_args"] = tuple(raw.get("extra_args", ()))
    kw["env"] = tuple(sorted(raw.get("env", {}).items()))
    kw["secrets"] = tuple(sorted(raw.get("secrets", {}).items()))
    kw["read_write_paths"] = tuple(raw.get("read_write_paths", ()))
    kw["devices"] = tuple(raw.get("devices", ()))
    kw["nodes"] = tuple(Node(**{**n, "gpus": tuple(n["gpus"]) if "gpus" in n else None}) for n in raw.get("nodes", ()))
    kw["timeouts"] = tuple({**DEFAULT_TIMEOUTS, **{k: float(v) for k, v in raw.get("timeouts", {}).items()}}.items())
    if "mem_fraction_static" in kw:
        kw["mem_fraction_static"] = float(kw["mem_fraction_static"])
    if "sglang_version" in kw:
        kw["sglang_version"] = kw["sglang_version"].strip()
    for key in ("sim_time_scale", "gpu_memory_gb", "watchdog_s", "restart_sec", "health_interval_s"):
        if key in kw:
            kw[key] = float(kw[key])
    kw.setdefault("readiness", default_readiness(kw.get("nnodes", 1)))
    cfg = ServiceConfig(name=name, path=path, **kw)
    _cross_check(cfg)
    return cfg


def default_readiness(nnodes: int) -> str:
    """What an unset `readiness` means: notify, or journal for a multi-node config."""
    return MULTINODE_READINESS if nnodes > 1 else DEFAULT_READINESS


def _check_nodes(cfg: ServiceConfig) -> None:
    if cfg.nnodes == 1 and not cfg.nodes:
        return
    if cfg.nnodes == 1:
        raise ConfigError(cfg.path, "nodes", f"lists {len(cfg.nodes)} node(s) but nnodes is 1; set nnodes = {len(cfg.nodes)}")
    if len(cfg.nodes) != cfg.nnodes:
        raise ConfigError(cfg.path, "nodes", f"nnodes = {cfg.nnodes} needs {cfg.nnodes} [[nodes]] tables "
                          f"(node_rank 0–{cfg.nnodes - 1}), found {len(cfg.nodes)}")
    ranks = sorted(n.node_rank for n in cfg.nodes)
    if ranks != list(range(cfg.nnodes)):
        raise ConfigError(cfg.path, "nodes", f"node_rank must be 0–{cfg.nnodes - 1}, each once; got {ranks}")
    if cfg.tp_size % cfg.nnodes:
        raise ConfigError(cfg.path, "nnodes", f"tp_size {cfg.tp_size} does not split over {cfg.nnodes} nodes")
    per_node = cfg.gpu_count // cfg.nnodes
    for n in cfg.nodes:
        if n.gpus is not None and len(n.gpus) != per_node:
            raise ConfigError(cfg.path, f"nodes[{n.node_rank}].gpus", f"tp_size {cfg.tp_size} × dp_size {cfg.dp_size} "
                              f"over {cfg.nnodes} nodes needs {per_node} GPUs per node, but it lists {len(n.gpus)}")


def _cross_check(cfg: ServiceConfig) -> None:
    _check_nodes(cfg)
    if cfg.gpus is not None and cfg.nnodes > 1:
        per_node = cfg.gpu_count // cfg.nnodes
        if len(cfg.gpus) != per_node:
            raise ConfigError(cfg.path, "gpus", f"with nnodes = {cfg.nnodes}, gpus lists each node's {per_node} GPUs, "
                              f"not {len(cfg.gpus)}")
    elif cfg.gpus is not None and len(cfg.gpus) != cfg.gpu_count:
        how = f"tp_size {cfg.tp_size} with DP attention" if cfg.gpu_count == cfg.tp_size != cfg.tp_size * cfg.dp_size \
            else f"tp_size {cfg.tp_size} × dp_size {cfg.dp_size}"
        raise ConfigError(cfg.path, "tp_size", f"{how} needs {cfg.gpu_count} GPUs, but gpus lists {len(cfg.gpus)}: "
                                               f"{list(cfg.gpus)}")
    if cfg.watchdog_s is not None and cfg.readiness != "notify":
        raise ConfigError(cfg.path, "watchdog_s", 'needs readiness = "notify" (svcdiag supervise sends WATCHDOG=1)')
    if cfg.restart_sec is not None and restart_of(cfg.restart, cfg.watchdog_s) == "no":
        raise ConfigError(cfg.path, "restart_sec", "needs a unit that restarts: restart = \"on-failure\" (or "
                                                   "watchdog_s, which restarts on failure; docs/config.md#restarts)")
    for key, _ in cfg.secrets:
        if key in dict(cfg.env) or key in ("PYTHONUNBUFFERED", "CUDA_VISIBLE_DEVICES"):
            raise ConfigError(cfg.path, f"secrets.{key}", "is also set in [env] (or by svcdiag); keep it in one place")
    owned = {"--port", "--host", "--model-path", "--model", "--tp-size", "--tp", "--tensor-parallel-size",
             "--nnodes", "--node-rank", "--dist-init-addr", "--nccl-init-addr"}
    for arg in cfg.extra_args:
        flag = arg.split("=", 1)[0]
        if flag in owned:
            raise ConfigError(cfg.path, "extra_args",
                              f"{flag} is set by its own field; set it there, not in extra_args")
