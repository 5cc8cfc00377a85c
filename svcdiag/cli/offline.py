"""Commands that start nothing: replay a saved log, predict memory, read events back."""

from __future__ import annotations

import sys

import click

from svcdiag.cli import main
from svcdiag.cli.common import INTERRUPTED, emit_json, json_option, load, publisher, units_dir, verdict_exit
from svcdiag.errors import SvcdiagError


@main.command()
@click.argument("path", required=False)
@click.option("--example", metavar="NAME", help="replay a bundled example log (see --list-examples)")
@click.option("--list-examples", is_flag=True, help="list the bundled example logs")
@click.option("--config", "config_name", metavar="NAME", help="judge with this config's deadlines and figures")
@click.option("--invocation", metavar="ID", help="the start to judge: an invocation id (prefix) or a 1-based number")
@click.option("--strict", is_flag=True, help="exit 5 when the start is healthy but degraded")
@click.option("--json", "as_json", is_flag=True, help="one JSON object per event; the verdict last")
@click.pass_context
def replay(ctx: click.Context, path: str | None, example: str | None, list_examples: bool,
           config_name: str | None, invocation: str | None, strict: bool, as_json: bool) -> None:
    """Judge a saved SGLang log: plain, journalctl short, -o json or -o export ('-' for stdin)."""
    from svcdiag.ops.replay import EXAMPLES_DIR, example_path, replay_path
    from svcdiag.ops.start import conclude, diagnoser

    if list_examples:
        click.echo("".join(f"{p.stem}\n" for p in sorted(EXAMPLES_DIR.iterdir())), nl=False)
        return
    if example and path:
        raise SvcdiagError("give a PATH or --example, not both")
    path = str(example_path(example)) if example else path
    if not path:
        raise SvcdiagError("replay needs a PATH ('-' for stdin) or --example NAME")
    cfg = load(ctx, config_name) if config_name else None
    name, result = replay_path(path, sys.stdin.buffer, cfg, invocation)
    pub = publisher(as_json, cfg, live=False)
    pub.start(result.verdict.unit, result.chosen.invocation or result.verdict.invocation)
    which = f"start {result.chosen.index} of {len(result.starts)}" + (
        f", invocation {result.chosen.invocation}" if result.chosen.invocation else "")
    pub.note(f"replay {name}: {result.format} format, {which}")
    for ev in result.events:
        pub.event(ev)
    units = units_dir(ctx) if cfg else None
    verdict_exit(ctx, conclude(pub, result.verdict, diagnoser(cfg, units)), strict=strict)


@main.command()
@click.argument("name", required=False)
@click.option("--gpu-memory", type=float, metavar="GB", help="GPU memory free per GPU before loading "
              "(else the config's gpu_memory_gb, torch, nvidia-smi)")
@click.option("--kv-bytes-per-token", type=click.IntRange(min=1), metavar="N",
              help="KV bytes per token on one GPU, when config.json cannot be read")
@click.option("--weights-gb", type=click.FloatRange(min=0, min_open=True), metavar="GB",
              help="the whole checkpoint's size, when the model directory has no safetensors")
@click.option("--calibration", is_flag=True, help="predicted vs. logged KV tokens of past starts, per config")
@click.option("--state-dir", metavar="DIR", help="where calibration is kept (default: $SVCDIAG_STATE_DIR or /var/lib/svcdiag)")
@json_option
@click.pass_context
def preflight(ctx: click.Context, name: str | None, gpu_memory: float | None, kv_bytes_per_token: int | None,
              weights_gb: float | None, calibration: bool, state_dir: str | None, as_json: bool) -> None:
    """Predict NAME's KV pool and max_running_requests before starting it, by SGLang's own
    formula; exit 1 when it cannot serve one full-context request."""
    from svcdiag.files import state_dir as find_state_dir
    from svcdiag.ops.preflight import Calibration, plan
    from svcdiag.output.report import render_calibration, render_preflight

    if calibration:
        rows = [r for r in Calibration(find_state_dir(state_dir)).rows() if not name or r["config"] == name]
        if as_json:
            for r in rows:
                emit_json(r)
        else:
            click.echo(render_calibration(rows), nl=False)
        return
    if not name:
        raise SvcdiagError("preflight: name a config (or --calibration)")
    cfg = load(ctx, name)
    result = plan(cfg, gpu_memory=gpu_memory, kv_bytes_per_token=kv_bytes_per_token, weights_gb=weights_gb)
    out = {"event": "preflight", "name": cfg.name, **result.to_json()}
    emit_json(out) if as_json else click.echo(render_preflight(cfg.name, out), nl=False)
    ctx.exit(1 if result.prediction.verdict == "cannot_serve" else 0)


@main.command()
@click.option("--follow", "-f", "follow_", is_flag=True, help="after the history, print new events as they come")
@click.option("--unit", "-u", "names", multiple=True, metavar="NAME",
              help="only this config or unit (repeatable; default: every unit svcdiag has reported on)")
@click.option("--since", metavar="TIME", help="'2026-12-02 19:30', '19:30', 'today', '-10min', '@UNIX'")
@click.option("--json", "as_json", is_flag=True, help="JSON Lines, the records exactly as written (docs/events.md)")
@click.pass_context
def events(ctx: click.Context, follow_: bool, names: tuple[str, ...], since: str | None, as_json: bool) -> None:
    """Readiness events of every start svcdiag judged, read back from the journal: from any
    terminal, while `up` runs elsewhere or long after it exited."""
    from svcdiag.output.report import JsonLines, Lines
    from svcdiag.systemd.journal import EventReader, parse_since

    wanted = set(names) | {n + ".service" for n in names if not n.endswith(".service")}
    reader = EventReader(units=wanted, since=parse_since(since) if since else None)
    sink = JsonLines(sys.stdout) if as_json else Lines(sys.stdout, with_unit=True)
    try:
        while True:
            for rec in reader.read():
                sink.publish(rec)
            if not follow_:
                return
            reader.wait(1.0)
    except KeyboardInterrupt:
        ctx.exit(INTERRUPTED)
