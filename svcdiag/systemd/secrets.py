"""Journal mode's secrets: the EnvironmentFile= svcdiag writes from [secrets], root only (0600,
in a 0700 folder), so the values reach SGLang's environment without ever being in the unit,
`systemctl show` or a command line (docs/security.md).

On a remote host (`push_remote`) the values are read here, as for a local unit, and written
there over the SSH connection, on ssh's stdin only: each credential where the unit's
`LoadCredential[Encrypted]=` looks for it, and in journal mode the EnvironmentFile too, each
0600 from creation (umask 077, temp file beside it, then rename)."""

from __future__ import annotations

import os
import shlex
from pathlib import Path
from typing import Any

from svcdiag.config.secrets import (
    CREDSTORE_DIRS,
    CREDSTORE_ENCRYPTED_DIRS,
    CREDSTORE_PREFIX,
    Secret,
    check_files,
    env_file,
    environment_file_text,
    read_error,
    value_text,
)
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
    import subprocess  # here: ~5 ms of every command that loads this module

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


# ---------------------------------------------------------------- on a remote host


def remote_credential_path(s: Secret) -> str:
    """Where the remote host's systemd looks for this credential: the unit's own path, or for a
    `credstore:NAME` the first credstore folder (the one its search tries first)."""
    if s.ref.startswith(CREDSTORE_PREFIX):
        return f"{(CREDSTORE_ENCRYPTED_DIRS if s.encrypted else CREDSTORE_DIRS)[0]}/{s.source}"
    return s.source


def _put_script(path: str, *, encrypt_as: str | None, private_dir: bool) -> str:
    """The remote shell for one secret: its bytes (the plaintext, for `encrypt_as`) come on stdin;
    prints `written` or `unchanged`. Nothing but paths and the credential's name is in it."""
    q, d = shlex.quote(path), shlex.quote(str(Path(path).parent))
    tmp = f"{q}.svcdiag-tmp.$$"
    fail = f"{{ rm -f -- {tmp}; exit 1; }}"
    lines = ["umask 077 || exit 1", f"mkdir -p -- {d} || exit 1"]
    if private_dir:
        lines.append(f"chmod 700 -- {d} || exit 1")
    if encrypt_as is not None:  # sealed by that host's own key (and TPM2): the one that must decrypt it
        lines.append(f"systemd-creds encrypt --name={shlex.quote(encrypt_as)} - {tmp} || {fail}")
    else:
        lines += [f"cat > {tmp} || {fail}",
                  f'if cmp -s -- {tmp} {q} && [ "$(stat -c %a -- {q})" = 600 ]; then rm -f -- {tmp}; '
                  "echo unchanged; exit 0; fi"]
    lines += [f"chmod 600 -- {tmp} && mv -f -- {tmp} {q} || {fail}", "echo written"]
    return "\n".join(lines)


def _put(conn: Any, cfg: ServiceConfig, name: str | None, path: str, data: bytes, *, encrypt_as: str | None = None,
         private_dir: bool = False) -> bool:
    """Write one secret on the remote host; True when it changed there."""
    p = conn.run(_put_script(path, encrypt_as=encrypt_as, private_dir=private_dir), input=data)
    if p.returncode != 0:
        why = p.stderr.decode(errors="replace").strip().splitlines()
        raise ConfigError(cfg.path, f"secrets.{name}" if name else "secrets", f"cannot write {conn.target}:{path}: "
                          f"{why[-1] if why else 'permission denied (log in as root)'}")
    return p.stdout.decode().strip().endswith("written")


def push_remote(conn: Any, cfg: ServiceConfig) -> list[str]:
    """The config's secrets onto the host `conn` (svcdiag.systemd.remote.Connection) reaches:
    every secret file checked and read here first (one missing writes nothing there), then each
    written there only when it differs. Returns the remote paths written (never a value)."""
    secrets = check_files(cfg)
    env = str(env_file(cfg.name))
    if not secrets:
        conn.run(f"rm -f -- {shlex.quote(env)}")
        return []
    values = {s.name: _read(cfg, s) for s in secrets}
    written = [path for s in secrets
               if _put(conn, cfg, s.name, path := remote_credential_path(s), values[s.name],
                       encrypt_as=s.name if s.encrypted else None)]
    if cfg.readiness == "notify":  # the supervisor exports them from $CREDENTIALS_DIRECTORY
        conn.run(f"rm -f -- {shlex.quote(env)}")
    else:
        text = environment_file_text({s.name: value_text(cfg.path, s.name, values[s.name]) for s in secrets})
        if _put(conn, cfg, None, env, text.encode(), private_dir=True):
            written.append(env)
    return written
