"""Replay's fast path: which lines the grammar might act on, as one pattern over a chunk of bytes, derived
from the grammar's dispatch keys (a message's first six characters) and the level prefixes it reads through.
A line the pattern does not match is quiet: it only counts and moves the clock (LineParser.skip)."""

from __future__ import annotations

import re
from collections.abc import Callable, Collection, Iterable

#: a logging level before the message (`INFO:     ` uvicorn's, `[WARNING] `, `ERROR - `, basicConfig's `INFO:name:`):
#: another formatter than SGLang's own, the line it wraps read as SGLang's
LEVEL_RE = re.compile(r"\[?(?:DEBUG|INFO|WARNING|WARN|ERROR|CRITICAL|FATAL)(?:\]|:[\w.]*:|:| -| \||(?= ))[ \t]*")
LEVEL_HEADS = frozenset("[DIWECF")


def _trie(words: list[bytes]) -> bytes:
    """An alternation of literals, grouped by first byte (re tries the branches in turn)."""
    groups: dict[bytes, list[bytes]] = {}
    for w in sorted(set(words)):
        groups.setdefault(w[:1], []).append(w[1:])
    parts = []
    for head, rest in groups.items():
        if len(rest) == 1 or not all(rest):
            parts.append(b"|".join(re.escape(head + r) for r in rest))
        else:
            parts.append(re.escape(head) + b"(?:" + _trie(rest) + b")")
    return b"|".join(parts)


def _unique_head(word: str, keys: Iterable[str]) -> str:
    """The shortest head of `word` that no key starts with: a message starting with it is none of them."""
    for n in range(1, len(word) + 1):
        if not any(k.startswith(word[:n]) or word[:n].startswith(k) for k in keys):
            return word[:n]
    return word


_COMPILED: dict[tuple[str | bool, ...], re.Pattern[bytes]] = {}


def interesting_re(keys: Collection[str], ascii_only: bool = False) -> re.Pattern[bytes]:
    """A pattern over a chunk of bytes (each line preceded by a newline) whose matches are the
    newlines before every line this parser might act on, and only a superset of those.

    Any line it does not match is "quiet" for this parser when no traceback is open
    (`quiet_message`): it only counts in `sglang_lines` and moves the clock, which `skip` does
    for a whole run. Lines holding `Traceback (most recent call last):` are not excluded here:
    the caller looks for that string per chunk.
    """
    return _compiled(("plain", ascii_only), keys, lambda: rb"\n(?!" + quiet_message(keys, ascii_only) + rb")")

def interesting_message_re(keys: Collection[str], fmt: str, ascii_only: bool = False) -> re.Pattern[bytes]:
    """The journal formats' `interesting_re`: matches every MESSAGE field of a chunk of `-o json`
    lines (`fmt` "json") or `-o export` entries ("export": at its `M`) whose value is not a quiet message,
    or is not a plain string (JSON: null, an array of bytes). A record whose MESSAGE it does not
    match is quiet, given what the caller checks per chunk: in JSON no `\\u`, `\\n` or `\\r`
    escape, which could spell a key, a newline or a colour code (any other escape in the first
    bytes keeps a message from looking quiet); in export no binary field."""
    if fmt == "json":
        return _compiled(("json", ascii_only), keys, lambda: rb'"MESSAGE"\s*:\s*+(?!"' + UNWRAPPED
                              + quiet_message(keys, ascii_only, escaped=True) + rb")")
    # `MESSAGE=` first, its newline looked behind: re's search for a literal head steps on each byte equal to its
    # first, and `M` is ~4 times rarer than a newline in an entry (~10 % less CPU for the export path's scan)
    return _compiled(("export", ascii_only), keys,
                     lambda: rb"MESSAGE=(?<=\nMESSAGE=)(?!" + UNWRAPPED + quiet_message(keys, ascii_only) + rb")")

#: a journal message the reader unwraps (systemd.journal_formats.unwrap) is not quiet, whatever follows: the
#: two wrapper prefixes that could pass for SGLang's dated one, Jenkins' `[2025-11-06T02:08:14.810Z] ` and a
#: compose service's `[name] | `
UNWRAPPED = rb"(?!\[\d{4}-\d\d-\d\dT|\[[\w.-]+\]\s*\|)"

def quiet_message(keys: Collection[str], ascii_only: bool, escaped: bool = False) -> bytes:
    """The source of a pattern that matches at a line's first byte when the line is quiet: a
    prefix as `feed_line` tells one and a message no handler takes (`Decode batch.`, `Prefill
    batch.`, a warning), or an unprefixed uvicorn access line (`INFO:     127.0.0.1:… "POST …"
    200 OK`) with no `[20` after its head (a line of SGLang's glued after it is read).

    The prefix is `[2`, then the time, then `] `, or `.`/a space, the ranks and `] `. In a chunk
    the caller knows is ASCII (`ascii_only`) the time is any 18 characters, as `feed_line` takes
    it (`parse_ts` says whether it is one): a tight loop in re, where checking each digit costs a
    third of the scan. Otherwise its digits are spelled out, so that its 20 bytes are 20
    characters. `escaped`: inside a JSON string, where neither `"` nor a backslash may stand in
    the prefix or open the message (an escape would move the characters against the bytes)."""
    other = rb'\n"\\' if escaped else rb"\n"
    stamp = rb"[^" + other + rb"]{18}" if ascii_only else rb"\d{3}-\d\d-\d\d \d\d:\d\d:\d\d"
    prefix = rb"\[2" + stamp + rb"(?:\] |[. ][^\]" + other + rb"]*\] )"
    if escaped:
        assert not any(set(k) & set('"\\/') for k in keys), "a key JSON may escape"
    # a level prefix (LEVEL_RE) wraps a line of its own unless an access line (`INFO:     127.0.0.1:… "GET …"`)
    alt = _trie([k.encode() for k in keys if k != "INFO: "]) + rb"|" + LEVEL_RE.pattern.encode() \
        + rb"(?![ \t]*\d)" + (rb"|\\" if escaped else b"")
    # the commonest quiet messages first, as far as tells them from every key: most lines of
    # a serving log are one of these (0.5.x writes `Prefill batch,`), and each literal byte is one step of re's
    common = [_unique_head(w, keys) for w in ("Decode batch. ", "Prefill batch. ", "Prefill batch, ")]
    quiet = rb"(?:" + b"|".join(re.escape(w.encode()) for w in common) + rb"|(?!" + alt + rb"))"
    # an access line is quiet unless SGLang's line is glued after it (`[20…`: the reference reads that one, _glued_prefix)
    return rb"(?:" + prefix + quiet + rb"|INFO: +\d(?![^\n]*\[20))"

def _compiled(kind: tuple[str, bool], keys: Collection[str], source: Callable[[], bytes]) -> re.Pattern[bytes]:
    """One compiled pattern per kind and set of handlers, for the life of the process."""
    key = (*kind, *sorted(keys))
    pat = _COMPILED.get(key)
    if pat is None:
        pat = _COMPILED[key] = re.compile(source())
    return pat
