"""detect() tells a plain log without compiling journalctl's short pattern or the runtimes' prefixes: a line
opening with SGLang's dated prefix matches neither, so skipping them for such a line changes no format."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from svcdiag.systemd import journal_formats as jf

#: the characters the two patterns turn on near a line's head
HEAD = st.text(alphabet="0123456789-:T]|[ .,Zpod/abcDEF\x1b", max_size=10)


@given(head=HEAD, rest=st.text(max_size=80))
def test_a_line_skipped_as_dated_matches_neither_pattern(head: str, rest: str) -> None:
    line = "[20" + head + rest
    if jf._sglang_dated(line):
        assert jf.SHORT_RE.match(line) is None
        assert jf.CONTAINER_RE.match(line) is None


@given(rest=st.text(max_size=80))
def test_sglang_s_own_prefix_is_dated(rest: str) -> None:
    assert jf._sglang_dated("[2026-05-23 09:42:05] " + rest)
    assert jf._sglang_dated("[2026-05-23 09:42:05.123 TP0] " + rest)


def test_a_compose_log_of_sglang_lines_is_still_a_container_log() -> None:
    lines = [f"sglang-1  | [2026-05-23 09:42:{i:02d}] Decode batch. #running-req: 1" for i in range(10)]
    assert jf.detect("\n".join(lines).encode()) == "container"
    assert jf.detect("\n".join(ln.split("| ", 1)[1] for ln in lines).encode()) == "plain"
