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

CATALOGUE_DIR = Path(__file__).with_name("message_catalogue")
GENERIC_FILE = CATALOGUE_DIR / "generic.json"
_RELEASE_RE = re.compile(r"^sglang-(.+)\.json$")


@dataclass(frozen=True, slots=True)
class Message:
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
