"""A strict reading of systemd.service(5)'s ExecStart= rules, used where no real systemd
is at hand (the rig's test checks the same property against systemd itself)."""

from __future__ import annotations

ESCAPES = {"a": "\a", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t", "v": "\v", "\\": "\\",
           '"': '"', "'": "'", "s": " "}


def _unspec(word: str) -> str:
    out, i = [], 0
    while i < len(word):
        c = word[i]
        if c == "%":
            assert i + 1 < len(word) and word[i + 1] == "%", f"bare specifier in {word!r}"
            out.append("%")
            i += 2
        elif c == "$":
            assert i + 1 < len(word) and word[i + 1] == "$", f"variable expansion in {word!r}"
            out.append("$")
            i += 2
        else:
            out.append(c)
            i += 1
    return "".join(out)


def split_exec(line: str) -> list[str]:
    """Words of an ExecStart= value; raises AssertionError on anything systemd would treat
    specially (a bare ';', an unescaped specifier or variable, a line break)."""
    assert "\n" not in line and "\x00" not in line
    words: list[str] = []
    i, n = 0, len(line)
    while True:
        while i < n and line[i] in " \t":
            i += 1
        if i >= n:
            return words
        assert not (line[i] == ";" and (i + 1 == n or line[i + 1] in " \t")), "command separator"
        word: list[str] = []
        quote = None
        while i < n:
            c = line[i]
            if quote is None and c in " \t":
                break
            if c == "\\":
                nxt = line[i + 1]
                if nxt == "x":
                    word.append(chr(int(line[i + 2:i + 4], 16)))
                    i += 4
                    continue
                word.append(ESCAPES[nxt])
                i += 2
                continue
            if quote is None and c in "\"'":
                quote = c
                i += 1
                continue
            if c == quote:
                quote = None
                i += 1
                continue
            word.append(c)
            i += 1
        assert quote is None, "unterminated quote"
        words.append(_unspec("".join(word)))
