"""The `svcdiag` command. Each subcommand is thin: it wires config, render, systemd,
journal and the judge together, and publishes through publish.Publisher.

Exit codes: 0 healthy, 1 failed, 2 bad input (one line, no traceback), 3 timed out,
4 incomplete (the log ends before a verdict).
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any, NoReturn

import click

from svcdiag.config.service import ServiceConfig, UnitsDir, find_units_dir
from svcdiag.errors import SvcdiagError

DEFAULT_UNIT_DIR = "/etc/systemd/system"


def fail(message: str, code: int = 2) -> NoReturn:
    click.echo(f"svcdiag: error: {message}", err=True)
    sys.exit(code)


class Group(click.Group):
    """Turns every SvcdiagError (bad input, missing precondition) into one line and exit 2."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except SvcdiagError as e:
            fail(str(e), e.exit_code)
        except BrokenPipeError:
            sys.exit(0)


@click.group(cls=Group, context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--units", "units_opt", metavar="DIR", help="config folder (default: $SVCDIAG_UNITS, ./units, /etc/svcdiag/units)")
@click.pass_context
def main(ctx: click.Context, units_opt: str | None) -> None:
    """Run SGLang servers as systemd units and say when each is healthy, failed or stuck, and why."""
    ctx.obj = {"units_opt": units_opt}


def units_dir(ctx: click.Context) -> UnitsDir:
    return find_units_dir(ctx.obj["units_opt"])


def load(ctx: click.Context, name: str) -> ServiceConfig:
    units = units_dir(ctx)
    if not units.file(name).exists():
        from svcdiag.config.service import did_you_mean

        raise SvcdiagError(f"no config {name!r} in {units.path}{did_you_mean(name, units.names())}")
    return units.load(name)


def emit_json(obj: Any) -> None:
    click.echo(json.dumps(obj, ensure_ascii=False, default=str))


# ---------------------------------------------------------------- configs and units


@main.command("list")
@click.option("--json", "as_json", is_flag=True, help="one JSON object per config")
@click.pass_context
def list_cmd(ctx: click.Context, as_json: bool) -> None:
    """The configs, with the folder they were read from."""
    units = units_dir(ctx)
    configs = units.load_all()
    rows = []
    for c in configs:
        rows.append({
            "name": c.name, "base": c.extends, "tp": c.tp_size,
            "gpus": ",".join(map(str, c.gpus)) if c.gpus is not None else None, "port": c.port,
            "speculative": c.speculative.algorithm if c.speculative else None, "baseline": c.baseline,
            "simulate": c.simulate, "unit": c.unit,
        })
    if as_json:
        emit_json({"units_dir": str(units.path), "found_by": units.reason, "configs": rows})
        return
    click.echo(f"configs in {units.path} ({units.reason})")
    header = ("NAME", "BASE", "TP", "GPUS", "PORT", "SPECULATIVE", "BASELINE")
    table = [header] + [(r["name"], r["base"] or "-", str(r["tp"]), r["gpus"] or "-", str(r["port"]),
                         (r["speculative"] or "-") + (f" (sim: {r['simulate']})" if r["simulate"] else ""),
                         "yes" if r["baseline"] else "") for r in rows]
    widths = [max(len(row[i]) for row in table) for i in range(len(header))]
    for row in table:
        click.echo("  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip())


@main.command()
@click.argument("name")
@click.pass_context
def render(ctx: click.Context, name: str) -> None:
    """Print the systemd unit rendered from config NAME."""
    from svcdiag.systemd.render import render_unit

    click.echo(render_unit(load(ctx, name)), nl=False)


@main.command()
@click.argument("names", nargs=-1)
@click.option("--unit-dir", default=DEFAULT_UNIT_DIR, show_default=True, type=click.Path(file_okay=False))
@click.option("--force", is_flag=True, help="replace a unit file svcdiag did not write")
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
def install(ctx: click.Context, names: tuple[str, ...], unit_dir: str, force: bool, as_json: bool) -> None:
    """Render and write units (all configs when no NAME), atomically; daemon-reload if systemd runs."""
    from svcdiag.systemd.install import install_units

    units = units_dir(ctx)
    configs = [load(ctx, n) for n in names] if names else units.load_all()
    result = install_units(configs, Path(unit_dir), force=force)
    if as_json:
        emit_json(result)
        return
    for item in result["units"]:
        click.echo(f"{item['action']:>9}  {item['path']}")
    click.echo(result["reload"])


@main.command()
@click.argument("a")
@click.argument("b")
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
def diff(ctx: click.Context, a: str, b: str, as_json: bool) -> None:
    """The effective configs of A and B (after extends), key by key; * marks GPU-memory keys."""
    from svcdiag.config.diff import config_diff

    rows = config_diff(load(ctx, a), load(ctx, b))
    if as_json:
        emit_json({"a": a, "b": b, "differences": rows})
        return
    if not rows:
        click.echo(f"{a} and {b} have the same effective config")
        return
    width = max(len(r["key"]) for r in rows) + 2
    click.echo(f"  {'key'.ljust(width)}{a}  →  {b}")
    for r in rows:
        mark = "*" if r["memory"] else " "
        click.echo(f"{mark} {r['key'].ljust(width)}{json.dumps(r['a'])}  →  {json.dumps(r['b'])}")
    if any(r["memory"] for r in rows):
        click.echo("(* changes GPU memory: KV cache, Mamba cache or CUDA graphs)")


# ---------------------------------------------------------------- offline


@main.command()
@click.argument("path", required=False)
@click.option("--example", metavar="NAME", help="replay a bundled example log (see --list-examples)")
@click.option("--list-examples", is_flag=True, help="list the bundled example logs")
@click.option("--config", "config_name", metavar="NAME", help="judge with this config's deadlines and figures")
@click.option("--invocation", metavar="ID", help="the start to judge: an invocation id (prefix) or a 1-based number")
@click.option("--json", "as_json", is_flag=True, help="one JSON object per event; the verdict last")
@click.pass_context
def replay(ctx: click.Context, path: str | None, example: str | None, list_examples: bool,
           config_name: str | None, invocation: str | None, as_json: bool) -> None:
    """Judge a saved SGLang log: plain, journalctl short, -o json or -o export ('-' for stdin)."""
    from svcdiag.judge.verdict import EXIT_CODES
    from svcdiag.ops.replay import EXAMPLES_DIR, example_path
    from svcdiag.ops.replay import replay as run_replay

    if list_examples:
        for p in sorted(EXAMPLES_DIR.iterdir()):
            click.echo(p.stem)
        return
    if example:
        if path:
            raise SvcdiagError("give a PATH or --example, not both")
        path = str(example_path(example))
    if not path:
        raise SvcdiagError("replay needs a PATH ('-' for stdin) or --example NAME")
    cfg = load(ctx, config_name) if config_name else None
    if path == "-":
        stream = sys.stdin.buffer
        name = "<stdin>"
    else:
        try:
            stream = open(path, "rb")
        except FileNotFoundError:
            raise SvcdiagError(f"{path}: no such file") from None
        except IsADirectoryError:
            raise SvcdiagError(f"{path}: is a directory") from None
        except OSError as e:
            raise SvcdiagError(f"{path}: cannot read: {e.strerror}") from None
        name = path
    with stream:
        try:
            result = run_replay(stream, name, cfg, invocation)
        except OSError as e:
            raise SvcdiagError(f"{name}: cannot read: {e.strerror}") from None
    pub = publisher(as_json, cfg, units_dir(ctx) if cfg else None, live=False)
    pub.start(result.verdict.unit, result.chosen.invocation or result.verdict.invocation)
    n = len(result.starts)
    which = f"start {result.chosen.index} of {n}" + (f", invocation {result.chosen.invocation}"
                                                       if result.chosen.invocation else "")
    pub.note(f"replay {name}: {result.format} format, {which}")
    for ev in result.events:
        pub.event(ev)
    v = pub.verdict(result.verdict)
    sys.exit(EXIT_CODES[v.verdict])


# ---------------------------------------------------------------- live (systemd)


def publisher(as_json: bool, cfg: ServiceConfig | None, units: UnitsDir | None = None, sd: Any = None, *,
              live: bool = True, textfile: str | None = None) -> Any:
    """Where a command's records go: the terminal (a live line on a TTY, plain lines, or JSON);
    for a live wait also the journal and, when asked, a Prometheus textfile."""
    from svcdiag.output.live_line import LiveTerminal, wants_live
    from svcdiag.output.publish import Publisher
    from svcdiag.output.report import JsonLines, Lines

    term = JsonLines if as_json else LiveTerminal if live and wants_live(sys.stdout, as_json) else Lines
    sinks: list[Any] = [term(sys.stdout)]
    if textfile:
        from svcdiag.output.textfile import Textfile

        sinks.append(Textfile(textfile))
    if live:
        from svcdiag.systemd.journal import JournalSink

        sinks.append(JournalSink(warn=lambda m: click.echo(f"svcdiag: warning: {m}", err=True)))
    return Publisher(sinks, config=cfg.name if cfg else None, unit=cfg.unit if cfg else None,
                     diagnose=_diagnoser(cfg, units, sd))


def _check_textfile(ctx: click.Context, param: Any, value: str | None) -> str | None:
    """A bad path is refused before anything is started, not after a 2-minute wait."""
    if value:
        from svcdiag.output.textfile import Textfile

        Textfile(value)
    return value


def textfile_option(f: Any) -> Any:
    return click.option("--textfile", metavar="FILE.prom", envvar="SVCDIAG_TEXTFILE", callback=_check_textfile,
                        help="also keep each unit's latest state in this Prometheus textfile "
                             "(node_exporter's collector; $SVCDIAG_TEXTFILE)")(f)


def judge_start(sd: Any, cfg: ServiceConfig, props: Any, pub: Any, timeout: float | None) -> Any:
    """The verdict of one start: the journal's, then, if that says healthy, HTTP's."""
    from svcdiag.ops.follow import follow
    from svcdiag.ops.http_check import cross_check
    from svcdiag.output.publish import Progress

    def progress(judge: Any, now: float) -> None:
        r = judge.readiness
        pub.progress(Progress(cfg.unit, cfg.name, r.phase, r.started, r.next_deadline(), now))

    pub.start(cfg.unit, props.invocation)
    verdict = follow(sd, cfg, cfg.unit, props, emit=pub.event, total_timeout=timeout, on_progress=progress).verdict
    assert verdict is not None
    if verdict.verdict == "healthy":
        verdict = cross_check(verdict, cfg.host, cfg.port, cfg.timeout["http_check"])
    return verdict


def _interrupted(name: str, pub: Any) -> NoReturn:
    where = f" (in phase {pub.phase})" if pub.phase else ""
    pub.note(f"interrupted: {name} is left as it is{where}; `svcdiag wait {name}` to resume waiting, "
             f"`svcdiag down {name}` to stop it")
    pub.close()
    sys.exit(130)


def _wait_verdict(sd: Any, cfg: ServiceConfig, props: Any, pub: Any, timeout: float | None,
                  plan: Any = None) -> NoReturn:
    from svcdiag.judge.verdict import EXIT_CODES

    try:
        verdict = judge_start(sd, cfg, props, pub, timeout)
    except KeyboardInterrupt:
        _interrupted(cfg.name, pub)
    calibrate(cfg, plan, verdict, pub.note)  # before the verdict, which stays the last line
    verdict = pub.verdict(verdict)
    pub.close()
    sys.exit(EXIT_CODES[verdict.verdict])


def calibrate(cfg: ServiceConfig, plan: Any, verdict: Any, note: Any, state: str | None = None) -> None:
    """Predicted vs. logged KV tokens, kept for `preflight --calibration`."""
    if plan is None:
        return
    from svcdiag.ops.baseline import state_dir
    from svcdiag.ops.preflight import Calibration

    try:
        row = Calibration(state_dir(state)).record(cfg, plan.prediction, verdict)
    except OSError as e:
        note(f"calibration not recorded: {e}")
        return
    if row is not None:
        note(f"preflight predicted {row['predicted_kv_tokens']:,} KV tokens, SGLang allocated "
             f"{row['logged_kv_tokens']:,} ({row['error_pct']:+.1f} %)")


@main.command()
@click.argument("name")
@click.option("--wait-ready", is_flag=True, help="wait for the verdict: healthy, failed or timed out")
@click.option("--timeout", type=float, metavar="S", help="overall deadline in seconds (on top of per-phase ones)")
@click.option("--restart", is_flag=True, help="restart even if the unit is already active")
@click.option("--json", "as_json", is_flag=True, help="JSON Lines (docs/events.md), the verdict last")
@click.option("--force", is_flag=True, help="start even when preflight predicts it cannot serve one request")
@click.option("--gpu-memory", type=float, metavar="GB", help="preflight: GPU memory free per GPU before loading")
@textfile_option
@click.pass_context
def up(ctx: click.Context, name: str, wait_ready: bool, timeout: float | None, restart: bool, as_json: bool,
       force: bool, gpu_memory: float | None, textfile: str | None) -> None:
    """Preflight, install (if missing or drifted) and start NAME; with --wait-ready, report its verdict."""
    from svcdiag.ops.follow import unit_lock
    from svcdiag.systemd.dbus import Systemd

    cfg = load(ctx, name)
    with Systemd.connect() as sd:
        pub = publisher(as_json, cfg, units_dir(ctx), sd, textfile=textfile)
        with unit_lock(name, pub.note):
            starts = restart or not sd.props(cfg.unit).running
            plan = preflight_gate(cfg, pub, as_json, force=force, gpu_memory=gpu_memory) if starts else None
            props = ensure_started(sd, cfg, pub.note, restart=restart)
            if not wait_ready:
                if not as_json:
                    pub.note(f"follow it with: svcdiag wait {name}")
                return
            _wait_verdict(sd, cfg, props, pub, timeout, plan)


def preflight_gate(cfg: ServiceConfig, pub: Any, as_json: bool, *, force: bool, gpu_memory: float | None) -> Any:
    """Predict the KV pool before a start; refuse one that cannot serve a single request."""
    from svcdiag.ops.preflight import plan as make_plan
    from svcdiag.ops.preflight import predicted_cause
    from svcdiag.output.report import render_preflight

    try:
        plan = make_plan(cfg, gpu_memory=gpu_memory)
    except SvcdiagError as e:
        pub.note(f"preflight skipped: {e}")
        return None
    p = plan.prediction
    pub.note(f"preflight: {p.verdict}: {p.kv_tokens:,} KV tokens predicted, max_running_requests "
             f"{p.max_running_requests} ({plan.inputs.gpu_free_gb:.2f} GB free from {plan.inputs.gpu_source})")
    if p.verdict != "cannot_serve":
        return plan
    pub.publish(pub.record("diagnosis", ts=time.time(), phase=None, cause=predicted_cause(p),
                           message="preflight: " + "; ".join(p.reasons),
                           data={"explanation": list(p.reasons), "fixes": list(p.fixes), "preflight": plan.to_json()}))
    if force:
        pub.note("--force: starting anyway")
        return plan
    if not as_json:
        click.echo(render_preflight(cfg.name, plan.to_json()), nl=False)
        pub.note("not started: it cannot serve one request; apply a fix above, or --force to start anyway")
    pub.close()
    sys.exit(1)


def ensure_started(sd: Any, cfg: ServiceConfig, note: Any, *, restart: bool) -> Any:
    """Attach to a running start, or install (when missing or drifted) and start a fresh one."""
    from svcdiag.ops.follow import start_unit
    from svcdiag.systemd.install import SYSTEM_UNIT_DIR, drift, install_units

    props = sd.props(cfg.unit)
    why = drift(cfg)
    if props.running and not restart:
        if why:
            note(f"{cfg.unit} runs a unit that differs from its config ({why}); --restart to apply the config")
        note(f"{cfg.unit} is already {props.active_state} (invocation {props.invocation}); attaching")
        return props
    if why:
        install_units([cfg], SYSTEM_UNIT_DIR)
        note(f"installed {SYSTEM_UNIT_DIR / cfg.unit} ({why})")
    props = start_unit(sd, cfg.unit, restart=restart and props.running)
    note(f"started {cfg.unit} (invocation {props.invocation})")
    return props


@main.command()
@click.argument("name")
@click.option("--timeout", type=float, metavar="S", help="overall deadline in seconds")
@click.option("--json", "as_json", is_flag=True, help="JSON Lines (docs/events.md), the verdict last")
@textfile_option
@click.pass_context
def wait(ctx: click.Context, name: str, timeout: float | None, as_json: bool, textfile: str | None) -> None:
    """Attach to NAME's current start and wait for its verdict, restarting nothing."""
    from svcdiag.systemd.dbus import Systemd

    cfg = load(ctx, name)
    with Systemd.connect() as sd:
        props = sd.props(cfg.unit)
        if not props.invocation:
            raise SvcdiagError(f"{cfg.unit} has not been started since boot ({props.active_state}); "
                               f"start it with: svcdiag up {name} --wait-ready")
        pub = publisher(as_json, cfg, units_dir(ctx), sd, textfile=textfile)
        if not props.running:
            pub.note(f"{cfg.unit} is {props.active_state}; judging its last start (invocation {props.invocation})")
        _wait_verdict(sd, cfg, props, pub, timeout)


@main.command()
@click.argument("name")
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
def down(ctx: click.Context, name: str, as_json: bool) -> None:
    """Stop NAME and wait until systemd has stopped it."""
    from svcdiag.systemd.dbus import Systemd

    cfg = load(ctx, name)
    with Systemd.connect() as sd:
        before = sd.props(cfg.unit)
        if before.active_state in ("inactive", "failed") and not before.job:
            outcome = "nothing to stop"  # systemd may have unloaded it: StopUnit would say "not loaded"
        else:
            outcome = sd.wait_job(sd.stop(cfg.unit), 90.0)
        after = sd.props(cfg.unit)
    result = {"event": "down", "unit": cfg.unit, "job": outcome, "state_before": before.active_state,
              "state_after": after.active_state}
    if as_json:
        emit_json(result)
    else:
        click.echo(f"{cfg.unit}: {before.active_state} → {after.active_state} (stop job {outcome})")
    if after.running:
        sys.exit(1)


@main.command()
@click.argument("names", nargs=-1)
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
def status(ctx: click.Context, names: tuple[str, ...], as_json: bool) -> None:
    """State, phase, figures and verdict of the current start of each unit (default: all)."""
    from svcdiag.ops.follow import follow
    from svcdiag.output.publish import verdict_record
    from svcdiag.systemd.dbus import Systemd

    units = units_dir(ctx)
    configs = [load(ctx, n) for n in names] if names else units.load_all()
    rows = []
    with Systemd.connect() as sd:
        for cfg in configs:
            props = sd.props(cfg.unit)
            row: dict[str, Any] = {"event": "status", "name": cfg.name, "unit": cfg.unit,
                                   "active_state": props.active_state, "sub_state": props.sub_state,
                                   "invocation": props.invocation or None}
            if props.invocation and props.load_state != "not-found":
                res = follow(sd, cfg, cfg.unit, props, emit=lambda ev: None, keep_following=False)
                r = res.judge.readiness
                v = res.verdict
                if v is not None and v.verdict != "healthy":
                    v = v.with_(diagnosis=_diagnoser(cfg, units, sd)(v))
                row.update(phase=r.phase, kv_tokens=r.figures.get("kv_tokens"),
                           max_running_requests=r.figures.get("max_running_requests"),
                           verdict=verdict_record(v, cfg.name).to_json() if v else None)
                if props.running and props.active_enter_ts:
                    row["uptime_s"] = round(time.time() - props.active_enter_ts, 1)
            rows.append(row)
    if as_json:
        for row in rows:
            emit_json(row)
        return
    for row in rows:
        v = row.get("verdict")
        verdict = f"{v['verdict']}{' [' + v['cause'] + ']' if v and v.get('cause') else ''}" if v else \
            ("in progress" if row["active_state"] in ("activating", "active") else "-")
        up_for = f", up {row['uptime_s']:.0f} s" if row.get("uptime_s") is not None else ""
        click.echo(f"{row['name']:<24} {row['active_state']:<12} phase {row.get('phase') or '-':<16} "
                   f"kv_tokens {'-' if row.get('kv_tokens') is None else row['kv_tokens']:<10} max_running {'-' if row.get('max_running_requests') is None else row['max_running_requests']:<5} "
                   f"{verdict}{up_for}")
        if v and v.get("diagnosis"):
            for sentence in v["diagnosis"]["explanation"][:2]:
                click.echo(f"    {sentence}")


@main.command()
@click.argument("name")
@click.option("--milestones", is_flag=True, help="only the milestones, as events")
@click.option("--follow", "follow_", is_flag=True, help="keep following until the unit stops (Ctrl-C to leave)")
@click.pass_context
def logs(ctx: click.Context, name: str, milestones: bool, follow_: bool) -> None:
    """The current start's log (this invocation only, systemd's lines about it included)."""
    from svcdiag.ops.follow import follow
    from svcdiag.systemd.dbus import Systemd

    cfg = load(ctx, name)
    pub = publisher(False, cfg, live=False)
    with Systemd.connect() as sd:
        props = sd.props(cfg.unit)
        if not props.invocation:
            raise SvcdiagError(f"{cfg.unit} has not been started since boot")

        def line(rec: Any) -> None:
            if not milestones:
                who = "systemd: " if rec.systemd else ""
                click.echo(f"{who}{rec.text}")

        try:
            follow(sd, cfg, cfg.unit, props, emit=pub.event if milestones else lambda ev: None,
                   keep_following=follow_, on_record=line, until_verdict=False)
        except KeyboardInterrupt:
            sys.exit(130)


@main.command()
@click.option("--follow", "-f", "follow_", is_flag=True, help="after the history, print new events as they come")
@click.option("--unit", "-u", "names", multiple=True, metavar="NAME",
              help="only this config or unit (repeatable; default: every unit svcdiag has reported on)")
@click.option("--since", metavar="TIME", help="'2026-12-02 19:30', '19:30', 'today', '-10min', '@UNIX'")
@click.option("--json", "as_json", is_flag=True, help="JSON Lines, the records exactly as written (docs/events.md)")
def events(follow_: bool, names: tuple[str, ...], since: str | None, as_json: bool) -> None:
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
        sys.exit(130)


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
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
def preflight(ctx: click.Context, name: str | None, gpu_memory: float | None, kv_bytes_per_token: int | None,
              weights_gb: float | None, calibration: bool, state_dir: str | None, as_json: bool) -> None:
    """Predict NAME's KV pool and max_running_requests before starting it, by SGLang's own
    formula; exit 1 when it cannot serve one full-context request."""
    from svcdiag.ops.baseline import state_dir as find_state_dir
    from svcdiag.ops.preflight import Calibration, plan
    from svcdiag.output.report import render_preflight

    if calibration:
        rows = Calibration(find_state_dir(state_dir)).rows()
        if name:
            rows = [r for r in rows if r["config"] == name]
        if as_json:
            for r in rows:
                emit_json(r)
            return
        if not rows:
            click.echo("no calibration yet: it is recorded after each `up --wait-ready` or `baseline-check`")
            return
        by: dict[str, list[dict[str, Any]]] = {}
        for r in rows:
            by.setdefault(r["config"], []).append(r)
        for cname, rs in sorted(by.items()):
            errs = [abs(r["error_pct"]) for r in rs if r.get("error_pct") is not None]
            last = rs[-1]
            click.echo(f"{cname:24} {len(rs):3} start(s)  last: predicted {last['predicted_kv_tokens']:>10,} "
                       f"logged {last['logged_kv_tokens']:>10,} ({last['error_pct']:+.2f} %)  "
                       f"worst |error| {max(errs):.2f} %" + ("  > 5 %!" if max(errs) > 5 else ""))
        return
    if not name:
        raise SvcdiagError("preflight: name a config (or --calibration)")
    cfg = load(ctx, name)
    result = plan(cfg, gpu_memory=gpu_memory, kv_bytes_per_token=kv_bytes_per_token, weights_gb=weights_gb)
    out = {"event": "preflight", "name": cfg.name, **result.to_json()}
    if as_json:
        emit_json(out)
    else:
        click.echo(render_preflight(cfg.name, out), nl=False)
    sys.exit(1 if result.prediction.verdict == "cannot_serve" else 0)


@main.command("baseline-check")
@click.argument("name", required=False)
@click.option("--against", "candidate", metavar="CANDIDATE", help="explain how CANDIDATE differs and why it fails")
@click.option("--keep-running", is_flag=True, help="leave the baseline running even if it was stopped before")
@click.option("--state-dir", metavar="DIR", help="snapshot history (default: $SVCDIAG_STATE_DIR or /var/lib/svcdiag)")
@click.option("--timeout", type=float, metavar="S", help="overall deadline on top of the per-phase ones")
@click.option("--json", "as_json", is_flag=True, help="JSON Lines (docs/events.md): events, the verdict, "
                                                      "drift, then a baseline_result line")
@textfile_option
@click.pass_context
def baseline_check(ctx: click.Context, name: str | None, candidate: str | None, keep_running: bool,
                   state_dir: str | None, timeout: float | None, as_json: bool, textfile: str | None) -> None:
    """Start the known-good baseline afresh, snapshot its figures, compare with the last good run,
    and put it back the way it was. NAME defaults to the config marked `baseline = true`."""
    from svcdiag.judge.verdict import EXIT_CODES
    from svcdiag.ops.baseline import SnapshotStore, compare, explain_candidate, make_snapshot
    from svcdiag.ops.baseline import state_dir as find_state_dir
    from svcdiag.ops.follow import follow, unit_lock
    from svcdiag.systemd.dbus import Systemd

    units = units_dir(ctx)
    cfg = load(ctx, name) if name else units.baseline()
    cand = load(ctx, candidate) if candidate else None
    store = SnapshotStore(find_state_dir(state_dir), cfg.name)
    prev = store.last_good()
    with Systemd.connect() as sd:
        pub = publisher(as_json, cfg, units, sd, textfile=textfile)
        for problem in store.problems:
            pub.note(problem)
        with unit_lock(cfg.name, pub.note):
            before = sd.props(cfg.unit)
            pub.note(f"baseline {cfg.name}: {before.active_state} before the check; a fresh start is judged")
            interrupted = False
            try:
                own_plan = _quiet_plan(cfg)
                props = ensure_started(sd, cfg, pub.note, restart=True)
                verdict = judge_start(sd, cfg, props, pub, timeout)
            except KeyboardInterrupt:
                interrupted = True
            finally:
                if not before.running and not keep_running:
                    sd.wait_job(sd.stop(cfg.unit), 90.0)  # the check must not leave it running
                after = sd.props(cfg.unit)
            if interrupted:
                pub.note(f"interrupted: {cfg.unit} put back to {after.active_state}; no snapshot written")
                pub.close()
                sys.exit(130)
        calibrate(cfg, own_plan, verdict, pub.note, state_dir)
        snapshot = make_snapshot(cfg, verdict, before.active_state)
        snapshot["state_after"] = after.active_state
        drift = compare(prev[1], snapshot) if prev and snapshot["healthy"] else []
        path = store.write(snapshot)
        against = None
        if cand is not None:
            cprops = sd.props(cand.unit)
            cverdict = None
            if cprops.invocation:
                cverdict = follow(sd, cand, cand.unit, cprops, emit=lambda ev: None, keep_following=False).verdict
            cplan = _quiet_plan(cand) if cverdict is None else None
            against = explain_candidate(cfg, cand, cverdict, snapshot if snapshot["healthy"] else (prev[1] if prev else None),
                                        preflight=cplan.to_json() if cplan else None)
    verdict = pub.verdict(verdict)
    for d in drift:
        pub.publish(pub.record("drift", ts=verdict.ts, message=d["message"], data=d))
    healthy = snapshot["healthy"] and not drift
    result = {"name": cfg.name, "healthy": healthy, "drift": drift,
              "compared_with": str(prev[0]) if prev else None, "state_before": before.active_state,
              "state_after": after.active_state, "snapshot": str(path), "against": against}
    summary = (f"baseline {cfg.name} " + ("holds" if healthy else "drifted" if snapshot["healthy"] else "is not healthy")
               + f": {verdict.verdict}, {len(drift)} drift item(s)")
    pub.publish(pub.record("baseline_result", ts=verdict.ts, verdict=verdict.verdict, message=summary, data=result))
    pub.close()
    if not as_json:
        click.echo(summary)
        click.echo(f"  compared with: {result['compared_with'] or 'no earlier good snapshot'}")
        click.echo("  drift: " + ("none" if not drift else ""))
        for d in drift:
            click.echo(f"    - {d['message']}")
        click.echo(f"  state: {before.active_state} before, {after.active_state} after; snapshot {path}")
        if against:
            click.echo(f"  against {against['candidate']} ({against['source']}): {against.get('explanation') or against['verdict']}")
            for r in against["differences"]:
                mark = "*" if r["key"] in against["explaining_keys"] else " "
                click.echo(f"    {mark} {r['key']}: {json.dumps(r['a'])} → {json.dumps(r['b'])}")
    if verdict.verdict != "healthy":
        sys.exit(EXIT_CODES[verdict.verdict])
    sys.exit(1 if drift else 0)


def _quiet_plan(cfg: ServiceConfig) -> Any:
    """A preflight plan when the model and GPU figures are at hand, else None."""
    from svcdiag.ops.preflight import plan

    try:
        return plan(cfg)
    except SvcdiagError:
        return None


def _diagnoser(cfg: ServiceConfig | None, units: UnitsDir | None = None, sd: Any = None) -> Any:
    """The diagnosis hook: knows the other configs (who else wants this port) and, live, systemd."""
    from svcdiag.judge.diagnosis import diagnose

    def owners() -> list[str]:
        if cfg is None or units is None:
            return []
        out = []
        for other in units.load_all():
            if other.name == cfg.name or other.port != cfg.port:
                continue
            if sd is None:
                out.append(f"{other.name} (configured)")
            elif sd.props(other.unit).running:
                out.append(other.name)
        return out

    return lambda v: diagnose(v, cfg, port_owners=owners() if v.cause == "port_in_use" else None)


if __name__ == "__main__":
    main()
