"""Commands on what svcdiag remembers: history, campaign, bundle."""

from __future__ import annotations

import click

from svcdiag.cli import common as c
from svcdiag.cli import main


@main.command()
@click.argument("name", required=False)
@c.SINCE
@click.option("--advise", is_flag=True, help="per-phase deadlines, TimeoutStartSec and a startupProbe the recorded starts need")
@click.option("--format", "fmt", type=click.Choice(["text", "kubernetes"]), default="text", show_default=True,
              help="--advise as a table, or as the env and probe blocks of a pod (docs/kubernetes.md)")
@click.option("--probe-port", type=click.IntRange(1, 65535), default=8081, show_default=True, metavar="PORT",
              help="--format kubernetes: the supervisor's --probe-port")
@c.STATE_DIR
@c.JSON
@click.pass_context
def history(ctx: click.Context, name: str | None, since: float | None, advise: bool, fmt: str, probe_port: int,
            state_dir: str | None, as_json: bool) -> None:
    """Every judged start (up, wait, baseline-check, campaign), oldest first; NAME: one config's."""
    from svcdiag.errors import SvcdiagError
    from svcdiag.ops.host import history as h
    from svcdiag.output.history import render_advice, render_history

    if advise:
        if not name:
            raise SvcdiagError("history --advise: name a config")
        cfg = c.load(ctx, name)
        a = h.advise(cfg, h.load_usual(cfg, None, state_dir, strict=True))  # unread is not "0 starts"
        if fmt == "kubernetes" and not as_json:
            from svcdiag.output.history import render_kubernetes

            click.echo(render_kubernetes(a, probe_port), nl=False)
            return
        c.emit_rows([a], as_json, render_advice)
        return
    if fmt != "text":
        raise SvcdiagError("history --format kubernetes: only with --advise NAME")
    rows = h.read_rows(state_dir, name, since=since)
    if name and not rows and since is None:
        _known_name(ctx, name, h.read_rows(state_dir))
    c.emit_rows(rows, True, str) if as_json else click.echo(render_history(rows), nl=False)


def _known_name(ctx: click.Context, name: str, every: list[dict]) -> None:
    """`history NAME` of no config and no recorded start is a typo: one line with the name meant, exit 2,
    as every other command says it (a config with no start yet is "no recorded starts")."""
    from svcdiag.config.service import did_you_mean
    from svcdiag.errors import SvcdiagError

    try:
        configs = c.units_dir(ctx).names()
    except SvcdiagError:
        configs = []
    known = set(configs) | {str(r.get("config")) for r in every}
    if name not in known:
        raise SvcdiagError(f"history: no config and no recorded start named {name!r}{did_you_mean(name, sorted(known))}")


@main.command()
@click.argument("plan_path", metavar="PLAN.toml", type=click.Path(dir_okay=False))
@click.option("--rerun", is_flag=True, help="run again what an earlier run of this campaign recorded")
@click.option("--force", is_flag=True, help="start even when another process holds memory on a config's GPUs")
@c.HOST
@c.STATE_DIR
@c.JSON
@click.pass_context
def campaign(ctx: click.Context, plan_path: str, rerun: bool, force: bool, host: str | None, state_dir: str | None,
             as_json: bool) -> None:
    """Baseline first, then each phase's configs: up, judge, benchmark, down; every one recorded.
    Exit 0 when every config was healthy, 1 otherwise, 130 when interrupted. With --host (or each
    config's remote_host): every run on that host, over SSH."""
    from pathlib import Path

    from svcdiag.config.campaign import load_plan
    from svcdiag.ops.fleet.campaign import run
    from svcdiag.output.campaign import summary

    units = c.units_dir(ctx)
    plan = load_plan(Path(plan_path), units)
    pub = c.publisher(as_json, None, journal_sink=not host)  # a --host run's records: the output only, as `up`'s
    outcome = run(plan, units, pub, rerun=rerun, force=force, state=state_dir, host=host)
    pub.close()
    if as_json:
        c.emit_json(c.tagged("campaign_result", {
            "name": outcome.name, "baseline": outcome.baseline, "interrupted": outcome.interrupted,
            "stopped_by_baseline": outcome.stopped_by_baseline, "results": list(outcome.files),
            "rows": [r.to_json() for r in outcome.rows]}))
    else:
        click.echo(summary(outcome), nl=False)
    ctx.exit(c.INTERRUPTED if outcome.interrupted else 0 if outcome.ok else 1)


@main.command()
@click.argument("name")
@click.option("--invocation", metavar="ID", help="the start (default: the config's last recorded one)")
@click.option("-o", "--output", "out", metavar="FILE.tar.gz", help="where (default: NAME-INVOCATION.tar.gz here)")
@c.HOST
@c.STATE_DIR
@c.JSON
@click.pass_context
def bundle(ctx: click.Context, name: str, invocation: str | None, out: str | None, host: str | None,
           state_dir: str | None, as_json: bool) -> None:
    """A post-mortem of one start, secrets redacted: `svcdiag replay FILE.tar.gz` judges it again.
    With --host (or the config's remote_host): that host's journal, unit file and status, over SSH."""
    cfg = c.load(ctx, name)
    c.require_bus(host, cfg)  # no systemd here: no unit's journal to bundle either
    from svcdiag.ops.offline.bundle import bundle as make

    with c.hosts(host) as hosts:
        sd = hosts.get(cfg) if hosts.key(cfg) != "local" else None
        r = make(cfg, invocation=invocation, out=out, state=state_dir, sd=sd)
    row = c.tagged("bundle", {"path": str(r.path), "invocation": r.invocation, "files": list(r.files),
                              "redacted": list(r.redacted), "verdict": (r.verdict or {}).get("verdict")})
    c.emit_rows([row], as_json, lambda x: f"{x['path']}: invocation {x['invocation']}, {len(x['files'])} files, "
                f"verdict {x['verdict']}; redacted: {', '.join(d['what'] for d in x['redacted']) or 'nothing'}\n")
