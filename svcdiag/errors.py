"""The one exception type the CLI turns into a one-line message and exit code 2."""

from __future__ import annotations


class SvcdiagError(Exception):
    """Bad input or a missing precondition: reported in one line, never a traceback."""

    exit_code = 2


class ConfigError(SvcdiagError):
    """A config file is wrong; the message names the file and the field."""

    def __init__(self, path: object, field: str | None, message: str):
        self.path = str(path)
        self.field = field
        self.message = message
        where = f"{self.path}: {field}" if field else self.path
        super().__init__(f"{where}: {message}")


class AccessDenied(SvcdiagError):
    """systemd (polkit) refused this user a unit operation: exit 1, one line."""

    exit_code = 1
    MESSAGE = "Access denied by systemd: run as root or install the polkit rule in docs/polkit.md"

    def __init__(self, what: str = "") -> None:
        super().__init__(self.MESSAGE + (f" ({what})" if what else ""))
