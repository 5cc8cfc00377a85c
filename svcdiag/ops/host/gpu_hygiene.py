"""GPU hygiene before a start: memory on the config's GPUs held by a process that is not
this unit's (an orphaned scheduler of an earlier start, someone's notebook) is named with
its PID, unit and GB, and the start refused unless --force.

NVML (the `gpu` extra), else `nvidia-smi --query-compute-apps=pid,gpu_uuid,used_memory`, says
who holds what, by GPU UUID, mapped to the indexes CUDA_VISIBLE_DEVICES names; each PID's unit
comes from `/proc/PID/cgroup`. svcdiag itself and its children are never named: they are not
a foreign holder. Without either there is nothing to check. On a remote host both are read
there, over the SSH connection.
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from svcdiag.config.service import ServiceConfig
from svcdiag.errors import SvcdiagError
from svcdiag.ops.host.gpumem import Nvml, cuda_visible, local_nvml, remote_smi, visible

MiB_PER_GB = 1024  # nvidia-smi's MiB → GiB, as torch and SGLang count a GB
PROC = Path("/proc")


@dataclass(frozen=True, slots=True)
class Holder:
    """A process holding GPU memory, and the unit it belongs to (None: none of ours)."""

    pid: int
    gpu: int
    gb: float
    unit: str | None  # the systemd unit (service or scope) its cgroup belongs to

    def describe(self) -> str:
        return f"PID {self.pid} ({self.unit or 'no unit'}) holds {self.gb:.1f} GB on GPU {self.gpu}"


class GpuBusy(SvcdiagError):
    """Another process holds memory on the config's GPUs: refused like preflight's refusal (exit 1)."""

    exit_code = 1


def unit_of(pid: int, proc: Path = PROC, remote: Any = None) -> str | None:
    """The unit a PID runs in, from its cgroup path (`0::/system.slice/x.service` → `x.service`)."""
    if remote is not None:
        try:
            text = remote.read_file(f"/proc/{pid}/cgroup")
        except SvcdiagError:
            text = None
        if text is None:
            return None
    else:
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


def own_pids(proc: Path = PROC, me: int | None = None) -> set[int]:
    """svcdiag's own PID and its descendants (a probe it runs, a supervised child): never a foreign holder."""
    me = os.getpid() if me is None else me
    parent: dict[int, int] = {}
    try:
        entries = [e for e in proc.iterdir() if e.name.isdigit()]
    except OSError:
        return {me}
    for e in entries:
        try:
            stat = (e / "stat").read_text()
            parent[int(e.name)] = int(stat.rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
    mine, grew = {me}, True
    while grew:
        grew = False
        for pid, ppid in parent.items():
            if ppid in mine and pid not in mine:
                mine.add(pid)
                grew = True
    return mine


def config_gpus(cfg: ServiceConfig) -> tuple[int, ...]:
    return cfg.gpus if cfg.gpus else tuple(range(cfg.gpu_count))


def _remote_queries(conn: Any) -> tuple[str, str] | None:
    """Both queries on the remote host, or None where it has no nvidia-smi."""
    if conn.run("command -v nvidia-smi >/dev/null 2>&1").returncode != 0:
        return None
    run = remote_smi(conn)
    out = []
    for args in (["--query-gpu=index,uuid", "--format=csv,noheader"],
                 ["--query-compute-apps=pid,gpu_uuid,used_memory", "--format=csv,noheader,nounits"]):
        text = run(args)
        if text is None:
            raise SvcdiagError(f"{conn.target}: nvidia-smi {shlex.join(args)} failed")
        out.append(text)
    return out[0], out[1]


def _nvml_apps(cfg: ServiceConfig, reader: Nvml) -> tuple[list[tuple[int, int, float]], set[int]]:
    """NVML's compute processes ([(pid, index, GB)]) and the indexes of the config's GPUs."""
    devices = reader.devices()
    mine = {d.index for d in visible(cuda_visible(cfg), devices)}
    apps = [(pid, d.index, used / 1024**3) for d in devices for pid, used in d.processes]
    return apps, mine


def foreign_holders(cfg: ServiceConfig, proc: Path = PROC, remote: Any = None, *,
                    nvml: Callable[[], Nvml | None] = local_nvml) -> list[Holder]:
    """Who else holds memory on the config's GPUs now (empty without NVML and nvidia-smi).
    `remote`: the SSH Connection of the host the config runs on."""
    mine = set(config_gpus(cfg))
    reader = nvml() if remote is None else None
    if reader is not None:
        apps, mine = _nvml_apps(cfg, reader)
    else:
        if remote is not None:
            got = _remote_queries(remote)
            if got is None:
                return []
            gpu_text, app_text = got
        else:
            exe = shutil.which("nvidia-smi")
            if exe is None:
                return []
            gpu_text = _smi(exe, "--query-gpu=index,uuid", "--format=csv,noheader")
            app_text = _smi(exe, "--query-compute-apps=pid,gpu_uuid,used_memory", "--format=csv,noheader,nounits")
        apps = parse_apps(app_text, parse_gpus(gpu_text))
    ours = own_pids(proc) if remote is None else set()
    out = []
    for pid, gpu, gb in apps:
        if gpu not in mine or pid in ours:
            continue
        unit = unit_of(pid, proc, remote)
        if unit != cfg.unit:
            out.append(Holder(pid, gpu, round(gb, 2), unit))
    return out


def gate(cfg: ServiceConfig, note: Callable[[str], None], *, force: bool, remote: Any = None) -> list[Holder]:
    """Refuse the start (GpuBusy, exit 1) while another process holds memory on its GPUs; with force, say so and go on.
    `remote`: the SSH Connection of the host it runs on (its nvidia-smi and /proc)."""
    holders = foreign_holders(cfg, remote=remote)
    if not holders:
        return holders
    said = "; ".join(h.describe() for h in holders) + (f" on {remote.target}" if remote is not None else "")
    if force:
        note(f"--force: starting anyway, though {said}")
        return holders
    raise GpuBusy(f"{cfg.name}: GPU memory held by another process: {said}; stop it "
                  f"(an orphaned scheduler of an earlier start is a common cause of 'Not enough memory'), "
                  "or pass --force")
