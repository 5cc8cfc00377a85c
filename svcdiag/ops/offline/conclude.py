"""A verdict's last step before it is published: the diagnosis, with what only the
application knows. Its own module so that `replay` (which judges no live unit) does not
import `ops.serve.start` and everything a live start needs."""

from __future__ import annotations

from collections.abc import Callable

from svcdiag.sglang.causes import Cause

TYPE_CHECKING = False  # typing costs ~3 ms to import, and no module a replay loads needs it at run time
if TYPE_CHECKING:
    from typing import Any

    from svcdiag.config.service import ServiceConfig, UnitsDir
    from svcdiag.judge.verdict import Verdict
    from svcdiag.output.publish import Publisher
    from svcdiag.systemd.dbus import Systemd


def diagnoser(cfg: ServiceConfig | None, units: UnitsDir | None = None,
              sd: Systemd | None = None) -> Callable[[Verdict], dict[str, Any] | None]:
    """Diagnosis with what only the application knows: which other configs want this port."""

    def owners() -> list[str]:
        if cfg is None or units is None:
            return []
        out = []
        for other in units.load_all():
            if other.name == cfg.name or other.port != cfg.port:
                continue
            if sd is None:
                out.append(f"{other.name} (configured)")
            elif sd.props(other.unit).running:
                out.append(other.name)
        return out

    def diagnosed(v: Verdict) -> dict[str, Any] | None:
        from svcdiag.judge.diagnosis import diagnose  # a healthy start needs none (nor sglang.memory)

        return diagnose(v, cfg, port_owners=owners() if v.cause == Cause.PORT_IN_USE else None)

    return diagnosed


def conclude(pub: Publisher, v: Verdict, diagnose_: Callable[[Verdict], dict[str, Any] | None],
             before: Callable[[Verdict], None] | None = None) -> Verdict:
    """Diagnose a verdict that is not healthy, then publish it: diagnosis before the output stage
    (`before`, with the diagnosed verdict, just before it is published: history's drift and row)."""
    if (v.verdict != "healthy" or v.degraded) and v.diagnosis is None:
        v = v.with_(diagnosis=diagnose_(v))
    if before is not None:
        before(v)
    return pub.verdict(v)
