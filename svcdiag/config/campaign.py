"""Campaign plans: a TOML file of phases of configs (docs/campaign.md), checked as strictly as
a config: unknown keys, types, config names, placeholders; every error names the file and field.
"""

from __future__ import annotations

import re
import string
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from svcdiag.config.service import (
    UNIT_NAME_RE,
    ServiceConfig,
    UnitsDir,
    _bool,
    _check_table,
    _nonempty_str,
    _positive_number,
    _tname,
    _unit_name_ref,
    did_you_mean,
    read_toml,
)
from svcdiag.errors import ConfigError

#: what a benchmark command template may name
PLACEHOLDERS = ("port", "host", "served_model_name", "name", "output_file")
PHASE_NAME_RE = re.compile(r"^[A-Za-z0-9_.\-]+$")


def _template(v: Any) -> str | None:
    err = _nonempty_str(v)
    if err:
        return err
    try:
        names = [f for _, f, _, _ in string.Formatter().parse(v) if f is not None]
    except ValueError as e:
        return f"is not a valid template: {e}"
    for n in names:
        if n not in PLACEHOLDERS:
            return f"unknown placeholder {{{n}}}{did_you_mean(n, PLACEHOLDERS)}; known: " + \
                ", ".join(f"{{{p}}}" for p in PLACEHOLDERS)
    return None


def _names(v: Any) -> str | None:
    if not isinstance(v, list) or not v:
        return "must be a non-empty list of config names"
    for item in v:
        err = _unit_name_ref(item)
        if err:
            return err
    if len(set(v)) != len(v):
        return "lists a config twice"
    return None


def _phase_name(v: Any) -> str | None:
    err = _nonempty_str(v)
    return err or (None if PHASE_NAME_RE.match(v) else f"is not a valid phase name: {v!r}")


TOP = {
    "name": _phase_name,
    "description": _nonempty_str,
    "baseline": lambda v: None if v is False else _unit_name_ref(v),
    "benchmark": lambda v: None if v is False else _template(v),  # false: no benchmark, as a phase may say
    "benchmark_timeout": _positive_number,
    "results_dir": _nonempty_str,
    "phase": lambda v: None if isinstance(v, list) else f"must be an array of [[phase]] tables, not {_tname(v)}",
}
def _count(v: Any) -> str | None:
    return None if isinstance(v, int) and not isinstance(v, bool) and v >= 1 else f"must be an integer ≥ 1, not {v!r}"


TUNE_TARGET = {"max_running": _count, "context": _count}


def _tune(v: Any) -> str | None:
    """`tune = { target = { max_running = 8, context = 32768 }, keep = [...], allow = [...], max_starts = N,
    budget = "45m" }`."""
    if not isinstance(v, dict):
        return f"must be a table such as {{ target = {{ max_running = 8 }} }}, not {_tname(v)}"
    known = {"target", "keep", "allow", "max_starts", "budget"}
    for key in v:
        if key not in known:
            return f"unknown key {key!r}{did_you_mean(key, known)}; known: {', '.join(sorted(known))}"
    target = v.get("target")
    if not isinstance(target, dict) or "max_running" not in target:
        return "needs target = { max_running = N } (and optionally context = N)"
    for key, value in target.items():
        check = TUNE_TARGET.get(key)
        err = f"unknown key {key!r}; known: max_running, context" if check is None else check(value)
        if err:
            return f"target.{key} {err}" if check else f"target: {err}"
    for key in ("keep", "allow"):
        if key in v and not (isinstance(v[key], list) and all(isinstance(k, str) for k in v[key])):
            return f"{key} must be a list of config keys"
    if "max_starts" in v and _count(v["max_starts"]):
        return f"max_starts {_count(v['max_starts'])}"
    if "budget" in v and _nonempty_str(v["budget"]):
        return "budget must be a duration such as \"45m\""
    return None


PHASE = {
    "name": _phase_name,
    "configs": _names,
    "parallel": _bool,
    "benchmark": lambda v: None if v is False else _template(v),
    "tune": _tune,
}


@dataclass(frozen=True, slots=True)
class Phase:
    """One step of a campaign: its configs, run one after another or together."""

    name: str
    configs: tuple[ServiceConfig, ...]
    parallel: bool = False
    benchmark: str | None = None
    #: `tune = {...}`: each config is tuned to this target first (`svcdiag tune`), then its tuned config runs
    tune: dict[str, Any] | None = None


@dataclass(frozen=True, slots=True)
class Plan:
    """A campaign file, checked: its baseline, its phases in order and where the results go."""

    name: str
    path: Path
    baseline: ServiceConfig | None
    phases: tuple[Phase, ...]
    results_dir: Path
    benchmark_timeout: float = 3600.0


def load_plan(path: Path, units: UnitsDir) -> Plan:
    raw = read_toml(path)
    _check_table(path, "", raw, TOP)
    phases_raw = raw.get("phase")
    if not phases_raw:
        raise ConfigError(path, "phase", "is required: at least one [[phase]] with configs = [...]")
    known = units.names()

    def config(name: str, field: str) -> ServiceConfig:
        if name not in known:
            raise ConfigError(path, field, f"no config {name!r} in {units.path}{did_you_mean(name, known)}")
        return units.load(name)

    phases, seen = [], set()
    for i, ph in enumerate(phases_raw):
        where = f"phase[{i}]"
        _check_table(path, where, ph, PHASE)
        for key in ("name", "configs"):
            if key not in ph:
                raise ConfigError(path, f"{where}.{key}", "is required")
        if ph["name"] in seen:
            raise ConfigError(path, f"{where}.name", f"phase {ph['name']!r} is named twice")
        seen.add(ph["name"])
        bench = ph.get("benchmark", raw.get("benchmark"))
        phases.append(Phase(ph["name"], tuple(config(n, f"{where}.configs") for n in ph["configs"]),
                            bool(ph.get("parallel", False)) and "tune" not in ph, bench or None, ph.get("tune")))
    name = raw.get("name", path.stem)
    if not UNIT_NAME_RE.match(name):
        raise ConfigError(path, "name", f"{name!r} is not a valid campaign name")
    if raw.get("baseline") is False:
        baseline = None
    elif "baseline" in raw:
        baseline = config(raw["baseline"], "baseline")
    else:
        marked = [n for n in known if units.load(n).baseline]
        if len(marked) != 1:
            raise ConfigError(path, "baseline", f"name the baseline config (the units folder marks {len(marked)} "
                              "with `baseline = true`), or `baseline = false` to run without one")
        baseline = units.load(marked[0])
    results = Path(raw["results_dir"]) if "results_dir" in raw else path.with_name(f"{path.stem}-results")
    if not results.is_absolute():
        results = path.parent / results
    return Plan(name, path, baseline, tuple(phases), results, float(raw.get("benchmark_timeout", 3600.0)))
