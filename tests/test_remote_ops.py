"""The remote halves of preflight, GPU hygiene, campaign and [secrets] without SSH (docs/remote.md):
a stand-in Connection runs each remote command with this machine's `sh`, so the shell svcdiag
sends is the shell tested. The live paths are in tests/rig/test_rig_remote_ops.py."""

from __future__ import annotations

import json
import os
import stat
import subprocess
from pathlib import Path

import pytest

from svcdiag.config.service import UnitsDir
from svcdiag.errors import ConfigError, SvcdiagError
from svcdiag.ops.fleet.campaign import resources
from svcdiag.ops.host.gpu_hygiene import foreign_holders
from svcdiag.ops.host.gpumem import gpu_free_gb
from svcdiag.ops.host.preflight import RemoteFiles, plan
from svcdiag.sglang.modelinfo import read_shape, weight_bytes
from svcdiag.systemd.secrets import push_remote, remote_credential_path

from .model_fixtures import DENSE_QWEN3_8B, GB, model_dir

SMI_CSV = "memory.total [MiB], memory.used [MiB]\n81559 MiB, 1 MiB\n"


class ShConn:
    """A Connection whose 'remote host' is this machine's sh, in a folder of the test's; it keeps
    every command line and stdin it was given, and plays nvidia-smi from `smi` when set."""

    target = "root@gpu-x:2222"

    def __init__(self, smi: dict[str, str] | None = None):
        self.smi = smi
        self.commands: list[str] = []
        self.inputs: list[bytes] = []

    def run(self, command: str, *, input: bytes | None = None, timeout: float = 60.0) -> subprocess.CompletedProcess[bytes]:
        self.commands.append(command)
        self.inputs.append(input or b"")
        if "nvidia-smi" in command:
            if self.smi is None:
                return subprocess.CompletedProcess(command, 127 if "exit 127" in command else 1, b"", b"")
            out = next((v for k, v in self.smi.items() if k in command), "")
            return subprocess.CompletedProcess(command, 0, out.encode(), b"")
        return subprocess.run(["sh", "-c", command], input=input, capture_output=True, timeout=timeout, check=False)

    def read_file(self, path: str) -> str | None:
        self.commands.append(f"cat -- {path}")
        try:
            return Path(path).read_text()
        except FileNotFoundError:
            return None


def _cfg(units: Path, name: str, body: str):
    (units / f"{name}.toml").write_text(f'extends = "demo-dense"\n{body}')
    return UnitsDir(units, "test").load(name)


# ---------------------------------------------------------------- preflight


def test_model_files_are_read_through_the_reader_given(tmp_path: Path) -> None:
    d = model_dir(tmp_path, "m", DENSE_QWEN3_8B, 16)
    conn = ShConn()
    assert read_shape(str(d), RemoteFiles(conn)) == read_shape(d)
    assert weight_bytes(str(d), RemoteFiles(conn)) == 16 * GB
    assert any("config.json" in c for c in conn.commands)  # through the connection, not the filesystem
    (d / "model.safetensors.index.json").unlink()
    (d / "model-00001.safetensors").write_bytes(b"x" * 1000)
    (d / "model-00002.safetensors").write_bytes(b"x" * 24)
    assert weight_bytes(str(d), RemoteFiles(conn)) == weight_bytes(d) == 1024
    with pytest.raises(SvcdiagError, match="no model.safetensors.index.json and no"):
        weight_bytes(str(tmp_path / "absent"), RemoteFiles(conn))


def test_remote_gpu_memory_is_that_hosts_nvidia_smi_or_a_one_line_ask(units: Path, tmp_path: Path) -> None:
    d = model_dir(tmp_path, "m", DENSE_QWEN3_8B, 16)
    cfg = _cfg(units, "r1", f'model_path = "{d}"\n')
    assert gpu_free_gb(cfg, None, ShConn({"memory.total": SMI_CSV})) == (79.65, "nvidia-smi on root@gpu-x:2222 (GPUs 0, now)")
    with pytest.raises(SvcdiagError) as e:
        gpu_free_gb(cfg, None, ShConn(None))
    assert "no nvidia-smi on root@gpu-x:2222" in str(e.value) and "--gpu-memory GB" in str(e.value)
    assert "\n" not in str(e.value)
    p = plan(cfg, remote=ShConn({"memory.total": SMI_CSV}))
    assert p.to_json()["sources"]["shape"] == f"root@gpu-x:2222:{d}/config.json (Qwen3ForCausalLM, dense)"
    # what SGLang will see: the 79.65 GB read less its CUDA context and the driver's reserve (no
    # figure for an unnamed GPU: the default row, 0.5 + 0.5 GiB, 0.5–1.35 GiB with its allocator slack)
    assert (p.inputs.gpu_free_gb, p.inputs.gpu_free_range_gb) == (78.65, (78.3, 79.15))
    assert p.to_json()["sources"]["gpu_reading"].startswith("79.65 GB read, less SGLang's CUDA context and the driver's")
    with pytest.raises(SvcdiagError, match=r"^root@gpu-x:2222:.*config.json: no such file"):
        plan(_cfg(units, "r2", f'model_path = "{tmp_path}/nowhere"\n'), gpu_memory=80, remote=ShConn())


def test_a_hub_id_is_found_in_the_remote_hosts_cache(units: Path, tmp_path: Path) -> None:
    hub = tmp_path / "hf" / "hub" / "models--Qwen--Qwen3-8B"
    snap = model_dir(hub / "snapshots", "abc123", DENSE_QWEN3_8B, 16)  # no refs/main: the listed snapshot
    cfg = _cfg(units, "rhub", f'model_path = "Qwen/Qwen3-8B"\n[env]\nHF_HOME = "{tmp_path / "hf"}"\n')
    conn = ShConn({"memory.total": SMI_CSV})
    p = plan(cfg, remote=conn)
    assert p.to_json()["sources"]["model"] == f"hub id Qwen/Qwen3-8B: root@gpu-x:2222:{snap}"
    assert any(c.startswith("test -d") and "snapshots" in c for c in conn.commands)  # listed there, over SSH
    with pytest.raises(SvcdiagError, match=r"^root@gpu-x:2222:Qwen/Qwen3-8B/config.json: hub id not in the Hugging"):
        plan(_cfg(units, "rhub2", 'model_path = "Qwen/Qwen3-8B"\n'), gpu_memory=80, remote=ShConn())


def test_gpu_hygiene_on_a_remote_host_reads_its_smi_and_proc(units: Path) -> None:
    cfg = _cfg(units, "h1", "")
    uuid = "GPU-0000"
    pid = os.getpid()  # this process: its /proc/PID/cgroup is read through the connection
    conn = ShConn({"index,uuid": f"0, {uuid}\n", "compute-apps": f"{pid}, {uuid}, 3072\n"})
    [h] = foreign_holders(cfg, remote=conn)
    assert (h.pid, h.gpu, h.gb) == (pid, 0, 3.0)
    assert any(f"/proc/{pid}/cgroup" in c for c in conn.commands) or h.unit is None
    assert foreign_holders(cfg, remote=ShConn(None)) == []  # no nvidia-smi there: nothing to check


def test_campaign_resources_of_different_hosts_never_clash(units: Path) -> None:
    cfg = _cfg(units, "c1", "")
    assert resources(cfg) == resources(cfg, "local")
    assert not resources(cfg, "root@gpu-a") & resources(cfg, "root@gpu-b")
    assert resources(cfg, "root@gpu-a") == resources(cfg, "root@gpu-a")


# ---------------------------------------------------------------- [secrets] on a remote host


@pytest.mark.parametrize("readiness", ["journal", "notify"])
def test_remote_secrets_go_on_stdin_and_land_0600(units: Path, tmp_path: Path, monkeypatch, readiness: str) -> None:
    secrets_dir = tmp_path / "there" / "etc" / "svcdiag" / "secrets"
    monkeypatch.setenv("SVCDIAG_SECRETS_DIR", str(secrets_dir))
    value = "hf_Xy9\"$HOME`id`'%h\\"
    src = tmp_path / "here" / "hf_token"
    src.parent.mkdir()
    src.write_text(value + "\n")
    src.chmod(0o600)
    cfg = _cfg(units, f"s-{readiness}", f'readiness = "{readiness}"\n[secrets]\nHF_TOKEN = "{src}"\n')
    there = tmp_path / "there"  # the remote host's root: the unit's credential path, under it
    monkeypatch.setattr("svcdiag.systemd.secrets.remote_credential_path", lambda s: f"{there}{s.source}")
    copy = Path(f"{there}{src}")
    conn = ShConn()
    old = os.umask(0o022)  # what a login shell there may have: the script's own umask must win
    try:
        written = push_remote(conn, cfg)
    finally:
        os.umask(old)
    env = secrets_dir / f"{cfg.name}.env"
    assert written == [str(copy)] + ([str(env)] if readiness == "journal" else [])
    assert all(value not in c and "hf_Xy9" not in c for c in conn.commands)  # never an argument
    assert any(value.encode() in i for i in conn.inputs)  # on stdin
    assert stat.S_IMODE(copy.stat().st_mode) == 0o600 and copy.read_text() == value + "\n"
    assert stat.S_IMODE(copy.parent.stat().st_mode) == 0o700  # a folder it had to make: private too
    if readiness == "journal":
        assert stat.S_IMODE(env.stat().st_mode) == 0o600 and stat.S_IMODE(secrets_dir.stat().st_mode) == 0o700
        assert 'HF_TOKEN="hf_Xy9\\"\\$HOME\\`id\\`' in env.read_text()
    else:
        assert not env.exists()
    assert not list(there.rglob("*.svcdiag-tmp.*"))

    assert push_remote(conn, cfg) == []  # unchanged there: nothing rewritten
    src.write_text("hf_rotated\n")
    src.chmod(0o600)
    assert str(copy) in push_remote(conn, cfg) and copy.read_text() == "hf_rotated\n"  # rotated here: written there


def test_remote_secret_paths_follow_the_unit_and_failures_name_the_field(units: Path, tmp_path: Path,
                                                                          monkeypatch) -> None:
    from svcdiag.config.secrets import Secret

    assert remote_credential_path(Secret("T", "credstore:hf", "hf", Path("/run/credstore/hf"), False)) == "/etc/credstore/hf"
    assert remote_credential_path(Secret("T", "credstore:hf", "hf", Path("/run/x"), True)) == "/etc/credstore.encrypted/hf"
    assert remote_credential_path(Secret("T", "/srv/k", "/srv/k", Path("/srv/k"), False)) == "/srv/k"

    monkeypatch.setenv("SVCDIAG_SECRETS_DIR", str(tmp_path / "secrets"))
    src = tmp_path / "k"
    src.write_text("hf_abc\n")
    src.chmod(0o600)
    cfg = _cfg(units, "sf", f'readiness = "journal"\n[secrets]\nHF_TOKEN = "{src}"\n')

    class Refusing(ShConn):
        def run(self, command: str, **kw: object) -> subprocess.CompletedProcess[bytes]:
            return subprocess.CompletedProcess(command, 1, b"", b"mkdir: cannot create directory: Permission denied\n")

    with pytest.raises(ConfigError) as e:
        push_remote(Refusing(), cfg)
    assert "secrets.HF_TOKEN" in str(e.value) and "root@gpu-x:2222" in str(e.value) and "hf_abc" not in str(e.value)
    src.chmod(0o644)  # checked here first, as for a local unit: nothing is sent
    conn = ShConn()
    with pytest.raises(ConfigError, match="chmod 600"):
        push_remote(conn, cfg)
    assert conn.commands == []


def test_install_over_ssh_writes_secrets_before_the_unit(units: Path, tmp_path: Path, monkeypatch) -> None:
    from svcdiag.systemd.install import install_remote

    monkeypatch.setenv("SVCDIAG_SECRETS_DIR", str(tmp_path / "secrets"))
    src = tmp_path / "k"
    src.write_text("hf_abc\n")
    src.chmod(0o600)
    cfg = _cfg(units, "si", f'readiness = "journal"\n[secrets]\nHF_TOKEN = "{src}"\n')
    order: list[str] = []

    class Conn(ShConn):
        def read_file(self, path: str) -> str | None:
            return None

        def write_atomic(self, path: str, text: str, mode: int = 0o644) -> None:
            order.append(path)

        def run(self, command: str, **kw: object) -> subprocess.CompletedProcess[bytes]:
            order.append("secret")
            return super().run(command, **kw)  # type: ignore[arg-type]

    class Sd:
        remote = Conn()

        def daemon_reload(self) -> None:
            order.append("reload")

    out = install_remote(Sd(), [cfg])
    assert order.index("secret") < order.index(f"/etc/systemd/system/{cfg.unit}") < order.index("reload")
    assert out["secrets"] and all(s.startswith("root@gpu-x:2222:") for s in out["secrets"])
    assert json.dumps(out).count("hf_abc") == 0
