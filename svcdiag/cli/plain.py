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
    from svcdiag.output.publish import Publisher

#: a verdict's exit code; `--strict` turns a degraded healthy start into 5
#: Ctrl-C's exit code (common.INTERRUPTED)
INTERRUPTED = 130
EXIT_CODES = {"healthy": 0, "failed": 1, "timed_out": 3, "incomplete": 4}
DEGRADED_STRICT = 5


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
    from svcdiag.ops.serve.nodes import Hosts
    from svcdiag.ops.serve.nodes import status as read_status

    configs, bad = load_many(units_opt, names)
    with Hosts(host) as hosts:
        rows = read_status(hosts, configs, units_dir(units_opt))
        from svcdiag.output.tables import render_status

        emit_rows(rows, as_json, render_status)
    end_with(bad)


def check_start(ctx: object, param: object, value: str | int | None) -> int | None:
    """`replay --start N`'s check (a click callback that needs no click): a start's number, 1 the first;
    anything else is one line, exit 2."""
    if value is None:
        return None
    try:
        number = int(value)
    except ValueError:
        number = 0
    if number < 1:
        from svcdiag.errors import SvcdiagError

        raise SvcdiagError(f"replay --start: {value!r} is not a start's number (1 the first)")
    return number


def publisher(as_json: bool, cfg: ServiceConfig | None, *, live: bool = True, textfile: str | None = None,
              progress: bool = False, journal_sink: bool = True) -> Publisher:
    """The terminal's sink (live line on a TTY, lines, or JSON); for a live wait also the journal.
    `progress`: progress records in the JSON and the journal too (the live line always has them)."""
    from svcdiag.output.publish import for_terminal
    from svcdiag.output.schema import ON_REQUEST

    journal = []
    if live and journal_sink:
        from svcdiag.systemd.journal import JournalSink

        journal = [JournalSink(warn=lambda m: echo(f"svcdiag: warning: {m}\n", err=True),
                               also=ON_REQUEST if progress else frozenset())]
    return for_terminal(sys.stdout, cfg, as_json=as_json, live=live, textfile=textfile, extra=journal,
                        progress=progress)


def verdict_exit(verdict: Any, *, strict: bool = False) -> None:
    """Leave with the verdict's code: 0 healthy, 1 failed, 3 timed out, 4 incomplete (5: degraded, --strict)."""
    code = EXIT_CODES[verdict.verdict]
    if code == 0 and strict and getattr(verdict, "degraded", ()):
        code = DEGRADED_STRICT
    sys.exit(code)


def replay(units_opt: str | None, path: str | None, example: str | None, list_examples: bool,
           config_name: str | None, start_no: str | int | None, invocation: str | None, strict: bool,
           as_json: bool, progress: bool) -> None:
    """`svcdiag replay`: judge a saved log, its verdict the exit code."""
    from svcdiag.errors import SvcdiagError
    from svcdiag.ops.offline.conclude import conclude, diagnoser
    from svcdiag.ops.offline.replay import example_names, replay_path, source

    if list_examples:
        echo("".join(f"{n}\n" for n in example_names()))
        return
    number = check_start(None, None, start_no)
    if number is not None and invocation is not None:
        raise SvcdiagError("replay: --start N or --invocation ID, not both")
    cfg = load(units_opt, config_name) if config_name else None
    name, result = replay_path(source(path, example), sys.stdin.buffer, cfg, invocation, number)
    pub = publisher(as_json, cfg, live=False, progress=progress)
    pub.start(result.verdict.unit, result.chosen.invocation or result.verdict.invocation)
    pub.note(f"replay {name}: {result.describe()}")
    for ev in result.events:
        pub.event(ev)
    verdict = conclude(pub, result.verdict, diagnoser(cfg, units_dir(units_opt) if cfg else None))
    verdict_exit(verdict, strict=strict)


def tagged(event: str, row: dict[str, Any]) -> dict[str, Any]:
    """A command's --json record with the schema version and its kind first, as every record
    in docs/events.md has (`list`, `diff`, `check`, `preflight`, `render`, `install`)."""
    from svcdiag.output.schema import SCHEMA_VERSION

    return {"schema": SCHEMA_VERSION, "event": event, **{k: v for k, v in row.items() if k != "event"}}


def list_configs(units_opt: str | None, as_json: bool) -> None:
    """`svcdiag list`: the configs, with the folder they were read from."""
    from svcdiag.output.tables import render_configs  # not output.report: `list` needs no events

    listing = units_dir(units_opt).listing()
    emit_rows([tagged("configs", listing)], as_json, render_configs)
    end_with(listing["errors"])


def render(units_opt: str | None, name: str, as_json: bool) -> None:
    """`svcdiag render NAME`: the unit (one per node of a multi-node config) rendered from the config."""
    from svcdiag.ops.host.sglang_version import resolve
    from svcdiag.sglang.flags import exec_argv
    from svcdiag.systemd.render import render_unit, unit_argv

    if as_json:  # where the unit would go, and whether it drifted: only --json says
        from svcdiag.systemd.install import installed_unit

    cfg = load(units_opt, name)
    rows = []
    for node in cfg.node_configs():  # a multi-node config: one unit per node (docs/remote.md#multi-node)
        v = resolve(node).version
        rows.append(tagged("render", {"name": node.name, "unit": node.unit, "config_hash": node.config_hash,
                    "exec_start": unit_argv(node, v), "sglang_argv": exec_argv(node, v), "text": render_unit(node, v)}
                    | ({"node_rank": node.node_rank, "host": node.remote_host or "localhost"} if cfg.multinode else {})
                    | (installed_unit(node, v) if as_json and not node.remote_host else {})))
    emit_rows(rows, as_json, lambda r: (f"# node {r['node_rank']} on {r['host']}: {r['unit']}\n" if "node_rank" in r
                                        else "") + r["text"])


def check(units_opt: str | None, name: str, sglang_version: str | None, state_dir: str | None, as_json: bool) -> None:
    """`svcdiag check NAME`: its rendered SGLang arguments against the release that will run them."""
    import json

    from svcdiag.ops.host.check import check as check_config
    from svcdiag.ops.host.check import require_ok

    result = check_config(load(units_opt, name), override=sglang_version, state=state_dir, checked_by="check")
    if as_json:
        echo(json.dumps(tagged("check", result.to_json()), ensure_ascii=False, default=str) + "\n")
    else:
        for line in (*result.notes, *(f"svcdiag: warning: {w}" for w in result.warnings)) if result.ok else ():
            echo(line + "\n", err=True)
    require_ok(result)
    if not as_json:
        echo(result.summary() + "\n")


def logs(units_opt: str | None, name: str, milestones: bool, follow_: bool, host: str | None, as_json: bool) -> None:
    """`svcdiag logs NAME`: the current start's log (this invocation only, systemd's lines about it included)."""
    cfg = load(units_opt, name)
    if milestones and not follow_ and not (host or cfg.remote_host) and published_milestones(cfg, as_json):
        return
    from svcdiag.ops.serve.service import logs as read_logs
    from svcdiag.systemd.dbus import Systemd

    pub = publisher(as_json, cfg, live=False) if milestones else None
    on_record = None
    if not milestones:
        from svcdiag.output import report

        def on_record(rec: Any) -> None:
            emit_rows([report.log_record(rec)], as_json, report.render_log_record)

    with Systemd.connect(host or cfg.remote_host) as sd:
        try:
            read_logs(sd, cfg, on_record=on_record or (lambda rec: None), on_event=pub.event if pub else None,
                      keep_following=follow_)
        except KeyboardInterrupt:
            sys.exit(INTERRUPTED)


def published_milestones(cfg: ServiceConfig, as_json: bool) -> bool:
    """`logs --milestones` of a start whose supervisor published its milestones (svcdiag.ops.serve.milestones):
    printed from that record as the judge would print them, without the judge or D-Bus. False: judge the lines."""
    from svcdiag.systemd.journal import published_milestones as read

    records = read(cfg)
    if records is None:
        return False
    if as_json:
        import json

        encode = json.JSONEncoder(ensure_ascii=False, default=str).encode  # as report.JsonLines writes each
        text = "".join(encode(r) + "\n" for r in records)
    else:
        from svcdiag.output.event_text import event_line

        text = "".join(event_line(r.get("event"), r.get("ts"), r.get("cause"), r.get("message")) or "" for r in records)
    sys.stdout.write(text)  # as the sinks write, not echo (click would strip a message's escape codes)
    sys.stdout.flush()
    return True


def top(units_opt: str | None, host: str | None, as_json: bool) -> None:
    """`svcdiag top`: the live board of every svcdiag unit; piped, one snapshot (--json: an object per unit)."""
    from svcdiag.ops.serve.board import Board, watch
    from svcdiag.output import board as view
    from svcdiag.systemd.dbus import Systemd

    snapshot = as_json or not view.interactive(sys.stdout)
    configs, bad = units_dir(units_opt).load_each()  # one bad file hides no unit: its error is said at the end
    with Systemd.connect(host) as sd:
        b = Board(sd, configs, follow=not snapshot)
        try:
            if snapshot:
                b.refresh()
                rows = b.rows()
                if as_json:
                    emit_rows([tagged("board", r.to_json()) for r in rows], True, str)
                else:
                    echo(view.render_text(rows))
                return
            with view.Screen() as screen:
                watch(b, screen.draw, keys_fd=screen.keys_fd, on_key=screen.key)
        except KeyboardInterrupt:
            pass
        finally:
            b.close()
            end_with(bad)


def bounded(value: str, high: float, integer: bool, low: float) -> float | int | None:
    """A number as common.Bounded takes it (finite, in (low, high]), or None where Bounded refuses it."""
    import math

    try:
        number = int(value) if integer else float(value)
    except (TypeError, ValueError):
        return None
    return number if math.isfinite(number) and low < number <= high else None


def preflight(units_opt: str | None, name: str | None, gpu_memory: float | None, kv_bytes_per_token: int | None,
              weights_gb: float | None, model_config: str | None, calibration: bool, host: str | None,
              state_dir: str | None, as_json: bool) -> None:
    """`svcdiag preflight NAME`: the KV pool and max_running_requests predicted; exit 1 when it cannot serve
    one full-context request."""
    from svcdiag.errors import SvcdiagError
    from svcdiag.files import state_dir as find_state_dir
    from svcdiag.ops.host.preflight import Calibration, host_files, plan
    from svcdiag.output.preflight_text import render_calibration, render_preflight

    if calibration:
        rows = [r for r in Calibration(find_state_dir(state_dir)).rows() if not name or r["config"] == name]
        if as_json:
            emit_rows(rows, True, str)
        else:
            echo(render_calibration(rows))
        return
    if not name:
        raise SvcdiagError("preflight: name a config (or --calibration)")
    cfg = load(units_opt, name)
    with host_files(cfg, host) as remote:
        result = plan(cfg, gpu_memory=gpu_memory, kv_bytes_per_token=kv_bytes_per_token, weights_gb=weights_gb,
                      remote=remote, model_config=model_config)
    emit_rows([tagged("preflight", {"name": cfg.name, **result.to_json()})], as_json,
              lambda row: render_preflight(cfg.name, row))
    sys.exit(1 if result.prediction.verdict == "cannot_serve" else 0)


#: the commands `svcdiag.cli.fast` may run without click: each takes the group's and the
#: command's parameters by the names click gives them
SERVED: dict[str, Callable[..., None]] = {"status": status, "replay": replay, "list": list_configs, "render": render,
                                          "check": check, "logs": logs, "top": top,
                                          "preflight": preflight}
