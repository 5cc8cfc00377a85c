"""Configs written back as TOML (`svcdiag import`, `svcdiag new`): the few value kinds a config
holds (strings, numbers, booleans, lists of them, one level of tables), each key with an
optional comment. tomllib reads; nothing in the standard library writes."""

from __future__ import annotations

import json
import math
from typing import Any


def value(v: Any) -> str:
    """One TOML value: strings as JSON spells them (a TOML basic string takes the same escapes)."""
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        if not math.isfinite(v):
            raise ValueError(f"no TOML for {v!r}")
        return repr(v)
    if isinstance(v, str):
        return json.dumps(v, ensure_ascii=False)
    if isinstance(v, list | tuple):
        return "[" + ", ".join(value(x) for x in v) + "]"
    raise TypeError(f"no TOML for {type(v).__name__}")


def key(k: str) -> str:
    return k if k.replace("_", "").replace("-", "").isalnum() else json.dumps(k)


def dump(top: dict[str, Any], comments: dict[str, str] | None = None, header: str = "") -> str:
    """`top`'s plain keys first, then each dict value as a [table]; `comments`: "key" or
    "table.key" → a comment after its line."""
    comments = comments or {}
    lines = [f"# {ln}" if ln else "#" for ln in header.splitlines()] if header else []

    def line(name: str, v: Any, full: str) -> str:
        text = f"{key(name)} = {value(v)}"
        return f"{text}  # {comments[full]}" if full in comments else text

    lines += [line(k, v, k) for k, v in top.items() if not isinstance(v, dict)]
    for table, body in top.items():
        if isinstance(body, dict) and body:
            lines += ["", f"[{key(table)}]", *(line(k, v, f"{table}.{k}") for k, v in body.items())]
    return "\n".join(lines) + "\n"
