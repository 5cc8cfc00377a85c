"""Plain tables for a person: `svcdiag list`'s and `status`'s, and the column layout the report's tables share.

Kept apart from `output.report`, which imports the events, the verdict and the figures (~60 ms of
dataclasses): `list` needs none of them, nor does `status` of a start whose supervisor published its verdict.
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


def render_status(row: dict[str, Any]) -> str:
    v = row.get("verdict")
    if v:
        verdict = v["verdict"] + (f" [{v['cause']}]" if v.get("cause") else "")
        verdict += " (degraded)" if v.get("degraded") else ""
    else:
        verdict = "in progress" if row["active_state"] in ("activating", "active") else "-"
    up_for = f", up {row['uptime_s']:.0f} s" if row.get("uptime_s") is not None else ""
    if row.get("host"):  # a remote host, or a node of a multi-node start (docs/remote.md)
        rank = f"rank {row['node_rank']} " if row.get("node_rank") is not None else ""
        up_for += f"  [{rank}on {row['host']}]"
    kv, mr = row.get("kv_tokens"), row.get("max_running_requests")
    state = row["active_state"] + (f" ({row['result']})" if row.get("result") not in (None, "success") else "")
    out = (f"{row['name']:<24} {state:<12} phase {row.get('phase') or '-':<16} "
           f"kv_tokens {'-' if kv is None else kv:<10} max_running {'-' if mr is None else mr:<5} {verdict}{up_for}\n")
    if v and v.get("diagnosis"):
        out += "".join(f"    {sentence}\n" for sentence in v["diagnosis"]["explanation"][:2])
    if row.get("watch"):  # after ready: what the serving watch says now
        out += f"    {row['watch']['status']}\n"
    figures = (v or {}).get("figures") or {}  # a verdict record's own (verdict_record): read as it was written
    lost = figures.get("journal_dropped_lines")
    if lost:  # journald's "Suppressed N messages" record: the journal is not the whole story
        whose = "; the verdict is svcdiag supervise's, which read them all" if figures.get("verdict_source") == "supervisor" else ""
        out += f"    journald dropped {lost:,} of this start's lines (its rate limit){whose}\n"
    return out
