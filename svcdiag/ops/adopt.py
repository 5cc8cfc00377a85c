"""Adopt what an operator already has: `svcdiag import UNIT|FILE` turns a hand-written unit (its
ExecStart=, Environment=, User=, Group=, WorkingDirectory=, timeouts) or a launch script / pasted
command line into a config; `svcdiag new NAME --model …` writes a starter config. Both validate
what they write by loading it as any config is loaded, and never replace a config without `force`.

Secrets found in Environment= (names like TOKEN, KEY, SECRET, PASSWORD) are moved to [secrets]:
the value goes to a 0600 file beside journal mode's EnvironmentFiles, the unit names only the file.
"""

from __future__ import annotations

import dataclasses
import difflib
import re
import shutil
import tempfile
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from svcdiag.config import toml_out
from svcdiag.config.secrets import secrets_dir
from svcdiag.config.service import DEFAULT_TIMEOUTS, SECRET_NAME_RE, ServiceConfig, UnitsDir
from svcdiag.errors import SvcdiagError
from svcdiag.files import write_atomic
from svcdiag.ops.sglang_version import resolve
from svcdiag.sglang.command import Command, find_launch, read_command, split_shell
from svcdiag.systemd.notify import start_limit_s
from svcdiag.systemd.render import render_unit
from svcdiag.systemd.unit_file import UnitFile, environment, exec_words, parse_unit

UNIT_DIRS = ("/etc/systemd/system", "/run/systemd/system", "/usr/lib/systemd/system", "/lib/systemd/system")
#: settings svcdiag renders itself: an imported unit's own are not carried over, and say so
DROPPED = ("ExecStartPre", "ExecStartPost", "ExecStop", "ExecReload", "Restart", "RestartSec", "EnvironmentFile",
           "LimitNOFILE", "LimitMEMLOCK", "KillMode", "Type", "TimeoutStopSec")
NAME_RE = re.compile(r"^[A-Za-z0-9:_.\-]+$")


@dataclass(frozen=True)
class Adopted:
    """A config written (or, with dry_run, that would be), and the unit it renders."""

    name: str
    path: Path
    toml: str
    warnings: tuple[str, ...]
    secrets: tuple[tuple[str, str], ...]  # env name → the file its value went to
    old_unit: str | None
    old_unit_path: str | None
    new_unit: str
    written: bool

    def diff(self) -> str:
        """The old unit against the one svcdiag renders from the new config (unified diff)."""
        return "".join(difflib.unified_diff((self.old_unit or "").splitlines(keepends=True),
                                            self.new_unit.splitlines(keepends=True),
                                            fromfile=self.old_unit_path or "(no unit: a command line)",
                                            tofile=f"{self.name}.service (rendered by svcdiag)"))

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "path": str(self.path), "written": self.written, "toml": self.toml,
                "warnings": list(self.warnings), "secrets": [{"env": k, "file": f} for k, f in self.secrets],
                "old_unit": self.old_unit_path, "diff": self.diff()}


# ------------------------------------------------------------ reading the source

def _find_unit(source: str) -> Path | None:
    """A unit name (`sglang-x.service`, or `sglang-x`) in systemd's folders."""
    name = source if source.endswith(".service") else f"{source}.service"
    if "/" in name:
        return None
    return next((Path(d) / name for d in UNIT_DIRS if (Path(d) / name).is_file()), None)


def read_source(source: str) -> tuple[str, str, str]:
    """(kind "unit" | "command", its text, where it came from) for a file, a unit name, or '-'."""
    if source == "-":
        import sys

        text, where = sys.stdin.read(), "<stdin>"
    else:
        path = Path(source)
        if not path.is_file():
            found = _find_unit(source)
            if found is None:
                raise SvcdiagError(f"{source}: no such file, and no unit of that name in {', '.join(UNIT_DIRS)}")
            path = found
        try:
            text = path.read_text(encoding="utf-8")
        except OSError as e:
            raise SvcdiagError(f"{path}: cannot read: {e.strerror}") from None
        where = str(path)
    kind = "unit" if re.search(r"^\s*\[Service\]\s*$", text, re.M) else "command"
    return kind, text, where


def _script_command(text: str) -> tuple[list[str], dict[str, str]]:
    """A launch script's (or a pasted line's) SGLang command, and what it exported before it."""
    env: dict[str, str] = {}
    joined = re.sub(r"\\\n", " ", text)
    for line in joined.splitlines():
        s = line.strip()
        m = re.match(r"^(?:export\s+)([A-Za-z_][A-Za-z0-9_]*)=(.*)$", s)
        if m:
            words = split_shell(m.group(2)) or [""]
            env[m.group(1)] = words[0]
        elif "sglang" in s:
            try:
                words = split_shell(s)
            except SvcdiagError:
                continue  # an echo's unbalanced quote, say: not the launch line
            if find_launch(words) is not None:
                return words, env
    raise SvcdiagError("no `python -m sglang.launch_server …` line found")


# ------------------------------------------------------------ building the config

def _config_dict(cmd: Command, env: dict[str, str], unit: UnitFile | None, name: str,
                 warnings: list[str]) -> tuple[dict[str, Any], dict[str, str]]:
    """The config's keys (tables as dicts) and the secrets (env name → value) to move out."""
    top: dict[str, Any] = {}
    if unit is not None and unit.get("Unit", "Description"):
        top["description"] = unit.get("Unit", "Description")
    if "model_path" not in cmd.keys:
        raise SvcdiagError("the command has no --model-path: nothing to serve")
    for k, v in cmd.keys.items():
        if not k.startswith("speculative."):
            top[k] = v
    if cmd.python:
        top["python"] = cmd.python
    else:
        warnings.append("python unset: the unit would run /usr/bin/python3; set python = to SGLang's interpreter")
    if cmd.extra_args:
        top["extra_args"] = cmd.extra_args
    env = {**env, **cmd.env}
    env.pop("PYTHONUNBUFFERED", None)
    gpus = env.pop("CUDA_VISIBLE_DEVICES", None)
    if gpus is not None:
        try:
            top["gpus"] = [int(g) for g in gpus.split(",") if g.strip()]
        except ValueError:
            env["CUDA_VISIBLE_DEVICES"] = gpus
            warnings.append(f"CUDA_VISIBLE_DEVICES={gpus!r} is not a list of GPU indexes: kept in [env], gpus unset")
    if unit is not None:
        for key, field in (("User", "user"), ("Group", "group"), ("WorkingDirectory", "working_directory")):
            value = unit.get("Service", key)
            if value:
                top[field] = value
        _timeouts(unit, warnings)
        dropped = [k for k in DROPPED if unit.all("Service", k)]
        if dropped:
            warnings.append(f"not carried over (svcdiag renders its own, docs/config.md#the-rendered-unit): "
                            f"{', '.join(f'{k}=' for k in dropped)}")
    secrets = {k: v for k, v in env.items() if SECRET_NAME_RE.search(k)}
    plain = {k: v for k, v in env.items() if k not in secrets}
    spec = {k.split(".", 1)[1]: v for k, v in cmd.keys.items() if k.startswith("speculative.")}
    if spec:
        top["speculative"] = spec
    if plain:
        top["env"] = plain
    return top, secrets


def _timeouts(unit: UnitFile, warnings: list[str]) -> None:
    start = unit.get("Service", "TimeoutStartSec") or unit.get("Service", "TimeoutSec")
    if start:
        allowed = start_limit_s(dict(DEFAULT_TIMEOUTS))  # the one figure the rendered unit and docs/config.md say
        warnings.append(f"TimeoutStartSec={start}: svcdiag gives each phase of the start its own deadline instead "
                        f"([timeouts], docs/config.md#restarts; the whole start's limit, TimeoutStartSec={allowed:.0f} "
                        "by default), so a stuck phase is caught where it sticks")


def _validate(name: str, text: str, target: Path) -> ServiceConfig:
    """Load `text` as config NAME beside the folder's others (its base, if it extends one), its
    errors naming `target`; the config as if read from there."""
    with tempfile.TemporaryDirectory() as d:
        for other in target.parent.glob("*.toml"):
            shutil.copyfile(other, Path(d) / other.name)
        (Path(d) / f"{name}.toml").write_text(text, encoding="utf-8")
        try:
            cfg = UnitsDir(Path(d), "import").load(name)
        except SvcdiagError as e:
            raise SvcdiagError(str(e).replace(d, str(target.parent))) from None
    return dataclasses.replace(cfg, path=target)


def _target(units: UnitsDir, name: str, force: bool) -> Path:
    if not NAME_RE.match(name):
        raise SvcdiagError(f"{name!r}: not a config name (letters, digits, ':', '_', '.', '-'); pass --name NAME")
    target = units.path / f"{name}.toml"
    if target.exists() and not force:
        raise SvcdiagError(f"{target} exists; pick another --name, or --force to replace it")
    return target


def import_config(source: str, units: UnitsDir, *, name: str | None = None, version: str | None = None,
                  dry_run: bool = False, force: bool = False) -> Adopted:
    """`svcdiag import`: the config of `source` (a unit file or name, a script, '-'), written to `units`."""
    kind, text, where = read_source(source)
    warnings: list[str] = []
    unit = None
    env: dict[str, str] = {}
    if kind == "unit":
        unit = parse_unit(text, where)
        starts = [v for v in unit.all("Service", "ExecStart") if v]
        if len(starts) != 1:
            raise SvcdiagError(f"{where}: {len(starts)} ExecStart= lines; import takes a unit with one")
        words = exec_words(starts[-1])
        env = environment(unit.all("Service", "Environment"))
        if any("$" in w for w in words):
            warnings.append("ExecStart= uses $VARIABLES: they were imported as written; put their values in the config")
        default = Path(where).name.removesuffix(".service")
    else:
        words, env = _script_command(text)
        default = Path(where).stem if where != "<stdin>" else ""
    name = name or default
    if not name:
        raise SvcdiagError("import from stdin: pass --name NAME")
    target = _target(units, name, force)
    cmd = read_command(words, version, source=where)
    warnings += cmd.warnings
    top, secrets = _config_dict(cmd, env, unit, name, warnings)
    if version:
        top["sglang_version"] = version
    moved: list[tuple[str, str]] = []
    if secrets:
        top["secrets"] = {}
        for key in secrets:
            file = secrets_dir() / f"{name}.{key}"
            top["secrets"][key] = str(file)
            moved.append((key, str(file)))
        warnings.append(f"{', '.join(secrets)} {'was' if len(secrets) == 1 else 'were'} in Environment=, which anyone "
                        "may read (systemctl show): moved to [secrets], each value in a 0600 file "
                        f"({', '.join(f for _, f in moved)}); rotate {'it' if len(secrets) == 1 else 'them'} if the old "
                        "unit was ever shared")
    header = f"Imported by `svcdiag import` from {where}: review it, then `svcdiag diff`/`render` and `svcdiag up {name}`."
    body = toml_out.dump(top, header=header)
    if secrets and not dry_run:
        for (_, file), value in zip(moved, secrets.values(), strict=True):
            write_atomic(Path(file), value + "\n")  # 0600 in a 0700 folder, as [secrets] wants them
    cfg = _validate(name, body, target)
    new_unit = render_unit(cfg, resolve(cfg, override=version).version)
    if not dry_run:
        write_atomic(target, body, mode=0o644)
    return Adopted(name, target, body, tuple(warnings), tuple(moved), text if unit else None,
                   where if unit else None, new_unit, not dry_run)


# ------------------------------------------------------------ a new config

def _free_port(configs: Iterable[ServiceConfig]) -> int:
    used = {c.port for c in configs}
    return next(p for p in range(30000, 65535) if p not in used and p + 1 not in used)


def new_config(name: str, units: UnitsDir, *, model: str, extends: str | None = None,
               force: bool = False, dry_run: bool = False) -> Adopted:
    """`svcdiag new`: a starter config for `model`, the keys an operator usually sets, commented."""
    target = _target(units, name, force)
    try:
        others = units.load_all()
    except SvcdiagError:
        others = []
    port = _free_port(others)
    if extends:
        base = units.load(extends)
        text = _NEW_EXTENDS.format(name=name, base=extends, model=model, port=port, tp=base.tp_size,
                                   mem=base.mem_fraction_static, mr=base.max_running_requests,
                                   ctx=base.context_length)
    else:
        text = _NEW.format(name=name, model=model, port=port)
    cfg = _validate(name, text, target)
    unit = render_unit(cfg, resolve(cfg).version)
    if not dry_run:
        write_atomic(target, text, mode=0o644)
    return Adopted(name, target, text, (), (), None, None, unit, not dry_run)


_NEW = '''# {name}: written by `svcdiag new`. Every key: docs/config.md; a walk-through: docs/install.md.
description = "{model} on SGLang"
model_path = "{model}"              # a local directory (config.json + *.safetensors), or a Hugging Face id
python = "/opt/sglang/.venv/bin/python"   # SGLang's interpreter: `svcdiag check {name}` says if it imports sglang
user = "sglang"                     # the service user (`svcdiag setup` creates it)
group = "sglang"
port = {port}
tp_size = 1                         # tensor parallel: one GPU per rank
gpus = [0]                          # CUDA_VISIBLE_DEVICES; tp_size × dp_size of them
# mem_fraction_static = 0.85        # GPU memory for weights + KV cache (SGLang's default depends on the GPU)
# context_length = 32768            # the longest request; KV cache must hold at least one
# max_running_requests = 16         # `svcdiag preflight {name}` predicts what fits
# chunked_prefill_size = 8192
# trust_remote_code = true          # models with their own code on the hub
# extra_args = ["--attention-backend", "flashinfer"]   # any other launch_server flag
# sglang_version = "0.5.23"         # unset: svcdiag asks the interpreter

# [speculative]                     # speculative decoding
# algorithm = "EAGLE3"
# draft_model_path = "/models/draft"
# num_steps = 3

# [env]
# NCCL_DEBUG = "WARN"

# [secrets]                         # never in [env]: docs/security.md
# HF_TOKEN = "/etc/svcdiag/secrets/hf_token"   # a 0600 file holding the value

# [timeouts]                        # per-phase deadlines, seconds (docs/config.md#timeouts)
# loading_weights = 1800            # a big checkpoint from slow storage
'''

_NEW_EXTENDS = '''# {name}: written by `svcdiag new`, a variant of {base} (every key not set here is {base}'s).
# Every key: docs/config.md; a walk-through: docs/install.md.
extends = "{base}"
description = "{model} on SGLang (from {base})"
model_path = "{model}"
port = {port}                         # its own port: it may run beside {base}
# tp_size = {tp}                       # {base}'s; gpus must then list tp_size × dp_size GPUs
# mem_fraction_static = {mem}
# max_running_requests = {mr}
# context_length = {ctx}
# speculative = false               # drop {base}'s [speculative], if any
'''
