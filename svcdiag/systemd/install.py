"""Write rendered units where systemd reads them, atomically, and reload systemd."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from svcdiag.config.secrets import check_files
from svcdiag.config.service import ServiceConfig
from svcdiag.errors import SvcdiagError
from svcdiag.files import DEFAULT_STATE_DIR, private_dir, write_atomic
from svcdiag.systemd.render import installed_hash, render_unit
from svcdiag.systemd.secrets import push_remote, remove_environment_file, write_environment_file

SYSTEM_UNIT_DIR = Path("/etc/systemd/system")


def systemd_running() -> bool:
    """sd_booted(3): systemd is PID 1 of this (container's) namespace."""
    return os.path.isdir("/run/systemd/system")


def unit_path(cfg: ServiceConfig, unit_dir: Path = SYSTEM_UNIT_DIR) -> Path:
    return unit_dir / cfg.unit


def drift(cfg: ServiceConfig, unit_dir: Path = SYSTEM_UNIT_DIR, version: str | None = None,
          remote: Any = None) -> str | None:
    """Why the installed unit is not what the config renders to (for SGLang `version`), or None if it is.
    `remote`: the unit is on that host (svcdiag.systemd.remote.Connection)."""
    path = unit_path(cfg, unit_dir)
    if remote is not None:
        got = remote.read_file(str(path))
        if got is None:
            return "not installed"
        text = got
    else:
        try:
            text = path.read_text(encoding="utf-8", errors="replace")
        except FileNotFoundError:
            return "not installed"
    if text == render_unit(cfg, version):
        return None
    have = installed_hash(text)
    if have != cfg.config_hash:
        return f"installed from config hash {have or 'none'}, config is now {cfg.config_hash}"
    return "installed unit was edited by hand, or rendered for another SGLang release"


def installed_unit(cfg: ServiceConfig, version: str | None = None, unit_dir: Path = SYSTEM_UNIT_DIR) -> dict[str, Any]:
    """This host's installed unit beside what `cfg` renders to: `unit_file`, `installed_text` (None:
    not installed) and `drift` (why `up` would install it again, or None): what `render --json`
    adds for a caller that must say what `up` would change (Ansible's check and diff modes)."""
    path = unit_path(cfg, unit_dir)
    try:
        text: str | None = path.read_text(encoding="utf-8", errors="replace")
    except FileNotFoundError:
        text = None
    return {"unit_file": str(path), "installed_text": text, "drift": drift(cfg, unit_dir, version)}


def _state_dir_for_restarts() -> None:
    """A unit with a watchdog records its restarts in svcdiag's state (ReadWritePaths=-/var/lib/svcdiag): it
    must exist before the unit starts, or a strict sandbox leaves the supervisor nothing to write to. Made as
    `svcdiag setup` would not (private to root); a store `setup` shared is left as it is."""
    try:
        private_dir(Path(DEFAULT_STATE_DIR))
    except OSError:
        pass  # not root: `svcdiag setup` makes it; the supervisor warns in the journal meanwhile


def install_units(configs: list[ServiceConfig], unit_dir: Path, *, reload: bool = True,
                  force: bool = False, versions: Mapping[str, str | None] | None = None) -> dict[str, Any]:
    """Write each config's unit; `versions` (config name → SGLang release) spells the flags."""
    versions = versions or {}
    rendered = [(cfg, render_unit(cfg, versions.get(cfg.name))) for cfg in configs]  # all or nothing: render every one first
    for cfg, _ in rendered:
        path = unit_dir / cfg.unit
        try:
            foreign = path.exists() and "X-SvcdiagConfig=" not in path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            foreign = False
        if foreign and not force:
            raise SvcdiagError(f"{path} exists and was not written by svcdiag; move it away, or "
                               f"`svcdiag install --force {cfg.name}` to replace it")
    for cfg, _ in rendered:  # secrets checked (and journal mode's EnvironmentFile written) before any unit
        if cfg.watchdog_s is not None and unit_dir == SYSTEM_UNIT_DIR:
            _state_dir_for_restarts()
        if cfg.secrets:
            write_environment_file(cfg)
        else:
            remove_environment_file(cfg)
    out: list[dict[str, str]] = []
    changed = False
    before: list[tuple[ServiceConfig, Path, str | None]] = []  # what each written unit replaced
    for cfg, text in rendered:
        path = unit_dir / cfg.unit
        try:
            old = path.read_text(encoding="utf-8") if path.exists() else None
        except OSError:
            old = None
        if old == text:
            out.append({"name": cfg.name, "path": str(path), "action": "unchanged"})
            continue
        try:
            write_atomic(path, text, mode=0o644)  # world-readable, as units are: it holds no secret
        except PermissionError:
            raise SvcdiagError(f"cannot write {path}: permission denied; run as root: "
                               f"sudo svcdiag install {cfg.name}") from None
        except OSError as e:
            raise SvcdiagError(f"cannot write {path}: {e.strerror}") from None
        changed = True
        before.append((cfg, path, old))
        out.append({"name": cfg.name, "path": str(path), "action": "updated" if old else "installed"})
    if not reload:
        note = "daemon-reload: not asked for"
    elif not changed:
        note = "daemon-reload: nothing changed"
    elif unit_dir.resolve() != SYSTEM_UNIT_DIR or not systemd_running():
        note = ("daemon-reload: skipped (no running systemd here)" if not systemd_running()
                else f"daemon-reload: skipped ({unit_dir} is not {SYSTEM_UNIT_DIR})")
    else:
        from svcdiag.systemd.dbus import Systemd

        with Systemd.connect() as sd:
            sd.daemon_reload()
            _loaded_or_undone(sd, before)
        note = "daemon-reload: done"
    return {"unit_dir": str(unit_dir), "units": out, "reload": note}


def _loaded_or_undone(sd: Any, written: list[tuple[ServiceConfig, Path, str | None]]) -> None:
    """After the reload: a unit systemd could not load is taken back (the one it replaced restored, or
    removed) and named in one line; install never reports success for a unit that cannot start."""
    bad = [(cfg, path, old, state) for cfg, path, old in written
           if (state := sd.props(cfg.unit).load_state) in ("error", "bad-setting")]
    if not bad:
        return
    for _, path, old, _ in bad:
        if old is None:
            path.unlink(missing_ok=True)
        else:
            write_atomic(path, old, mode=0o644)
    sd.daemon_reload()
    cfg, path, old, state = bad[0]
    raise SvcdiagError(f"systemd cannot load {path} (LoadState={state}; `systemd-analyze verify {path}` says why): "
                       f"{'the unit it replaced is restored' if old is not None else 'it was removed again'}; "
                       f"fix config {cfg.name}")


def install_remote(sd: Any, configs: list[ServiceConfig], *, force: bool = False,
                   versions: Mapping[str, str | None] | None = None) -> dict[str, Any]:
    """install_units on the host `sd` reaches over SSH: each unit written there atomically (temp
    file + rename), then one daemon-reload over that host's D-Bus. [secrets] are read here and
    written there first (svcdiag.systemd.secrets.push_remote); `out["secrets"]` names the paths."""
    versions = versions or {}
    conn = sd.remote
    rendered = [(cfg, render_unit(cfg, versions.get(cfg.name))) for cfg in configs]
    for cfg, _ in rendered:
        if cfg.secrets:
            check_files(cfg)  # every config's secret files, here, before anything is written there
    olds = {cfg.name: conn.read_file(str(SYSTEM_UNIT_DIR / cfg.unit)) for cfg, _ in rendered}
    for cfg, _ in rendered:
        old = olds[cfg.name]
        if old is not None and "X-SvcdiagConfig=" not in old and not force:
            raise SvcdiagError(f"{conn.target}:{SYSTEM_UNIT_DIR / cfg.unit} exists and was not written by svcdiag; "
                               f"move it away, or `svcdiag install --force {cfg.name}` to replace it")
    secrets = [f"{conn.target}:{p}" for cfg, _ in rendered for p in push_remote(conn, cfg)]
    out: list[dict[str, str]] = []
    changed = False
    for cfg, text in rendered:
        path = f"{SYSTEM_UNIT_DIR / cfg.unit}"
        if olds[cfg.name] == text:
            out.append({"name": cfg.name, "path": f"{conn.target}:{path}", "action": "unchanged"})
            continue
        conn.write_atomic(path, text, mode=0o644)
        changed = True
        out.append({"name": cfg.name, "path": f"{conn.target}:{path}", "action": "updated" if olds[cfg.name] else "installed"})
    if changed:
        sd.daemon_reload()
    return {"unit_dir": f"{conn.target}:{SYSTEM_UNIT_DIR}", "units": out, "secrets": secrets,
            "reload": "daemon-reload: done" if changed else "daemon-reload: nothing changed"}
