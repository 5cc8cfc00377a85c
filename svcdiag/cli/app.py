"""The `svcdiag` click group: its options, how an error becomes one line and an exit code, and
the commands registered on it (imported at the end)."""

from __future__ import annotations

import sys
from typing import Any

import click

from svcdiag.cli.plain import fail
from svcdiag.errors import SvcdiagError


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


from svcdiag.cli import configs, host, offline, records, service  # noqa: E402  (they register their commands on main)
from svcdiag.cli.complete import wire  # noqa: E402

wire(main)  # config names and --host complete in the shell

__all__ = ["Group", "configs", "fail", "host", "main", "offline", "records", "service"]
