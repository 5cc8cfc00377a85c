"""Which `launch_server` flags each SGLang release accepts, and a check of an argv against them.

SGLang renames, deprecates and removes flags between releases (0.5.2x dropped
`--cuda-graph-max-bs` for `--cuda-graph-max-bs-decode`/`-prefill`, deprecated
`--enable-dp-attention` for `--attn-dp-size N`). A unit that passes a removed flag dies at
argparse (exit 2) before it logs anything useful, so svcdiag checks the argv it renders
against the release that will run it.

The tables are JSON files bundled beside this module (`flag_tables/sglang-X.json`), read
statically from the released wheels by `scripts/sglang-flag-tables`; `renames.json` there
is hand-maintained. Pure: stdlib only, no I/O but reading those files.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import cache, lru_cache
from pathlib import Path
from types import MappingProxyType
from typing import Any

from svcdiag.sglang import lazy_re

DATA_DIR = Path(__file__).resolve().parent / "flag_tables"

__all__ = [
    "FlagProblem", "FlagSpec", "FlagTable", "Rename", "compare_versions",
    "known_versions", "renames", "table_for", "version_key",
]


# ---------------------------------------------------------------- versions

_VERSION = lazy_re.compile(
    r"^v?(?P<release>\d+(?:\.\d+)*)"
    r"(?:[-_.]?(?P<pre>a|b|rc|alpha|beta|c)[-_.]?(?P<pre_n>\d*))?"
    r"(?:[-_.]?post[-_.]?(?P<post>\d*))?"
    r"(?:[-_.]?dev[-_.]?(?P<dev>\d*))?"
    r"(?:\+[a-z0-9.]+)?$",
    re.I,
)
_PRE_RANK = {"a": 0, "alpha": 0, "b": 1, "beta": 1, "c": 2, "rc": 2}


def version_key(version: str) -> tuple[Any, ...]:
    """A sort key in PEP 440 order for the versions SGLang publishes ("0.5.23",
    "0.4.6.post1", "0.5.0rc2", "0.5.1.dev3", "v0.5.2"): dev < rc < final < post.
    Releases are compared numerically with trailing zeros ignored ("0.5" == "0.5.0")."""
    m = _VERSION.match(version.strip())
    if not m:
        raise ValueError(f"not a version: {version!r}")
    release = [int(x) for x in m["release"].split(".")]
    while len(release) > 1 and release[-1] == 0:
        release.pop()
    pre, post, dev = m["pre"], m["post"], m["dev"]
    if pre is not None:
        pre_key = (0, _PRE_RANK[pre.lower()], int(m["pre_n"] or 0))
    elif dev is not None and post is None:
        pre_key = (-1, 0, 0)  # 1.0.dev1 sorts before 1.0a1
    else:
        pre_key = (1, 0, 0)
    post_key = int(post or 0) if post is not None else -1
    dev_key = int(dev or 0) if dev is not None else float("inf")
    return (tuple(release), pre_key, post_key, dev_key)


def compare_versions(a: str, b: str) -> int:
    """-1, 0 or 1 as version `a` is older than, the same as, or newer than `b`."""
    ka, kb = version_key(a), version_key(b)
    return (ka > kb) - (ka < kb)


# ------------------------------------------------------------------ records

@dataclass(frozen=True)
class FlagSpec:
    """One `launch_server` flag of one release, as argparse registers it."""

    name: str
    dest: str
    takes_value: bool
    nargs: str | int | None = None      # None: exactly one value (when takes_value)
    type: str | None = None             # "int", "float", "str", "human_int" or None
    aliases: tuple[str, ...] = ()
    choices: tuple[str, ...] | None = None
    deprecated: str | None = None       # "use --x" style pointer, when deprecated
    error: str | None = None            # registered, but using it stops the launch


@dataclass(frozen=True)
class Rename:
    """A flag that a release removed, and what to pass instead (renames.json)."""

    flag: str
    removed_in: str
    use: tuple[str, ...] = ()
    last_seen: str | None = None
    note: str | None = None


@dataclass(frozen=True)
class FlagProblem:
    """One thing wrong with an argv for a release. `severity` is "error" (the server
    will not start with it) or "warning" (accepted, deprecated); `replacement` names
    what to pass instead, when known; `kind` is a stable tag for programs."""

    flag: str
    severity: str
    message: str
    replacement: tuple[str, ...] = ()
    kind: str = ""


# ------------------------------------------------------------------ loading

def _table_files() -> dict[str, Path]:
    out = {}
    for p in DATA_DIR.glob("sglang-*.json"):
        out[p.name[len("sglang-"):-len(".json")]] = p
    return out


@lru_cache(maxsize=1)
def known_versions() -> tuple[str, ...]:
    """The releases with a bundled table, oldest first."""
    return tuple(sorted(_table_files(), key=version_key))


@lru_cache(maxsize=1)
def renames() -> Mapping[str, Rename]:
    """Removed flags and their replacements, keyed by the old flag."""
    path = DATA_DIR / "renames.json"
    raw = json.loads(path.read_text(encoding="utf-8")) if path.exists() else {}
    return MappingProxyType({
        flag: Rename(flag=flag, removed_in=r["removed_in"], use=tuple(r.get("use") or ()),
                     last_seen=r.get("last_seen"), note=r.get("note"))
        for flag, r in raw.items() if not flag.startswith("_")
    })


@cache
def _load(version: str) -> Mapping[str, FlagSpec]:
    raw = json.loads((DATA_DIR / f"sglang-{version}.json").read_text(encoding="utf-8"))
    specs = {}
    for name, f in raw["flags"].items():
        choices = f.get("choices")
        specs[name] = FlagSpec(
            name=name, dest=f["dest"], takes_value=f["takes_value"], nargs=f.get("nargs"),
            type=f.get("type"), aliases=tuple(f.get("aliases") or ()),
            choices=tuple(choices) if choices is not None else None,
            deprecated=f.get("deprecated"), error=f.get("error"),
        )
    return MappingProxyType(specs)


def table_for(version: str) -> FlagTable:
    """The table of `version`; else the newest bundled one at or below it, except that a
    release's own post-release stands in before an older release (0.4.6 → 0.4.6.post1, not
    0.4.0: post-releases fix bugs, not flags); above the newest bundled release the newest
    stands in, below the oldest the oldest. `FlagTable.exact` says whether it was bundled."""
    versions = known_versions()
    if not versions:
        raise LookupError(f"no SGLang flag tables in {DATA_DIR}")
    key = version_key(version)
    below = [v for v in versions if version_key(v) <= key]
    same_release = [v for v in versions if version_key(v)[:2] == key[:2]]
    if below and version_key(below[-1])[:2] == key[:2]:
        chosen = below[-1]
    elif same_release:
        chosen = same_release[0]
    else:
        chosen = below[-1] if below else versions[0]
    return FlagTable(version=chosen, requested=version,
                     exact=version_key(chosen) == key, flags=_load(chosen))


def _history(flag: str) -> tuple[str | None, str | None]:
    """(last bundled release that knows `flag`, first bundled release that does)."""
    seen = [v for v in known_versions() if _index(v).get(flag) is not None]
    return (seen[-1] if seen else None, seen[0] if seen else None)


@cache
def _index(version: str) -> Mapping[str, FlagSpec]:
    idx: dict[str, FlagSpec] = {}
    for spec in _load(version).values():
        for n in (spec.name, *spec.aliases):
            idx.setdefault(n, spec)
    return MappingProxyType(idx)


# ------------------------------------------------------------------- checking

_NEGATIVE_NUMBER = lazy_re.compile(r"^-\d+$|^-\d*\.\d+$")
_HUMAN_INT = lazy_re.compile(r"^\s*(\d+(?:\.\d+)?)(Ki|Mi|Gi|Ti|k|M|G|T)\s*$")


def _convert(type_name: str | None, value: str) -> object:
    """The value as argparse's `type=` would give it; raises ValueError when it can't."""
    if type_name == "int":
        return int(value)
    if type_name == "float":
        return float(value)
    if type_name == "human_int":
        m = _HUMAN_INT.match(value)
        if m:
            if "." in m[1] and m[2].endswith("i"):
                raise ValueError(value)
            return value
        return int(value)
    return value


def _in_choices(spec: FlagSpec, value: str, converted: object) -> bool:
    return any(c == converted or str(c) == value for c in spec.choices or ())


@dataclass(frozen=True)
class FlagTable:
    """The flags of one bundled release, standing in for the `requested` one."""

    version: str
    requested: str
    exact: bool
    flags: Mapping[str, FlagSpec] = field(repr=False, compare=False)

    @property
    def label(self) -> str:
        """How messages name the release: "sglang 0.5.23", or for a stand-in
        "sglang 0.5.24 (flags of 0.5.23)"."""
        if self.exact:
            return f"sglang {self.requested}"
        return f"sglang {self.requested} (flags of {self.version})"

    def lookup(self, flag: str) -> FlagSpec | None:
        """The flag's spec by its name or any alias (no prefix abbreviations)."""
        return _index(self.version).get(flag)

    def __contains__(self, flag: object) -> bool:
        return isinstance(flag, str) and self.lookup(flag) is not None

    def is_option(self, token: str) -> bool:
        """Whether argparse would read `token` as an option rather than a value."""
        if not token.startswith("-") or token == "-":
            return False
        if self.lookup(token.split("=", 1)[0]) is not None:
            return True
        if _NEGATIVE_NUMBER.match(token):
            return False
        return " " not in token

    def take_values(self, spec: FlagSpec | None, argv: Sequence[str], i: int) -> tuple[list[str], int]:
        """The values argparse gives a flag from argv[i:] (the words after it; `spec` None: a flag
        this release does not know, taken to want one), and the index after them."""
        if spec is not None and not spec.takes_value:
            return [], i
        nargs = None if spec is None else spec.nargs
        limit = 1 if nargs in (None, "?") else (nargs if isinstance(nargs, int) else len(argv))
        j = i
        while j < len(argv) and j - i < limit and argv[j] != "--" and not self.is_option(argv[j]):
            j += 1
        return list(argv[i:j]), j

    def _removed(self, flag: str) -> FlagProblem | None:
        """An error when renames.json says `flag` was gone by the requested release."""
        r = renames().get(flag)
        if r is None or version_key(r.removed_in) > version_key(self.requested):
            return None
        use = self._follow(r.use)
        msg = f"{flag} is not a flag of {self.label}: removed in {r.removed_in}"
        msg += f"; use {' or '.join(use)}" if use else ""
        msg += f" ({r.note})" if r.note else ""
        return FlagProblem(flag, "error", msg, use, "removed")

    def _follow(self, use: tuple[str, ...], depth: int = 0) -> tuple[str, ...]:
        """Replacements as this release spells them: a replacement that a later rename
        removed by the requested release is replaced in turn."""
        out: list[str] = []
        for u in use:
            name = re.split(r"[ =]", u, maxsplit=1)[0]
            r = renames().get(name)
            if depth < 5 and r is not None and name not in self \
                    and version_key(r.removed_in) <= version_key(self.requested) and r.use:
                out.extend(x for x in self._follow(r.use, depth + 1) if x not in out)
            elif u not in out:
                out.append(u)
        return tuple(out)

    def _unknown(self, flag: str) -> FlagProblem:
        removed = self._removed(flag)
        if removed is not None:
            return removed
        last, first = _history(flag)
        if first is not None and version_key(first) > version_key(self.version):
            later = [v for v in known_versions() if version_key(v) > version_key(self.version)]
            if not self.exact and first == later[0]:
                # added somewhere between the stand-in table and `first`: can't tell
                msg = (f"{flag} is not in the sglang {self.version} table standing in for "
                       f"{self.requested}; sglang {first} has it, so check the release itself")
                return FlagProblem(flag, "warning", msg, (), "unverified")
            msg = f"{flag} is not a flag of {self.label}: only newer releases have it (first bundled: sglang {first})"
            return FlagProblem(flag, "error", msg, (), "too-new")
        if last is not None:
            msg = f"{flag} is not a flag of {self.label}: last seen in sglang {last}, no known replacement"
            return FlagProblem(flag, "error", msg, (), "removed")
        msg = f"{flag} is not a flag of {self.label} (argparse: unrecognized arguments)"
        return FlagProblem(flag, "error", msg, (), "unknown")

    def check(self, argv: Sequence[str]) -> list[FlagProblem]:
        """Problems with a `launch_server` argument list, parsed like argparse does
        (`--flag value`, `--flag=value`, valueless store_true flags, aliases; no prefix
        abbreviations): unknown or removed flags, missing values, values outside
        `choices` or not numbers, a value given to a flag that takes none, stray
        words, and deprecated flags (warnings)."""
        problems: list[FlagProblem] = []
        argv = list(argv)
        i = 0
        while i < len(argv):
            token = argv[i]
            i += 1
            if token == "--":
                problems += [FlagProblem(stray, "error",
                                         f"{stray!r}: launch_server takes no positional arguments ({self.label})",
                                         (), "stray") for stray in argv[i:]]
                break
            if not self.is_option(token):
                problems.append(FlagProblem(token, "error",
                                            f"{token!r} is not a flag nor the value of one ({self.label})",
                                            (), "stray"))
                continue
            spec = self.lookup(token)
            flag, eq, inline = token, "", ""
            if spec is None and "=" in token:  # `--flag=value`, as argparse splits it
                flag, eq, inline = token.partition("=")
                spec = self.lookup(flag)
            if spec is None:
                problems.append(self._unknown(flag))
                while i < len(argv) and not self.is_option(argv[i]) and argv[i] != "--":
                    i += 1  # the unknown flag's value(s)
                continue

            found, i = self._check_given(flag, spec, eq, inline, argv, i)
            problems += found
        return problems

    def _check_given(self, flag: str, spec: FlagSpec, eq: str, inline: str, argv: list[str],
                     i: int) -> tuple[list[FlagProblem], int]:
        """One flag of the table as given (`eq` and `inline`: `=value` when written so): its value(s), taken from
        `argv` at `i` when not inline, then its standing in the release (removed, rejected, deprecated); the
        problems, and where the next argument starts."""
        problems: list[FlagProblem] = []
        values: list[str] = []
        if not spec.takes_value:
            if eq:
                problems.append(FlagProblem(flag, "error",
                                            f"{flag} takes no value in {self.label}, but got {inline!r}",
                                            (), "unexpected-value"))
        elif eq:
            values = [inline]
        else:
            values, i = self.take_values(spec, argv, i)
            nargs = spec.nargs
            need = 1 if nargs in (None, "+") else (nargs if isinstance(nargs, int) else 0)
            if len(values) < need:
                what = "a value" if need == 1 else f"{need} values"
                problems.append(FlagProblem(flag, "error",
                                            f"{flag} expects {what} in {self.label}, got none",
                                            (), "missing-value"))
        for v in values:
            problem = self._check_value(flag, spec, v)
            if problem is not None:
                problems.append(problem)

        removed = None if self.exact else self._removed(flag)
        if removed is not None:  # in the stand-in table, but gone by the release asked for
            problems.append(removed)
        elif spec.error:
            problems.append(FlagProblem(flag, "error",
                                        f"{flag} stops the launch in {self.label}: {spec.error}",
                                        _replacement(spec.deprecated), "rejected"))
        elif spec.deprecated:
            repl = _replacement(spec.deprecated)
            msg = f"{flag} is deprecated in {self.label} (accepted, with a warning); {spec.deprecated}"
            problems.append(FlagProblem(flag, "warning", msg, repl, "deprecated"))
        return problems, i

    def _check_value(self, flag: str, spec: FlagSpec, value: str) -> FlagProblem | None:
        try:
            converted = _convert(spec.type, value)
        except (ValueError, OverflowError):
            kinds = {"int": "an integer", "float": "a number", "human_int": "an integer (or 32k, 1Mi)"}
            kind = kinds.get(spec.type or "", f"a {spec.type}")
            return FlagProblem(flag, "error",
                               f"{flag} expects {kind} in {self.label}, got {value!r}",
                               (), "bad-type")
        if spec.choices is not None and not _in_choices(spec, value, converted):
            shown = ", ".join(str(c) for c in spec.choices[:12]) + (", ..." if len(spec.choices) > 12 else "")
            return FlagProblem(flag, "error",
                               f"{flag} {value!r} is not one of the choices of {self.label}: {shown}",
                               (), "bad-choice")
        return None


def _replacement(deprecated: str | None) -> tuple[str, ...]:
    if deprecated and deprecated.startswith("use --"):
        return (deprecated[len("use "):],)
    return ()
