"""A verdict's figures: every number the start logged or the judge measured, each named once.

One typed record instead of string keys, so a reader cannot misspell one and docs/events.md's
table (generated from `FIELDS`, checked by a test) cannot drift. Here, not in judge/, because the
sizing arithmetic (sglang/preflight.py, memory_plan.py) reads them too. The JSON form is the wire
format of `--json`, events, history records and bundles: the same keys, unset ones omitted.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

from svcdiag.errors import SvcdiagError

TYPE_CHECKING = False  # typing costs ~3 ms to import, and no module a replay loads needs it at run time
if TYPE_CHECKING:
    from typing import Any


def _f(unit: str, doc: str, kind: str = "num") -> Any:
    """An optional figure: `unit` ("" for none), `doc` its one-line meaning, `kind` its JSON shape."""
    return field(default=None, metadata={"unit": unit, "doc": doc, "kind": kind})


#: per-phase maps: phase → seconds
PhaseMap = dict[str, float]


#: speculative algorithms whose draft has a KV pool of its own, logged as a second KV line
DRAFT_KV_ALGORITHMS = frozenset({"EAGLE", "EAGLE3", "NEXTN", "STANDALONE"})


@dataclass(frozen=True, slots=True, kw_only=True)
class Figures:
    """Every figure a start's log gives, each field's unit and meaning in its metadata (the docs' table)."""

    # ---- the launch's own arguments (server_args)
    mem_fraction_static: float | None = _f("fraction", "--mem-fraction-static as the log printed it")
    tp_size: int | None = _f("", "tensor-parallel size", "int")
    requested_max_running_requests: int | None = _f("requests", "--max-running-requests asked for", "int")
    requested_max_mamba_cache_size: int | None = _f("slots", "--max-mamba-cache-size asked for", "int")
    context_length: int | None = _f("tokens", "--context-length asked for", "int")
    node_rank: int | None = _f("", "this node's rank in a multi-node start", "int")
    model_path: str | None = _f("", "the target model's path or hub id", "str")
    draft_model_path: str | None = _f("", "the speculative draft model's path or hub id", "str")
    nnodes: int | None = _f("", "number of nodes in the start", "int")
    speculative_algorithm: str | None = _f("", "the speculative decoding algorithm, if any", "str")
    context_len: int | None = _f("tokens", "the context length the server uses (its summary, else asked)", "int")
    # ---- weights
    avail_before_load_gb: float | None = _f("GB", "free GPU memory before the target's weights load")
    weights_gb: float | None = _f("GB", "what the target's weights took")
    avail_after_load_gb: float | None = _f("GB", "free GPU memory after the target's weights")
    model_type: str | None = _f("", "the target model's class", "str")
    weight_load_s: float | None = _f("s", "how long the target's weights took to load")
    draft_avail_before_load_gb: float | None = _f("GB", "free GPU memory before the draft's weights load")
    draft_weights_gb: float | None = _f("GB", "what the draft's weights took")
    draft_model_type: str | None = _f("", "the draft model's class", "str")
    # ---- memory pools
    kv_tokens: int | None = _f("tokens", "the target's KV cache pool", "int")
    kv_k_gb: float | None = _f("GB", "the KV pool's K half")
    kv_v_gb: float | None = _f("GB", "the KV pool's V half")
    kv_gb: float | None = _f("GB", "the KV pool (MLA's one `KV size`)")
    kv_dtype: str | None = _f("", "the KV cache's dtype", "str")
    kv_tokens_upper_bound: int | None = _f("tokens", "the KV pool's upper bound before its final size", "int")
    swa_kv_tokens: int | None = _f("tokens", "the sliding-window layers' KV pool", "int")
    draft_kv_tokens: int | None = _f("tokens", "the draft's KV pool", "int")
    draft_kv_gb: float | None = _f("GB", "the draft's KV pool (K + V)")
    mamba_slots: int | None = _f("slots", "the Mamba state pool", "int")
    mamba_conv_gb: float | None = _f("GB", "the Mamba pool's conv state")
    mamba_ssm_gb: float | None = _f("GB", "the Mamba pool's SSM state")
    mamba_intermediate_ssm_gb: float | None = _f("GB", "speculative decoding's intermediate SSM state")
    mamba_intermediate_conv_gb: float | None = _f("GB", "speculative decoding's intermediate conv state")
    mamba_slots_per_request: int | None = _f("slots", "Mamba slots one request holds", "int")
    unified_memory_pool_gb: float | None = _f("GB", "--enable-unified-memory's shared KV/Mamba pool")
    hicache_host_gb: float | None = _f("GB", "the hierarchical cache's host pool (per rank)")
    pool_end_avail_gb: float | None = _f("GB", "free GPU memory after the target's pools")
    draft_pool_end_avail_gb: float | None = _f("GB", "free GPU memory after the draft's pools")
    max_running_capped_to: int | None = _f("requests", "what SGLang lowered max_running_requests to", "int")
    max_running_capped_by: str | None = _f("", "what lowered it", "str")
    # ---- CUDA graphs and the scheduler's summary
    cuda_graph_avail_before_gb: float | None = _f("GB", "free GPU memory before CUDA-graph capture")
    cuda_graph_gb: float | None = _f("GB", "what the target's CUDA graphs took")
    max_total_num_tokens: int | None = _f("tokens", "the scheduler summary's max_total_num_tokens", "int")
    max_running_requests: int | None = _f("requests", "the scheduler's max_running_requests", "int")
    available_gpu_mem_gb: float | None = _f("GB", "free GPU memory at the scheduler's summary")
    chunked_prefill_size: int | None = _f("tokens", "the scheduler's chunked prefill size", "int")
    port: int | None = _f("", "the port SGLang listens on, when it moved off the one asked", "int")
    sglang_phase_seconds: PhaseMap | None = _f("s", "SGLang's own start-up timings: its phase → seconds", "map")  # noqa: RUF009 (an immutable default: None)
    # ---- deadlines the judge granted (phase → extra seconds)
    precompile_extra_s: PhaseMap | None = _f("s", "extra deadline for kernel precompiles: phase → seconds", "map")  # noqa: RUF009 (an immutable default: None)
    draft_extra_s: PhaseMap | None = _f("s", "extra deadline for the draft's load: phase → seconds", "map")  # noqa: RUF009 (an immutable default: None)
    pool_extra_s: PhaseMap | None = _f("s", "extra deadline for pinning a host pool: phase → seconds", "map")  # noqa: RUF009 (an immutable default: None)
    overran_deadlines_s: PhaseMap | None = _f("s", "healthy, but these phases passed their deadline: phase → deadline",  # noqa: RUF009 (an immutable default: None)
                                              "map")
    # ---- how the start ended
    startup_s: float | None = _f("s", "from the start to the verdict")
    signal: str | None = _f("", "the signal that ended the server (KILL, SEGV, ...)", "str")
    exit_status: int | None = _f("", "the server's exit status", "int")
    stopped_after_s: float | None = _f("s", "time in the stuck phase before an outside stop")
    systemd_timeout_s: float | None = _f("s", "when systemd's TimeoutStartSec= ended the start")
    died_of: str | None = _f("", "died_after_ready: the cause of the death itself", "str")
    stopped_after_ready_by: str | None = _f("", "who stopped a healthy server (a clean stop)", "str")
    killed_after_ready: str | None = _f("", "a post-ready incident: the line saying a process was SIGKILLed while serving",
                                        "str")
    incident: str | None = _f("", "how a healthy server's life ended, when that is an incident: killed (the start stays "
                              "healthy), died_after_ready or wedged (docs/live.md#how-a-healthy-start-ends)", "str")
    oom_killer_line: str | None = _f("", "killed: the OOM killer's line (the kernel's for the killed pid, else "
                                     "systemd's for the unit), where the log has it", "str")
    unit_result: str | None = _f("", "systemd's Result= of a unit that ended after ready", "str")
    killed: str | None = _f("", "`supervisor` when svcdiag's supervisor killed the server", "str")
    verdict_source: str | None = _f("", "`supervisor` when the verdict is the supervisor's", "str")
    journal_dropped_lines: int | None = _f("lines", "lines journald dropped from the start's log", "int")
    # ---- the release
    sglang_version: str | None = _f("", "the SGLang release", "str")
    sglang_version_source: str | None = _f("", "where the release came from (config, server_info, ...)", "str")
    rendered_sglang_version: str | None = _f("", "the release rendered with, when the server says another", "str")
    # ---- the HTTP cross-check (a list where data-parallel ranks disagree)
    http_max_total_num_tokens: int | None = _f("tokens", "/server_info's max_total_num_tokens", "int")
    http_max_running_requests: int | list[int] | None = _f(  # noqa: RUF009 (an immutable default: None)
        "requests", "/server_info's effective max_running_requests per DP rank", "ints")
    http_token_capacity: int | list[int] | None = _f("tokens", "/server_info's KV token capacity", "ints")  # noqa: RUF009 (an immutable default: None)
    http_max_running_requests_mismatch: bool | None = _f("", "/server_info disagrees with the log's", "bool")
    http_token_capacity_mismatch: bool | None = _f("", "/server_info disagrees with the log's KV tokens", "bool")
    # ---- multi-node
    nodes: list[dict[str, Any]] | None = _f("", "each node's own verdict (JSON), by rank", "list")  # noqa: RUF009 (an immutable default: None)
    failed_node_rank: int | None = _f("", "the first node that failed", "int")

    @property
    def kv_pool_gb(self) -> float:
        """The target's KV pool in GB: MLA's one `KV size`, else K + V (0 when the log gave neither)."""
        return self.kv_gb if self.kv_gb is not None else (self.kv_k_gb or 0.0) + (self.kv_v_gb or 0.0)

    def doubtful(self) -> dict[str, str]:
        """The figures that may be another line's, when journald dropped lines of the start
        (journal_dropped_lines): name → why. A figure is read from a milestone line by its order (the
        first weight load is the target's); with lines missing, the one kept may be the other's (the
        draft's 1.66 GB shown as the model's weights)."""
        if not self.journal_dropped_lines:
            return {}
        out: dict[str, str] = {}
        if self.weights_gb is not None:
            if (self.speculative_algorithm or self.draft_model_path) and self.draft_weights_gb is None:
                why = "one weight load kept of the two a speculative start prints: it may be the draft's"
            elif self.model_path is None:
                why = "its server_args line was dropped: whether a draft loaded too is unknown"
            else:
                why = ""
            if why:
                out["weights_gb"] = why
                if self.avail_before_load_gb is not None:
                    out["avail_before_load_gb"] = why
        # a draft with a KV pool of its own prints a second KV line (before 0.5.23, shaped as the target's):
        # with one kept, it may be the draft's, unless /server_info agreed with it
        if (self.kv_tokens is not None and self.draft_kv_tokens is None
                and (self.speculative_algorithm or "").upper() in DRAFT_KV_ALGORITHMS
                and self.http_max_total_num_tokens != self.kv_tokens):
            out["kv_tokens"] = "one KV pool line kept of the two a draft with its own pool prints: it may be the draft's"
        return out

    def pick(self, names: tuple[str, ...]) -> dict[str, Any]:
        """The set figures among `names`, in `names`' order (a record's own order, kept on the wire);
        a misspelt name is a TypeError."""
        if unknown := [k for k in names if k not in BY_NAME]:
            raise TypeError(f"not a figure: {', '.join(unknown)}")
        out = self.to_json()
        return {k: out[k] for k in names if k in out}

    def only(self, names: tuple[str, ...]) -> Figures:
        """These figures, the rest unset (a misspelt name is a TypeError, not a figure silently lost)."""
        return Figures(**{k: getattr(self, k, None) for k in names})

    def replace(self, **changes: Any) -> Figures:
        return dataclasses.replace(self, **changes)

    def to_json(self) -> dict[str, Any]:
        """The wire form: set figures only, in declaration order."""
        out: dict[str, Any] = {}
        for f in FIELDS:
            v = getattr(self, f.name)
            if v is not None:
                out[f.name] = dict(v) if isinstance(v, dict) else list(v) if isinstance(v, list) else v
        return out

    @classmethod
    def from_json(cls, d: Any, source: str = "figures") -> Figures:
        """Read a record's figures back. A key this release does not know is skipped (a history or bundle
        written by a newer svcdiag still loads); a known key of the wrong shape is a one-line error
        naming `source` and the key."""
        if isinstance(d, Figures):
            return d
        if d is None:
            return cls()
        if not isinstance(d, dict):
            raise SvcdiagError(f"{source}: figures must be a JSON object, not {type(d).__name__}")
        kw = {}
        for k, v in d.items():
            f = BY_NAME.get(k)
            if f is None or v is None:
                continue
            if not _fits(f.metadata["kind"], v):
                raise SvcdiagError(f"{source}: figures.{k}: expected {_SHAPES[f.metadata['kind']]}, got {v!r}")
            kw[k] = dict(v) if isinstance(v, dict) else list(v) if isinstance(v, list) else v
        return cls(**kw)


def _num(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


_SHAPES = {"num": "a number", "int": "an integer", "str": "a string", "bool": "true or false",
           "map": "an object of numbers", "ints": "an integer or a list of integers", "list": "a list"}


def _fits(kind: str, v: Any) -> bool:
    if kind == "num":
        return _num(v)
    if kind == "int":
        return _int(v)
    if kind == "str":
        return isinstance(v, str)
    if kind == "bool":
        return isinstance(v, bool)
    if kind == "map":
        return isinstance(v, dict) and all(isinstance(k, str) and _num(x) for k, x in v.items())
    if kind == "ints":
        return _int(v) or (isinstance(v, list) and all(_int(x) for x in v))
    return isinstance(v, list)


FIELDS: tuple[dataclasses.Field[Any], ...] = dataclasses.fields(Figures)
BY_NAME = {f.name: f for f in FIELDS}


def table() -> str:
    """docs/events.md's figures table, from the type (tests/test_figures.py keeps the two equal)."""
    rows = ["| figure | unit | meaning |", "|---|---|---|"]
    rows += [f"| `{f.name}` | {f.metadata['unit']} | {f.metadata['doc']} |" for f in FIELDS]
    return "\n".join(rows) + "\n"
