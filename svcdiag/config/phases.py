"""A start's phases and their default deadlines, apart from the config's dataclasses: the judge
needs these tables, and a replay without a config imports no config module."""

from __future__ import annotations

#: A start's phases, in order: the readiness machine walks them, configs set a deadline
#: for each but the last, outputs label by them. The one list.
PHASES = ("starting", "loading_weights", "kv_cache", "mamba_cache", "cuda_graph", "scheduler", "http", "ready")
PHASE_TIMEOUTS = PHASES[:-1]
#: Seconds per phase. They fit a 27B model that starts in ~2 minutes, and a weight load
#: of up to 10 minutes from slow storage, with room to spare; `http_check` bounds the
#: HTTP cross-check after the log says ready; `jit_compile` is added, once, to the deadline of
#: a phase in which SGLang says it begins a kernel pre-compile session that takes long the
#: first time on a host (DeepGEMM: "typically 10-20 mins").
DEFAULT_TIMEOUTS = {
    "starting": 300.0,
    "loading_weights": 900.0,
    "kv_cache": 300.0,
    "mamba_cache": 300.0,
    "cuda_graph": 600.0,
    "scheduler": 300.0,
    "http": 300.0,
    "http_check": 60.0,
    "jit_compile": 1800.0,
}
#: timeouts that are added to a phase's deadline, not deadlines of their own
ALLOWANCES = ("jit_compile",)
