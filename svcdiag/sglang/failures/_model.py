"""The registry's vocabulary: the cause ids, their families, what a row holds, and `said` for a row's words."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from svcdiag.sglang import lazy_re


class Cause(StrEnum):
    """The stable cause ids (docs/replay.md#failure-causes-stable-ids): a StrEnum, so `cause == "cuda_oom"` holds."""

    MAX_RUNNING_ZERO = "max_running_zero"
    WATCHDOG_TIMEOUT = "watchdog_timeout"
    MAMBA_CACHE_TOO_SMALL = "mamba_cache_too_small"
    NOT_ENOUGH_MEMORY = "not_enough_memory"
    CUDA_OOM = "cuda_oom"
    HOST_OOM = "host_oom"
    PORT_IN_USE = "port_in_use"
    UNSUPPORTED_MODEL = "unsupported_model"
    MODEL_NOT_FOUND = "model_not_found"
    HUB_UNREACHABLE = "hub_unreachable"
    UNSUPPORTED_HARDWARE = "unsupported_hardware"
    GPU_UNAVAILABLE = "gpu_unavailable"
    CUDA_ERROR = "cuda_error"
    KV_TRANSFER_FAILED = "kv_transfer_failed"
    EP_DISPATCH_TIMEOUT = "ep_dispatch_timeout"
    NVSHMEM_FAILED = "nvshmem_failed"
    RENDEZVOUS_FAILED = "rendezvous_failed"
    NCCL_ERROR = "nccl_error"
    DISK_FULL = "disk_full"
    ACCESS_DENIED = "access_denied"
    BAD_CHECKPOINT = "bad_checkpoint"
    BROKEN_INSTALL = "broken_install"
    TORCH_COMPILE_FAILED = "torch_compile_failed"
    BAD_ARGUMENTS = "bad_arguments"
    WARMUP_FAILED = "warmup_failed"
    ROUTER_FAILED = "router_failed"
    PD_BOOTSTRAP_FAILED = "pd_bootstrap_failed"
    KILLED_BY_SIGNAL = "killed_by_signal"
    EXITED = "exited"
    STOPPED = "stopped"
    DIED_SILENTLY = "died_silently"
    EXCEPTION = "exception"
    TIMED_OUT = "timed_out"
    INCOMPLETE = "incomplete"
    HTTP_UNREACHABLE = "http_unreachable"
    HTTP_MISMATCH = "http_mismatch"
    DIED_AFTER_READY = "died_after_ready"
    CONNECTION_LOST = "connection_lost"


class Family(StrEnum):
    """What a cause is about: the module that files its rows (svcdiag/sglang/failures/<module>.py) and what readers
    ask instead of listing causes (`in_family`)."""

    NOT_ENOUGH_MEMORY = "not_enough_memory"  # SGLang's own sizing left too little: more memory for it, or less asked
    OUT_OF_MEMORY = "out_of_memory"  # an allocation failed: the device's or the host's memory ran out
    GPU = "gpu"
    DISTRIBUTED = "distributed"
    MODEL = "model"
    INSTALL = "install"
    NETWORK = "network"
    HOST = "host"
    PROCESS = "process"
    SERVING = "serving"


class Role(StrEnum):
    ROOT = "root"  # the failure itself
    CONSEQUENCE = "consequence"  # a process ended because of something said elsewhere


#: each cause's family, named here once
FAMILY: Mapping[Cause, Family] = {
    Cause.MAX_RUNNING_ZERO: Family.NOT_ENOUGH_MEMORY,
    Cause.WATCHDOG_TIMEOUT: Family.PROCESS,
    Cause.MAMBA_CACHE_TOO_SMALL: Family.NOT_ENOUGH_MEMORY,
    Cause.NOT_ENOUGH_MEMORY: Family.NOT_ENOUGH_MEMORY,
    Cause.CUDA_OOM: Family.OUT_OF_MEMORY,
    Cause.HOST_OOM: Family.OUT_OF_MEMORY,
    Cause.PORT_IN_USE: Family.NETWORK,
    Cause.UNSUPPORTED_MODEL: Family.MODEL,
    Cause.MODEL_NOT_FOUND: Family.MODEL,
    Cause.HUB_UNREACHABLE: Family.NETWORK,
    Cause.UNSUPPORTED_HARDWARE: Family.GPU,
    Cause.GPU_UNAVAILABLE: Family.GPU,
    Cause.CUDA_ERROR: Family.GPU,
    Cause.KV_TRANSFER_FAILED: Family.DISTRIBUTED,
    Cause.EP_DISPATCH_TIMEOUT: Family.DISTRIBUTED,
    Cause.NVSHMEM_FAILED: Family.DISTRIBUTED,
    Cause.RENDEZVOUS_FAILED: Family.DISTRIBUTED,
    Cause.NCCL_ERROR: Family.DISTRIBUTED,
    Cause.DISK_FULL: Family.HOST,
    Cause.ACCESS_DENIED: Family.HOST,
    Cause.BAD_CHECKPOINT: Family.MODEL,
    Cause.BROKEN_INSTALL: Family.INSTALL,
    Cause.TORCH_COMPILE_FAILED: Family.GPU,
    Cause.BAD_ARGUMENTS: Family.INSTALL,
    Cause.WARMUP_FAILED: Family.SERVING,
    Cause.ROUTER_FAILED: Family.SERVING,
    Cause.PD_BOOTSTRAP_FAILED: Family.DISTRIBUTED,
    Cause.KILLED_BY_SIGNAL: Family.PROCESS,
    Cause.EXITED: Family.PROCESS,
    Cause.STOPPED: Family.PROCESS,
    Cause.DIED_SILENTLY: Family.PROCESS,
    Cause.EXCEPTION: Family.PROCESS,
    Cause.TIMED_OUT: Family.PROCESS,
    Cause.INCOMPLETE: Family.PROCESS,
    Cause.HTTP_UNREACHABLE: Family.SERVING,
    Cause.HTTP_MISMATCH: Family.SERVING,
    Cause.DIED_AFTER_READY: Family.SERVING,
    Cause.CONNECTION_LOST: Family.PROCESS,
}


def in_family(*families: Family) -> frozenset[Cause]:
    """The causes of these families (`cause in in_family(Family.NOT_ENOUGH_MEMORY)`: a StrEnum, so a cause's
    string is in it too)."""
    return frozenset(c for c, f in FAMILY.items() if f in families)


#: the words a row's sentences need beyond what its patterns captured and the verdict says (a default for a capture
#: that may be missing, a name looked up): a function of those words, so the sentences stay in the family's .toml
Words = Callable[[Mapping[str, str]], Mapping[str, str]]


@dataclass(frozen=True, slots=True)
class FailureClass:
    """One cause, or one of its sub-cases (`detail`), with everything known about it."""

    cause: Cause
    detail: str = ""
    #: where the row stands: rows are tried in ascending priority (classify's `line`s, a cause's sub-cases, the
    #: cause table's order), whatever module files them; no two rows share one
    priority: int = 0
    line: re.Pattern[str] | None = None  # an exception's final line or a lone fatal line: names the cause
    said: re.Pattern[str] | None = None  # the failure's message and evidence: picks the sub-case
    read: tuple[re.Pattern[str], ...] = ()  # more of what a picked sub-case captures (each first match's groups)
    #: a line of its own that names this cause where the grammar reads it (matched at the line's start): not
    #: classify's, since its words name the cause only there (an argparse line, a launcher's, a PD server's)
    alone: re.Pattern[str] | None = None
    role: Role = Role.ROOT
    #: the SGLang releases whose words these are, by hand, where the catalogues cannot say ("<= 0.4.3"); a row whose
    #: words are all SGLang's has its range in message_catalogue/releases.json (message_catalogue.row_releases)
    releases: str = ""
    words: Words | None = None
    fixes: tuple[tuple[Mapping[str, Any], str], ...] = ()  # (settings, why), formatted as the explanation is
    #: one line: a cause's row says what the cause is; a sub-case's is an example of the words it is picked by. The
    #: long text (a cause's evidence, a row's explanation) is the family's .toml (`prose`), shown in docs/causes.md
    doc: str = ""


def said(pattern: str) -> re.Pattern[str]:
    """A sub-case's words, looked for in the failure's message and evidence (one line each)."""
    return lazy_re.compile(pattern, re.M)
