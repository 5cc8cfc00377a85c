"""A campaign's results: per phase a table (Markdown, CSV), and a chart of start-up time per
phase per config (stacked bars; PNG and SVG with the optional `plot` extra, matplotlib)."""

from __future__ import annotations

import csv
import io
from pathlib import Path
from typing import Any

from svcdiag.config.service import PHASES
from svcdiag.files import write_atomic
from svcdiag.sglang.figures import Figures

INSTALL_PLOT = "chart skipped: matplotlib is not installed; pip install 'svcdiag[plot]' to get results as PNG and SVG"


def _phases(rows: list[dict[str, Any]]) -> list[str]:
    seen = {p for r in rows for p in (r.get("phase_seconds") or {})}
    return [p for p in PHASES if p in seen]


def _bench_keys(rows: list[dict[str, Any]]) -> list[str]:
    keys: list[str] = []
    for r in rows:
        for k in ((r.get("benchmark") or {}).get("figures") or {}):
            if k not in keys:
                keys.append(k)
    return keys


def table(rows: list[dict[str, Any]]) -> tuple[list[str], list[list[Any]]]:
    """The columns and cells of one table: config, status, seconds per phase, figures, benchmark."""
    phases, bench = _phases(rows), _bench_keys(rows)
    head = ["config", "status", "cause", *[f"{p}_s" for p in phases], "startup_s", "kv_tokens", "max_running",
            "degraded", "bench_exit", *bench]
    body = []
    for r in rows:
        f, b = Figures.from_json(r.get("figures"), f"campaign row {r['config']}"), r.get("benchmark") or {}
        ps = r.get("phase_seconds") or {}
        body.append([r["config"], r["status"] + (" (recorded)" if r.get("skipped") else ""), r.get("cause") or "",
                     *[_num(ps.get(p)) for p in phases], _num(f.startup_s), _num(f.kv_tokens),
                     _num(f.max_running_requests), ",".join(r.get("degraded") or ()),
                     "" if b.get("exit_code") is None else b["exit_code"],
                     *[_num((b.get("figures") or {}).get(k)) for k in bench]])
    return head, body


def _num(v: Any) -> Any:
    return "" if v is None else round(v, 2) if isinstance(v, float) else v


def by_phase(rows: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    out: dict[str, list[dict[str, Any]]] = {}
    for r in rows:
        out.setdefault(r["phase"], []).append(r)
    return out


def markdown(name: str, baseline: dict[str, Any] | None, rows: list[dict[str, Any]]) -> str:
    lines = [f"# Campaign {name}", ""]
    if baseline is not None:
        lines += [f"Baseline `{baseline['config']}`: **{baseline['verdict']}**"
                  + (f" ({baseline['cause']})" if baseline.get("cause") else "")
                  + (f"; {baseline['summary']}" if baseline.get("summary") else ""), ""]
    for phase, prows in by_phase(rows).items():
        head, body = table(prows)
        lines += [f"## {phase}", "", "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
        lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in body]
        diag = [(r["config"], r["diagnosis"]) for r in prows if r.get("diagnosis") and r["diagnosis"].get("explanation")]
        for cfg, d in diag:
            lines += ["", f"**{cfg}**: " + " ".join(d["explanation"])]
        lines.append("")
    return "\n".join(lines)


def csv_text(rows: list[dict[str, Any]]) -> str:
    """One CSV over every phase (a `phase` column first)."""
    head, body = table(rows)
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(["phase", *head])
    for r, row in zip(rows, body, strict=True):
        w.writerow([r["phase"], *row])
    return buf.getvalue()


def chart(rows: list[dict[str, Any]], stem: Path) -> list[Path] | str:
    """Stacked bars of seconds per start-up phase, one bar per config that started; the files
    written, or why none were (matplotlib missing)."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return INSTALL_PLOT
    started = [r for r in rows if r.get("phase_seconds")]
    if not started:
        return "chart skipped: no config started"
    phases = _phases(started)
    labels = [f"{r['phase']}/{r['config']}" for r in started]
    fig, ax = plt.subplots(figsize=(max(6.0, 0.9 * len(labels) + 2), 4.5))
    bottoms = [0.0] * len(started)
    for p in phases:
        vals = [float((r.get("phase_seconds") or {}).get(p, 0.0)) for r in started]
        ax.bar(labels, vals, bottom=bottoms, label=p)
        bottoms = [a + b for a, b in zip(bottoms, vals, strict=True)]
    ax.set_ylabel("seconds")
    ax.set_title("start-up time per phase")
    ax.legend(fontsize="small")
    plt.setp(ax.get_xticklabels(), rotation=30, ha="right")
    fig.tight_layout()
    out = [stem.with_suffix(".png"), stem.with_suffix(".svg")]
    for path in out:
        buf = io.BytesIO()
        fig.savefig(buf, format=path.suffix[1:])
        write_atomic(path, buf.getvalue(), mode=0o644)  # never through a planted symlink (docs/security.md)
    plt.close(fig)
    return out


def summary(outcome: Any) -> str:
    """The lines `svcdiag campaign` ends with on a terminal."""
    lines = []
    if outcome.baseline is not None:
        b = outcome.baseline
        lines.append(f"baseline {b['config']}: {b['verdict']}" + (f" ({b['cause']})" if b.get("cause") else ""))
    for r in outcome.rows:
        extra = f" ({r.cause})" if r.cause else ""
        startup_s = Figures.from_json(r.figures, f"campaign row {r.config}").startup_s
        took = f" {startup_s:.1f} s" if startup_s is not None else ""
        rec = " [recorded earlier]" if r.skipped else ""
        bench = f", benchmark exit {r.benchmark['exit_code']}" if r.benchmark else ""
        lines.append(f"  {r.phase}/{r.config}: {r.status}{extra}{took}{bench}{rec}")
    state = "interrupted" if outcome.interrupted else "stopped: baseline not healthy" if outcome.stopped_by_baseline \
        else "done"
    lines.append(f"campaign {outcome.name} {state}; results: {outcome.results_dir}")
    return "\n".join(lines) + "\n"
