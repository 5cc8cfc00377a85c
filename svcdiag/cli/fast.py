"""Commands run without click (`status`, `replay`, `list`, `render`, `check`: plain.SERVED): click costs
~15 to 25 ms of start-up, more than the rest of `status` before it first asks systemd.

click stays the only definition of the CLI. `python -m svcdiag.cli.help` records each served
command's parameters from the click command itself into help_manifest.py (`PARAMS`), and only
for parameters this matcher can parse exactly as click does: long options that take one
string or are on/off flags, and string arguments (optional ones after the required ones).
`serve` then accepts an argv only when every token is one it is sure of (the group's options,
the command's, its names) and the manifest is
current (the same CLI sources and click release); anything else — `-h`, `--version`, a short
option, an unknown or misspelled one, a value that starts with `-`, shell completion — is
click's to parse, and its to reject. tests/test_cli_fast.py checks the two agree.
"""

from __future__ import annotations

import os
import sys

TYPE_CHECKING = False  # typing costs 3 ms of the ~30 that `status` may take before it asks systemd
if TYPE_CHECKING:
    from typing import Any

#: a recorded parameter's kind
FLAG, VALUE, ARGS, ARG, OPT_ARG = "flag", "value", "args", "arg", "opt_arg"  # OPT_ARG: an optional argument
#: an option whose value is a number (common.Bounded: its (high, integer, low) where a callback's name would be), or
#: a file's path (click.Path(dir_okay=False)): converted or looked at here, and left to click when it would refuse it
NUMBER, FILE = "number", "file"
#: where a callback must live for the matcher to call it (a click callback that imports no click)
PLAIN = "svcdiag.cli.plain"


def serve(argv: list[str]) -> bool:
    """Run the command `argv` names without click, when the manifest can parse it as click would;
    False otherwise (click then parses `argv`). A run ends in sys.exit, as click's does."""
    parsed = parse(argv)
    if parsed is None:
        return False
    command, values, checks = parsed
    from svcdiag.cli.startup import import_dataclasses

    import_dataclasses()
    from svcdiag.cli import plain
    from svcdiag.errors import SvcdiagError

    try:
        for check, value in checks:
            getattr(plain, check)(None, None, value)
        plain.SERVED[command](**values)
    except SvcdiagError as e:
        plain.fail(str(e), e.exit_code)
    except BrokenPipeError:  # as the click group leaves it
        sys.exit(0)
    except (KeyboardInterrupt, EOFError):  # as click's main says it
        plain.echo("\nAborted!\n", err=True)
        sys.exit(1)
    sys.exit(0)


def parse(argv: list[str]) -> tuple[str, dict[str, Any], list[tuple[str, Any]]] | None:
    """(command, the group's and the command's parameter values, the callbacks to run in click's
    order with their values), or None when click must parse `argv`."""
    if any(k.startswith("_") and k.endswith("_COMPLETE") for k in os.environ):
        return None  # click's shell completion
    try:
        from svcdiag.cli import help_manifest as m
        from svcdiag.cli.help import click_release, sources
    except ImportError:
        return None
    table = getattr(m, "PARAMS", None)
    if not table or () not in table:
        return None
    group = table[()]
    i, n = 0, len(argv)
    given: list[str] = []
    values: dict[str, Any] = _defaults(group)
    while i < n and argv[i][:1] == "-" and argv[i] != "-":  # a group takes its options before the command
        i = _option(group, argv, i, values, given)
        if i < 0:
            return None
    if i >= n or (argv[i],) not in table:
        return None
    command, spec = argv[i], table[(argv[i],)]
    values.update(_defaults(spec))
    words: list[str] = []
    i += 1
    while i < n:
        token = argv[i]
        if token == "--":
            words += argv[i + 1:]
            break
        if token[:1] == "-" and token != "-":
            i = _option(spec, argv, i, values, given)
            if i < 0:
                return None
        else:
            words.append(token)
            i += 1
    if not _arguments(spec, words, values):
        return None
    if sources() != m.SOURCES or click_release() != m.CLICK:
        return None
    if not _convert(spec, values):
        return None
    return command, values, _checks(group, spec, given, values)


def _convert(spec: tuple[tuple[Any, ...], ...], values: dict[str, Any]) -> bool:
    """Numbers as common.Bounded converts them, and file paths as click.Path(dir_okay=False) takes them;
    False when click would refuse one (click then says why, in its words)."""
    for dest, kind, _, check in spec:
        value = values[dest]
        if value is None:
            continue
        if kind == NUMBER:
            from svcdiag.cli.plain import bounded

            values[dest] = bounded(value, *check)
            if values[dest] is None:
                return False
        elif kind == FILE and os.path.exists(value) and (os.path.isdir(value) or not os.access(value, os.R_OK)):
            return False
    return True


def _defaults(spec: tuple[tuple[Any, ...], ...]) -> dict[str, Any]:
    return {dest: False if kind == FLAG else () if kind == ARGS else None for dest, kind, _, _ in spec}


def _option(spec: tuple[tuple[Any, ...], ...], argv: list[str], i: int, values: dict[str, Any],
            given: list[str]) -> int:
    """Take the option at argv[i] into `values`; the index after it, or -1 when unsure."""
    token = argv[i]
    name, eq, inline = token.partition("=")
    for dest, kind, opts, _ in spec:
        if name not in opts or not name.startswith("--"):
            continue
        if kind == FLAG:
            if eq:
                return -1
            values[dest] = True
            nxt = i + 1
        elif eq:
            values[dest] = inline
            nxt = i + 1
        elif i + 1 < len(argv) and argv[i + 1][:1] != "-":
            values[dest] = argv[i + 1]
            nxt = i + 2
        else:
            return -1
        if dest not in given:
            given.append(dest)
        return nxt
    return -1


def _arguments(spec: tuple[tuple[Any, ...], ...], words: list[str], values: dict[str, Any]) -> bool:
    args = [(dest, kind) for dest, kind, _, _ in spec if kind in (ARG, ARGS, OPT_ARG)]
    if args and args[0][1] == ARGS:
        values[args[0][0]] = tuple(words)
        return True
    need = sum(1 for _, kind in args if kind == ARG)  # the optional ones come after these (`_params`)
    if not need <= len(words) <= len(args):
        return False
    values.update({dest: w for (dest, _), w in zip(args, words, strict=False)})
    return True


def _checks(group: tuple[tuple[Any, ...], ...], spec: tuple[tuple[Any, ...], ...], given: list[str],
            values: dict[str, Any]) -> list[tuple[str, Any]]:
    """The callbacks, as click runs them: the group's, then the command's, each in the order its
    parameters were given on the command line, then the rest in declaration order."""
    out = []
    for params in (group, spec):
        order = {dest: given.index(dest) if dest in given else len(given) for dest, _, _, _ in params}
        for dest, kind, _, check in sorted(params, key=lambda p: order[p[0]]):
            if check and kind not in (NUMBER, FILE):
                out.append((check, values[dest]))
    return out


# ---------------------------------------------------------------- recording (imports click)


def recorded() -> dict[tuple[str, ...], tuple[tuple[Any, ...], ...]]:
    """The group's and each served command's parameters, as `PARAMS` in help_manifest.py: for each,
    (name, kind, option strings, callback in svcdiag.cli.plain or None). Only a command whose every
    parameter the matcher parses as click does is recorded; the others are click's alone."""
    from svcdiag.cli import plain
    from svcdiag.cli.app import main

    group = _params(main, group=True)
    if group is None:
        return {}
    table = {(): group}
    for name in sorted(plain.SERVED):
        spec = _params(main.commands[name], group=False)
        if spec is not None:
            table[(name,)] = spec
    return table


def _params(cmd: Any, *, group: bool) -> tuple[tuple[Any, ...], ...] | None:
    """cmd's parameters as the matcher takes them, or None when it cannot parse them as click does.
    Each default is read off click itself (a context made from no arguments), not assumed."""
    import click

    settings = cmd.context_settings
    if any(settings.get(k) for k in ("ignore_unknown_options", "allow_extra_args", "token_normalize_func",
                                     "auto_envvar_prefix", "default_map")):
        return None
    if group and (cmd.chain or cmd.invoke_without_command):
        return None
    absent = cmd.make_context("svcdiag", [], resilient_parsing=True).params
    out = []
    for p in cmd.params:
        if p.is_eager and not p.expose_value and not p.envvar:
            continue  # --help, --version: they act only when given, and given they are click's
        flag = isinstance(p, click.Option) and p.is_flag
        typed = None if flag else _typed(p.type)
        kind_ok = isinstance(p.type, click.types.BoolParamType) if flag else p.type is click.STRING or typed is not None
        if p.envvar or p.multiple or p.nargs not in (1, -1) or not kind_ok:
            return None
        check = None
        if p.callback is not None:
            if getattr(p.callback, "__module__", None) != PLAIN:
                return None
            check = p.callback.__name__
        if isinstance(p, click.Option):
            opts = tuple(o for o in p.opts if o.startswith("--"))  # a short form is left to click
            if not opts or p.secondary_opts or p.count or p.prompt or p.required or p.nargs != 1:
                return None
            if flag and (absent[p.name] is not False
                         or cmd.make_context("svcdiag", [opts[0]], resilient_parsing=True).params[p.name] is not True):
                return None
            if not flag and absent[p.name] is not None:
                return None
            if typed is not None and check is not None:
                return None
            out.append((p.name, FLAG, opts, check) if flag else (p.name, VALUE, opts, check) if typed is None
                       else (p.name, typed[0], opts, typed[1]))
        elif isinstance(p, click.Argument) and check is None and typed is None:
            if p.nargs == -1 and (p.required or absent[p.name] != ()):
                return None
            if p.nargs == 1 and not p.required and absent[p.name] is not None:
                return None
            out.append((p.name, ARGS if p.nargs == -1 else ARG if p.required else OPT_ARG, (), None))
        else:
            return None
    args = [kind for _, kind, _, _ in out if kind in (ARG, ARGS, OPT_ARG)]
    if ARGS in args and len(args) > 1:
        return None
    if OPT_ARG in args and ARG in args[args.index(OPT_ARG):]:  # a required argument after an optional one
        return None
    return tuple(out)


def _typed(kind: Any) -> tuple[str, Any] | None:
    """(NUMBER, (high, integer, low)) for a common.Bounded, (FILE, None) for a click.Path that only refuses a
    directory or an unreadable file; None for any other type (click's alone)."""
    import click

    from svcdiag.cli.common import Bounded

    if type(kind) is Bounded:
        return NUMBER, (kind.high, kind.integer, kind.low)
    if type(kind) is click.Path and not kind.exists and kind.file_okay and not kind.dir_okay and kind.readable \
            and not (kind.writable or kind.executable or kind.resolve_path or kind.allow_dash) and kind.type is None:
        return FILE, None
    return None
