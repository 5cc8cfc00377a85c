"""`--help` without click: the texts click prints, kept in `help_manifest.py` (with the
parameters `svcdiag.cli.fast` parses `status` by).

`python -m svcdiag.cli.help` renders every command's help with click itself and writes the
manifest; tests/test_cli_help.py checks that it is current and that what `serve` prints is
byte for byte what click prints. `serve` answers only when the manifest was made from these very
CLI sources and this click release, for a terminal at least 80 columns wide (click's width is
then 78); in every other case it says no, and click answers. This module imports no click.
"""

from __future__ import annotations

import os
import sys
import zlib
from pathlib import Path

HERE = Path(__file__).resolve().parent
MANIFEST = HERE / "help_manifest.py"
WIDTH = 78  # click's help width on a terminal of 80 columns or more
PROG = "\0"  # stands for the program's name in the stored texts
HELP = ("--help", "-h")


def serve(argv: list[str]) -> bool:
    """Print the help `argv` asks for (`[COMMAND...] --help`) from the manifest; False when the
    manifest cannot say what click would (click then parses `argv`)."""
    if not argv or argv[-1] not in HELP:
        return False
    try:
        from svcdiag.cli import help_manifest as m
    except ImportError:
        return False
    path = tuple(argv[:-1])
    if argv[-1] not in m.FLAGS.get(path, ()) or _width() != WIDTH or sources() != m.SOURCES \
            or click_release() != m.CLICK:
        return False
    text = m.TEXTS[path]
    try:
        sys.stdout.write(text.replace(PROG, _prog_name()))
        sys.stdout.flush()
    except BrokenPipeError:  # `svcdiag --help | head -1`: as click leaves it
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        sys.exit(1)
    return True


def sources() -> int:
    """A checksum of the CLI's sources (the manifest's own aside): any edit makes it stale."""
    crc = 0
    for name in sorted(os.listdir(HERE)):
        if name.endswith(".py") and name != MANIFEST.name:
            crc = zlib.crc32(name.encode() + (HERE / name).read_bytes(), crc)
    return crc


def click_release() -> str | None:
    """The installed click's version, read off its dist-info beside it (importing click costs ~25 ms)."""
    from importlib.machinery import PathFinder

    spec = PathFinder.find_spec("click")
    if spec is None or not spec.origin:
        return None
    site = os.path.dirname(os.path.dirname(spec.origin))
    found = [d for d in os.listdir(site) if d.startswith("click-") and d.endswith(".dist-info")]
    return found[0][len("click-"):-len(".dist-info")] if len(found) == 1 else None


def _width() -> int:
    """click's HelpFormatter width: max(min(columns, 80) - 2, 50), the columns as
    shutil.get_terminal_size() finds them ($COLUMNS, then stdout's terminal, else 80)."""
    try:
        columns = int(os.environ["COLUMNS"])
    except (KeyError, ValueError):
        columns = 0
    if columns <= 0:
        try:
            columns = os.get_terminal_size(sys.__stdout__.fileno()).columns  # type: ignore[union-attr]
        except (AttributeError, ValueError, OSError):
            columns = 0
        columns = columns or 80
    return max(min(columns, 80) - 2, 50)


def _prog_name() -> str:
    """The program's name as click's `_detect_program_name` finds it: `python -m svcdiag` or the script's."""
    main = sys.modules["__main__"]
    path = sys.argv[0]
    if getattr(main, "__package__", None) in (None, ""):
        return os.path.basename(path)
    module = main.__package__
    name = os.path.splitext(os.path.basename(path))[0]
    if name != "__main__":
        module = f"{module}.{name}"
    return f"python -m {module.lstrip('.')}"


def render(path: tuple[str, ...]) -> str:
    """What click prints for `svcdiag [path...] --help` at width 78 (imports the click group)."""
    import contextlib
    import io

    from click import formatting

    from svcdiag.cli.app import main

    out = io.StringIO()
    old, formatting.FORCED_WIDTH = formatting.FORCED_WIDTH, WIDTH
    try:
        with contextlib.redirect_stdout(out):
            main.main([*path, "--help"], prog_name=PROG, standalone_mode=True)
    except SystemExit as e:
        if e.code not in (0, None):
            raise
    finally:
        formatting.FORCED_WIDTH = old
    return out.getvalue()


def commands() -> dict[tuple[str, ...], list[str]]:
    """Every command path of the group (the group itself first), with the flags click takes as
    its help (`-h` is not, for a command that gives `-h` another meaning)."""
    from click import Command, Context, Group

    from svcdiag.cli.app import main

    paths: dict[tuple[str, ...], list[str]] = {}

    def walk(cmd: Command, path: tuple[str, ...], parent: Context | None) -> None:
        ctx = cmd.make_context(path[-1] if path else PROG, [], parent=parent, resilient_parsing=True)
        paths[path] = sorted(set(cmd.get_help_option_names(ctx)) & set(HELP))
        if isinstance(cmd, Group):
            for name in sorted(cmd.commands):
                walk(cmd.commands[name], (*path, name), ctx)

    walk(main, (), None)
    return paths


def manifest_text() -> str:
    """The source of help_manifest.py, from click's own renderings."""
    lines = ['"""Generated by `python -m svcdiag.cli.help` from the click commands: do not edit.',
             'tests/test_cli_help.py fails when it is stale; svcdiag.cli.help ignores it then."""', "",
             f"SOURCES = {sources()}", f"CLICK = {click_release()!r}", "FLAGS = {"]
    paths = commands()
    lines += [f"    {path!r}: {tuple(flags)!r}," for path, flags in paths.items()]
    lines += ["}", "TEXTS = {"]
    for path in paths:
        lines.append(f"    {path!r}: (")
        lines += [f"        {line!r}" for line in render(path).splitlines(keepends=True)]
        lines.append("    ),")
    lines.append("}")
    from svcdiag.cli.fast import recorded

    lines.append("#: the parameters of the commands svcdiag.cli.fast runs without click (the group's under ())")
    lines.append("PARAMS = {")
    for path, spec in recorded().items():  # a parameter a line: the file stays within the line length
        lines.append(f"    {path!r}: (")
        lines += [f"        {param!r}," for param in spec]
        lines.append("    ),")
    lines.append("}")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    MANIFEST.write_text(manifest_text())
    print(f"wrote {MANIFEST}")
