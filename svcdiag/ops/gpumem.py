"""How much GPU memory a server will find free before it loads, and where that figure came from.

In order: the command line, the config, torch (the `gpu` extra, imported only here and
only when asked), then nvidia-smi. The smallest GPU of the config's set counts: SGLang
takes the minimum over ranks.
"""

from __future__ import annotations

import shutil
import subprocess

from svcdiag.config.service import ServiceConfig
from svcdiag.errors import SvcdiagError
from svcdiag.sglang.memory import GB

MiB = 1024**2


def _torch(gpus: list[int]) -> float | None:
    try:
        import torch  # the gpu extra; never imported at start-up
    except ImportError:
        return None
    try:
        if not torch.cuda.is_available():
            return None
        return min(torch.cuda.mem_get_info(i)[0] for i in gpus) / GB
    except Exception:  # a driver error: fall through to nvidia-smi, which says more
        return None


def parse_nvidia_smi(text: str, gpus: list[int]) -> float:
    """`nvidia-smi --query-gpu=memory.total,memory.used --format=csv` → free GiB on the smallest of `gpus`."""
    rows: list[float] = []
    for line in text.strip().splitlines()[1:]:  # the header: memory.total [MiB], memory.used [MiB]
        parts = [p.strip().split()[0] for p in line.split(",")]
        try:
            total, used = float(parts[0]), float(parts[1])
        except (ValueError, IndexError):
            raise SvcdiagError(f"nvidia-smi: cannot read the line {line!r}") from None
        rows.append((total - used) * MiB / GB)
    chosen = [rows[i] for i in gpus if i < len(rows)]
    if not chosen:
        raise SvcdiagError(f"nvidia-smi lists {len(rows)} GPU(s); the config wants GPUs {gpus}")
    return min(chosen)


def _nvidia_smi(gpus: list[int]) -> float | None:
    exe = shutil.which("nvidia-smi")
    if exe is None:
        return None
    try:
        out = subprocess.run([exe, "--query-gpu=memory.total,memory.used", "--format=csv"], capture_output=True,
                             text=True, timeout=20, check=True).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    return parse_nvidia_smi(out, gpus)


def gpu_free_gb(cfg: ServiceConfig, option: float | None) -> tuple[float, str]:
    """(GB, source), or a one-line error saying what to pass."""
    if option is not None:
        return option, "--gpu-memory"
    if cfg.gpu_memory_gb is not None:
        return cfg.gpu_memory_gb, f"{cfg.path}: gpu_memory_gb"
    gpus = list(cfg.gpus) if cfg.gpus else list(range(cfg.tp_size * cfg.dp_size))
    for name, probe in (("torch.cuda.mem_get_info", _torch), ("nvidia-smi", _nvidia_smi)):
        value = probe(gpus)
        if value is not None:
            return round(value, 2), f"{name} (GPUs {','.join(map(str, gpus))}, now)"
    raise SvcdiagError("no GPU memory figure: no --gpu-memory, no gpu_memory_gb in the config, no torch with CUDA, "
                       "no nvidia-smi; pass --gpu-memory GB (free per GPU before loading)")
