"""A hand-written unit file read as systemd reads it, for `svcdiag import`: sections, settings
(continuation lines, comments, repeated keys), ExecStart='s words by systemd.service(5)'s
quoting, and Environment= assignments. Pure: text in, values out."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from svcdiag.errors import SvcdiagError

_ESCAPES = {"a": "\a", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t", "v": "\v", "\\": "\\", '"': '"',
            "'": "'", "s": " "}


@dataclass
class UnitFile:
    """Each section's settings in order, a key set twice kept twice (Environment=, ExecStart=)."""

    path: str
    sections: dict[str, list[tuple[str, str]]] = field(default_factory=dict)

    def all(self, section: str, key: str) -> list[str]:
        return [v for k, v in self.sections.get(section, []) if k == key]

    def get(self, section: str, key: str) -> str | None:
        """The last value (systemd: a later assignment wins; an empty one resets)."""
        values = self.all(section, key)
        return values[-1] if values and values[-1] != "" else None


def parse_unit(text: str, path: str = "<unit>") -> UnitFile:
    unit = UnitFile(path)
    section: str | None = None
    pending = ""
    for raw in text.splitlines():
        line = pending + raw.strip() if pending else raw.strip()
        if line.endswith("\\"):
            pending = line[:-1] + " "
            continue
        pending = ""
        if not line or line[0] in "#;":
            continue
        if line.startswith("[") and line.endswith("]"):
            section = line[1:-1]
            unit.sections.setdefault(section, [])
            continue
        key, eq, value = line.partition("=")
        if not eq or section is None:
            raise SvcdiagError(f"{path}: not a unit file line: {raw.strip()[:120]!r}")
        unit.sections[section].append((key.strip(), value.strip()))
    if "Service" not in unit.sections:
        raise SvcdiagError(f"{path}: no [Service] section: not a service unit")
    return unit


def split_words(value: str) -> list[str]:
    """Words by systemd's rules: blanks separate, "…" and '…' quote, C escapes in and out of quotes,
    `%%` is `%` and `$$` is `$` (other specifiers and $VARS are left as written: the caller warns)."""
    words: list[str] = []
    i, n = 0, len(value)
    while i < n:
        while i < n and value[i] in " \t":
            i += 1
        if i >= n:
            break
        word, quoted = [], False
        while i < n and (quoted or value[i] not in " \t"):
            ch = value[i]
            if ch in "\"'" and (not quoted or quoted == ch):
                quoted = False if quoted else ch  # type: ignore[assignment]
                i += 1
            elif ch == "\\" and i + 1 < n:
                word.append(_ESCAPES.get(value[i + 1], value[i + 1]))
                i += 2
            else:
                word.append(ch)
                i += 1
        if quoted:
            raise SvcdiagError(f"unterminated quote in {value[:120]!r}")
        words.append("".join(word).replace("%%", "%").replace("$$", "$"))
    return words


def exec_words(value: str) -> list[str]:
    """ExecStart='s command: its words, without systemd's prefixes (`-`, `@`, `:`, `+`, `!`)."""
    words = split_words(value)
    if words:
        words[0] = re.sub(r"^[-@:+!]+", "", words[0])
    return words


def environment(values: list[str]) -> dict[str, str]:
    """Environment= lines (each may hold several quoted assignments), later ones winning."""
    out: dict[str, str] = {}
    for value in values:
        if value == "":
            out.clear()
            continue
        for word in split_words(value):
            k, eq, v = word.partition("=")
            if eq:
                out[k] = v
    return out
