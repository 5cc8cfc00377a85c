"""How much GPU memory a server will find free before it loads, and where that figure came from.

In order: the command line, the config, NVML (`nvidia-ml-py`, the `gpu` extra: it reads the
driver's figures and creates no CUDA context), nvidia-smi, and last the unit's own
interpreter running torch in a short-lived subprocess (its CUDA context dies with it).
torch is never imported in svcdiag's process: a CUDA context there would hold ~0.5 GB on
every GPU of the config while SGLang sizes its KV pool (docs/preflight.md#gpu-readings-where-the-gpu-figure-comes-from).
The GPUs are the ones SGLang will see: the config's `gpus` as CUDA_VISIBLE_DEVICES (indexes
or UUIDs); the smallest of them counts, as SGLang takes the minimum over ranks. A GPU in MIG
mode is named, never read as if whole. For a remote host (`--host`) only that host's
nvidia-smi counts, run over the SSH connection.

A driver's reading is not what SGLang will see: its own process takes a CUDA context (and NCCL's
buffers with tp > 1), and nvidia-smi's total − used still counts the driver's reserve.
`sglang_sees` takes those off, per GPU and driver as measured (CONTEXT_FIGURES), and says how
far off the result may be (docs/preflight.md#the-gpu-reading-what-sglang-will-see).
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from svcdiag.config.service import ServiceConfig
from svcdiag.errors import SvcdiagError
from svcdiag.sglang.memory import GB

MiB = 1024**2


@dataclass(frozen=True, slots=True)
class Device:
    """One GPU as the driver reports it (bytes)."""

    index: int
    uuid: str
    total: int
    free: int
    used: int = 0
    mig: bool = False  # MIG mode on: its memory belongs to instances, not to one CUDA device
    processes: tuple[tuple[int, int], ...] = field(default=())  # (pid, bytes used) of its compute processes
    name: str = ""  # the product name ("NVIDIA H200"), where the reader gives it


class Nvml(Protocol):
    """What svcdiag reads from NVML: every GPU of this host, in NVML's (PCI bus) order."""

    def devices(self) -> list[Device]: ...


class PynvmlReader:
    """NVML through nvidia-ml-py (`import pynvml`, the `gpu` extra): no CUDA context."""

    def __init__(self, nvml: Any):
        self.nvml = nvml

    def driver_version(self) -> str | None:
        n = self.nvml
        if not hasattr(n, "nvmlSystemGetDriverVersion"):
            return None
        n.nvmlInit()
        try:
            v = n.nvmlSystemGetDriverVersion()
            return v if isinstance(v, str) else v.decode()
        except n.NVMLError:
            return None
        finally:
            n.nvmlShutdown()

    def devices(self) -> list[Device]:
        n = self.nvml
        n.nvmlInit()
        try:
            out = []
            for i in range(n.nvmlDeviceGetCount()):
                h = n.nvmlDeviceGetHandleByIndex(i)
                uuid = n.nvmlDeviceGetUUID(h)
                mem = n.nvmlDeviceGetMemoryInfo(h)
                try:
                    mig = bool(n.nvmlDeviceGetMigMode(h)[0])
                except n.NVMLError:  # not a MIG-capable GPU
                    mig = False
                procs = tuple((p.pid, p.usedGpuMemory or 0) for p in n.nvmlDeviceGetComputeRunningProcesses(h))
                try:
                    name = n.nvmlDeviceGetName(h) if hasattr(n, "nvmlDeviceGetName") else ""
                except n.NVMLError:
                    name = ""
                out.append(Device(i, uuid if isinstance(uuid, str) else uuid.decode(), mem.total, mem.free, mem.used,
                                  mig, procs, name if isinstance(name, str) else name.decode()))
            return out
        finally:
            n.nvmlShutdown()


def local_nvml() -> Nvml | None:
    """NVML on this host, or None without nvidia-ml-py or a driver."""
    try:
        import pynvml  # the gpu extra (nvidia-ml-py); imported only here
    except ImportError:
        return None
    try:
        pynvml.nvmlInit()
        pynvml.nvmlShutdown()
    except Exception:  # no driver, no GPU: nvidia-smi says more
        return None
    return PynvmlReader(pynvml)


def visible(spec: str | None, devices: Sequence[Device]) -> list[Device]:
    """The devices CUDA shows under CUDA_VISIBLE_DEVICES=`spec` (indexes or UUIDs, `GPU-` prefixes
    allowed; the list ends at the first entry that names none, as CUDA's does); all when unset."""
    if spec is None:
        return list(devices)
    out: list[Device] = []
    for entry in (e.strip() for e in spec.split(",")):
        if entry.isdigit():
            match = [d for d in devices if d.index == int(entry)]
        elif entry.startswith(("GPU-", "MIG-")):
            match = [d for d in devices if d.uuid.startswith(entry)]
        else:
            match = []
        if len(match) != 1 or match[0] in out:
            break
        out.append(match[0])
    return out


def cuda_visible(cfg: ServiceConfig) -> str | None:
    """The CUDA_VISIBLE_DEVICES the unit runs with: the config's gpus (svcdiag.systemd.render)."""
    return ",".join(map(str, cfg.gpus)) if cfg.gpus else dict(cfg.env).get("CUDA_VISIBLE_DEVICES")


def ranks(cfg: ServiceConfig) -> int:
    return cfg.gpu_count // max(1, cfg.nnodes)


def nvml_free(cfg: ServiceConfig, reader: Nvml) -> tuple[float, str] | None:
    """(GiB free on the smallest GPU the unit's ranks use, what was read), or None when NVML
    sees no such GPU. A GPU in MIG mode is refused by name: its instances are not it."""
    spec = cuda_visible(cfg)
    devs = visible(spec, reader.devices())[: ranks(cfg)]
    if not devs:
        return None
    for d in devs:
        if d.mig:
            raise SvcdiagError(f"GPU {d.index} ({d.uuid}) is in MIG mode: the free memory of its instances is not "
                               f"the GPU's; pass --gpu-memory GB (the instance's memory)")
    which = ", ".join(str(d.index) for d in devs)
    return round(min(d.free for d in devs) / GB, 2), f"NVML (GPUs {which}, now)"


#: the unit's interpreter asked for free memory in a subprocess: its CUDA context dies with it
TORCH_PROBE = ("import json, torch; print(json.dumps([torch.cuda.mem_get_info(i)[0] "
               "for i in range(torch.cuda.device_count())]))")


def torch_subprocess(cfg: ServiceConfig, run: Callable[..., Any] | None = None) -> float | None:
    """Free GiB on the smallest of the unit's GPUs, by its own interpreter's torch, in a child
    process that exits at once; None when that interpreter has no torch or no GPU."""
    import os
    import subprocess  # (here, and shutil below: ~8 ms of a preflight that is told the GPU's memory)

    run = run or subprocess.run

    env = {k: v for k, v in os.environ.items() if k in ("PATH", "HOME", "LD_LIBRARY_PATH")}
    spec = cuda_visible(cfg)
    if spec is not None:
        env["CUDA_VISIBLE_DEVICES"] = spec
    try:
        p = run([cfg.python, "-c", TORCH_PROBE], capture_output=True, text=True, timeout=60, env=env, check=False)
        free = json.loads(p.stdout.strip().splitlines()[-1]) if p.returncode == 0 and p.stdout.strip() else []
    except (OSError, subprocess.SubprocessError, ValueError, IndexError):
        return None
    free = free[: ranks(cfg)]
    return min(free) / GB if free else None


def parse_nvidia_smi(text: str, gpus: list[int]) -> float:
    """`nvidia-smi --query-gpu=memory.total,memory.used[,memory.free] --format=csv` → free GiB on the
    smallest of `gpus` (memory.free when asked for: it leaves out the driver's reserved memory)."""
    rows: list[float] = []
    lines = text.strip().splitlines()
    header = [h.strip().split()[0] for h in lines[0].split(",")] if lines else []
    for line in lines[1:]:  # the header: memory.total [MiB], memory.used [MiB]
        parts = [p.strip().split()[0] if p.strip() else "" for p in line.split(",")]
        try:
            total, used = float(parts[0]), float(parts[1])
            free = float(parts[header.index("memory.free")]) if "memory.free" in header else total - used
        except (ValueError, IndexError):
            raise SvcdiagError(f"nvidia-smi: cannot read the line {line!r}") from None
        rows.append(free * MiB / GB)
    chosen = [rows[i] for i in gpus if i < len(rows)]
    if not chosen:
        raise SvcdiagError(f"nvidia-smi lists {len(rows)} GPU(s); the config wants GPUs {gpus}")
    return min(chosen)


#: runs nvidia-smi with these arguments: its stdout, or None where there is no nvidia-smi (or it failed)
Smi = Callable[[list[str]], str | None]


def local_smi(args: list[str]) -> str | None:
    import shutil
    import subprocess

    exe = shutil.which("nvidia-smi")
    if exe is None:
        return None
    try:
        return subprocess.run([exe, *args], capture_output=True, text=True, timeout=20, check=True).stdout
    except (OSError, subprocess.SubprocessError):
        return None


def remote_smi(conn: Any) -> Smi:
    """nvidia-smi on the host `conn` (svcdiag.systemd.remote.Connection) reaches, over its SSH connection."""

    def run(args: list[str]) -> str | None:
        p = conn.run(f"command -v nvidia-smi >/dev/null 2>&1 || exit 127; exec nvidia-smi {shlex.join(args)}",
                     timeout=30)
        return p.stdout.decode(errors="replace") if p.returncode == 0 else None

    return run


def smi_for(remote: Any) -> Smi:
    """This host's nvidia-smi, or the remote host's (`remote`: a Connection, or None)."""
    return local_smi if remote is None else remote_smi(remote)


def _nvidia_smi(gpus: list[int], smi: Smi = local_smi) -> float | None:
    out = smi(["--query-gpu=memory.total,memory.used", "--format=csv"])
    return None if out is None else parse_nvidia_smi(out, gpus)


def gpu_total_gb(cfg: ServiceConfig, remote: Any = None, *,
                 nvml: Callable[[], Nvml | None] = local_nvml) -> float | None:
    """The capacity (GiB) of the smallest GPU the unit's ranks use, for SGLang's automatic
    mem_fraction_static: NVML, else nvidia-smi's memory.total; None when neither answers."""
    reader = nvml() if remote is None else None
    if reader is not None:
        devs = visible(cuda_visible(cfg), reader.devices())[: ranks(cfg)]
        if devs:
            return min(d.total for d in devs) / GB
    gpus = list(cfg.gpus) if cfg.gpus else list(range(ranks(cfg)))
    out = (remote_smi(remote) if remote is not None else local_smi)(["--query-gpu=memory.total", "--format=csv"])
    if out is None:
        return None
    totals = []
    for line in out.strip().splitlines()[1:]:
        try:
            totals.append(float(line.strip().split()[0]) * MiB / GB)
        except (ValueError, IndexError):
            return None
    chosen = [totals[i] for i in gpus if i < len(totals)]
    return min(chosen) if chosen else None


def gpu_free_gb(cfg: ServiceConfig, option: float | None, remote: Any = None, *,
                nvml: Callable[[], Nvml | None] = local_nvml) -> tuple[float, str]:
    """(GB, source), or a one-line error saying what to pass. `remote`: the SSH Connection of
    the host the config runs on (its nvidia-smi). `nvml`: NVML's reader (tests inject one)."""
    if option is not None:
        return option, "--gpu-memory"
    if cfg.gpu_memory_gb is not None:
        return cfg.gpu_memory_gb, f"{cfg.path}: gpu_memory_gb"
    gpus = list(cfg.gpus) if cfg.gpus else list(range(cfg.gpu_count))
    which = f"GPUs {','.join(map(str, gpus))}, now"
    if remote is not None:
        value = _nvidia_smi(gpus, remote_smi(remote))
        if value is not None:
            return round(value, 2), f"nvidia-smi on {remote.target} ({which})"
        raise SvcdiagError(f"no GPU memory figure: no --gpu-memory, no gpu_memory_gb in the config, no nvidia-smi "
                           f"on {remote.target}; pass --gpu-memory GB (free per GPU before loading)")
    reader = nvml()
    if reader is not None:
        got = nvml_free(cfg, reader)
        if got is not None:
            return got
    value = _nvidia_smi(gpus)
    if value is not None:
        return round(value, 2), f"nvidia-smi ({which})"
    value = torch_subprocess(cfg)
    if value is not None:
        return round(value, 2), f"torch in {cfg.python}, a subprocess ({which})"
    raise SvcdiagError("no GPU memory figure: no --gpu-memory, no gpu_memory_gb in the config, no NVML, no "
                       "nvidia-smi, no torch with CUDA in the unit's python; pass --gpu-memory GB (free per GPU "
                       "before loading)")


# ---------------------------------------------------------------- what SGLang itself will see


@dataclass(frozen=True, slots=True)
class ContextFigure:
    """What SGLang's own process takes on one GPU before its first 'avail mem' (GiB): its CUDA
    context, and the driver's reserve that nvidia-smi's total − used still counts. Each figure
    is (low, nominal, high); a row applies to the GPUs whose name contains `gpu` on drivers of
    `driver_major` or newer (the first row that matches wins; the last matches every GPU)."""

    gpu: str
    driver_major: int
    context_gib: tuple[float, float, float]
    reserve_gib: tuple[float, float, float]
    source: str


#: measured figures (docs/preflight.md#the-gpu-reading-what-sglang-will-see); a GPU or driver not
#: listed gets the last row, whose range is wide enough for every real log read so far
CONTEXT_FIGURES = (
    ContextFigure("H200", 570, (0.48, 0.506, 0.55), (0.59, 0.602, 0.62),
                  "H200, driver 580.159.04, CUDA 13.0, torch 2.11 (tests/fixtures/nvidia-smi-h200): a torch process's "
                  "context 518 MiB, the driver's reserve 616 MiB; torch's own free 139.29 GiB = 140.40 − 0.51 − 0.60"),
    ContextFigure("", 0, (0.25, 0.5, 0.65), (0.25, 0.5, 0.65),
                  "no measurement for this GPU and driver: context and reserve of 0.5–1.3 GiB together, the span of "
                  "real logs' card total − SGLang's first 'avail mem' (0.73–1.17 GiB)"),
)
#: NCCL's and torch.distributed's buffers before 'Load weight begin' with more than one rank (GiB):
#: 'Init torch distributed ends. mem usage=0.13 GB' (tp 4, 4 × L4, tests/fixtures/memory-backtest)
DIST_INIT_GIB = (0.0, 0.13, 0.25)


@dataclass(frozen=True, slots=True)
class SglangView:
    """The free memory SGLang's first 'avail mem' will show (GiB), from a reading, and how far
    off it may be: SGLang may see anything from `low` to `high`."""

    nominal: float
    low: float
    high: float
    taken_off: str  # what was subtracted, in words
    source: str  # where the figures for this GPU come from


def context_figure(gpu_name: str | None, driver_major: int | None) -> ContextFigure:
    name = (gpu_name or "").upper()
    for row in CONTEXT_FIGURES:
        if row.gpu.upper() in name and (driver_major or 0) >= row.driver_major:
            return row
    return CONTEXT_FIGURES[-1]


def sglang_sees(reading_gb: float, kind: str, *, gpu_name: str | None = None, driver_major: int | None = None,
                ranks_: int = 1) -> SglangView:
    """What SGLang will see of `reading_gb` read by `kind`: "nvidia-smi" (total − used: it still
    counts SGLang's context and the driver's reserve), "nvml" (NVML's free: the reserve is out,
    SGLang's context is not; the low end also allows for a driver whose NVML counts the reserve
    as free), "torch" (a probe's own context is already out), anything else as given."""
    row = context_figure(gpu_name, driver_major)
    dist = DIST_INIT_GIB if ranks_ > 1 else (0.0, 0.0, 0.05)
    c, r = row.context_gib, row.reserve_gib
    if kind == "nvidia-smi":
        lo, nom, hi = (c[i] + r[i] + dist[i] for i in range(3))
        what = "SGLang's CUDA context and the driver's reserve"
    elif kind == "nvml":
        lo, nom, hi = c[0] + dist[0], c[1] + dist[1], c[2] + r[2] + dist[2]
        what = "SGLang's CUDA context"
    elif kind == "torch":
        lo, nom, hi = dist[0], dist[1], dist[2] + 0.05
        what = "what a second CUDA context may take beside the probe's"
    else:
        return SglangView(reading_gb, reading_gb, reading_gb, "nothing (taken as SGLang's own figure)", "as given")
    if ranks_ > 1:
        what += " and NCCL's buffers"
    return SglangView(round(reading_gb - nom, 2), round(reading_gb - hi, 2), round(reading_gb - lo, 2),
                      f"{what}, {nom:.2f} GiB ({lo:.2f}–{hi:.2f})", row.source)


def reading_kind(source: str) -> str:
    """The kind of a gpu_free_gb source, for sglang_sees."""
    if source.startswith("NVML"):
        return "nvml"
    if source.startswith("nvidia-smi"):
        return "nvidia-smi"
    if source.startswith("torch in"):
        return "torch"
    return "given"


def gpu_identity(cfg: ServiceConfig, remote: Any = None, *,
                 nvml: Callable[[], Nvml | None] = local_nvml) -> tuple[str | None, int | None]:
    """(the name of the first GPU the unit uses, the driver's major version), each None where
    neither NVML nor nvidia-smi says: which row of CONTEXT_FIGURES applies."""
    reader = nvml() if remote is None else None
    if reader is not None:
        devs = visible(cuda_visible(cfg), reader.devices())[: ranks(cfg)]
        version = getattr(reader, "driver_version", lambda: None)()
        return (devs[0].name or None) if devs else None, _major(version)
    out = (remote_smi(remote) if remote is not None else local_smi)(
        ["--query-gpu=name,driver_version", "--format=csv,noheader"])
    gpus = list(cfg.gpus) if cfg.gpus else [0]
    rows = [ln.split(",") for ln in (out or "").strip().splitlines()]
    row = rows[gpus[0]] if gpus[0] < len(rows) and len(rows[gpus[0]]) == 2 else None
    return (row[0].strip(), _major(row[1])) if row else (None, None)


def _major(version: str | None) -> int | None:
    head = (version or "").strip().split(".")[0]
    return int(head) if head.isdigit() else None
