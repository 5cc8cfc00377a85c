"""Regular expressions compiled when first used, not at import.

The failure registry holds ~170 patterns; compiling them all costs ~20 ms, a large share of a
command that answers in 50, and most runs use a handful (a healthy start's log reaches none of
the rarer causes). A `Lazy` stands in for a compiled `re.Pattern`: its source is `pattern` at
once, and its first use of any other attribute compiles it and keeps the compiled pattern's
methods on the instance, so later calls cost what a compiled pattern's do.
"""

from __future__ import annotations

import re

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

#: what a Lazy takes from the compiled pattern on first use
_TAKEN = ("search", "match", "fullmatch", "finditer", "findall", "sub", "subn", "split", "scanner",
          "groups", "groupindex", "flags")


class Lazy:
    """A pattern compiled on first use (see the module's doc)."""

    def __init__(self, pattern: str, flags: int = 0) -> None:
        self.pattern = pattern
        self._flags = flags

    def __getattr__(self, name: str) -> Any:  # called only for what the instance does not hold yet
        if name.startswith("__") or name not in _TAKEN:
            raise AttributeError(name)
        compiled = re.compile(self.pattern, self._flags)
        for n in _TAKEN:
            setattr(self, n, getattr(compiled, n))
        return getattr(compiled, name)

    def __repr__(self) -> str:
        return f"lazy_re.compile({self.pattern!r})"


def compile(pattern: str, flags: int = 0) -> re.Pattern[str]:  # re.compile's stand-in
    """`re.compile`, deferred to the pattern's first use."""
    return Lazy(pattern, flags)  # type: ignore[return-value]  # it answers as the pattern it stands for
