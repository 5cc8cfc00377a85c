"""Shell completion beyond click's own (subcommands and options): config names for every NAME
argument and `--config`/`--unit`/`--against`, and `--host` from the configs' hosts and the
start history. Wired onto the commands once, in `svcdiag.cli.app`, by parameter name, so a new
command's NAME completes without a line of its own (docs/install.md#shell-completion)."""

from __future__ import annotations

from typing import Any

import click
from click.shell_completion import CompletionItem

#: parameters that take a config name (arguments and options, by their Python name)
CONFIG_PARAMS = frozenset({"name", "names", "a", "b", "candidate", "config_name"})
HOST_PARAMS = frozenset({"host", "hosts"})


def _configs(ctx: click.Context) -> list[Any]:
    """The configs of the group's --units (or the default folder); none when it cannot be read:
    completion never prints an error into the operator's prompt."""
    from svcdiag.config.service import find_units_dir

    try:
        return find_units_dir(ctx.find_root().params.get("units_opt")).load_all()
    except Exception:  # a broken config must not break the shell
        return []


def config_names(ctx: click.Context, param: click.Parameter, incomplete: str) -> list[CompletionItem]:
    return [CompletionItem(cfg.name, help=cfg.description or None) for cfg in _configs(ctx)
            if cfg.name.startswith(incomplete)]


def hosts(ctx: click.Context, param: click.Parameter, incomplete: str) -> list[CompletionItem]:
    """The configs' remote_host and [[nodes]] hosts, then the hosts the history recorded starts on."""
    found: dict[str, None] = {}
    for cfg in _configs(ctx):
        for node in cfg.node_configs() if cfg.multinode else [cfg]:
            if node.remote_host:
                found[node.remote_host] = None
    found.update(dict.fromkeys(_history_hosts()))
    return [CompletionItem(h) for h in found if h.startswith(incomplete)]


def _history_hosts() -> list[str]:
    import socket
    import sqlite3

    from svcdiag.ops.host.history import db_path

    try:
        path = db_path(None)
        if not path.exists():
            return []
        with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as db:
            rows = db.execute("SELECT DISTINCT host FROM starts WHERE host IS NOT NULL ORDER BY host").fetchall()
    except Exception:  # unreadable state (not root): no suggestions, no error
        return []
    here = socket.gethostname()
    return [h for (h,) in rows if h and h != here]


def wire(group: click.Group) -> None:
    """Give every config-name and --host parameter of `group`'s commands its completion."""
    for cmd in group.commands.values():
        for p in cmd.params:
            if p.name in CONFIG_PARAMS and getattr(p, "_custom_shell_complete", None) is None:
                p._custom_shell_complete = config_names  # click's hook for Parameter(shell_complete=…)
            elif p.name in HOST_PARAMS and getattr(p, "_custom_shell_complete", None) is None:
                p._custom_shell_complete = hosts
