"""A call retried for a moment (the bus or the journal away while its daemon restarts).

tenacity's `Retrying(stop=stop_after_delay(S), wait=wait_exponential(multiplier=0.05, max=0.5))`,
in a dozen lines: importing tenacity costs ~10 to 25 ms (random, logging, concurrent.futures),
more than the rest of `logs --milestones` spends before it first asks the journal.
"""

from __future__ import annotations

import time

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import TypeVar

    T = TypeVar("T")


def briefly(attempt: Callable[[], T], stop_after_s: float, *, first_wait: float = 0.05, max_wait: float = 0.5) -> T:
    """attempt()'s result; after a failure, wait first_wait, doubling up to max_wait, and try again until
    stop_after_s has passed since the first try; then the last failure is raised."""
    began = time.monotonic()
    wait = first_wait
    while True:
        try:
            return attempt()
        except Exception:
            if time.monotonic() - began >= stop_after_s:
                raise
        time.sleep(wait)
        wait = min(wait * 2, max_wait)
