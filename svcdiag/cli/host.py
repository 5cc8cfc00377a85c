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
    each config's service user and its home, svcdiag's state, /etc/svcdiag/units, the polkit rule;
    then check svcdiag's own interpreter, each config's SGLang interpreter, the GPUs and the model
    paths. Exit 1 when a step or a check failed."""
    from svcdiag.errors import SvcdiagError
    from svcdiag.ops.setup import setup as prepare

    try:
        configs = c.units_dir(ctx).load_all()
    except SvcdiagError as e:  # a bare host: no units folder yet; setup makes /etc/svcdiag/units
        configs = []
        click.echo(f"svcdiag: note: {e}; only the host is prepared", err=True)
    steps = prepare(configs, dry_run=dry_run)
    c.emit_rows([c.tagged("setup", s.to_json()) for s in steps], as_json,
                lambda r: f"{_MARK[r['status']]:>7}  {r['what']}" + (f": {r['detail']}" if r["detail"] else "") + "\n")
    ctx.exit(1 if any(s.bad for s in steps) else 0)
