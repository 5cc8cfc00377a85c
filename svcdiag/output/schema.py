"""The public event schema (version 1): what `--json`, the journal and dashboards see.

One record type for every destination, so a line printed by `up --json`, an entry
read back by `svcdiag events` and a `journalctl -o json SVCDIAG_EVENT=verdict` entry
carry the same names. docs/events.md is this module in prose; change both or neither.
Pure: no I/O.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

TYPE_CHECKING = False  # typing costs ~3 ms to import, and no module a replay loads needs it at run time
if TYPE_CHECKING:
    from typing import Any

SCHEMA_VERSION = 1

#: event type → journald MESSAGE_ID (fixed forever: dashboards and `journalctl MESSAGE_ID=` rely on them)
MESSAGE_IDS = {
    "phase_entered": "fccfea93ff8445e9a7613feced8eab4f",
    "milestone": "84712416590c431a8211a5083d96bca6",
    "failure": "f3fd7ef455cb42cb8c0639cca120ff04",
    "verdict": "9b952a949d6b4c179b7eb53dd67f8111",
    "diagnosis": "8395fcf5b35e4410ab0d0d5ecb888e76",
    "baseline_result": "e9eddf1e8f584b9680f0781ebd32da7e",
    "drift": "7a095674dffd4e3c9b10fa3592e4aca7",
    "note": "5ad12f8f579641b799d8b83a938be7b1",
    "progress": "2c0b1f6e4d7a4e58b3a91c5d8f26e7a4",
    "slow_phase": "5f0c3a7e91b24d6c8e2a7b4d1c9f0e63",
    "incident": "b070229cd0e348b89e7078aa28688d5c",
}
EVENT_TYPES = tuple(MESSAGE_IDS)
#: the types written to the journal: a note is for the terminal that asked; progress (several a
#: second while weights load) only for a command run with --progress (ON_REQUEST)
ON_REQUEST = frozenset({"progress"})
JOURNALED = frozenset(EVENT_TYPES) - {"note"} - ON_REQUEST

#: syslog priorities: a dashboard filtering on -p warning sees failures only
_PRIORITY = {"failure": 3, "drift": 4, "slow_phase": 4, "incident": 3}
_COMMON = ("schema", "event", "ts", "time", "unit", "invocation", "config", "phase")


@dataclass(frozen=True, slots=True, kw_only=True)
class ReadinessEvent:
    """One published event. `data` holds the fields only its type has (docs/events.md)."""

    event: str
    ts: float | None = None
    unit: str | None = None
    invocation: str | None = None
    config: str | None = None
    phase: str | None = None
    milestone: str | None = None
    verdict: str | None = None
    cause: str | None = None
    message: str | None = None
    figures: dict[str, Any] = field(default_factory=dict)
    line: str | None = None
    data: dict[str, Any] = field(default_factory=dict)
    schema: int = SCHEMA_VERSION

    def __post_init__(self) -> None:
        if self.event not in MESSAGE_IDS:
            raise ValueError(f"unknown event type {self.event!r} (one of {', '.join(EVENT_TYPES)})")

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"schema": self.schema, "event": self.event, "ts": self.ts, "time": iso_time(self.ts),
                               "unit": self.unit, "invocation": self.invocation, "config": self.config,
                               "phase": self.phase}
        for key in ("milestone", "verdict", "cause", "message", "line"):
            value = getattr(self, key)
            if value is not None:
                out[key] = value
        if self.figures or self.event in ("milestone", "verdict"):
            out["figures"] = self.figures
        for key, value in self.data.items():
            out.setdefault(key, value)
        return out

    @classmethod
    def from_json(cls, obj: dict[str, Any]) -> ReadinessEvent:
        """The inverse of to_json; unknown keys (a newer writer's) are kept in `data`."""
        known = {"milestone", "verdict", "cause", "message", "line", "figures"}
        kwargs = {k: obj.get(k) for k in ("ts", "unit", "invocation", "config", "phase") if obj.get(k) is not None}
        kwargs.update({k: obj[k] for k in known if obj.get(k) is not None})
        data = {k: v for k, v in obj.items() if k not in known and k not in _COMMON}
        return cls(event=obj["event"], schema=int(obj.get("schema", SCHEMA_VERSION)), data=data, **kwargs)

    def key(self) -> tuple[Any, ...]:
        """Two observers of one start publish the same events; this is what makes them the same."""
        if self.event in ("verdict", "diagnosis"):  # one per conclusion, whenever each observer reached it
            return (self.unit, self.invocation, self.event, self.phase, self.verdict, self.cause)
        ts = None if self.ts is None else round(self.ts, 6)
        return (self.unit, self.invocation, self.event, self.milestone, self.phase, self.cause, ts, self.message)

    # ------------------------------------------------------------ journald

    def journal_fields(self) -> dict[str, str]:
        """Fields for sd_journal_send: MESSAGE for humans, SVCDIAG_* to filter on, the record as JSON."""
        import json  # here, not at import: a replay's text needs none (~1.5 ms)

        fields = {
            "MESSAGE": f"{self.config or self.unit or 'svcdiag'}: {self.message or self.event}",
            "MESSAGE_ID": MESSAGE_IDS[self.event],
            "PRIORITY": str(3 if self.verdict not in (None, "healthy") else _PRIORITY.get(self.event, 6)),
            "SYSLOG_IDENTIFIER": "svcdiag",
            "SVCDIAG_SCHEMA": str(self.schema),
            "SVCDIAG_EVENT": self.event,
            "SVCDIAG_JSON": json.dumps(self.to_json(), ensure_ascii=False, default=str, separators=(",", ":")),
        }
        for name, value in (("UNIT", self.unit), ("INVOCATION", self.invocation), ("CONFIG", self.config),
                            ("PHASE", self.phase), ("MILESTONE", self.milestone), ("VERDICT", self.verdict),
                            ("CAUSE", self.cause)):
            if value is not None:
                fields[f"SVCDIAG_{name}"] = str(value)
        if self.ts is not None:
            fields["SVCDIAG_TS"] = f"{self.ts:.6f}"
        return fields

    @classmethod
    def from_journal_fields(cls, fields: dict[str, Any]) -> ReadinessEvent | None:
        """An entry svcdiag wrote, read back; None for anything else (or a record it cannot read)."""
        raw = fields.get("SVCDIAG_JSON")
        if not raw:
            return None
        import json

        try:
            obj = json.loads(raw)
            return cls.from_json(obj)
        except (ValueError, KeyError, TypeError):
            return None


def iso_time(ts: float | None) -> str | None:
    if ts is None:
        return None
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(ts)) + f".{int(ts % 1 * 1000):03d}Z"
