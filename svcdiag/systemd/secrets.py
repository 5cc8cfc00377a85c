"""Journal mode's secrets: the EnvironmentFile= svcdiag writes from [secrets], root only (0600,
in a 0700 folder), so the values reach SGLang's environment without ever being in the unit,
`systemctl show` or a command line (docs/security.md)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from svcdiag.config.secrets import Secret, check_files, env_file, environment_file_text, read_error, value_text
from svcdiag.config.service import ServiceConfig
from svcdiag.errors import ConfigError, SvcdiagError
from svcdiag.files import write_atomic


def _read(cfg: ServiceConfig, s: Secret) -> bytes:
    assert s.file is not None
    if not s.encrypted:
        try:
            return s.file.read_bytes()
        except OSError as e:
            raise read_error(cfg.path, s.name, s.file, e) from None
    # a systemd-creds blob: decrypted by systemd-creds, its plaintext on a pipe, never an argument
    try:
        proc = subprocess.run(["systemd-creds", "decrypt", f"--name={s.name}", str(s.file), "-"],
                              capture_output=True, timeout=60, check=False)
    except (OSError, subprocess.TimeoutExpired) as e:
        raise ConfigError(cfg.path, f"secrets.{s.name}", f"systemd-creds decrypt {s.file}: {e}") from None
    if proc.returncode != 0:
        why = proc.stderr.decode(errors="replace").strip().splitlines()[-1:] or [f"exit {proc.returncode}"]
        raise ConfigError(cfg.path, f"secrets.{s.name}", f"systemd-creds cannot decrypt {s.file}: {why[0]} "
                          f"(encrypt it with --name={s.name})")
    return proc.stdout


def write_environment_file(cfg: ServiceConfig) -> Path | None:
    """Journal mode: (re)write the config's EnvironmentFile from its secrets, when it differs;
    None when there is nothing to write (no secrets, or notify mode). Checks every secret file
    first (missing, or readable by others: exit 2 naming it)."""
    secrets = check_files(cfg)
    if not secrets or cfg.readiness == "notify":
        return None
    text = environment_file_text({s.name: value_text(cfg.path, s.name, _read(cfg, s)) for s in secrets})
    path = env_file(cfg.name)
    try:
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        os.chmod(path.parent, 0o700)
        try:
            if path.read_text(encoding="utf-8") == text and (path.stat().st_mode & 0o777) == 0o600:
                return path
        except FileNotFoundError:
            pass
        write_atomic(path, text, mode=0o600)
    except PermissionError:
        raise SvcdiagError(f"cannot write {path}: permission denied; run as root: "
                           f"sudo svcdiag install {cfg.name}") from None
    except OSError as e:
        raise SvcdiagError(f"cannot write {path}: {e.strerror}") from None
    return path


def remove_environment_file(cfg: ServiceConfig) -> None:
    """A config that no longer has secrets (or moved to notify mode) leaves no file behind."""
    try:
        env_file(cfg.name).unlink()
    except FileNotFoundError:
        pass
    except OSError:
        pass
