"""Notify mode's secrets: systemd has put each [secrets] credential in $CREDENTIALS_DIRECTORY
(LoadCredential=); the supervisor exports them into SGLang's environment, and only there."""

from __future__ import annotations

from pathlib import Path

from svcdiag.config.secrets import read_error, value_text
from svcdiag.config.service import ServiceConfig


def credentials_environment(cfg: ServiceConfig, credentials_dir: Path) -> dict[str, str]:
    """NAME → value for every secret of `cfg`, read from `credentials_dir`/NAME (the credential
    ID is the variable's name). A missing credential is an error naming it: systemd refuses to
    start a unit whose LoadCredential= source is missing, so it means the unit is stale."""
    out: dict[str, str] = {}
    for name, _ref in cfg.secrets:
        path = credentials_dir / name
        try:
            data = path.read_bytes()
        except OSError as e:
            raise read_error(cfg.path, name, path, e) from None
        out[name] = value_text(cfg.path, name, data)
    return out
