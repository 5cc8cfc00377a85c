"""Commands that start nothing: replay a saved log, predict memory, read events back."""

from __future__ import annotations

import sys

import click

from svcdiag.cli import common as c
from svcdiag.cli import main, plain
from svcdiag.errors import SvcdiagError


@main.command()
@click.argument("path", required=False)
@click.option("--example", metavar="NAME", help="replay a bundled example log (see --list-examples)")
@click.option("--list-examples", is_flag=True, help="list the bundled example logs")
@click.option("--config", "config_name", metavar="NAME", help="judge with this config's deadlines and figures")
@click.option("--start", "start_no", metavar="N", callback=plain.check_start,
              help="the start to judge: its number in the input, 1 the first (default: the last)")
@click.option("--invocation", metavar="ID", help="the start to judge: its systemd invocation id, or a prefix of it")
@c.STRICT
@c.JSON
@c.PROGRESS
@click.pass_context
def replay(ctx: click.Context, path: str | None, example: str | None, list_examples: bool,
           config_name: str | None, start_no: int | None, invocation: str | None, strict: bool, as_json: bool,
           progress: bool) -> None:
    """Judge a saved SGLang log: plain, journalctl short, -o json or -o export ('-' for stdin)."""
    plain.replay(c.units_opt(ctx), path, example, list_examples, config_name, start_no, invocation, strict, as_json,
                 progress)


@main.command()
@click.argument("name", required=False)
@c.GPU_MEMORY
@click.option("--kv-bytes-per-token", type=c.Bounded(1 << 30, integer=True), metavar="N",
              help="KV bytes per token on one GPU, when config.json cannot be read")
@click.option("--weights-gb", type=c.Bounded(65536), metavar="GB",
              help="the whole checkpoint's size, when the model directory has no safetensors")
@click.option("--model-config", type=click.Path(dir_okay=False), metavar="FILE",
              help="a config.json to read the model's shape from (a hub id not cached here, a model elsewhere)")
@click.option("--calibration", is_flag=True, help="predicted vs. logged KV tokens of past starts, per config")
@c.HOST
@c.STATE_DIR
@c.JSON
@click.pass_context
def preflight(ctx: click.Context, name: str | None, gpu_memory: float | None, kv_bytes_per_token: int | None,
              weights_gb: float | None, model_config: str | None, calibration: bool, host: str | None,
              state_dir: str | None, as_json: bool) -> None:
    """Predict NAME's KV pool and max_running_requests before starting it, by SGLang's own
    formula; exit 1 when it cannot serve one full-context request. With --host (or the config's
    remote_host): the model files and nvidia-smi of that host, over SSH."""
    plain.preflight(c.units_opt(ctx), name, gpu_memory, kv_bytes_per_token, weights_gb, model_config, calibration, host,
                    state_dir, as_json)  # also served without click (svcdiag.cli.fast)


@main.command()
@click.option("--follow", "-f", "follow_", is_flag=True, help="after the history, print new events as they come")
@click.option("--unit", "-u", "names", multiple=True, metavar="NAME",
              help="only this config or unit (repeatable; default: every unit svcdiag has reported on)")
@c.SINCE
@click.option("--host", "hosts", multiple=True, metavar="[USER@]HOST[:PORT]", callback=lambda ctx, p, v: [
    plain.check_host(ctx, p, h) for h in v], help="read these hosts' journals over SSH, merged by time (repeatable)")
@c.JSON
@click.pass_context
def events(ctx: click.Context, follow_: bool, names: tuple[str, ...], since: float | None, hosts: list[str],
           as_json: bool) -> None:
    """Readiness events of every start svcdiag judged, read back from the journal: from any
    terminal, while `up` runs elsewhere or long after it exited."""
    from svcdiag.output.report import JsonLines, Lines
    from svcdiag.systemd.journal import EventReader

    if hosts:
        from svcdiag.ops.serve.nodes import events_on_hosts

        lines = Lines(sys.stdout, with_unit=True)

        def show(host: str, rec: object) -> None:
            if as_json:
                c.emit_json({**rec.to_json(), "host": host})  # type: ignore[attr-defined]
            elif text := lines.text(rec):  # type: ignore[arg-type]
                click.echo(f"{host}  {text.lstrip()}" if not text.startswith("\n") else text, nl=False)

        try:
            events_on_hosts(hosts, show, units=names, since=since, follow=follow_)
        except KeyboardInterrupt:
            ctx.exit(c.INTERRUPTED)
        return

    from svcdiag.systemd.journal import no_journal

    if why := no_journal():
        raise SvcdiagError(f"events: {why}")
    reader = EventReader(units=names, since=since)
    sink = JsonLines(sys.stdout) if as_json else Lines(sys.stdout, with_unit=True)
    try:
        reader.copy_to(sink.publish, follow=follow_)
    except KeyboardInterrupt:
        ctx.exit(c.INTERRUPTED)
