"""`svcdiag history`: the recorded starts as a table, and `--advise`'s deadlines."""

from __future__ import annotations

import time
from typing import Any

from svcdiag.sglang.figures import Figures

_SHORT = {"starting": "start", "loading_weights": "weights", "kv_cache": "kv", "mamba_cache": "mamba",
          "cuda_graph": "graphs", "scheduler": "sched", "http": "http"}


def _when(ts: float | None) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(ts)) if ts else "?"


def _s(v: Any) -> str:
    return f"{v:.1f}" if isinstance(v, int | float) else "-"


def _blank(v: Any) -> str:
    return "" if v is None else str(v)


def render_history(rows: list[dict[str, Any]]) -> str:
    if not rows:
        return "no recorded starts\n"
    head = ["when", "config", "command", "sglang", "verdict", "cause", "startup_s",
            *_SHORT.values(), "kv_tokens", "max_run", "degraded", "invocation"]
    body = []
    for r in rows:
        f, ps = Figures.from_json(r.get("figures"), f"a history row of {r['config']}"), r.get("phase_seconds") or {}
        body.append([_when(r.get("ts")), r["config"], r.get("command") or "", r.get("sglang_version") or "",
                     r["verdict"], r.get("cause") or "", _s(r.get("startup_s")), *[_s(ps.get(p)) for p in _SHORT],
                     _blank(f.kv_tokens), _blank(f.max_running_requests),
                     ",".join(x for x in (r.get("degraded") or []) if x), (r.get("invocation") or "")[:12]])
    widths = [max(len(str(x)) for x in col) for col in zip(head, *body, strict=True)]
    lines = ["  ".join(str(c).ljust(w) for c, w in zip(row, widths, strict=True)).rstrip() for row in [head, *body]]
    out = [lines[0]]
    for r, line in zip(rows, lines[1:], strict=True):  # each start, then what happened to it after ready
        if r.get("restarted_after"):
            out.append(f"  ↻ restarted after {r['restarted_after']}")
        out.append(line)
        out += [incident_line(i) for i in r.get("incidents") or ()]
    return "\n".join(out) + "\n"


def incident_line(i: dict[str, Any]) -> str:
    """A post-ready incident under its start: `  ! wedged [health_failed] 12:00:03: … → restart`."""
    cause = f" [{i['cause']}]" if i.get("cause") else ""
    action = f" → {i['action']}" if i.get("action") else ""
    return f"  ! {i['kind']}{cause} {_when(i.get('since') or i.get('ts'))}: {i.get('message') or ''}{action}"


def render_advice(a: dict[str, Any]) -> str:
    out = [f"{a['config']}: {a['healthy_starts']} healthy start(s) recorded"
           + (f" on SGLang {a['sglang_version']}" if a.get("sglang_version") else "")]
    if not a["enough"]:
        out.append(f"  (fewer than {a['min_healthy']}: the figures below are not yet used as deadlines)")
    out.append("  phase             n   p50 s   p90 s   p99 s   max s   advised s  configured s")
    for p in a["phases"]:
        if "n" not in p and p["configured"] is None:
            continue
        out.append(f"  {p['phase']:<16}{p.get('n', 0):>3}{_s(p.get('p50')):>8}{_s(p.get('p90')):>8}"
                   f"{_s(p.get('p99')):>8}{_s(p.get('max')):>8}{_s(p.get('advised')):>12}"
                   f"{_s(p['configured']) if p['configured'] is not None else '-':>14}")
    if "timeout_start_sec" in a:
        sp = a["startup_probe"]
        st = a["startup"]
        out += ["", f"start-up: p50 {st['p50']:.1f} s, p99 {st['p99']:.1f} s, max {st['max']:.1f} s ({st['n']} starts)",
                "", "systemd (the unit's [Service]):", f"  TimeoutStartSec={a['timeout_start_sec']}",
                "", "Kubernetes (the container):", "  startupProbe:", "    httpGet:",
                f"      path: {sp['httpGet']['path']}", f"      port: {sp['httpGet']['port']}",
                f"    periodSeconds: {sp['periodSeconds']}", f"    failureThreshold: {sp['failureThreshold']}",
                f"    timeoutSeconds: {sp['timeoutSeconds']}   # SGLang's /health takes ≥ 1 s to answer",
                f"  # {sp['failureThreshold']} × {sp['periodSeconds']} s = {sp['budget_s']} s ≥ TimeoutStartSec"]
    return "\n".join(out) + "\n"


def probe_budget(deadlines: dict[str, float]) -> float:
    """The longest start a container's supervisor allows: every phase to its deadline, a kernel
    compile's allowance, the HTTP cross-check. A kubelet budget at least this long never ends a
    start the supervisor would still let run: the supervisor, not the kubelet, says why it stopped."""
    from svcdiag.config.service import PHASE_TIMEOUTS

    return sum(deadlines[p] for p in PHASE_TIMEOUTS) + deadlines["jit_compile"] + deadlines["http_check"]


#: a kubelet probe's timeoutSeconds on the supervisor's probes (deploy/kubernetes/ too): `svcdiag probe`
#: took 1.27 s at load 12.7 and /readyz asks SGLang's /ready (0.8 s at most); a probe timed out is a
#: failed one, so the kubelet's default of 1 s would restart a healthy server on a busy node
PROBE_TIMEOUT_S = 5


def render_kubernetes(a: dict[str, Any], probe_port: int = 8081, period_s: int = 10) -> str:
    """`history --advise --format kubernetes`: the env and probe blocks of a container that runs
    this config under `svcdiag supervise` (docs/kubernetes.md), to paste into its spec."""
    import math

    from svcdiag.config.service import DEFAULT_TIMEOUTS

    d = a["deadlines"]
    budget = probe_budget(d)
    threshold = math.ceil(budget / period_s)
    said = f"{a['healthy_starts']} healthy start(s) recorded"
    said += f" on SGLang {a['sglang_version']}" if a.get("sglang_version") else ""
    said += "" if a["enough"] else f"; fewer than {a['min_healthy']}, so no deadline is learned yet"
    out = [f"# {a['config']}: {said}", "# the container's env (the deadlines the supervisor enforces; SVCDIAG_TIMEOUT_*):",
           "env:", "  - name: SVCDIAG_PROBE_PORT", f'    value: "{probe_port}"']
    for key, value in d.items():
        if value != DEFAULT_TIMEOUTS.get(key):
            out += [f"  - name: SVCDIAG_TIMEOUT_{key.upper()}", f'    value: "{value:g}"']
    out += ["ports:", "  - name: probes", f"    containerPort: {probe_port}",
            "# 200 once the start is judged healthy; a stuck start ends at its phase's deadline first",
            "startupProbe:", "  httpGet:", "    path: /startupz", "    port: probes", f"  periodSeconds: {period_s}",
            f"  failureThreshold: {threshold}   # {threshold} × {period_s} s ≥ {budget:g} s, the longest start allowed",
            f"  timeoutSeconds: {PROBE_TIMEOUT_S}   # the kubelet's default 1 s is too short on a loaded node",
            "readinessProbe:", "  httpGet:", "    path: /readyz", "    port: probes", f"  periodSeconds: {period_s}",
            f"  timeoutSeconds: {PROBE_TIMEOUT_S}", "livenessProbe:", "  httpGet:", "    path: /livez", "    port: probes",
            "  periodSeconds: 30", f"  timeoutSeconds: {PROBE_TIMEOUT_S}",
            "# the supervisor's message; the log's last lines where it could write none",
            "terminationMessagePolicy: FallbackToLogsOnError"]
    return "\n".join(out) + "\n"
