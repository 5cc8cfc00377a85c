"""Render a config into a systemd unit (Jinja2, StrictUndefined) and detect drift.

The bundled template is also compiled ahead into Python (svcdiag.systemd.template_compile): while the
template that would be loaded is that very text, its compiled function renders it and jinja2 is
never imported."""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path
from typing import Any

from svcdiag.config.service import ServiceConfig
from svcdiag.errors import SvcdiagError
from svcdiag.sglang.flags import exec_argv
from svcdiag.systemd.hardening import credential_lines, hardening_lines
from svcdiag.systemd.notify import restart_policy

TEMPLATE_NAME = "sglang.service.j2"
HASH_KEY = "X-SvcdiagConfigHash"
_NEEDS_QUOTES = re.compile(r'[\s"\'\\;]')


def _escape(word: str, *, expand_dollar: bool) -> str:
    out = word.replace("\\", "\\\\").replace('"', '\\"').replace("\t", "\\t").replace("%", "%%")
    return out.replace("$", "$$") if expand_dollar else out


def quote_exec_word(word: str) -> str:
    """One ExecStart word, by systemd.service(5)'s rules: `%` specifiers and `$` variables
    are doubled, and a word with blanks, quotes, backslashes or `;` goes in double quotes
    with C escapes, so no value can split into extra words, lines or directives."""
    esc = _escape(word, expand_dollar=True)
    return f'"{esc}"' if (not word or _NEEDS_QUOTES.search(word)) else esc


def quote_env(key: str, value: str) -> str:
    """An Environment= assignment: quoted, `%` doubled; `$` is literal there."""
    return f'"{key}={_escape(value, expand_dollar=False)}"'


def quote_setting(value: str) -> str:
    """A single-value setting (Description=, WorkingDirectory=): only `%` is special."""
    return value.replace("%", "%%")


def template_dirs() -> list[Path]:
    """The project's templates/ (next to units/ in a checkout), then the bundled copy."""
    env = os.environ.get("SVCDIAG_TEMPLATES")
    dirs = [Path(env)] if env else []
    here = Path(__file__).resolve().parent.parent
    return [*dirs, here.parent / "templates", here / "templates"]


def _environment() -> Any:
    import jinja2

    return jinja2.Environment(
        loader=jinja2.FileSystemLoader([str(d) for d in template_dirs()]),
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
        trim_blocks=True,
        lstrip_blocks=True,
        autoescape=False,
    )


def render_unit(cfg: ServiceConfig, version: str | None = None) -> str:
    """The unit file, its flags spelled for SGLang `version` (svcdiag.sglang.flags.render_version)."""
    env = [("PYTHONUNBUFFERED", "1")]
    if cfg.gpus is not None:
        env.append(("CUDA_VISIBLE_DEVICES", ",".join(str(g) for g in cfg.gpus)))
    env += [kv for kv in cfg.env if kv[0] not in ("PYTHONUNBUFFERED", "CUDA_VISIBLE_DEVICES")]
    argv = unit_argv(cfg, version)
    policy = restart_policy(cfg.timeout, cfg.watchdog_s, cfg.restart, cfg.restart_sec)
    description = cfg.description or f"SGLang server {cfg.name} ({cfg.model_path}, tp={cfg.tp_size})"
    values = dict(
        name=cfg.name,
        source=str(cfg.path),
        description=quote_setting(description),
        config_hash=cfg.config_hash,
        hash_key=HASH_KEY,
        exec_start=" ".join(quote_exec_word(w) for w in argv),
        environment=[quote_env(k, v) for k, v in env],
        user=cfg.user,
        group=cfg.group,
        working_directory=quote_setting(cfg.working_directory) if cfg.working_directory else None,
        simulate=cfg.simulate,
        notify=cfg.readiness == "notify",
        start_timeout=f"{policy.timeout_start_s:g}",
        restart=policy.restart,
        restart_sec=f"{policy.restart_s:g}" if policy.restart_s is not None else None,
        start_limit_interval=f"{policy.interval_s:g}",
        start_limit_burst=policy.burst,
        watchdog=f"{cfg.watchdog_s:g}" if cfg.watchdog_s else None,
        hardening=hardening_lines(cfg),
        credentials=credential_lines(cfg),
    )
    compiled = _compiled()
    if compiled is not None:
        return compiled.render(values)
    import jinja2

    try:
        template = _environment().get_template(TEMPLATE_NAME)
    except jinja2.TemplateNotFound:
        raise SvcdiagError(f"template {TEMPLATE_NAME} not found in "
                           + ", ".join(str(d) for d in template_dirs())) from None
    return template.render(**values)


def _compiled() -> Any:
    """The compiled template (template_compiled.py), when the template jinja2 would load is the text it
    was compiled from; else None (jinja2 renders it)."""
    for d in template_dirs():  # as jinja2's FileSystemLoader looks: the first folder that holds it
        path = d / TEMPLATE_NAME
        if path.is_file():
            break
    else:
        return None
    try:
        from svcdiag.systemd import template_compiled
        from svcdiag.systemd.template_compile import crc

        return template_compiled if crc(path.read_text(encoding="utf-8")) == template_compiled.SOURCE_CRC else None
    except (ImportError, OSError, UnicodeDecodeError):
        return None


def unit_argv(cfg: ServiceConfig, version: str | None = None) -> list[str]:
    """The unit's ExecStart= as words: SGLang's command (svcdiag.sglang.flags.exec_argv), behind
    `svcdiag supervise` in notify mode."""
    argv = exec_argv(cfg, version)
    return supervise_argv(cfg) + argv if cfg.readiness == "notify" else argv


def supervise_argv(cfg: ServiceConfig) -> list[str]:
    """Notify mode: svcdiag, under its own interpreter, as the unit's main process, in front of
    the server's argv (svcdiag.ops.serve.supervise)."""
    if cfg.node_rank is not None:  # one node of a multi-node config: the config's own name, and the node's rank
        return [sys.executable, "-m", "svcdiag", "--units", str(cfg.path.parent), "supervise", "--config",
                base_name(cfg), "--node-rank", str(cfg.node_rank), "--"]
    return [sys.executable, "-m", "svcdiag", "--units", str(cfg.path.parent), "supervise", "--config", cfg.name, "--"]


def base_name(cfg: ServiceConfig) -> str:
    """The multi-node config a node's config (`NAME-nodeR`, ServiceConfig.node_configs) was made from."""
    return cfg.name.removesuffix(f"-node{cfg.node_rank}") if cfg.node_rank is not None else cfg.name


def installed_hash(text: str) -> str | None:
    m = re.search(rf"^{HASH_KEY}=(\S+)$", text, re.M)
    return m.group(1) if m else None
