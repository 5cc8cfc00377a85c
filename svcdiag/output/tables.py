"""Plain tables for a person: `svcdiag list`'s, and the column layout the report's tables share.

Kept apart from `output.report`, which imports the events, the verdict and the figures (~60 ms of
dataclasses): `list` needs none of them.
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any


def table(rows: list[tuple[str, ...]]) -> str:
    """Columns padded to their widest cell, the first row the header."""
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return "".join("  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip() + "\n"
                   for row in rows)


def render_configs(listing: dict[str, Any]) -> str:
    rows = [("NAME", "BASE", "TP", "GPUS", "PORT", "SPECULATIVE", "BASELINE")]
    for r in listing["configs"]:
        spec = (r["speculative"] or "-") + (f" (sim: {r['simulate']})" if r["simulate"] else "")
        rows.append((r["name"], r["base"] or "-", str(r["tp"]), r["gpus"] or "-", str(r["port"]), spec,
                     "yes" if r["baseline"] else ""))
    return f"configs in {listing['units_dir']} ({listing['found_by']})\n" + table(rows)
