"""`svcdiag bundle NAME`: one start's post-mortem, in a tar.gz someone else can judge.

It holds the invocation's journal slice (export format: `svcdiag replay FILE.tar.gz` judges
it), the rendered unit, the effective config, the verdict and diagnosis, the config's
history rows, `nvidia-smi -q` and `/server_info` when there are any, and svcdiag's and
SGLang's versions. Of a remote host (`--host`): its journal, unit file, nvidia-smi and the
unit's status (status.json), read over the SSH connection; the history is this machine's.
Secrets are redacted everywhere (environment values of keys like
*TOKEN*, *KEY*, *SECRET*, *PASSWORD*; API keys in arguments), and MANIFEST.json lists what was.
"""

from __future__ import annotations

import dataclasses
import io
import json
import re
import shlex
import shutil
import socket
import struct
import subprocess
import tarfile
import time
import urllib.request
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Any, BinaryIO

from svcdiag.config.service import ServiceConfig
from svcdiag.errors import SvcdiagError
from svcdiag.files import write_atomic
from svcdiag.ops.host.gpumem import remote_smi
from svcdiag.ops.host.history import read_rows
from svcdiag.ops.offline.bundle_read import JOURNAL
from svcdiag.ops.offline.conclude import diagnoser
from svcdiag.ops.offline.replay import NoStartFound, replay
from svcdiag.systemd.install import SYSTEM_UNIT_DIR
from svcdiag.systemd.journal import no_access
from svcdiag.systemd.render import render_unit

SECRET_KEY_RE = re.compile(r"TOKEN|KEY|SECRET|PASSWORD|PASSWD|CREDENTIAL|AUTH", re.I)
SECRET_FLAG_RE = re.compile(r"^--?[\w-]*(api[-_]?key|token|secret|password|passwd)[\w-]*$", re.I)
REDACTED = "[REDACTED]"
MIN_SECRET_LEN = 4  # shorter values are not searched for in free text (they would match everywhere)


@dataclass(frozen=True, slots=True)
class Secret:
    """A value redacted from a bundle, and where it was found."""

    where: str  # "env.HF_TOKEN", "extra_args[3] (--api-key)"
    value: str


@dataclass(frozen=True, slots=True)
class BundleResult:
    """A bundle written: its files, what was redacted and the start's verdict."""

    path: Path
    invocation: str
    files: tuple[str, ...]
    redacted: tuple[dict[str, Any], ...]
    verdict: dict[str, Any] | None


def _secret_values(cfg: ServiceConfig) -> list[Secret]:
    """[secrets] values that svcdiag can read (plain files): never in a unit, but a server may log one."""
    from svcdiag.config.secrets import resolve_all

    out = []
    for s in resolve_all(cfg) if getattr(cfg, "secrets", ()) else []:
        if s.file is None or s.encrypted:
            continue
        try:
            value = s.file.read_bytes().decode("utf-8", "replace").rstrip("\r\n")
        except OSError:
            continue
        if len(value) >= MIN_SECRET_LEN:
            out.append(Secret(f"secrets.{s.name}", value))
    return out


def secrets(cfg: ServiceConfig) -> list[Secret]:
    """Every secret value to redact: secret-looking [env] values, [secrets] values, API keys in arguments."""
    out = [Secret(f"env.{k}", v) for k, v in cfg.env if SECRET_KEY_RE.search(k) and v]
    out += _secret_values(cfg)
    args = list(cfg.extra_args)
    for i, a in enumerate(args):
        flag, eq, val = a.partition("=")
        if SECRET_FLAG_RE.match(flag):
            if eq and val:
                out.append(Secret(f"extra_args[{i}] ({flag})", val))
            elif i + 1 < len(args) and not args[i + 1].startswith("--"):
                out.append(Secret(f"extra_args[{i + 1}] ({flag})", args[i + 1]))
    return out


class Redactor:
    """Replaces every secret value, counting where each was found."""

    def __init__(self, found: list[Secret]):
        self.secrets = sorted(found, key=lambda s: -len(s.value))
        self.hits: dict[str, set[str]] = {s.where: set() for s in found}

    def text(self, name: str, text: str) -> str:
        for s in self.secrets:
            if s.value in text:
                text = text.replace(s.value, REDACTED)
                self.hits[s.where].add(name)
        return text

    def data(self, name: str, data: bytes) -> bytes:
        for s in self.secrets:
            v = s.value.encode()
            if v in data:
                data = data.replace(v, REDACTED.encode())
                self.hits[s.where].add(name)
        return data

    def export(self, name: str, data: bytes) -> bytes:
        """The journal's export format, each field's value redacted (binary fields keep a true length)."""
        out, i, n = bytearray(), 0, len(data)
        while i < n:
            nl = data.find(b"\n", i)
            if nl < 0:
                nl = n
            line = data[i:nl]
            if not line:  # the blank line between entries
                out += b"\n"
                i = nl + 1
                continue
            if b"=" in line:
                key, _, value = line.partition(b"=")
                out += key + b"=" + self.data(name, value).replace(b"\n", b" ") + b"\n"
                i = nl + 1
            else:  # NAME\n, little-endian u64 size, the bytes, \n
                size = struct.unpack_from("<Q", data, nl + 1)[0]
                value = self.data(name, data[nl + 9:nl + 9 + size])
                out += line + b"\n" + struct.pack("<Q", len(value)) + value + b"\n"
                i = nl + 9 + size + 1
        return bytes(out)

    def manifest(self) -> list[dict[str, Any]]:
        return [{"what": where, "replaced_by": REDACTED, "found_in": sorted(files)} for where, files in self.hits.items()]


def redacted_config(cfg: ServiceConfig, red: Redactor) -> dict[str, Any]:
    flat = cfg.flat()
    for k in list(flat):
        if k.startswith("env.") and SECRET_KEY_RE.search(k[4:]):
            flat[k] = REDACTED
    return json.loads(red.text("config.json", json.dumps({"name": cfg.name, "path": str(cfg.path),
                                                           "config_hash": cfg.config_hash, "effective": flat})))


def journal_slice(invocation: str, remote: Any = None) -> bytes:
    """The invocation's entries in export format, from this host's journal or `remote`'s (a Connection)."""
    if remote is not None:
        inv = shlex.quote(invocation)
        p = remote.run(f"journalctl --no-pager -o export _SYSTEMD_INVOCATION_ID={inv} + INVOCATION_ID={inv}",
                       timeout=120)
        if p.returncode != 0:
            raise SvcdiagError(f"bundle: journalctl on {remote.target} failed: "
                               f"{p.stderr.decode(errors='replace').strip()[-300:]}")
        return p.stdout
    if why := no_access():
        raise SvcdiagError(f"bundle: {why}")
    exe = shutil.which("journalctl")
    if exe is None:
        raise SvcdiagError("bundle: journalctl is not installed; the journal slice cannot be read")
    proc = subprocess.run([exe, "--no-pager", "-o", "export", f"_SYSTEMD_INVOCATION_ID={invocation}", "+",
                           f"INVOCATION_ID={invocation}"], capture_output=True, timeout=120, check=False)
    if proc.returncode != 0:
        raise SvcdiagError(f"bundle: journalctl failed: {proc.stderr.decode(errors='replace').strip()[-300:]}")
    return proc.stdout


def _server_info(cfg: ServiceConfig, remote: Any = None) -> str | None:
    host, port = cfg.host, cfg.port
    if remote is not None:  # the server's port there, through the SSH connection
        local = remote.forward(cfg.host, cfg.port)
        if local is None:
            return None
        host, port = "127.0.0.1", local
    for path in ("/server_info", "/get_server_info"):
        try:
            with urllib.request.urlopen(f"http://{host}:{port}{path}", timeout=3) as r:
                return r.read().decode("utf-8", "replace")
        except (OSError, ValueError):
            continue
    return None


def _nvidia_smi(remote: Any = None) -> str | None:
    if remote is not None:
        return remote_smi(remote)(["-q"])
    exe = shutil.which("nvidia-smi")
    if exe is None:
        return None
    try:
        return subprocess.run([exe, "-q"], capture_output=True, text=True, timeout=30, check=False).stdout
    except (OSError, subprocess.SubprocessError):
        return None


def _unit_text(cfg: ServiceConfig, version: str | None, remote: Any = None) -> str:
    installed = SYSTEM_UNIT_DIR / cfg.unit
    if remote is not None:
        return remote.read_file(str(installed)) or render_unit(cfg, version)
    try:
        return installed.read_text()
    except OSError:
        return render_unit(cfg, version)


def pick_invocation(cfg: ServiceConfig, invocation: str | None, rows: list[dict[str, Any]], sd: Any = None) -> str:
    """The invocation asked for (a prefix of a recorded one will do), else the config's last recorded start,
    else the unit's current one (on `sd`'s host, when given)."""
    if invocation:
        full = [r["invocation"] for r in rows if r.get("invocation") and r["invocation"].startswith(invocation)]
        return full[-1] if full else invocation
    recorded = [r["invocation"] for r in rows if r.get("invocation")]
    if recorded:
        return str(recorded[-1])
    if sd is not None:
        inv = sd.props(cfg.unit).invocation
    else:
        from svcdiag.systemd.dbus import Systemd

        with Systemd.connect() as local:
            inv = local.props(cfg.unit).invocation
    if not inv:
        raise SvcdiagError(f"bundle: {cfg.unit} has no recorded start and none since boot; pass --invocation ID")
    return inv


def bundle(cfg: ServiceConfig, *, invocation: str | None, out: str | None, state: str | None,
           sd: Any = None) -> BundleResult:
    """The bundle of one start; `sd`: the systemd of the host it ran on (a remote one: over SSH)."""
    remote = getattr(sd, "remote", None)
    try:
        rows = read_rows(state, cfg.name)
    except SvcdiagError:  # a store this user cannot read: the bundle is the journal's, without the history row
        rows = []
    inv = pick_invocation(cfg, invocation, rows, sd)
    row = next((r for r in reversed(rows) if r.get("invocation") == inv), None)
    red = Redactor(secrets(cfg))
    raw = journal_slice(inv, remote)
    if not raw.strip():
        where = f" on {remote.target}" if remote is not None else ""
        raise SvcdiagError(f"bundle: the journal{where} holds nothing of invocation {inv} of {cfg.unit}")
    journal = red.export(JOURNAL, raw)
    verdict = None
    try:
        result = replay(io.BytesIO(journal), JOURNAL, cfg)
        v = result.verdict
        if (v.verdict != "healthy" or v.degraded) and v.diagnosis is None:
            v = v.with_(diagnosis=diagnoser(cfg)(v))
        verdict = v.to_json()
    except NoStartFound:
        pass
    sglang_version = (row or {}).get("sglang_version") or cfg.sglang_version
    files: dict[str, bytes] = {JOURNAL: journal}

    def text(name: str, body: str) -> None:
        files[name] = red.text(name, body).encode()

    text("unit.service", _unit_text(cfg, sglang_version, remote))
    if sd is not None:
        text("status.json", json.dumps(dataclasses.asdict(sd.props(cfg.unit)), indent=2, default=str) + "\n")
    files["config.json"] = (json.dumps(redacted_config(cfg, red), indent=2) + "\n").encode()
    text("verdict.json", json.dumps({"replayed": verdict, "recorded": row}, indent=2, default=str) + "\n")
    text("history.json", json.dumps(rows, indent=2, default=str) + "\n")
    smi = _nvidia_smi(remote)
    if smi is not None:
        text("nvidia-smi.txt", smi)
    info = _server_info(cfg, remote)
    if info is not None:
        text("server_info.json", info)
    versions = {"svcdiag": _version("svcdiag"), "sglang": sglang_version}
    text("versions.json", json.dumps(versions, indent=2) + "\n")
    manifest = {"config": cfg.name, "unit": cfg.unit, "invocation": inv, "created": time.time(),
                "host": str(remote.target) if remote is not None else socket.gethostname(), "versions": versions,
                "files": sorted(files),
                "redacted": red.manifest(), "replay": "svcdiag replay THIS.tar.gz"}
    files["MANIFEST.json"] = (json.dumps(manifest, indent=2) + "\n").encode()
    target = Path(out or f"{cfg.name}-{inv[:12]}.tar.gz")
    _write_tar(target, f"{cfg.name}-{inv[:12]}", files)
    return BundleResult(target, inv, tuple(sorted(files)), tuple(red.manifest()), verdict)


def _version(dist: str) -> str | None:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return None


def _write_tar(target: Path, top: str, files: dict[str, bytes]) -> None:
    """0600, written as files.write_atomic writes (a planted symlink at the name is refused)."""

    def write(f: BinaryIO) -> None:
        with tarfile.open(fileobj=f, mode="w:gz") as tar:
            for name, data in sorted(files.items()):
                info = tarfile.TarInfo(f"{top}/{name}")
                info.size, info.mtime, info.mode = len(data), int(time.time()), 0o600
                tar.addfile(info, io.BytesIO(data))

    write_atomic(target, write, mode=0o600)
