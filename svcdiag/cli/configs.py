"""Configs and unit files: list, render, install, diff. Nothing here touches a running unit."""

from __future__ import annotations

from pathlib import Path

import click

from svcdiag.cli import common as c
from svcdiag.cli import main, plain
from svcdiag.errors import SvcdiagError

DEFAULT_UNIT_DIR = "/etc/systemd/system"


@main.command("list")
@c.JSON
@click.pass_context
def list_cmd(ctx: click.Context, as_json: bool) -> None:
    """The configs, with the folder they were read from."""
    plain.list_configs(c.units_opt(ctx), as_json)


@main.command()
@click.argument("name")
@c.JSON
@click.pass_context
def render(ctx: click.Context, name: str, as_json: bool) -> None:
    """Print the systemd unit rendered from config NAME (flags spelled for its SGLang release); --json:
    `exec_start` is the unit's ExecStart= (`svcdiag supervise … --` first in notify mode), `sglang_argv`
    SGLang's own command, and this host's installed unit (`unit_file`, `installed_text`, `drift`)."""
    plain.render(c.units_opt(ctx), name, as_json)


@main.command()
@click.argument("names", nargs=-1)
@click.option("--unit-dir", default=DEFAULT_UNIT_DIR, show_default=True, type=click.Path(file_okay=False))
@click.option("--force", is_flag=True, help="replace a unit file svcdiag did not write")
@c.HOST
@c.JSON
@click.pass_context
def install(ctx: click.Context, names: tuple[str, ...], unit_dir: str, force: bool, host: str | None,
            as_json: bool) -> None:
    """Check, render and write units (no NAME: every config but the stand-in demos; one per node of a
    multi-node config), atomically; daemon-reload if systemd runs. On a remote host (--host,
    remote_host, [[nodes]] host): over SSH."""
    from svcdiag.ops.host.check import checked_install
    from svcdiag.ops.serve.nodes import expand, install_on_hosts

    configs = c.load_many(ctx, names)
    demos = [cfg.name for cfg in configs if cfg.simulate and not names]  # named, a demo is installed
    configs = expand([cfg for cfg in configs if cfg.name not in demos])
    if not configs:
        raise SvcdiagError("install: no config to install but stand-in demos (simulate =); name one to install it")
    if host or any(cfg.remote_host for cfg in configs):
        with c.hosts(host) as hosts:
            result = install_on_hosts(hosts, configs, force=force)
    else:
        result = checked_install(configs, Path(unit_dir), force=force)
    if demos:
        result["notes"].append(f"not installed: {len(demos)} stand-in demo(s) (simulate =: {', '.join(demos)}); "
                               "name one to install it")
    if as_json:
        c.emit_json(c.tagged("install", result))
        return
    for line in (*result["notes"], *(f"svcdiag: warning: {w}" for w in result["warnings"])):
        click.echo(line, err=True)
    for item in result["units"]:
        click.echo(f"{item['action']:>9}  {item['path']}")
    for path in result.get("secrets", []):  # a remote host's secret files: their paths only
        click.echo(f"{'secret':>9}  {path}")
    click.echo(result["reload"])


@main.command()
@click.argument("a")
@click.argument("b")
@c.JSON
@click.pass_context
def diff(ctx: click.Context, a: str, b: str, as_json: bool) -> None:
    """The effective configs of A and B (after extends), key by key; * marks GPU-memory keys."""
    from svcdiag.config.diff import config_diff

    result = c.tagged("diff", {"a": a, "b": b, "differences": config_diff(c.load(ctx, a), c.load(ctx, b))})
    c.emit_rows([result], as_json, c.report().render_diff)


@main.command("check")
@click.argument("name")
@click.option("--sglang-version", metavar="V", help="check for this SGLang release (default: the config's, else its python's)")
@c.STATE_DIR
@c.JSON
@click.pass_context
def check_cmd(ctx: click.Context, name: str, sglang_version: str | None, state_dir: str | None, as_json: bool) -> None:
    """Check NAME's rendered SGLang arguments against the release that will run them (exit 2: refused)."""
    plain.check(c.units_opt(ctx), name, sglang_version, state_dir, as_json)
