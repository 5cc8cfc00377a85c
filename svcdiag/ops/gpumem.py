"""How much GPU memory a server will find free before it loads, and where that figure came from.

In order: the command line, the config, torch (the `gpu` extra, imported only here and
only when asked), then nvidia-smi. The smallest GPU of the config's set counts: SGLang
takes the minimum over ranks. For a remote host (`--host`), torch here would measure the
wrong machine: only that host's nvidia-smi counts, run over the SSH connection.
"""

from __future__ import annotations

import shlex
import shutil
import subprocess
from collections.abc import Callable
from typing import Any

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


#: runs nvidia-smi with these arguments: its stdout, or None where there is no nvidia-smi (or it failed)
Smi = Callable[[list[str]], str | None]


def local_smi(args: list[str]) -> str | None:
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


def gpu_free_gb(cfg: ServiceConfig, option: float | None, remote: Any = None) -> tuple[float, str]:
    """(GB, source), or a one-line error saying what to pass. `remote`: the SSH Connection of
    the host the config runs on (its nvidia-smi, never this host's torch)."""
    if option is not None:
        return option, "--gpu-memory"
    if cfg.gpu_memory_gb is not None:
        return cfg.gpu_memory_gb, f"{cfg.path}: gpu_memory_gb"
    gpus = list(cfg.gpus) if cfg.gpus else list(range(cfg.tp_size * cfg.dp_size))
    which = f"GPUs {','.join(map(str, gpus))}, now"
    if remote is not None:
        value = _nvidia_smi(gpus, remote_smi(remote))
        if value is not None:
            return round(value, 2), f"nvidia-smi on {remote.target} ({which})"
        raise SvcdiagError(f"no GPU memory figure: no --gpu-memory, no gpu_memory_gb in the config, no nvidia-smi "
                           f"on {remote.target}; pass --gpu-memory GB (free per GPU before loading)")
    for name, probe in (("torch.cuda.mem_get_info", _torch), ("nvidia-smi", _nvidia_smi)):
        value = probe(gpus)
        if value is not None:
            return round(value, 2), f"{name} ({which})"
    raise SvcdiagError("no GPU memory figure: no --gpu-memory, no gpu_memory_gb in the config, no torch with CUDA, "
                       "no nvidia-smi; pass --gpu-memory GB (free per GPU before loading)")
