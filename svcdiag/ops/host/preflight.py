"""Preflight's I/O: the model directories, the GPU figure, and the calibration record.

`plan()` gathers a config's inputs (saying where each came from, and what it could not
read) and hands them to preflight's pure arithmetic. `Calibration` keeps, per config,
predicted vs. logged KV tokens after every start, so the prediction's error is known.

On a remote host (`--host`, `remote_host`) the model directories are read there over the SSH
connection (`cat`, `stat`) and the GPU figure is that host's nvidia-smi.
"""

from __future__ import annotations

import json
import os
import shlex
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path, PurePosixPath
from typing import Any

from svcdiag.config.service import ServiceConfig
from svcdiag.errors import SvcdiagError
from svcdiag.files import open_append, read_text
from svcdiag.ops.host.gpumem import gpu_free_gb, gpu_identity, gpu_total_gb, ranks, reading_kind, sglang_sees
from svcdiag.sglang.causes import Cause, Family, in_family
from svcdiag.sglang.memory import (
    AUTO_MEM_FRACTION,
    GB,
    SM100_HYBRID_ARCHS,
    attention_page,
    gpu_sm,
    sm100_page_modeled,
)
from svcdiag.sglang.modelinfo import (
    LOCAL,
    ModelFiles,
    ModelInfoError,
    hub_caches,
    hub_snapshot,
    is_hub_id,
    read_config_json,
    read_shape,
    weight_bytes,
)
from svcdiag.sglang.preflight import Inputs, Prediction, from_config_alone, inputs_from_shape, predict, sizing_inputs


@dataclass(frozen=True, slots=True)
class Plan:
    """A preflight: its inputs (None: the config alone), the prediction, and notes on how it was made."""

    inputs: Inputs | None  # None: judged from the config alone (no model shape or GPU figure)
    prediction: Prediction
    notes: tuple[str, ...]

    def to_json(self) -> dict[str, Any]:
        i = self.inputs
        out = {**self.prediction.to_json(), "cause": predicted_cause(self.prediction), "notes": list(self.notes)}
        if i is None:
            return {**out, "gpu_free_gb": None, "gpu_source": None, "kv_bytes_per_token": None,
                    "weights_gb_per_gpu": None, "mamba_slot_bytes": None, "sources": {"limits": "the config alone"}}
        return {**out, "gpu_free_gb": i.gpu_free_gb, "gpu_source": i.gpu_source,
                "kv_bytes_per_token": i.kv_bytes_per_token, "weights_gb_per_gpu": round(i.weights_bytes / GB, 3),
                "mamba_slot_bytes": list(i.mamba_slot_bytes) if i.mamba_slot_bytes else None,
                "draft_kv_bytes_per_token": i.draft_kv_bytes_per_token, "sources": i.sources}


class RemoteFiles:
    """A remote host's model files, read over its SSH connection (svcdiag.systemd.remote.Connection)."""

    def __init__(self, conn: Any):
        self.conn = conn

    def text(self, path: str) -> str | None:
        return self.conn.read_file(path)

    def sizes(self, folder: str, suffix: str) -> list[int] | None:
        q = shlex.quote(folder)
        p = self.conn.run(f"test -d {q} || exit 3; for f in {q}/*{shlex.quote(suffix)}; do "
                          f'test -e "$f" && stat -L -c %s -- "$f"; done; exit 0')
        if p.returncode == 3:
            return None
        if p.returncode != 0:
            raise SvcdiagError(f"{self.conn.target}: cannot list {folder}")
        return [int(x) for x in p.stdout.decode().split() if x.isdigit()]

    def names(self, folder: str) -> list[str] | None:
        p = self.conn.run(f"test -d {shlex.quote(folder)} || exit 3; ls -1 -- {shlex.quote(folder)}")
        return sorted(p.stdout.decode().split()) if p.returncode == 0 else None


def _where(remote: Any) -> str:
    return f"{remote.target}:" if remote is not None else ""


TRUE = ("1", "true", "yes", "on")


def locate_model(cfg: ServiceConfig, files: ModelFiles, remote: Any = None, *,
                 environ: Mapping[str, str] | None = None) -> tuple[str, str | None]:
    """The folder SGLang will load `cfg.model_path` from, and how it was found (None: the path
    as given). A hub id (`Qwen/Qwen3-8B`) that is no folder here is looked up in the Hugging
    Face cache the unit would use (its [env] HF_HOME / HF_HUB_CACHE first); not cached is a
    ModelInfoError that says whether SGLang will download it or, with HF_HUB_OFFLINE, fail."""
    path = cfg.model_path
    if not is_hub_id(path) or files.text(f"{path}/config.json") is not None:
        return path, None
    env = dict(os.environ if environ is None and remote is None else environ or {})
    env.update(dict(cfg.env))
    homes = [] if remote is not None else [os.path.expanduser(f"~{cfg.user}") if cfg.user else "",
                                          os.path.expanduser("~")]
    if remote is not None and cfg.user:
        homes = [f"/home/{cfg.user}"]
    homes.append("/root")
    caches = hub_caches(env, [h for h in homes if h and not h.startswith("~")])
    snap = hub_snapshot(path, caches, files)
    if snap is not None:
        return snap, f"hub id {path}: {_where(remote)}{snap}"
    offline = env.get("HF_HUB_OFFLINE", "").lower() in TRUE
    then = "with HF_HUB_OFFLINE set, SGLang will fail to load it" if offline else "SGLang will download it at start"
    raise ModelInfoError(PurePosixPath(path) / "config.json", ["config.json"],
                         f"hub id not in the Hugging Face cache ({', '.join(caches)}): {then}; "
                         f"pass --model-config FILE")


def plan(cfg: ServiceConfig, *, gpu_memory: float | None = None, kv_bytes_per_token: int | None = None,
         weights_gb: float | None = None, remote: Any = None, model_config: str | None = None) -> Plan:
    """The prediction for `cfg`, or a one-line SvcdiagError naming what is missing. `remote`:
    the SSH Connection of the host it runs on, where its model files and GPUs are.
    `model_config`: a config.json to read the model's shape from (this host's file). A config
    whose own settings serve nobody is CANNOT SERVE even when nothing else can be read."""
    notes: list[str] = []
    sources: dict[str, str] = {}
    files: ModelFiles = LOCAL if remote is None else RemoteFiles(remote)
    at = _where(remote)
    alone = from_config_alone(cfg)
    where = cfg.model_path
    try:
        try:
            where, how = locate_model(cfg, files, remote)
        except ModelInfoError:
            if model_config is None:
                raise
            how = None  # the shape from --model-config; the weights from --weights-gb
        if how:
            sources["model"] = how
        if model_config is not None:
            shape = read_config_json(PurePosixPath(model_config))  # a config.json, whatever its name
            sources["shape"] = f"{model_config} ({shape.architecture}, {shape.kind})"
        else:
            shape = read_shape(where, files)
            sources["shape"] = f"{at}{where}/config.json ({shape.architecture}, {shape.kind})"
    except ModelInfoError as e:
        if kv_bytes_per_token is None:
            if alone is not None:
                return Plan(None, alone, (f"{at}{e.path} not read: judged from the config alone",))
            if remote is not None:
                raise SvcdiagError(f"{at}{e}") from None
            raise
        shape = None
        notes.append(f"{at}{e.path}: {', '.join(e.missing)} unreadable or missing; using --kv-bytes-per-token")
        if cfg.hybrid:
            notes.append("the Mamba state cache is not counted without config.json: the KV figure is an upper bound")
    if kv_bytes_per_token is not None:
        sources["kv_bytes_per_token"] = "--kv-bytes-per-token"
    if weights_gb is not None:
        weights = int(weights_gb * GB)
        sources["weights"] = "--weights-gb"
    else:
        try:
            weights = weight_bytes(where, files)
        except SvcdiagError as e:
            if alone is not None:
                return Plan(None, alone, (f"{at}{where}: no weights found: judged from the config alone",))
            raise SvcdiagError(f"{at}{e}; pass --weights-gb") from None
        sources["weights"] = f"{at}{where} (safetensors)"
    draft, draft_shape = 0, None
    uncertain: list[str] = []
    if shape is None and cfg.hybrid:
        uncertain.append("config.json unread: the Mamba state left out, the KV figure an upper bound")
    spec = cfg.speculative
    if spec is not None and spec.draft_model_path:
        try:
            draft = weight_bytes(spec.draft_model_path, files)
            sources["draft"] = f"{at}{spec.draft_model_path} (safetensors)"
        except SvcdiagError as e:
            notes.append(f"draft model size unknown ({e}); its weights are left out")
            uncertain.append("the draft's weights unread: the KV figure an upper bound")
        try:
            draft_shape = read_shape(spec.draft_model_path, files)
        except SvcdiagError:
            notes.append(f"{at}{spec.draft_model_path}/config.json unreadable: the draft's KV is left out")
    try:
        free, source = gpu_free_gb(cfg, gpu_memory, remote)
    except SvcdiagError:
        if alone is not None:
            return Plan(None, alone, ("no GPU memory figure: judged from the config alone",))
        raise
    total = None
    if cfg.mem_fraction_static is None:  # SGLang picks it by the GPU's capacity
        total = gpu_total_gb(cfg, remote)
        if total is not None:
            sources["gpu_total"] = f"{total:.2f} GB per GPU, for SGLang's automatic mem_fraction_static"
        else:
            notes.append(f"no GPU capacity read: mem_fraction_static unset is taken as {AUTO_MEM_FRACTION}")
    identity = gpu_identity(cfg, remote)  # the card: its context figure, and SM100's attention backend
    free, span = sglang_view(cfg, free, source, sources, identity)
    if gpu_sm(identity[0]) is not None:
        sources["gpu_sm"] = f"{identity[0]}: SM100, SGLang's default attention backend sets the page size"
    inp = inputs_from_shape(cfg, shape, gpu_free_gb=free, gpu_source=source, weights_bytes=weights,
                            draft_bytes=draft, draft_shape=draft_shape, kv_bytes_per_token=kv_bytes_per_token,
                            sources=sources, gpu_total_gb=total, gpu_name=identity[0])
    if gpu_sm(identity[0]) is not None and shape is not None and shape.kind == "hybrid":
        sized = sizing_inputs(cfg, inp)
        if any(sized.attention_backends):
            inp = replace(inp, sources={**inp.sources, "gpu_sm": (
                f"{identity[0]}: SM100, the attention backend asked (no override): sized at page size "
                f"{attention_page(sized)[0]}")})
        elif sized.architecture in SM100_HYBRID_ARCHS:
            inp = replace(inp, sources={**inp.sources, "gpu_sm": (
                f"{identity[0]}: SM100, the hybrid's own choice of attention backend by its radix cache and speculative "
                f"decoding (_qwen3_5_hybrid_overrides): sized at page size {attention_page(sized)[0]}")})
        elif sm100_page_modeled(sized):
            inp = replace(inp, sources={**inp.sources, "gpu_sm": (
                f"{identity[0]}: SM100, SGLang's default attention backend (no override for {sized.architecture}): "
                f"sized at page size {attention_page(sized)[0]}")})
        else:
            notes.append(f"{identity[0]} (SM100): SGLang's attention backend for {sized.architecture} is not modeled: "
                         "the page size is taken as given")
    if span is not None or uncertain:
        inp = replace(inp, gpu_free_range_gb=span, upper_bound=bool(uncertain), uncertainty=tuple(
            ([f"{sources['gpu_reading']}"] if span is not None else []) + uncertain) + inp.uncertainty)
    if inp.context_len is None:
        notes.append("no context_length in the config and none in config.json: the one-request check is skipped")
    return Plan(inp, predict(cfg, inp), tuple(notes))


def sglang_view(cfg: ServiceConfig, free: float, source: str, sources: dict[str, str],
                identity: tuple[str | None, int | None]) -> tuple[float, tuple[float, float] | None]:
    """The free memory SGLang's first 'avail mem' will show, from a driver's reading: its own CUDA
    context and the driver's reserve taken off (svcdiag.ops.host.gpumem.sglang_sees), with the range it
    may lie in; a figure given (--gpu-memory, gpu_memory_gb) is SGLang's own and stays as it is."""
    kind = reading_kind(source)
    if kind == "given":
        return free, None
    name, driver = identity
    view = sglang_sees(free, kind, gpu_name=name, driver_major=driver, ranks_=ranks(cfg))
    sources["gpu_reading"] = (f"{free:.2f} GB read, less {view.taken_off}: {view.nominal:.2f} GB "
                              f"({view.low:.2f}–{view.high:.2f}); {view.source}")
    return view.nominal, (view.low, view.high)


@contextmanager
def host_files(cfg: ServiceConfig, host: str | None) -> Iterator[Any]:
    """The SSH Connection to the config's host (`host` wins over its remote_host) for the
    length of a preflight, or None when it runs here. Only SSH: preflight needs no D-Bus."""
    spec = host or cfg.remote_host
    if not spec:  # here, with the SSH module not imported (~2 ms: threading, its patterns)
        yield None
        return
    from svcdiag.systemd.remote import connect, is_local

    if is_local(spec):
        yield None
        return
    assert spec is not None
    conn = connect(spec)
    try:
        yield conn
    finally:
        conn.close()


def predicted_cause(p: Prediction) -> str | None:
    """The failure SGLang would report for this prediction."""
    if p.verdict != "cannot_serve":
        return None
    if p.failure == Cause.BAD_ARGUMENTS:  # its server args refuse the start (memory.args_refusal)
        return Cause.BAD_ARGUMENTS
    if p.failure in in_family(Family.NOT_ENOUGH_MEMORY):  # the one it names, or one that admits no request
        return Cause(p.failure)
    return Cause.MAX_RUNNING_ZERO


# ---------------------------------------------------------------- calibration


class Calibration:
    """`STATE/NAME/calibration.jsonl`: one line per judged start, appended, never rewritten."""

    FILE = "calibration.jsonl"

    def __init__(self, root: Path):
        self.root = root

    def record(self, cfg: ServiceConfig, p: Prediction, verdict: Any) -> dict[str, Any] | None:
        logged = verdict.figures.kv_tokens
        if not isinstance(logged, int):
            return None  # the start died before the KV pool: nothing to compare
        row = {"ts": round(time.time(), 3), "config": cfg.name, "invocation": verdict.invocation,
               "config_hash": cfg.config_hash, "predicted_kv_tokens": p.kv_tokens, "logged_kv_tokens": logged,
               "error_pct": round(100 * (p.kv_tokens - logged) / logged, 2) if logged else None,
               "predicted": p.verdict, "verdict": verdict.verdict}
        with open_append(self.root / cfg.name / self.FILE) as fd:  # a member's planted symlink is refused
            size = os.fstat(fd).st_size
            torn = size > 0 and os.pread(fd, 1, size - 1) != b"\n"  # a crash mid-line: start a fresh one
            os.write(fd, (("\n" if torn else "") + json.dumps(row, separators=(",", ":")) + "\n").encode())
        return row

    def rows(self) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        for f in sorted(self.root.glob(f"*/{self.FILE}")):
            try:
                text = read_text(f, errors="replace")
            except OSError:
                continue  # a FIFO a member put there, a file that vanished: the others stand
            for line in text.splitlines():
                try:
                    row = json.loads(line)
                except ValueError:
                    continue  # a torn last line after a crash: the others stand
                if isinstance(row, dict) and "predicted_kv_tokens" in row:
                    out.append(row)
        return out
