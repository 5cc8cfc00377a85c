"""Command bodies that import no click: the click commands call them, and `svcdiag.cli.fast`
calls them straight from argv when the manifest says it can parse that argv as click would.
One implementation either way, so the output, the one-line errors and the exit codes are the same.

Like `svcdiag.cli`, this module keeps `typing` out (3 ms of a ~30 ms start-up): annotations
only, under `from __future__ import annotations`.
"""

from __future__ import annotations

import sys

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

    from svcdiag.config.service import ServiceConfig, UnitsDir


def echo(text: str, *, err: bool = False) -> None:
    """click.echo's output for plain text: written and flushed. Text with an escape sequence goes
    through click itself, which strips ANSI codes when the stream is not a terminal."""
    if "\x1b" in text:
        import click

        click.echo(text, err=err, nl=False)
        return
    out = sys.stderr if err else sys.stdout
    out.write(text)
    out.flush()


def fail(message: str, code: int = 2) -> None:
    """One line on stderr, then exit: how every SvcdiagError ends a command."""
    echo(f"svcdiag: error: {message}\n", err=True)
    sys.exit(code)


def check_host(ctx: object, param: object, value: str | None) -> str | None:
    """`--host`'s check (a click callback that needs no click): a bad spec is one line, exit 2."""
    if value:
        from svcdiag.systemd.remote import Target

        Target.parse(value)
    return value


def units_dir(units_opt: str | None) -> UnitsDir:
    from svcdiag.config.service import find_units_dir  # imported when used: `--help` stays fast

    return find_units_dir(units_opt)


def load(units_opt: str | None, name: str) -> ServiceConfig:
    from svcdiag.config.service import did_you_mean, validate_name
    from svcdiag.errors import SvcdiagError

    units = units_dir(units_opt)
    validate_name(name, units.file(name))  # before the file system sees it: a 300-character name is one line too
    if not units.file(name).exists():
        raise SvcdiagError(f"no config {name!r} in {units.path}{did_you_mean(name, units.names())}")
    return units.load(name)


def load_many(units_opt: str | None, names: tuple[str, ...]) -> tuple[list[ServiceConfig], list[str]]:
    """The named configs, or every config that loads when none is named, and the errors of those that
    do not (said by `end_with`, after the good ones are shown)."""
    return ([load(units_opt, n) for n in names], []) if names else units_dir(units_opt).load_each()


def end_with(bad: list[str]) -> None:
    """After every good unit is shown: each config that did not load, one line each, then exit 2."""
    if bad:
        for line in bad:
            echo(f"svcdiag: error: {line}\n", err=True)
        sys.exit(2)


def emit_rows(rows: list[dict[str, Any]], as_json: bool, render: Callable[[dict[str, Any]], str]) -> None:
    """Rows as JSON Lines, or each rendered for a person."""
    import json

    for row in rows:
        echo(json.dumps(row, ensure_ascii=False, default=str) + "\n" if as_json else render(row))


def status(units_opt: str | None, names: tuple[str, ...], host: str | None, as_json: bool) -> None:
    """`svcdiag status`: state, phase, figures and verdict of each unit's current start."""
    from svcdiag.ops.nodes import Hosts
    from svcdiag.ops.nodes import status as read_status

    configs, bad = load_many(units_opt, names)
    with Hosts(host) as hosts:
        rows = read_status(hosts, configs, units_dir(units_opt))
        from svcdiag.output.report import render_status

        emit_rows(rows, as_json, render_status)
    end_with(bad)


#: the commands `svcdiag.cli.fast` may run without click: each takes the group's and the
#: command's parameters by the names click gives them
SERVED: dict[str, Callable[..., None]] = {"status": status}
