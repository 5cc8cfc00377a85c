"""Why svcdiag stopped a unit, left where that unit's own supervisor reads it.

A multi-node start stops its other nodes the moment one node fails (svcdiag.ops.serve.nodes). To
their systemd that is an operator's stop: SGLang ends cleanly, the unit is `Result=success`, and
nothing on that host says the start failed, nor where. So before the stop, `up` writes the
reason for that start (its invocation) to STOP_DIR/UNIT on the node's host (over SSH where it
is remote); the node's supervisor, on the SIGTERM that follows, reads it, says it (STATUS=,
its last line in the journal) and exits 1, so that systemd records a failed start
(svcdiag.ops.serve.supervise). A reason left for an earlier start is never taken for this one.
"""

from __future__ import annotations

import json
import os
import shlex
from pathlib import Path
from typing import Any

from svcdiag.files import write_atomic

#: where the reasons are (a tmpfs: gone at the next boot, as the starts they explain)
STOP_DIR = Path(os.environ.get("SVCDIAG_STOP_DIR", "/run/svcdiag/stopped"))


def leave(unit: str, invocation: str | None, why: str, remote: Any = None) -> None:
    """Say `why` to the supervisor of `unit`'s start `invocation` (on `remote`'s host: an SSH
    Connection). Raises OSError or SvcdiagError where it cannot be written."""
    path = STOP_DIR / unit
    text = json.dumps({"invocation": invocation, "why": why}) + "\n"
    if remote is None:
        write_atomic(path, text, mode=0o644)
        return
    remote.run(f"mkdir -p -m 0755 {shlex.quote(str(STOP_DIR))}")
    remote.write_atomic(str(path), text, mode=0o644)


def read(unit: str, invocation: str | None) -> str | None:
    """The reason left for `unit`'s start `invocation`, or None (none left, or left for another start)."""
    try:
        rec = json.loads((STOP_DIR / unit).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(rec, dict) or not invocation or rec.get("invocation") != invocation:
        return None
    why = rec.get("why")
    return why if isinstance(why, str) and why else None
