"""Commands on live units: up, wait, down, status, logs, baseline-check, tune."""

from __future__ import annotations

from typing import TYPE_CHECKING

import click

from svcdiag.cli import common as c
from svcdiag.cli import main, plain

if TYPE_CHECKING:
    from svcdiag.ops.serve.start import StartOutcome
    from svcdiag.output.publish import Publisher


def _finish(ctx: click.Context, outcome: StartOutcome, pub: Publisher, *, as_json: bool, strict: bool) -> None:
    """Close the output, then leave with the outcome's exit code."""
    if outcome.refused is not None:
        if not as_json:
            click.echo(c.report().render_preflight(pub.config or "", outcome.refused.to_json()), nl=False)
        pub.note("not started: it cannot serve one request; apply a fix above, or --force to start anyway")
    pub.close()
    if outcome.refused is not None:
        ctx.exit(1)
    if outcome.interrupted:
        ctx.exit(c.INTERRUPTED)
    if outcome.verdict is not None:
        c.verdict_exit(ctx, outcome.verdict, strict=strict)


@main.command()
@click.argument("name")
@click.option("--wait-ready", is_flag=True, help="wait for the verdict: healthy, failed or timed out")
@click.option("--restart", is_flag=True, help="restart even if the unit is already active")
@click.option("--force", is_flag=True, help="start even when preflight predicts it cannot serve one request, "
              "or another process holds memory on its GPUs")
@c.GPU_MEMORY
@c.HOST
@c.waiting
@click.pass_context
def up(ctx: click.Context, name: str, wait_ready: bool, restart: bool, force: bool, gpu_memory: float | None,
       host: str | None, timeout: float | None, as_json: bool, strict: bool, textfile: str | None,
       progress: bool) -> None:
    """Preflight, install (if missing or drifted) and start NAME; with --wait-ready, report its verdict.
    A multi-node config (nnodes > 1): every node's unit, on its host, judged together."""
    cfg = c.load(ctx, name)
    c.require_bus(host, cfg)
    from svcdiag.ops.serve import nodes, start

    with c.hosts(host) as hosts:
        pub = c.publisher(as_json, cfg, textfile=textfile, progress=progress, journal_sink=hosts.key(cfg) == "local")
        if cfg.multinode:
            outcome = nodes.up(hosts, cfg, c.units_dir(ctx), pub, wait=wait_ready, restart=restart, timeout=timeout)
        else:
            outcome = start.up(hosts.get(cfg), cfg, c.units_dir(ctx), pub, wait=wait_ready, restart=restart,
                               force=force, gpu_memory=gpu_memory, timeout=timeout)
    if not wait_ready and not as_json and outcome.refused is None:
        pub.note(f"follow it with: svcdiag wait {name}")
    _finish(ctx, outcome, pub, as_json=as_json, strict=strict)


@main.command()
@click.argument("name")
@c.HOST
@c.waiting
@click.pass_context
def wait(ctx: click.Context, name: str, host: str | None, timeout: float | None, as_json: bool, strict: bool,
         textfile: str | None, progress: bool) -> None:
    """Attach to NAME's current start and wait for its verdict, restarting nothing."""
    cfg = c.load(ctx, name)
    c.require_bus(host, cfg)
    from svcdiag.ops.serve import nodes, start

    with c.hosts(host) as hosts:
        pub = c.publisher(as_json, cfg, textfile=textfile, progress=progress, journal_sink=hosts.key(cfg) == "local")
        if cfg.multinode:
            outcome = nodes.up(hosts, cfg, c.units_dir(ctx), pub, wait=True, restart=False, timeout=timeout,
                               attach_only=True, command="wait")
        else:
            outcome = start.attach(hosts.get(cfg), cfg, c.units_dir(ctx), pub, timeout)
    _finish(ctx, outcome, pub, as_json=as_json, strict=strict)


@main.command()
@click.argument("names", nargs=-1, required=True)
@c.HOST
@c.JSON
@click.pass_context
def down(ctx: click.Context, names: tuple[str, ...], host: str | None, as_json: bool) -> None:
    """Stop each NAME (every node of a multi-node one) and wait until systemd has stopped it; exit 1 if one still runs."""
    from svcdiag.ops.serve.nodes import down as stop

    configs = c.load_many(ctx, names)
    with c.hosts(host) as hosts:
        rows = stop(hosts, configs)
    c.emit_rows(rows, as_json, c.report().render_down)
    ctx.exit(0 if all(r["stopped"] for r in rows) else 1)


@main.command()
@click.argument("names", nargs=-1)
@c.HOST
@c.JSON
@click.pass_context
def status(ctx: click.Context, names: tuple[str, ...], host: str | None, as_json: bool) -> None:
    """State, phase, figures and verdict of the current start of each unit (default: all); one row per node."""
    plain.status(c.units_opt(ctx), names, host, as_json)  # also served without click (svcdiag.cli.fast)


@main.command()
@click.argument("name")
@click.option("--milestones", is_flag=True, help="only the milestones, as events")
@click.option("--follow", "-f", "follow_", is_flag=True, help="keep following until the unit stops (Ctrl-C to leave)")
@c.HOST
@c.JSON
@click.pass_context
def logs(ctx: click.Context, name: str, milestones: bool, follow_: bool, host: str | None, as_json: bool) -> None:
    """The current start's log (this invocation only, systemd's lines about it included)."""
    plain.logs(c.units_opt(ctx), name, milestones, follow_, host, as_json)  # also served without click (cli.fast)


@main.command("baseline-check")
@click.argument("name", required=False)
@click.option("--against", "candidate", metavar="CANDIDATE", help="explain how CANDIDATE differs and why it fails")
@click.option("--keep-running", is_flag=True, help="leave the baseline running even if it was stopped before")
@c.HOST
@c.STATE_DIR
@c.waiting
@click.pass_context
def baseline_check(ctx: click.Context, name: str | None, candidate: str | None, keep_running: bool,
                   host: str | None, state_dir: str | None, timeout: float | None, as_json: bool, strict: bool,
                   textfile: str | None, progress: bool) -> None:
    """Start the known-good baseline afresh, snapshot its figures, compare with the last good run,
    and put it back the way it was. NAME defaults to the config marked `baseline = true`."""
    units = c.units_dir(ctx)
    cfg = c.load(ctx, name) if name else units.baseline()
    cand = c.load(ctx, candidate) if candidate else None
    c.require_bus(host, cfg)
    from svcdiag.ops.fleet.baseline import check

    with c.hosts(host) as hosts:
        pub = c.publisher(as_json, cfg, textfile=textfile, progress=progress, journal_sink=hosts.key(cfg) == "local")
        outcome = check(hosts.get(cfg), cfg, units, pub, candidate=cand, keep_running=keep_running, state=state_dir,
                        timeout=timeout)
    pub.close()
    if outcome.verdict is None:
        ctx.exit(c.INTERRUPTED)
    if not as_json:
        click.echo(c.report().render_baseline(outcome.result), nl=False)
    if outcome.verdict.verdict != "healthy" or not outcome.drift:
        c.verdict_exit(ctx, outcome.verdict, strict=strict)
    ctx.exit(1)  # healthy, but drifted


TUNE_EXIT = {"met": 0, "impossible": 1, "stuck": 1, "budget": 3, "interrupted": c.INTERRUPTED}


@main.command()
@click.argument("name")
@click.option("--target", "targets", multiple=True, required=True, metavar="KEY=N",
              help="max_running=N (required): N requests at once; context=N: of N tokens each (default: the config's)")
@click.option("--keep", multiple=True, metavar="KEY", help="hold this capacity key as the config has it (repeatable)")
@click.option("--allow", multiple=True, metavar="KEY",
              help="let the search lower speculative.num_draft_tokens (DFlash's block size) when nothing else serves")
@click.option("--budget", metavar="DURATION", help="stop before a start would run past it (45m, 1h30m, 600s)")
@click.option("--max-starts", type=click.IntRange(1), metavar="N", help="at most N real starts")
@click.option("--write", "write", type=click.Path(dir_okay=False), metavar="PATH",
              help="also write the result here (always: units/NAME-tuned.toml)")
@click.option("--baseline", is_flag=True, help="re-verify the known-good baseline first; refuse if it drifted")
@click.option("--resume", is_flag=True, help="continue the last interrupted run of NAME")
@c.GPU_MEMORY
@c.HOST
@c.STATE_DIR
@c.JSON
@c.TIMEOUT
@click.pass_context
def tune(ctx: click.Context, name: str, targets: tuple[str, ...], keep: tuple[str, ...], allow: tuple[str, ...],
         budget: str | None,
         max_starts: int | None, write: str | None, baseline: bool, resume: bool, gpu_memory: float | None,
         host: str | None, state_dir: str | None, as_json: bool, timeout: float | None) -> None:
    """Find the settings that serve --target on NAME's GPU, proving each with a real start, and
    write them as units/NAME-tuned.toml (extends NAME). Exit 0 served, 1 impossible, 3 budget spent."""
    from pathlib import Path

    cfg = c.load(ctx, name)
    c.require_bus(host, cfg)
    from svcdiag.ops.fleet import tune as t

    target, kept, budget_s = t.parse_target(targets, cfg), t.parse_keep(keep), t.parse_budget(budget)
    allowed = t.parse_keep(allow, "--allow")
    with c.hosts(host) as hosts:
        pub = c.publisher(as_json, cfg, journal_sink=hosts.key(cfg) == "local")
        result = t.tune(hosts.get(cfg), cfg, c.units_dir(ctx), pub, target=target, keep=kept, allow=allowed,
                        budget_s=budget_s,
                        max_starts=max_starts, write=Path(write) if write else None, baseline=baseline,
                        resume=resume, gpu_memory=gpu_memory, timeout=timeout, state=state_dir)
    pub.close()
    if as_json:
        c.emit_json(c.tagged("tune_result", result.to_json()))
    else:
        click.echo(c.report().render_tune(result.to_json()), nl=False)
    ctx.exit(TUNE_EXIT.get(result.status, 1))


@main.command()
@click.option("--host", "host", metavar="[USER@]HOST[:PORT]", callback=plain.check_host,
              help="the board of that host's units, over SSH (its D-Bus signals and journal); default: this host")
@c.JSON
@click.pass_context
def top(ctx: click.Context, host: str | None, as_json: bool) -> None:
    """A live board of every svcdiag unit: state, phase and its progress, elapsed vs. usual, KV tokens,
    max_running, degraded marks, last verdict (q quits). Piped: one snapshot (--json: an object per unit)."""
    plain.top(c.units_opt(ctx), host, as_json)  # also served without click (cli.fast)


@main.command(context_settings={"ignore_unknown_options": True})
@click.option("--config", "name", metavar="NAME",
              help="the config whose start this is (a notify unit); without it, a container's: the config from ARGV")
@click.option("--node-rank", type=click.IntRange(0, 63), metavar="R",
              help="with --config: node R of a multi-node config (its unit NAME-nodeR)")
@click.option("--probe-port", type=click.IntRange(0, 65535), envvar="SVCDIAG_PROBE_PORT", metavar="PORT",
              help="container: answer /startupz /readyz /livez on this port ($SVCDIAG_PROBE_PORT)")
@click.option("--probe-host", default="0.0.0.0", envvar="SVCDIAG_PROBE_HOST", show_default=True, metavar="ADDR",
              help="container: the probes' address (127.0.0.1 for exec probes only; $SVCDIAG_PROBE_HOST)")
@click.option("--events", metavar="stderr|FILE", envvar="SVCDIAG_EVENTS",
              help="container: the judge's events as JSON Lines there, never on SGLang's stdout ($SVCDIAG_EVENTS)")
@click.option("--termination-log", metavar="FILE", envvar="SVCDIAG_TERMINATION_LOG",
              help="container: the verdict, cause and first fix there (default /dev/termination-log if it exists)")
@click.option("--grace", type=click.FloatRange(0), default=25.0, envvar="SVCDIAG_GRACE_S", show_default=True,
              metavar="S", help="container: seconds SGLang gets after SIGTERM before SIGKILL "
                                "(under the pod's terminationGracePeriodSeconds; $SVCDIAG_GRACE_S)")
@click.argument("argv", nargs=-1, required=True, type=click.UNPROCESSED)
@click.pass_context
def supervise(ctx: click.Context, name: str | None, node_rank: int | None, probe_port: int | None, probe_host: str,
              events: str | None, termination_log: str | None, grace: float, argv: tuple[str, ...]) -> None:
    """Run ARGV (`-- sglang command`) as its child, pass its output through byte for byte and judge
    its start. With --config: a notify unit's main process (READY=1 once judged healthy; rendered by
    readiness = "notify"). Without: a container's (docs/kubernetes.md): deadlines enforced here,
    exit with the verdict's code, orphans reaped, probes on --probe-port."""
    from svcdiag.errors import SvcdiagError

    if name is not None:
        given = [f"--{p.replace('_', '-')}" for p in ("probe_port", "probe_host", "events", "termination_log", "grace")
                 if ctx.get_parameter_source(p) == click.core.ParameterSource.COMMANDLINE]
        if given:
            raise SvcdiagError(f"supervise: {', '.join(given)}: a container's option (supervise without --config); "
                               "a notify unit tells systemd instead")
        from svcdiag.ops.serve.supervise import exit_like
        from svcdiag.ops.serve.supervise import supervise as run

        ctx.exit(exit_like(run(c.units_dir(ctx), name, argv, node_rank)))
    if node_rank is not None:
        raise SvcdiagError("supervise: --node-rank needs --config (a container reads --node-rank from SGLang's command line)")
    from svcdiag.ops.containers.container import ContainerOptions, supervise_container

    end = supervise_container(argv, ContainerOptions(probe_host=probe_host, probe_port=probe_port, events=events,
                                                     termination_log=termination_log, grace_s=grace))
    ctx.exit(c.container_exit(end))


@main.command()
@click.argument("which", type=click.Choice(["startup", "ready", "live"]))
@click.option("--port", type=click.IntRange(1, 65535), envvar="SVCDIAG_PROBE_PORT", required=True, metavar="PORT",
              help="the supervisor's --probe-port ($SVCDIAG_PROBE_PORT)")
@click.option("--host", default="127.0.0.1", show_default=True, metavar="ADDR", help="the supervisor's address")
@click.option("--timeout", type=float, default=2.0, show_default=True, metavar="S", help="seconds to wait for the answer")
@click.pass_context
def probe(ctx: click.Context, which: str, port: int, host: str, timeout: float) -> None:
    """A Kubernetes exec probe: ask the container's supervisor (`supervise --probe-port`) whether the
    start is done (startup), the server serves (ready) or the start is alive (live); exit 0 or 1."""
    from svcdiag.ops.containers.probes import ask

    a = ask(which, port, host, timeout)
    click.echo(a.text, err=not a.ok)
    ctx.exit(0 if a.ok else 1)
