"""Commands that prepare a host and write configs: setup, import, new."""

from __future__ import annotations

import click

from svcdiag.cli import common as c
from svcdiag.cli import main

_MARK = {"done": "done", "present": "ok", "would": "would", "ok": "ok", "failed": "FAILED", "skipped": "skipped"}


@main.command()
@click.option("--dry-run", is_flag=True, help="say what would be done, change nothing (the checks still run)")
@c.JSON
@click.pass_context
def setup(ctx: click.Context, dry_run: bool, as_json: bool) -> None:
    """Prepare this host for svcdiag's units, saying each step; run it again at will: group svcdiag,
    each config's service user and its home, svcdiag's state, /etc/svcdiag/units, the polkit rule,
    bash completion;
    then check svcdiag's own interpreter, each config's SGLang interpreter, the GPUs and the model
    paths. Exit 1 when a step or a check failed."""
    from svcdiag.errors import SvcdiagError
    from svcdiag.ops.host.setup import setup as prepare

    try:
        configs = c.units_dir(ctx).load_all()
    except SvcdiagError as e:  # a bare host: no units folder yet; setup makes /etc/svcdiag/units
        configs = []
        click.echo(f"svcdiag: note: {e}; only the host is prepared", err=True)
    from click.shell_completion import BashComplete

    script = BashComplete(ctx.find_root().command, {}, "svcdiag", "_SVCDIAG_COMPLETE").source()
    steps = prepare(configs, dry_run=dry_run, completion=script)
    c.emit_rows([c.tagged("setup", s.to_json()) for s in steps], as_json,
                lambda r: f"{_MARK[r['status']]:>7}  {r['what']}" + (f": {r['detail']}" if r["detail"] else "") + "\n")
    ctx.exit(1 if any(s.bad for s in steps) else 0)


def _adopted(result: object, as_json: bool, *, show_diff: bool) -> None:
    from svcdiag.ops.host.adopt import Adopted

    assert isinstance(result, Adopted)
    if as_json:
        c.emit_json(c.tagged("config_written", result.to_json()))
        return
    for w in result.warnings:
        click.echo(f"svcdiag: warning: {w}", err=True)
    click.echo(result.toml if not result.written else "", nl=False)
    if show_diff:
        click.echo(result.diff(), nl=False)
    click.echo(f"{'wrote' if result.written else 'would write'} {result.path}" +
               (f"; next: svcdiag check {result.name}, then svcdiag up {result.name} --wait-ready" if result.written else ""),
               err=True)


@main.command("import")
@click.argument("source", metavar="UNIT|FILE")
@click.option("--name", metavar="NAME", help="the config's name (default: the unit's, or the script's file name)")
@click.option("--sglang-version", metavar="V", help="read the flags as this SGLang release does (default: the newest bundled)")
@click.option("--dry-run", is_flag=True, help="print the config and the unit diff; write nothing")
@click.option("--force", is_flag=True, help="replace a config of that name")
@c.JSON
@click.pass_context
def import_cmd(ctx: click.Context, source: str, name: str | None, sglang_version: str | None, dry_run: bool,
               force: bool, as_json: bool) -> None:
    """Turn a hand-written unit (a file, or a unit name) or a launch script / command line ('-': stdin)
    into a config: flags as config keys, the rest in extra_args, secrets from Environment= moved to
    [secrets]; then show the diff of the old unit and the one svcdiag renders."""
    from svcdiag.ops.host.adopt import import_config, units_to_be

    units = units_to_be(c.units_opt(ctx)) if dry_run else c.units_dir(ctx)  # --dry-run: before setup made it
    result = import_config(source, units, name=name, version=sglang_version, dry_run=dry_run, force=force)
    _adopted(result, as_json, show_diff=True)


@main.command()
@click.argument("name")
@click.option("--model", required=True, metavar="PATH|HUB_ID", help="the model: a local directory or a Hugging Face id")
@click.option("--extends", "base", metavar="BASE", help="a variant of config BASE (every key it does not set is BASE's)")
@click.option("--dry-run", is_flag=True, help="print the config; write nothing")
@click.option("--force", is_flag=True, help="replace a config of that name")
@c.JSON
@click.pass_context
def new(ctx: click.Context, name: str, model: str, base: str | None, dry_run: bool, force: bool, as_json: bool) -> None:
    """Write a starter config NAME for a model: the keys an operator usually sets, commented
    (docs/install.md walks through one)."""
    from svcdiag.ops.host.adopt import new_config

    _adopted(new_config(name, c.units_dir(ctx), model=model, extends=base, force=force, dry_run=dry_run),
             as_json, show_diff=False)
