"""`preflight`'s text: the budget an operator reads, and the calibration table. Apart from report.py
so that `preflight` does not import the events, the verdict and the figures (their dataclasses)."""

from __future__ import annotations

from svcdiag.sglang.causes import Cause

TYPE_CHECKING = False  # typing costs ~3 ms to import, and no module a replay loads needs it at run time
if TYPE_CHECKING:
    from typing import Any


def _n(v: Any) -> str:
    return f"{v:,}" if isinstance(v, int) and not isinstance(v, bool) else str(v)


def _fix_lines(fixes: list[dict[str, Any]] | None) -> list[str]:
    """Each fix as the settings to change and why (a diagnosis's or a preflight's)."""
    if not fixes:
        return []
    import json  # here, not at import: a replay's text needs it only for a diagnosis's fixes (~1.5 ms)

    return ["  fixes:"] + [f"    - {', '.join(f'{k} = {json.dumps(v)}' for k, v in fix['set'].items())}: {fix['reason']}"
                           for fix in fixes]


def render_preflight(name: str, plan: dict[str, Any]) -> str:
    """A preflight plan (memplan.Plan.to_json()) as the budget an operator reads."""
    b = plan["budget_gb"]
    head = {"ok": "OK", "tight": "TIGHT", "cannot_serve": "CANNOT SERVE"}[plan["verdict"]]
    pool = f"{plan['kv_tokens']:,} KV tokens predicted{_spread(plan.get('interval'))}, " if b \
        else "from the config's own limits: "
    if plan.get("failure") == Cause.BAD_ARGUMENTS:  # its server args refuse the flags before sizing anything
        pool = "SGLang refuses the arguments, "
    lines = [f"{name}: preflight {head}: {pool}max_running_requests {plan['max_running_requests']}, "
             f"context_len {_n(plan['context_len'])}"
             + (f" (SGLang {plan['sizing_family']}'s arithmetic)" if plan.get("sizing_family") else "")]
    if b:
        lines += [f"  GPU memory free before loading: {b['free_before_load']:.2f} GB ({plan['gpu_source']})",
                  f"  mem_fraction_static {b['mem_fraction_static']}: "
                  f"{b['free_before_load'] * b['mem_fraction_static']:.2f} GB for weights and caches, "
                  f"{b['reserve']:.2f} GB reserve",
                  f"    weights        {b['weights']:8.2f} GB per GPU",
                  (f"    Mamba cache    {b['mamba_cache']:8.2f} GB ({plan['mamba_slots']} slots"
                   + (f", {plan['slots_per_request']} per request)" if plan.get("slots_per_request") else ")")
                   if plan.get("mamba_slots") is not None else "    Mamba cache        none counted")]
        if b.get("mamba_intermediate"):
            lines.append(f"    spec. state    {b['mamba_intermediate']:8.2f} GB (the draft tokens' intermediate state)")
        lines += [f"    KV cache       {b['kv_cache']:8.2f} GB at {plan['kv_bytes_per_token']:,} bytes per token"
                  + (f" (+ {plan['draft_kv_bytes_per_token']:,} for the draft's KV)"
                     if plan.get("draft_kv_bytes_per_token") else ""),
                  f"    draft model    {b['draft']:8.2f} GB"]
    lines.append("  limits on max_running_requests: " + ", ".join(f"{k} {v:,}" for k, v in plan["limits"].items())
                 + (f" (binding: {plan['binding']})" if plan.get("binding") else ""))
    if plan.get("interval"):
        lines.append("  " + interval_line(plan["interval"]))
    lines += [f"  - {r}" for r in plan["reasons"]]
    lines += [f"  note: {n}" for n in plan["notes"]]
    lines += _fix_lines(plan["fixes"])
    return "\n".join(lines) + "\n"


def _spread(interval: dict[str, Any] | None) -> str:
    """' ± 1.5 %' after a predicted KV figure (' at most' when only its upper bound is known)."""
    if not interval:
        return ""
    if interval["kv_tokens"][0] is None:
        return " at most"
    return f" ± {interval['kv_pct']} %" if interval.get("kv_pct") is not None else ""


def interval_line(interval: dict[str, Any]) -> str:
    """The prediction at the ends of the inputs' uncertainty, and why they are uncertain."""
    lo, hi = interval["kv_tokens"]
    mlo, mhi = interval["max_running_requests"]
    glo, ghi = interval["gpu_free_gb"]
    free = f"{glo:.2f}–{ghi:.2f} GB free" if glo is not None else f"at most {ghi:.2f} GB free"
    kv = f"{lo:,}–{hi:,}" if lo is not None else f"at most {hi:,}"
    mr = f"{mlo}–{mhi}" if mlo is not None else f"at most {mhi}"
    return f"uncertainty: {kv} KV tokens, max_running_requests {mr} ({free}; " + "; ".join(interval["why"]) + ")"


def render_calibration(rows: list[dict[str, Any]]) -> str:
    if not rows:
        return "no calibration yet: it is recorded after each `up --wait-ready` or `baseline-check`\n"
    by: dict[str, list[dict[str, Any]]] = {}
    for r in rows:
        by.setdefault(r["config"], []).append(r)
    out = []
    for name, rs in sorted(by.items()):
        worst = max(abs(r["error_pct"]) for r in rs if r.get("error_pct") is not None)
        last = rs[-1]
        out.append(f"{name:24} {len(rs):3} start(s)  last: predicted {last['predicted_kv_tokens']:>10,} "
                   f"logged {last['logged_kv_tokens']:>10,} ({last['error_pct']:+.2f} %)  "
                   f"worst |error| {worst:.2f} %" + ("  > 5 %!" if worst > 5 else ""))
    return "\n".join(out) + "\n"
