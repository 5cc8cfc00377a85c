"""The registry's long text, kept out of the rows: each family's .toml beside its module (memory.toml for memory.py)
holds a cause's `evidence` (docs/replay.md's table of causes) and a row's `explain` (the diagnosis's sentences,
templates over what the row captured and the verdict), by `[cause]` and `[cause.sub-case]`; where a function of
judge/diagnosis.py chooses what to say from the verdict's figures or the config, the row's `[….say]` table holds
the sentences it chooses among, by name. Read once, when a diagnosis or the docs first ask, so importing the
registry reads no file."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from svcdiag.sglang.failures._model import FailureClass


@dataclass(frozen=True, slots=True)
class Prose:
    """A cause's or sub-case's words, from its family's .toml: evidence, explanation, named sentences."""

    evidence: str = ""  # a cause's: what its words look like, markdown
    explain: tuple[str, ...] = ()  # the diagnosis's sentences, `{…}` filled from the row's words
    say: Mapping[str, tuple[str, ...]] = field(default_factory=dict)  # named sentences a diagnosis function picks


def read(path: Path, rows: Iterable[FailureClass]) -> dict[tuple[str, str], Prose]:
    """A family's prose by (cause, detail); a table that names no row of its module, or a field it does not know,
    is refused with the file and the table named."""
    import tomllib

    rows = tuple(rows)
    keys = {(r.cause.value, r.detail) for r in rows}
    try:
        data = tomllib.loads(path.read_text())
    except tomllib.TOMLDecodeError as e:
        raise ValueError(f"{path}: {e}") from None
    out: dict[tuple[str, str], Prose] = {}
    for cause, table in data.items():
        if not isinstance(table, dict):
            raise ValueError(f"{path}: {cause} is a key outside any table: a row's words go under [cause] or "
                             "[cause.sub-case]")
        subs = {k: v for k, v in table.items() if isinstance(v, dict) and k != "say"}
        cause_says = {k: tuple(v) for k, v in table.get("say", {}).items()}
        out[(cause, "")] = _prose(path, (cause, ""), keys, {k: v for k, v in table.items() if k not in subs}, {})
        out.update(((cause, d), _prose(path, (cause, d), keys, t, cause_says)) for d, t in subs.items())
    return {k: p for k, p in out.items() if p != Prose()}


def _prose(path: Path, key: tuple[str, str], keys: set[tuple[str, str]], table: dict,
           cause_says: Mapping[str, tuple[str, ...]]) -> Prose:
    name = ".".join(k for k in key if k)
    if key not in keys:
        raise ValueError(f"{path}: [{name}] is no row of {path.with_suffix('.py').name}")
    if unknown := set(table) - ({"explain", "say"} if key[1] else {"evidence", "explain", "say"}):
        raise ValueError(f"{path}: [{name}] has {', '.join(sorted(unknown))}: a cause has evidence, explain and say, "
                         "a sub-case explain and say")
    say = {k: tuple(v) for k, v in table.get("say", {}).items()}
    return Prose(evidence=table.get("evidence", ""), explain=_explain(path, name, table.get("explain", ()),
                                                                      {**cause_says, **say}), say=say)


def _explain(path: Path, name: str, items: list[Any], says: Mapping[str, tuple[str, ...]]) -> tuple[str, ...]:
    """A row's sentences: each a template, or `{say = "NAME"}` for its own or its cause's sentences of that name
    (where two rows say the same, it is written once)."""
    out: list[str] = []
    for item in items:
        if isinstance(item, dict) and set(item) == {"say"} and item["say"] in says:
            out += says[item["say"]]
        elif isinstance(item, str):
            out.append(item)
        else:
            raise ValueError(f"{path}: [{name}]'s explain has {item!r}: a sentence, or {{say = \"NAME\"}} naming one "
                             "of its own or its cause's [….say] sentences")
    return tuple(out)
