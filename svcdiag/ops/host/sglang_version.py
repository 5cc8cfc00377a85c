"""Which SGLang release a unit will run: `--sglang-version`, the config's `sglang_version`,
or the unit's own interpreter asked (`python -c "import sglang; print(sglang.__version__)"`),
cached by interpreter path and mtime in the state dir. When none of these answers, the
newest bundled flag table is assumed, and the result says so.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from svcdiag.config.service import VERSION_RE, ServiceConfig
from svcdiag.errors import SvcdiagError
from svcdiag.files import read_text, state_dir, write_atomic
from svcdiag.sglang.flags import newest_version

PROBE_TIMEOUT = 20.0
CACHE_FILE = "sglang-versions.json"
#: prints the version, then the package's folder (its mtime moves when pip replaces the package)
PROBE = "import os, sglang; print(sglang.__version__); print(os.path.dirname(os.path.abspath(sglang.__file__)))"
SOURCES = ("option", "config", "interpreter", "assumed-newest", "server_info")


@dataclass(frozen=True, slots=True)
class SglangVersion:
    """A release and where it came from: "option" (--sglang-version), "config", "interpreter",
    "assumed-newest" (nothing answered: the newest bundled table stands in) or "server_info"."""

    version: str
    source: str
    detail: str

    @property
    def assumed(self) -> bool:
        return self.source == "assumed-newest"

    def describe(self) -> str:
        """"sglang 0.5.23 (config)", "sglang 0.5.23 (assumed: …)"."""
        if self.assumed:
            return f"sglang {self.version} (assumed, the newest bundled table: {self.detail})"
        return f"sglang {self.version} ({self.source}: {self.detail})"

    def figures(self) -> dict[str, str]:
        return {"sglang_version": self.version, "sglang_version_source": self.source}

    def to_json(self) -> dict[str, Any]:
        return {"version": self.version, "source": self.source, "detail": self.detail}


def check_version(value: str, what: str) -> str:
    """`value` when it is a version string, else a one-line error naming `what`."""
    if not VERSION_RE.match(value.strip()):
        raise SvcdiagError(f"{what}: not a version like 0.5.23 or 0.4.6.post1: {value!r}")
    return value.strip()


def resolve(cfg: ServiceConfig, *, override: str | None = None, state: str | None = None,
            timeout: float = PROBE_TIMEOUT) -> SglangVersion:
    """The release `cfg`'s unit will run, and how svcdiag knows."""
    if override:
        return SglangVersion(check_version(override, "--sglang-version"), "option", "--sglang-version")
    if cfg.sglang_version:
        return SglangVersion(cfg.sglang_version, "config", f"sglang_version in {cfg.path}")
    if cfg.simulate:
        return _assumed(f"the stand-in (simulate = {cfg.simulate!r}) runs in place of SGLang")
    found, why = probe(cfg.python, state=state, timeout=timeout, env=dict(cfg.env))
    if found is None:
        return _assumed(why)
    return SglangVersion(found, "interpreter", why)


def _assumed(why: str) -> SglangVersion:
    return SglangVersion(newest_version(), "assumed-newest", why)


def probe(python: str, *, state: str | None = None, timeout: float = PROBE_TIMEOUT,
          env: dict[str, str] | None = None) -> tuple[str | None, str]:
    """(version, how it was found) from the interpreter at `python` (with the unit's `env`),
    or (None, why not). A cached answer stands while the interpreter's and the sglang
    package's mtimes do."""
    try:
        st = os.stat(python)
    except OSError as e:
        return None, f"{python}: {e.strerror or e}"
    cache_path = state_dir(state) / CACHE_FILE
    cache = _read_cache(cache_path)
    hit = cache.get(python)
    if isinstance(hit, dict) and hit.get("mtime_ns") == st.st_mtime_ns and _package_unchanged(hit):
        return str(hit["version"]), f"{python} has sglang {hit['version']} (cached)"
    import subprocess  # here: ~5 ms of a command that rarely runs a probe

    try:
        proc = subprocess.run([python, "-c", PROBE], capture_output=True, text=True, timeout=timeout,
                              stdin=subprocess.DEVNULL, env=probe_env(env), check=False)
    except subprocess.TimeoutExpired:
        return None, f"{python} -c 'import sglang' did not answer within {timeout:.0f} s"
    except OSError as e:
        return None, f"{python}: {e.strerror or e}"
    if proc.returncode != 0:
        return None, f"{python} cannot import sglang: {_last_line(proc.stderr) or f'exit status {proc.returncode}'}"
    lines = [ln.strip() for ln in proc.stdout.splitlines() if ln.strip()]
    version = lines[0] if lines else ""
    if not VERSION_RE.match(version):
        return None, f"{python} printed {version!r} for sglang.__version__, not a version"
    entry: dict[str, Any] = {"mtime_ns": st.st_mtime_ns, "version": version}
    if len(lines) > 1:
        entry["package"] = lines[1]
        entry["package_mtime_ns"] = _mtime(lines[1])
    cache[python] = entry
    try:
        write_atomic(cache_path, json.dumps(cache, indent=1, sort_keys=True) + "\n")
    except OSError:
        pass  # no writable state dir: ask again next time
    return version, f"{python} has sglang {version}"


def probe_env(unit_env: dict[str, str] | None = None) -> dict[str, str]:
    """svcdiag's environment without its PYTHON* settings, the unit's on top, and no GPU."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}
    env.update(unit_env or {})
    env["CUDA_VISIBLE_DEVICES"] = ""  # nothing here needs a GPU
    return env


def _mtime(path: str) -> int | None:
    try:
        return os.stat(path).st_mtime_ns
    except OSError:
        return None


def _package_unchanged(entry: dict[str, Any]) -> bool:
    return "package" not in entry or _mtime(str(entry["package"])) == entry.get("package_mtime_ns")


def _read_cache(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(read_text(path))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _last_line(text: str) -> str:
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    return lines[-1] if lines else ""
