"""What each SGLang release can print at start-up, read from its wheel (scripts/sglang-message-catalogue).

A catalogue lists, per release, the start-up path's log and raise/assert messages and every
milestone line, as templates with numbered placeholders. `Message.render` fills them with
plausible sample values, so that tests can feed a line SGLang really prints (not one copied
from a pasted log) to the grammar: every milestone must read as that milestone, every fatal
message must be classed or named in generic.json with a reason (svcdiag.judge.catalogue).
"""

from __future__ import annotations

import ast
import json
import re
import string
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    from svcdiag.sglang.failures import FailureClass

CATALOGUE_DIR = Path(__file__).with_name("message_catalogue")
GENERIC_FILE = CATALOGUE_DIR / "generic.json"
_RELEASE_RE = re.compile(r"^sglang-(.+)\.json$")


@dataclass(frozen=True, slots=True)
class Message:
    """One message SGLang's source can print, where, and whether at start-up."""

    template: str  # str.format text with numbered placeholders ({0}, {1:.2f}, {2!r}); literal braces doubled
    args: tuple[str, ...]  # each placeholder's expression as written in SGLang's source
    kind: str  # info | warning | error | critical | exception | raise | assert
    file: str  # path under sglang/
    fn: str  # the function it is in
    startup: bool
    fatal: bool
    exc: str | None = None  # the exception class, for a raise
    milestone: str | None = None

    @property
    def name(self) -> str:
        """How generic.json names it: where it is, then its text."""
        return f"{self.file}:{self.fn}: {self.template}"

    @property
    def specs(self) -> list[str]:
        """Each placeholder's format spec (`.2f`, `d`, or empty), by its number."""
        return _specs(self.template)

    def render(self, values: dict[int, object] | None = None) -> str:
        """The message as SGLang would print it, each placeholder filled with a sample value (or
        `values[i]` for placeholder i)."""
        given = values or {}
        filled = [given[i] if i in given else _sample(expr, spec)
                  for i, (expr, spec) in enumerate(zip(self.args, self.specs, strict=False))]
        return self.template.format(*filled)


@dataclass(frozen=True, slots=True)
class Catalogue:
    """Every message of a release, read from its wheel."""

    version: str
    source: str  # the wheel it was read from
    counts: dict[str, int]
    messages: tuple[Message, ...]

    def startup_fatal(self) -> list[Message]:
        return [m for m in self.messages if m.startup and m.fatal]

    def milestones(self) -> list[Message]:
        return [m for m in self.messages if m.milestone]


def releases(where: Path = CATALOGUE_DIR) -> list[str]:
    """The releases with a catalogue, oldest first."""
    found = [m.group(1) for p in where.glob("sglang-*.json") if (m := _RELEASE_RE.match(p.name))]
    return sorted(found, key=_vkey)


def _vkey(v: str) -> tuple[int, ...]:
    return tuple(int(x) for x in re.findall(r"\d+", v))


def load(version: str, where: Path = CATALOGUE_DIR) -> Catalogue:
    path = where / f"sglang-{version}.json"
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        raise ValueError(f"{path}: cannot read the message catalogue: {e}") from e
    messages = tuple(Message(template=m["t"], args=tuple(m.get("a", ())), kind=m["k"], file=file, fn=m["fn"],
                             startup=bool(m.get("s")), fatal=bool(m.get("f")), exc=m.get("x"), milestone=m.get("m"))
                     for file, rows in raw["files"].items() for m in rows)
    return Catalogue(version=raw["version"], source=raw["source"], counts=raw["counts"], messages=messages)


@cache
def generic(where: Path = GENERIC_FILE) -> dict[str, str]:
    """The start-up fatals deliberately left to the generic cause: their name -> why."""
    raw = json.loads(where.read_text(encoding="utf-8"))
    reasons = raw["reasons"]
    return {m["name"]: reasons[m["why"]] for m in raw["messages"]}


# ------------------------------------------------------------------ sample values

def _specs(template: str) -> list[str]:
    """Each placeholder's format spec, in the order of its number."""
    specs: dict[int, str] = {}
    for _lit, fld, spec, _conv in string.Formatter().parse(template):
        if fld is not None and fld.isdigit():
            specs[int(fld)] = spec or ""
    return [specs.get(i, "") for i in range(max(specs, default=-1) + 1)]


class _Shown(str):
    """A sample whose repr is its text: `f"{server_args=}"` prints the dataclass's repr, not a quoted string."""

    __slots__ = ()

    def __repr__(self) -> str:
        return str(self)


#: (pattern on the expression, the value SGLang would print there), first match wins
_SAMPLES: tuple[tuple[re.Pattern[str], object], ...] = tuple((re.compile(p), v) for p, v in (
    (r"server_args_for_logging|resolved_dict", "{'model_path': '/models/Llama-3.1-8B-Instruct', 'tp_size': 1}"),  # 0.5.15+: a dict
    (r"^server_args$", _Shown("ServerArgs(model_path='/models/Llama-3.1-8B-Instruct', tp_size=1)")),
    (r"capture_name", "target decode"),
    (r"graph_backend", "CUDA graph"),
    (r"cache_name", "KV Cache"),
    (r"dtype", "torch.bfloat16"),
    (r"__name__|__class__", "LlamaForCausalLM"),
    (r"quant", ""),
    (r"(?:^|\W)(?:capture_)?bs$|capture_num_tokens$", "[1, 2, 4, 8]"),
    (r"backend", "flashinfer"),
    (r"path|dir\b|file", "/models/Llama-3.1-8B-Instruct"),
    (r"timings?\b|cuda_graph", "'decode': 12.5"),
    (r"fraction|ratio", 0.88),
    (r"mem|size_GB|_gb\b|GB|elapsed|time", 12.5),
    (r"tokens|size|num|len|count|max_|rank|step|port|\bid\b", 4096),
))


def _sample(expr: str, spec: str) -> object:
    """A value for one placeholder: what its format spec takes, else what its expression names."""
    try:
        node = ast.parse(expr, mode="eval").body
    except SyntaxError:
        node = None
    if isinstance(node, ast.IfExp):  # `'VA upper bound' if post_capture else 'is allocated'`: the plain case
        node = node.orelse
    if isinstance(node, ast.Constant):
        return node.value if not spec or isinstance(node.value, int | float) else 0
    if spec.endswith(("d", "x", "X", "o")):
        return 4096
    if spec.endswith(("f", "e", "g", "%")) or spec.startswith("."):
        return 12.5
    for pat, value in _SAMPLES:
        if pat.search(expr):
            return value
    return "x"


# ------------------------------------------------------------------ release ranges of the registry's rows

RELEASES_FILE = CATALOGUE_DIR / "releases.json"


@dataclass(frozen=True, slots=True)
class ReleaseRange:
    """The catalogued releases that print a row's words: `first`..`last`, and the nearest catalogued releases
    outside that do not (None: none catalogued there). Between a release that prints them and one that does not,
    no catalogue says, so only a release at or past `absent_before`/`absent_after` cannot have printed them."""

    first: str
    last: str
    absent_before: str | None = None
    absent_after: str | None = None

    def excludes(self, version: str) -> bool:
        """Whether a log of `version` (a release, or a range such as `>= 0.5.14`, `0.4.6 – 0.5.11`) cannot
        have printed these words: every release it may be lies where a catalogue says they are absent."""
        lo, hi = _bounds(version)
        if lo is None and hi is None:
            return False
        below = self.absent_before is not None and hi is not None and _vkey(hi) <= _vkey(self.absent_before)
        above = self.absent_after is not None and lo is not None and _vkey(lo) >= _vkey(self.absent_after)
        return below or above

    def describe(self) -> str:
        return f"{self.first} – {self.last}" if self.first != self.last else self.first


def _bounds(version: str) -> tuple[str | None, str | None]:
    """(lowest, highest) release a version text can be; None where it is open."""
    found = re.findall(r"\d+\.\d+(?:\.\d+)?(?:\.post\d+)?", version)
    if not found:
        return None, None
    if version.strip().startswith(">"):
        return found[0], None
    if version.strip().startswith("<"):
        return None, found[0]
    return found[0], found[-1]


def _alternatives(pattern: str) -> list[str]:
    """A pattern's top-level alternatives (split on `|` outside groups, classes and escapes)."""
    out, depth, cls, cur, i = [], 0, False, [], 0
    while i < len(pattern):
        ch = pattern[i]
        if ch == "\\":
            cur.append(pattern[i:i + 2])
            i += 2
            continue
        if cls:
            cls = ch != "]"
        elif ch == "[":
            cls = True
        elif ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        elif ch == "|" and depth == 0:
            out.append("".join(cur))
            cur = []
            i += 1
            continue
        cur.append(ch)
        i += 1
    return [*out, "".join(cur)]


def rendered(messages: Sequence[Message]) -> list[str]:
    """The messages as SGLang prints them (sample values in the placeholders); one that cannot be filled is left out."""
    out = []
    for m in messages:
        try:
            out.append(m.render())
        except (ValueError, IndexError, KeyError, TypeError):
            continue
    return out


def _row_patterns(row: FailureClass) -> list[re.Pattern[str]]:
    """A row's words, one pattern per top-level alternative: a sub-case's `said` (its cause's `line` for the
    cause's own row) and its lines of their own (`alone`)."""
    pats = [p for p in (row.said if row.detail else row.line, *(o.pattern for o in row.alone)) if p is not None]
    return [re.compile(a, p.flags) for p in pats for a in _alternatives(p.pattern) if a]


def release_ranges_from(texts: Mapping[str, Sequence[str]]) -> dict[str, ReleaseRange]:
    """Each registry row whose words are SGLang's own (every alternative of its patterns is in some release's
    messages), keyed `cause/detail`: the releases of `texts` (release -> its messages, rendered) that print them.
    A row with any alternative no release prints (torch's, a library's words) is left out: its words are not all
    SGLang's, and no range can be told from SGLang's wheels."""
    from svcdiag.sglang.failures import FAILURES  # (here: the registry imports nothing of this module)

    versions = sorted(texts, key=_vkey)
    out: dict[str, ReleaseRange] = {}
    for row in FAILURES:
        alts = _row_patterns(row)
        where_found = [{v for v in versions if any(a.search(t) for t in texts[v])} for a in alts]
        if not alts or not all(where_found):
            continue
        present = sorted(set().union(*where_found), key=_vkey)
        first, last = versions.index(present[0]), versions.index(present[-1])
        out[f"{row.cause}/{row.detail}"] = ReleaseRange(
            present[0], present[-1], versions[first - 1] if first > 0 else None,
            versions[last + 1] if last + 1 < len(versions) else None)
    return out


def release_range_disagreements(ranges: Mapping[str, ReleaseRange], where: Path = CATALOGUE_DIR) -> list[str]:
    """Where stored ranges (read from every message of each wheel) contradict the catalogues (each release's
    start-up fatals): a range for no row, a catalogued release that prints a row's words outside its range, an
    absent_before/absent_after that is no catalogued release or one that prints them."""
    from svcdiag.sglang.failures import BY_KEY

    versions = releases(where)
    texts = {v: rendered(load(v, where).startup_fatal()) for v in versions}
    wrong: list[str] = []
    for key, rng in ranges.items():
        cause, _, detail = key.partition("/")
        row = BY_KEY.get((cause, detail))
        if row is None:
            wrong.append(f"{key}: no such row")
            continue
        alts = _row_patterns(row)
        printed = [v for v in versions if any(a.search(t) for a in alts for t in texts[v])]
        wrong += [f"{key}: {v}'s catalogue prints its words, outside {rng.describe()}" for v in printed
                  if not _vkey(rng.first) <= _vkey(v) <= _vkey(rng.last)]
        for edge in (rng.absent_before, rng.absent_after):
            if edge is not None and (edge not in versions or edge in printed):
                wrong.append(f"{key}: {edge} is no catalogued release without its words")
    return wrong


def dump_release_ranges(ranges: dict[str, ReleaseRange]) -> str:
    """releases.json's text: one row a line, keyed `cause/detail`, sorted."""
    rows = [json.dumps(k) + ": " + json.dumps({f: getattr(r, f) for f in ReleaseRange.__slots__}) for k, r in
            sorted(ranges.items())]
    return "{\n" + ",\n".join(rows) + "\n}\n"


@cache
def release_ranges(where: Path = RELEASES_FILE) -> dict[str, ReleaseRange]:
    """The rows' release ranges as scripts/sglang-message-catalogue --releases wrote them (none when absent)."""
    try:
        raw = json.loads(where.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {}
    except (OSError, ValueError) as e:
        raise ValueError(f"{where}: cannot read the rows' release ranges: {e}") from e
    return {k: ReleaseRange(**v) for k, v in raw.items()}


def row_releases(cause: str, detail: str = "") -> ReleaseRange | None:
    """The catalogued releases whose SGLang prints a row's words (the sub-case's, else its cause's)."""
    table = release_ranges()
    return table.get(f"{cause}/{detail}") or (table.get(f"{cause}/") if detail else None)
