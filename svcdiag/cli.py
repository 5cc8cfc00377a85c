"""The `svcdiag` command. Each subcommand is thin: it wires config, render, systemd,
journal and the judge together, and prints through report.Printer.

Exit codes: 0 healthy, 1 failed, 2 bad input (one line, no traceback), 3 timed out,
4 incomplete (the log ends before a verdict).
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any, NoReturn

import click

from .config import ServiceConfig, UnitsDir, find_units_dir
from .errors import SvcdiagError

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
        from .config import _did_you_mean

        raise SvcdiagError(f"no config {name!r} in {units.path}{_did_you_mean(name, units.names())}")
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
        click.echo("  ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip())


@main.command()
@click.argument("name")
@click.pass_context
def render(ctx: click.Context, name: str) -> None:
    """Print the systemd unit rendered from config NAME."""
    from .render import render_unit

    click.echo(render_unit(load(ctx, name)), nl=False)


@main.command()
@click.argument("names", nargs=-1)
@click.option("--unit-dir", default=DEFAULT_UNIT_DIR, show_default=True, type=click.Path(file_okay=False))
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
def install(ctx: click.Context, names: tuple[str, ...], unit_dir: str, as_json: bool) -> None:
    """Render and write units (all configs when no NAME), atomically; daemon-reload if systemd runs."""
    from .install import install_units

    units = units_dir(ctx)
    configs = [load(ctx, n) for n in names] if names else units.load_all()
    result = install_units(configs, Path(unit_dir))
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
    from .compare import config_diff

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
    from .events import EXIT_CODES
    from .replay import EXAMPLES_DIR, example_path
    from .replay import replay as run_replay
    from .report import Printer

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
    printer = Printer(sys.stdout, as_json=as_json, diagnose=_diagnoser(cfg))
    n = len(result.starts)
    which = f"start {result.chosen.index} of {n}" + (f", invocation {result.chosen.invocation}"
                                                       if result.chosen.invocation else "")
    printer.note(f"replay {name}: {result.format} format, {which}")
    for ev in result.events:
        printer.event(ev)
    v = printer.verdict(result.verdict)
    sys.exit(EXIT_CODES[v.verdict])


def _diagnoser(cfg: ServiceConfig | None) -> Any:
    try:
        from .diagnosis import diagnose
    except ImportError:  # diagnosis arrives with its own issue
        return None
    return lambda v: diagnose(v, cfg)


if __name__ == "__main__":
    main()
