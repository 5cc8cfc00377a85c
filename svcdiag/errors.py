"""The one exception type the CLI turns into a one-line message and exit code 2."""

from __future__ import annotations


class SvcdiagError(Exception):
    """Bad input or a missing precondition: reported in one line, never a traceback."""

    exit_code = 2


class ConfigError(SvcdiagError):
    """A config file is wrong; the message names the file and the field."""

    def __init__(self, path: object, field: str | None, message: str):
        self.path = one_line(str(path))
        self.field = one_line(field) if field is not None else None
        self.message = one_line(message)
        where = f"{self.path}: {self.field}" if self.field else self.path
        super().__init__(f"{where}: {self.message}")


def one_line(text: str) -> str:
    """`text` with each character that is not printable (a newline in a TOML key, a control byte)
    escaped as Python would write it: an error names what it names, and stays one line."""
    if text.isprintable():
        return text
    return "".join(ch if ch.isprintable() else repr(ch)[1:-1] for ch in text)


class AccessDenied(SvcdiagError):
    """systemd (polkit) refused this user a unit operation: exit 1, one line."""

    exit_code = 1
    MESSAGE = "Access denied by systemd: run as root or install the polkit rule in docs/polkit.md"

    def __init__(self, what: str = "") -> None:
        super().__init__(self.MESSAGE + (f" ({what})" if what else ""))
