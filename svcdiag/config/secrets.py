"""[secrets]: where a service's secret values live, never the values themselves.

A config names each secret's environment variable and where systemd loads it from:

    [secrets]
    HF_TOKEN = "/etc/credstore/hf_token"     # a file, 0600 (or 0400), holding the value
    OPENAI_API_KEY = "credstore:openai"     # /etc/credstore/, /run/credstore/, /usr/lib/credstore/
                                            # (and the .encrypted ones: systemd-creds blobs)

The unit gets `LoadCredential=` (`LoadCredentialEncrypted=` for a systemd-creds blob), never
the value; svcdiag reads a value only to write journal mode's EnvironmentFile (root, 0600) or,
in the notify-mode supervisor, to export it to SGLang. docs/security.md.
"""

from __future__ import annotations

import base64
import binascii
import os
import re
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from svcdiag.errors import ConfigError, SvcdiagError

CREDSTORE_PREFIX = "credstore:"
CREDSTORE_DIRS = ("/etc/credstore", "/run/credstore", "/usr/lib/credstore")
CREDSTORE_ENCRYPTED_DIRS = ("/etc/credstore.encrypted", "/run/credstore.encrypted", "/usr/lib/credstore.encrypted")
#: A credential name systemd takes (a file name: no '/', not '.' or '..').
CRED_NAME_RE = re.compile(r"^[A-Za-z0-9_.\-]{1,255}$")
ENV_KEY_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
#: The first 16 bytes of a systemd-creds blob (src/shared/creds-util.h: the sealing key's kind).
CREDS_MAGIC = tuple(bytes.fromhex(h) for h in (
    "5a1c6a86df9d4096b1d5a65e0862f19a",  # host key
    "55b9ed1d38594d43a8319d2ebb332ac6",  # host key, scoped
    "0c7cc07b117645919c4b0bea08bc20fe",  # TPM2
    "faf7eb9341e3412ca1a436f95a29362f",  # TPM2 with public key
    "93a894094874449090caf2fc93cab553",  # host key + TPM2
    "ef4ac13679a9480ea7db68897f9f165d",  # host key + TPM2, scoped
    "af4950a849134eb1a73846304ff30c05",  # host key + TPM2 with public key
    "adbc4ca3efb64201ba881b6f2e4095ea",  # the same, scoped
    "058469daf6f54324800549da0f8ea2fb",  # null key (no TPM2)
))
SECRETS_DIR = Path("/etc/svcdiag/secrets")
#: Largest secret accepted (systemd's own credential limit is 1 MiB)
MAX_SECRET_BYTES = 1 << 20


def secrets_dir() -> Path:
    """Where journal mode's EnvironmentFiles go ($SVCDIAG_SECRETS_DIR for tests)."""
    return Path(os.environ.get("SVCDIAG_SECRETS_DIR") or SECRETS_DIR)


def env_file(name: str) -> Path:
    return secrets_dir() / f"{name}.env"


def check_secrets_table(path: Path, table: Any) -> None:
    """Per-file checks of [secrets]: names are environment variables, values say where."""
    if not isinstance(table, dict):
        raise ConfigError(path, "secrets", "must be a table of NAME = \"/path\" or \"credstore:NAME\"")
    for key, ref in table.items():
        field = f"secrets.{key}"
        if not ENV_KEY_RE.match(key):
            raise ConfigError(path, field, "is not a valid environment variable name")
        if not isinstance(ref, str):
            raise ConfigError(path, field, "must be a file path or \"credstore:NAME\" (the value itself never goes in a config)")
        if _CONTROL.search(ref):
            raise ConfigError(path, field, "contains a control character")
        if ref.startswith(CREDSTORE_PREFIX):
            if not CRED_NAME_RE.match(ref[len(CREDSTORE_PREFIX):]) or ref[len(CREDSTORE_PREFIX):] in (".", ".."):
                raise ConfigError(path, field, f"{ref!r}: a credstore name is letters, digits, '_', '.', '-'")
        elif not ref.startswith("/"):
            raise ConfigError(path, field, f"must be an absolute path or \"credstore:NAME\", got {ref!r}; "
                              "the value itself never goes in a config (docs/security.md)")


@dataclass(frozen=True)
class Secret:
    """One [secrets] entry, resolved: env `name`, the credential's `source` as the unit says it
    (an absolute path, or a credstore name), the file found (None: not found or not readable),
    and whether it is a systemd-creds blob."""

    name: str
    ref: str
    source: str
    file: Path | None
    encrypted: bool

    @property
    def directive(self) -> str:
        return "LoadCredentialEncrypted" if self.encrypted else "LoadCredential"


def is_creds_blob(head: bytes) -> bool:
    """Whether the start of a file is a systemd-creds blob (Base64 text, or the raw bytes)."""
    if head[:16] in CREDS_MAGIC:
        return True
    text = b"".join(head[:64].split())[:32]
    try:
        raw = base64.b64decode(text[: len(text) // 4 * 4], validate=True)
    except (binascii.Error, ValueError):
        return False
    return raw[:16] in CREDS_MAGIC


def _head(path: Path) -> bytes | None:
    try:
        with open(path, "rb") as f:
            return f.read(96)
    except OSError:
        return None


def resolve(cfg_path: Path, name: str, ref: str) -> Secret:
    """Where `ref` points, without judging it (render calls this as any user): a credstore
    name is looked up in the encrypted stores first, then the plain ones."""
    if ref.startswith(CREDSTORE_PREFIX):
        cred = ref[len(CREDSTORE_PREFIX):]
        for d in CREDSTORE_ENCRYPTED_DIRS:
            if _exists(Path(d) / cred):
                return Secret(name, ref, cred, Path(d) / cred, True)
        for d in CREDSTORE_DIRS:
            if _exists(Path(d) / cred):
                return Secret(name, ref, cred, Path(d) / cred, False)
        return Secret(name, ref, cred, None, False)
    p = Path(ref)
    head = _head(p)
    encrypted = is_creds_blob(head) if head is not None else p.suffix == ".cred"
    return Secret(name, ref, ref, p if _exists(p) else None, encrypted)


def _exists(p: Path) -> bool:
    try:
        return p.exists()
    except OSError:
        return False


def resolve_all(cfg: Any) -> list[Secret]:
    return [resolve(cfg.path, k, ref) for k, ref in cfg.secrets]


def check_files(cfg: Any) -> list[Secret]:
    """Each secret's file exists, is a regular file, and only its owner may read it: else
    ConfigError (exit 2) naming the config field and the file. Never reads a value."""
    out = []
    for s in resolve_all(cfg):
        field = f"secrets.{s.name}"
        if s.file is None:
            where = (f"no {s.source} in {', '.join(CREDSTORE_ENCRYPTED_DIRS + CREDSTORE_DIRS)}"
                     if s.ref.startswith(CREDSTORE_PREFIX) else f"{s.ref}: no such file")
            raise ConfigError(cfg.path, field, f"{where} (or not visible to this user; run as root)")
        try:
            st = s.file.stat()
        except PermissionError:
            raise ConfigError(cfg.path, field, f"{s.file}: permission denied; run as root") from None
        except OSError as e:
            raise ConfigError(cfg.path, field, f"{s.file}: {e.strerror}") from None
        if not stat.S_ISREG(st.st_mode):
            raise ConfigError(cfg.path, field, f"{s.file} is not a regular file")
        if st.st_mode & 0o077:
            raise ConfigError(cfg.path, field, f"{s.file} is group/world-accessible (mode {stat.S_IMODE(st.st_mode):04o}): "
                              f"chmod 600 {s.file}")
        if st.st_size > MAX_SECRET_BYTES:
            raise ConfigError(cfg.path, field, f"{s.file} is larger than 1 MiB")
        out.append(s)
    return out


def value_text(cfg_path: object, name: str, data: bytes) -> str:
    """A secret file's bytes as an environment value: UTF-8, one trailing newline dropped, and
    no control character but tab and newline (systemd drops such an assignment silently)."""
    if data.endswith(b"\r\n"):
        data = data[:-2]
    elif data.endswith(b"\n"):
        data = data[:-1]
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise ConfigError(cfg_path, f"secrets.{name}", "the secret is not UTF-8 text, so it cannot be an "
                          "environment variable (read it from $CREDENTIALS_DIRECTORY instead)") from None
    if re.search(r"[\x00-\x08\x0b-\x1f\x7f]", text):
        raise ConfigError(cfg_path, f"secrets.{name}", "the secret holds a control character, so it cannot be "
                          "an environment variable (read it from $CREDENTIALS_DIRECTORY instead)")
    return text


def environment_file_text(values: dict[str, str]) -> str:
    """systemd's EnvironmentFile= syntax: each value in double quotes, `\\ " ` $` escaped,
    newlines kept inside the quotes (systemd.exec(5), parse_env_file)."""
    lines = ["# Written by svcdiag from [secrets]: root only, 0600. Do not edit; `svcdiag install` rewrites it."]
    for k, v in sorted(values.items()):
        esc = re.sub(r'(["\\`$])', r"\\\1", v)
        lines.append(f'{k}="{esc}"')
    return "\n".join(lines) + "\n"


def read_error(cfg_path: object, name: str, file: object, e: OSError) -> SvcdiagError:
    why = "permission denied; run as root" if isinstance(e, PermissionError) else (e.strerror or str(e))
    return ConfigError(cfg_path, f"secrets.{name}", f"cannot read {file}: {why}")
