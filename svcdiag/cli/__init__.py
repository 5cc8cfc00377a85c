"""The `svcdiag` command: click commands only. Each parses its options, calls one use case
in `svcdiag.ops`, hands the result to `svcdiag.output`, and maps it to an exit code.

Exit codes: 0 healthy, 1 failed (or drifted, or refused by preflight), 2 bad input (one
line, no traceback), 3 timed out, 4 incomplete (the log ends before a verdict, or holds no
start), 5 healthy but degraded with --strict, 130 interrupted.
"""

from __future__ import annotations

import sys
from typing import Any

import click

from svcdiag.errors import SvcdiagError


def fail(message: str, code: int = 2) -> None:
    click.echo(f"svcdiag: error: {message}", err=True)
    sys.exit(code)


class Group(click.Group):
    """Turns every SvcdiagError (bad input, missing precondition) into one line and its exit code."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except SvcdiagError as e:
            fail(str(e), e.exit_code)
        except BrokenPipeError:
            sys.exit(0)


@click.group(cls=Group, context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--units", "units_opt", metavar="DIR", help="config folder (default: $SVCDIAG_UNITS, ./units, /etc/svcdiag/units)")
@click.version_option(package_name="svcdiag", prog_name="svcdiag", message="%(prog)s %(version)s")
@click.pass_context
def main(ctx: click.Context, units_opt: str | None) -> None:
    """Run SGLang servers as systemd units and say when each is healthy, failed or stuck, and why."""
    ctx.obj = {"units_opt": units_opt}


from svcdiag.cli import configs, offline, records, service  # noqa: E402  (they register their commands on main)

__all__ = ["configs", "main", "offline", "records", "service"]
