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
import os
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
from svcdiag.ops.host.sglang_version import resolve
from svcdiag.sglang.command import Command, find_launch, read_command, split_shell
from svcdiag.systemd.notify import start_limit_s
from svcdiag.systemd.render import render_unit
from svcdiag.systemd.unit_file import UnitFile, environment, exec_words, parse_unit

UNIT_DIRS = ("/etc/systemd/system", "/run/systemd/system", "/usr/lib/systemd/system", "/lib/systemd/system")
#: settings svcdiag renders itself: an imported unit's own are not carried over, and say so
DROPPED = ("ExecStartPre", "ExecStartPost", "ExecStop", "ExecReload", "EnvironmentFile",
           "LimitNOFILE", "LimitMEMLOCK", "KillMode", "Type", "TimeoutStopSec")
#: systemd's time spans as RestartSec= takes them ("5", "5s", "1min 30s", "500ms")
_SPAN = re.compile(r"(\d+(?:\.\d+)?)\s*(minutes?|min|msec|ms|m|seconds?|sec|s|hours?|hr|h)?")
_SPAN_S = {"ms": 0.001, "msec": 0.001, "m": 60, "min": 60, "minute": 60, "minutes": 60, "h": 3600, "hr": 3600,
           "hour": 3600, "hours": 3600}
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


def shell_tail(line: str) -> tuple[str, str]:
    """(the command, what follows it): a line cut at its first unquoted `|`, `;`, `&`, `<` or `>`
    (and a file descriptor's digits before one: `2>&1`), so `… 2>&1 | tee /var/log/x.log` is no flag."""
    quote: str | None = None
    i = 0
    while i < len(line):
        ch = line[i]
        if ch == "\\" and quote != "'":
            i += 2
            continue
        if quote:
            quote = None if ch == quote else quote
        elif ch in "'\"":
            quote = ch
        elif ch in "|;&<>":
            j = i
            while j > 0 and line[j - 1].isdigit():
                j -= 1
            if j < i and (j == 0 or line[j - 1].isspace()):
                i = j  # 2>&1: the digits are the redirection's
            return line[:i].rstrip(), line[i:].strip()
        i += 1
    return line, ""


def _script_command(text: str) -> tuple[list[str], dict[str, str], str]:
    """A launch script's (or a pasted line's) SGLang command, what it exported before it, and the
    shell that follows the command on its line (a pipe to tee, a redirection)."""
    env: dict[str, str] = {}
    joined = re.sub(r"\\\n", " ", text)
    for line in joined.splitlines():
        s = line.strip()
        m = re.match(r"^(?:export\s+)([A-Za-z_][A-Za-z0-9_]*)=(.*)$", s)
        if m:
            words = split_shell(m.group(2)) or [""]
            env[m.group(1)] = words[0]
        elif "sglang" in s:
            head, tail = shell_tail(s)
            try:
                words = split_shell(head)
            except SvcdiagError:
                continue  # an echo's unbalanced quote, say: not the launch line
            if find_launch(words) is not None:
                return words, env, tail
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
        _restart(unit, top, warnings)
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


def _restart(unit: UnitFile, top: dict[str, Any], warnings: list[str]) -> None:
    """The operator's Restart= (and RestartSec=) kept as the config's `restart`, `restart_sec`."""
    from svcdiag.config.service import RESTART_POLICIES

    policy = unit.get("Service", "Restart")
    if policy and policy != "no":
        if policy in RESTART_POLICIES:
            top["restart"] = policy
        else:
            warnings.append(f"Restart={policy}: not a policy systemd knows ({', '.join(RESTART_POLICIES)}); not kept")
    sec = unit.get("Service", "RestartSec")
    if sec and "restart" in top:
        seconds = _seconds(sec)
        if seconds is None or seconds <= 0:
            warnings.append(f"RestartSec={sec}: not a time span svcdiag reads; systemd's default (100ms) applies")
        else:
            top["restart_sec"] = seconds


def _seconds(span: str) -> float | None:
    """A systemd time span in seconds, or None."""
    parts = _SPAN.findall(span.strip())
    if not parts or _SPAN.sub("", span).strip():
        return None
    return sum(float(n) * _SPAN_S.get(unit, 1.0) for n, unit in parts)


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


def units_to_be(option: str | None) -> UnitsDir:
    """The units folder, or where `svcdiag setup` will make it (/etc/svcdiag/units) when there is
    none yet: `import --dry-run` shows the config before the host is set up."""
    from svcdiag.config.service import DEFAULT_UNITS_DIRS, find_units_dir

    try:
        return find_units_dir(option)
    except SvcdiagError:
        if option or os.environ.get("SVCDIAG_UNITS"):
            raise
        return UnitsDir(Path(DEFAULT_UNITS_DIRS[-1]), f"default {DEFAULT_UNITS_DIRS[-1]} (not made yet: svcdiag setup)")


def _target(units: UnitsDir, name: str, force: bool, rename: str) -> Path:
    """Where config NAME goes; `rename`: how this command names it otherwise (import: --name NAME;
    new: its NAME argument)."""
    if not NAME_RE.match(name):
        raise SvcdiagError(f"{name!r}: not a config name (letters, digits, ':', '_', '.', '-'); {rename}")
    target = units.path / f"{name}.toml"
    if target.exists() and not force:
        raise SvcdiagError(f"{target} exists; {rename}, or --force to replace it")
    return target


def import_config(source: str, units: UnitsDir, *, name: str | None = None, version: str | None = None,
                  dry_run: bool = False, force: bool = False) -> Adopted:
    """`svcdiag import`: the config of `source` (a unit file or name, a script, '-'), written to `units`."""
    kind, text, where = read_source(source)
    warnings: list[str] = []
    unit = None
    env: dict[str, str] = {}
    tail = ""
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
        words, env, tail = _script_command(text)
        default = Path(where).stem if where != "<stdin>" else ""
    name = name or default
    if not name:
        raise SvcdiagError("import from stdin: pass --name NAME")
    if kind != "unit" and tail:
        warnings.append(f"`{tail}` after the command is the shell's, not SGLang's: not carried over; the unit's "
                        f"output goes to journald (journalctl -u {name}.service, svcdiag logs {name}), where svcdiag "
                        "reads it")
    target = _target(units, name, force, "pass --name NAME")
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
    target = _target(units, name, force, f"give the new config another name (svcdiag new OTHER-NAME --model {model})"
                     if NAME_RE.match(name) else "name it with letters, digits, ':', '_', '.', '-'")
    try:
        others = units.load_all()
    except SvcdiagError:
        others = []
    port = _free_port(others)
    if extends:
        base = units.load(extends)
        text = _NEW_EXTENDS.format(name=name, base=extends, model=model, port=port, tp=base.tp_size)
        text += "".join(_inherited(key, getattr(base, key), extends) for key in (
            "mem_fraction_static", "max_running_requests", "context_length"))
        text += _NEW_EXTENDS_TAIL.format(base=extends)
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
'''
_NEW_EXTENDS_TAIL = '''# speculative = false               # drop {base}'s [speculative], if any
'''


def _inherited(key: str, value: Any, base: str) -> str:
    """A commented line showing what `key` is in the base; one it leaves unset says SGLang decides
    (never `# key = None`, which is no TOML)."""
    if value is None:
        return f"# {key} = …{' ' * max(1, 26 - len(key))}# unset in {base}: SGLang's default\n"
    return f"# {key} = {value!r}\n"
