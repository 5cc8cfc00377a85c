"""The unit's sandbox and its credentials, as unit lines (docs/security.md).

`hardening = "strict"` (the default) confines SGLang to what a CUDA inference server needs:
a read-only OS, its caches, /dev/shm and its working directory writable, the GPU nodes and
nothing else under /dev, no capabilities, the socket families NCCL and the HTTP server use.
Nothing that breaks CUDA: no MemoryDenyWriteExecute= (the JIT and Triton map W+X), no
PrivateDevices= (it hides /dev/nvidia*), no PrivateNetwork= (clients and NCCL need the host's).
"""

from __future__ import annotations

import sys
from pathlib import Path

from svcdiag.config.secrets import env_file, resolve_all
from svcdiag.config.service import ServiceConfig
from svcdiag.files import DEFAULT_STATE_DIR

#: DeviceAllow= per family: `char-GROUP` is every node of that driver (/proc/devices), which is
#: how systemd spells a glob: char-nvidia-frontend is /dev/nvidia[0-9]* and /dev/nvidiactl,
#: char-nvidia-uvm is /dev/nvidia-uvm and /dev/nvidia-uvm-tools, char-nvidia-caps /dev/nvidia-caps/*.
DEVICES = {
    "nvidia": ("char-nvidia-frontend rw", "/dev/nvidiactl rw", "char-nvidia-uvm rw", "/dev/nvidia-uvm rw",
               "/dev/nvidia-uvm-tools rw", "char-nvidia-caps rw", "char-nvidia-nvswitch rw"),
    "rocm": ("/dev/kfd rw", "char-kfd rw", "char-drm rw"),
    "infiniband": ("char-infiniband_verbs rw", "char-infiniband_mad rw", "/dev/infiniband/rdma_cm rw"),
}
#: Environment variables that name a cache SGLang, Hugging Face, Triton or torch write to.
CACHE_ENV = ("HF_HOME", "HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE", "TRANSFORMERS_CACHE", "XDG_CACHE_HOME",
             "TRITON_CACHE_DIR", "TORCHINDUCTOR_CACHE_DIR", "FLASHINFER_WORKSPACE_BASE", "SGLANG_CACHE_DIR")
SANDBOX = (
    "NoNewPrivileges=yes",
    "ProtectSystem=strict",
    "ProtectHome=read-only",
    "PrivateTmp=yes",
    "PrivateMounts=yes",
    "ProtectKernelTunables=yes",
    "ProtectKernelModules=yes",
    "ProtectKernelLogs=yes",
    "ProtectControlGroups=yes",
    "ProtectClock=yes",
    "ProtectHostname=yes",
    "ProtectProc=invisible",
    "RestrictNamespaces=yes",
    "RestrictRealtime=yes",
    "RestrictSUIDSGID=yes",
    "LockPersonality=yes",
    "SystemCallArchitectures=native",
    "CapabilityBoundingSet=",
    "AmbientCapabilities=",
    "KeyringMode=private",
    "UMask=0077",
    "RestrictAddressFamilies=AF_UNIX AF_INET AF_INET6 AF_NETLINK",
)
#: Syscall groups no inference server calls; a call anyway fails with EPERM instead of killing the
#: server (@debug stays allowed: CUDA IPC and NCCL may use pidfd_getfd).
SYSCALL_DENY = "~@clock @cpu-emulation @module @mount @obsolete @raw-io @reboot @swap"


def _pct(path: str) -> str:
    return path.replace("%", "%%")


def read_write_paths(cfg: ServiceConfig) -> list[str]:
    """What a strict unit may write: the user's caches (%h is User='s home), /dev/shm, the working
    directory (never `/`), cache folders [env] names, `read_write_paths`, and with `watchdog_s` svcdiag's
    state (the history the supervisor records restarts in). `-`: may be missing."""
    paths = ["%h/.cache", "%h/.triton", "/dev/shm"]
    wd = cfg.working_directory
    if wd and Path(wd) != Path("/"):
        paths.append(_pct(wd))
    env = dict(cfg.env)
    for key in CACHE_ENV:
        v = env.get(key, "")
        if v.startswith("/") and Path(v) != Path("/") and not any(c in v for c in " \t\"'\\"):
            paths.append(_pct(v))
    paths += [_pct(p) for p in cfg.read_write_paths]
    if cfg.watchdog_s is not None:  # the supervisor records a restarted start and its incidents in the history
        paths.append(_pct(DEFAULT_STATE_DIR))
    seen: list[str] = []
    for p in paths:
        if p not in seen:
            seen.append(p)
    return [f"ReadWritePaths=-{p}" for p in seen]


TEMP_DIRS = (Path("/tmp"), Path("/var/tmp"))


def temp_dir_binds(cfg: ServiceConfig) -> list[str]:
    """PrivateTmp= gives the unit an empty /tmp: what it runs or reads from under /tmp or /var/tmp
    (an interpreter, svcdiag itself for the stand-in or the supervisor, the units folder, the
    model) is bound back in, by its top folder there, or the start would fail 203/EXEC."""
    wanted = [cfg.python, sys.executable, str(Path(__file__).resolve().parents[2]), str(cfg.path.parent),
              cfg.model_path, cfg.working_directory or ""]
    if cfg.speculative is not None and cfg.speculative.draft_model_path:
        wanted.append(cfg.speculative.draft_model_path)
    binds: list[str] = []
    for raw in wanted:
        path = Path(raw) if raw and raw.startswith("/") else None
        for tmp in TEMP_DIRS:
            if path is not None and path.is_relative_to(tmp) and path != tmp:
                top = str(tmp / path.relative_to(tmp).parts[0])
                if not any(c in top for c in " \t\"'\\") and f"BindPaths=-{_pct(top)}" not in binds:
                    binds.append(f"BindPaths=-{_pct(top)}")
    return binds


def hardening_lines(cfg: ServiceConfig) -> list[str]:
    if cfg.hardening == "off":
        return []
    families = ["nvidia", *(d for d in ("rocm", "infiniband") if d in cfg.devices)]
    allow = [a for fam in families for a in DEVICES[fam]]
    allow += [f"{_pct(d)} rw" for d in cfg.devices if d.startswith("/")]
    return [*SANDBOX, *read_write_paths(cfg), *temp_dir_binds(cfg), "DevicePolicy=closed", *(f"DeviceAllow={a}" for a in allow),
            f"SystemCallFilter={SYSCALL_DENY}", "SystemCallErrorNumber=EPERM"]


def credential_lines(cfg: ServiceConfig) -> list[str]:
    """One LoadCredential[Encrypted]=NAME:SOURCE per secret (where it is, never what), and in
    journal mode the EnvironmentFile= svcdiag writes from them (the notify supervisor exports
    them itself, from $CREDENTIALS_DIRECTORY)."""
    lines = [f"{s.directive}={s.name}:{_pct(s.source)}" for s in resolve_all(cfg)]
    if lines and cfg.readiness != "notify":
        lines.append(f"EnvironmentFile={_pct(str(env_file(cfg.name)))}")
    return lines
