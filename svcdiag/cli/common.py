"""What every command shares: finding configs, choosing the output, the exit code of a verdict."""

from __future__ import annotations

import json
import math
from typing import TYPE_CHECKING, Any

import click

from svcdiag.cli import plain

if TYPE_CHECKING:
    from types import ModuleType

    from svcdiag.config.service import ServiceConfig, UnitsDir

#: a verdict's exit code; `--strict` turns a degraded healthy start into 5
EXIT_CODES = plain.EXIT_CODES
DEGRADED_STRICT = plain.DEGRADED_STRICT
INTERRUPTED = 130


class Bounded(click.ParamType):
    """A finite number in (low, high]: `inf`, `nan`, 0 and negatives are refused naming the
    option, exit 2 (click.FloatRange lets nan and, unbounded, inf through)."""

    def __init__(self, high: float, *, integer: bool = False, low: float = 0.0):
        self.high, self.integer, self.low = high, integer, low
        self.name = "integer" if integer else "float"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            number: float = value
        else:
            try:
                number = int(value) if self.integer else float(value)
            except (TypeError, ValueError):
                self.fail(f"{value!r} is not a valid {self.name}", param, ctx)
        if not math.isfinite(number):
            self.fail(f"{value!r} is not a finite number", param, ctx)
        if not self.low < number <= self.high:
            high = int(self.high) if self.integer else f"{self.high:g}"
            self.fail(f"{value} is not in the range {self.low:g}<x<={high}", param, ctx)
        return number


def units_opt(ctx: click.Context) -> str | None:
    """The group's `--units DIR`."""
    return ctx.find_root().obj["units_opt"]  # type: ignore[no-any-return]


def units_dir(ctx: click.Context) -> UnitsDir:
    return plain.units_dir(units_opt(ctx))


def load(ctx: click.Context, name: str) -> ServiceConfig:
    return plain.load(units_opt(ctx), name)


def require_bus(host: str | None, cfg: ServiceConfig | None) -> None:
    """Say "no system bus" at once, before the command's imports and checks, when its systemd is this
    host's and this host has none (a command that needs one took 4-7 s to say so under load)."""
    from svcdiag.systemd.dbus import NO_BUS, no_local_bus
    from svcdiag.systemd.remote import is_local

    local = is_local(host) and (cfg is None or (is_local(cfg.remote_host) and not cfg.multinode))
    if local and no_local_bus():
        from svcdiag.errors import SvcdiagError

        raise SvcdiagError(NO_BUS)


def load_many(ctx: click.Context, names: tuple[str, ...]) -> list[ServiceConfig]:
    """The named configs, or every config when none is named (all of them: a command that acts on
    them, `install`, stops at the first that does not load; `list`, `status`, `top` show the rest)."""
    from svcdiag.errors import SvcdiagError

    configs, bad = plain.load_many(units_opt(ctx), names)
    if bad:
        raise SvcdiagError(bad[0])
    return configs


def _check_textfile(path: str) -> str:
    from svcdiag.output.textfile import check_textfile

    return check_textfile(path)


def report() -> ModuleType:
    """svcdiag.output.report, imported when a command renders: `--help` does not pay for it."""
    from svcdiag.output import report as module

    return module


#: a command's --json record, the schema version and its kind first
tagged = plain.tagged


def emit_json(obj: Any) -> None:
    click.echo(json.dumps(obj, ensure_ascii=False, default=str))


#: rows as JSON Lines, or each rendered for a person
emit_rows = plain.emit_rows


#: the terminal's sink (plain.publisher: `replay` builds it without click too)
publisher = plain.publisher


TEXTFILE = click.option("--textfile", metavar="FILE.prom", envvar="SVCDIAG_TEXTFILE",
                        callback=lambda ctx, param, value: value and _check_textfile(value),
                        help="also keep each unit's latest state in this Prometheus textfile ($SVCDIAG_TEXTFILE)")
JSON = click.option("--json", "as_json", is_flag=True, help="JSON (docs/events.md), one object per line")
STRICT = click.option("--strict", is_flag=True, help="exit 5 when the start is healthy but degraded")
TIMEOUT = click.option("--timeout", type=Bounded(7 * 86400), metavar="S",
                       help="overall deadline in seconds, on top of the per-phase ones")
STATE_DIR = click.option("--state-dir", metavar="DIR", help="svcdiag's state ($SVCDIAG_STATE_DIR, /var/lib/svcdiag)")


def _since(ctx: click.Context, param: click.Parameter, value: str | None) -> float | None:
    """`--since`'s one parser for every command (journalctl's forms): a bad time is one line, exit 2."""
    from svcdiag.systemd.journal import parse_since

    return parse_since(value) if value else None


SINCE = click.option("--since", metavar="TIME", callback=_since,
                     help="'2026-12-02 19:30', '19:30', 'today', '-10min', '@UNIX'")


PROGRESS = click.option("--progress", is_flag=True,
                        help="also `progress` records (weight shards, CUDA-graph batches; ≤ 4 a second) in --json and the journal")


def waiting(f: Any) -> Any:
    """The options of every command that waits for a verdict."""
    for option in (PROGRESS, TEXTFILE, STRICT, JSON, TIMEOUT):
        f = option(f)
    return f


HOST = click.option("--host", "host", metavar="[USER@]HOST[:PORT]", callback=plain.check_host,
                    help="the GPU host, over SSH (D-Bus and the journal; docs/remote.md); default: the config's "
                         "remote_host, else this host")


def hosts(host: str | None) -> Any:
    """The systemd connections of one command: each config's host (or --host), one per host."""
    from svcdiag.ops.serve.nodes import Hosts

    return Hosts(host)


GPU_MEMORY = click.option("--gpu-memory", type=Bounded(4096), metavar="GB", help="preflight: GPU memory free per GPU before loading")


def verdict_exit(ctx: click.Context, verdict: Any, *, strict: bool = False) -> None:
    """Leave with the verdict's code: 0 healthy, 1 failed, 3 timed out, 4 incomplete (5: degraded, --strict)."""
    code = EXIT_CODES[verdict.verdict]
    if code == 0 and strict and getattr(verdict, "degraded", ()):
        code = DEGRADED_STRICT
    ctx.exit(code)


def container_exit(end: Any) -> int:
    """A container's exit status (svcdiag.ops.containers.container.ContainerEnd): a start that did not come up
    exits with its verdict's code (1 failed, 3 timed out, 4 incomplete), so that the pod's
    `exitCode` says which; a stop the kubelet asked for, or a server that ended after ready,
    exits as SGLang did (128 + its signal)."""
    v = end.verdict
    if v is not None and v.verdict != "healthy" and end.stopped_by is None:
        return EXIT_CODES[v.verdict]
    return end.supervised.exit_status  # type: ignore[no-any-return]
