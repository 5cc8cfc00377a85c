"""The `svcdiag` command: click commands only. Each parses its options, calls one use case
in `svcdiag.ops`, hands the result to `svcdiag.output`, and maps it to an exit code.

Exit codes: 0 healthy, 1 failed (or drifted, or refused by preflight), 2 bad input (one
line, no traceback), 3 timed out, 4 incomplete (the log ends before a verdict, or holds no
start), 5 healthy but degraded with --strict, 130 interrupted.

Start-up: importing this package imports no click. `svcdiag --help` and each command's `--help`
are printed from `help_manifest.py`, generated from the click commands themselves (`python -m
svcdiag.cli.help`; a test checks it is current) and used only while it matches the sources
and click it was made from; so are `status`, `replay`, `list`, `render` and `check` run (`svcdiag.cli.fast`:
argv parsed by the parameters recorded there, the body in `svcdiag.cli.plain`, which the click
command calls too), and `--version` printed from `svcdiag.__version__`.
Anything else imports the click group (`svcdiag.cli.app`) on first use.
"""

from __future__ import annotations

import sys

TYPE_CHECKING = False  # not typing's: importing typing costs 3 ms of the ~30 that `--help` may take
if TYPE_CHECKING:
    from typing import Any


class _Main:
    """`svcdiag.cli.app.main`, the click group, imported when first used: calling it with no
    arguments (the `svcdiag` command) first asks `help.serve` whether the manifest can answer."""

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if not args and not kwargs:
            if sys.argv[1:] == ["--version"]:  # click's version_option says the same, after importing click and metadata
                from svcdiag import __version__

                sys.stdout.write(f"svcdiag {__version__}\n")
                sys.exit(0)
            from svcdiag.cli.help import serve

            if serve(sys.argv[1:]):
                sys.exit(0)
            from svcdiag.cli import fast

            fast.serve(sys.argv[1:])  # `status`, when its argv is one the manifest parses as click does
        return _group()(*args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(_group(), name)


def _group() -> Any:
    from svcdiag.cli.app import main as group

    return group


#: the `svcdiag` command (the entry point), and the group the command modules register on
main: Any = _Main()


def __getattr__(name: str) -> Any:
    if name in ("fail", "Group"):  # the click side, on first use
        from svcdiag.cli import app

        return getattr(app, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
