"""GPU hygiene before a start: memory on the config's GPUs held by a process that is not
this unit's (an orphaned scheduler of an earlier start, someone's notebook) is named with
its PID, unit and GB, and the start refused unless --force.

`nvidia-smi --query-compute-apps=pid,gpu_uuid,used_memory` says who holds what; each PID's
unit comes from `/proc/PID/cgroup`. Without nvidia-smi there is nothing to check.
"""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from svcdiag.config.service import ServiceConfig
from svcdiag.errors import SvcdiagError

MiB_PER_GB = 1024  # nvidia-smi's MiB → GiB, as torch and SGLang count a GB
PROC = Path("/proc")


@dataclass(frozen=True, slots=True)
class Holder:
    pid: int
    gpu: int
    gb: float
    unit: str | None  # the systemd unit (service or scope) its cgroup belongs to

    def describe(self) -> str:
        return f"PID {self.pid} ({self.unit or 'no unit'}) holds {self.gb:.1f} GB on GPU {self.gpu}"


class GpuBusy(SvcdiagError):
    """Another process holds memory on the config's GPUs: refused like preflight's refusal (exit 1)."""

    exit_code = 1


def unit_of(pid: int, proc: Path = PROC) -> str | None:
    """The unit a PID runs in, from its cgroup path (`0::/system.slice/x.service` → `x.service`)."""
    try:
        text = (proc / str(pid) / "cgroup").read_text()
    except OSError:
        return None
    for line in text.splitlines():
        path = line.split(":", 2)[-1]
        for part in reversed(path.strip("/").split("/")):
            if part.endswith((".service", ".scope")):
                return part
    return None


def _smi(exe: str, *args: str) -> str:
    try:
        return subprocess.run([exe, *args], capture_output=True, text=True, timeout=20, check=True).stdout
    except (OSError, subprocess.SubprocessError) as e:
        raise SvcdiagError(f"nvidia-smi {' '.join(args)}: {e}") from None


def parse_gpus(text: str) -> dict[str, int]:
    """`--query-gpu=index,uuid --format=csv,noheader` → {uuid: index}."""
    out = {}
    for line in text.strip().splitlines():
        parts = [p.strip() for p in line.split(",")]
        if len(parts) >= 2 and parts[0].isdigit():
            out[parts[1]] = int(parts[0])
    return out


def parse_apps(text: str, gpus: dict[str, int]) -> list[tuple[int, int, float]]:
    """`--query-compute-apps=pid,gpu_uuid,used_memory --format=csv,noheader,nounits` → [(pid, gpu, GB)]."""
    out = []
    for line in text.strip().splitlines():
        parts = [p.strip() for p in line.split(",")]
        if len(parts) < 3 or not parts[0].isdigit():
            continue
        try:
            mib = float(parts[2].split()[0])
        except (ValueError, IndexError):
            continue
        gpu = gpus.get(parts[1], int(parts[1]) if parts[1].isdigit() else -1)
        out.append((int(parts[0]), gpu, mib / MiB_PER_GB))
    return out


def config_gpus(cfg: ServiceConfig) -> tuple[int, ...]:
    return cfg.gpus if cfg.gpus else tuple(range(cfg.tp_size * cfg.dp_size))


def foreign_holders(cfg: ServiceConfig, proc: Path = PROC) -> list[Holder]:
    """Who else holds memory on the config's GPUs now (empty without nvidia-smi)."""
    exe = shutil.which("nvidia-smi")
    if exe is None:
        return []
    gpus = parse_gpus(_smi(exe, "--query-gpu=index,uuid", "--format=csv,noheader"))
    apps = parse_apps(_smi(exe, "--query-compute-apps=pid,gpu_uuid,used_memory", "--format=csv,noheader,nounits"), gpus)
    mine = set(config_gpus(cfg))
    out = []
    for pid, gpu, gb in apps:
        if gpu not in mine:
            continue
        unit = unit_of(pid, proc)
        if unit != cfg.unit:
            out.append(Holder(pid, gpu, round(gb, 2), unit))
    return out


def gate(cfg: ServiceConfig, note: Callable[[str], None], *, force: bool) -> list[Holder]:
    """Refuse the start (GpuBusy, exit 1) while another process holds memory on its GPUs; with force, say so and go on."""
    holders = foreign_holders(cfg)
    if not holders:
        return holders
    said = "; ".join(h.describe() for h in holders)
    if force:
        note(f"--force: starting anyway, though {said}")
        return holders
    raise GpuBusy(f"{cfg.name}: GPU memory held by another process: {said}; stop it "
                  f"(an orphaned scheduler of an earlier start is a common cause of 'Not enough memory'), "
                  "or pass --force")
