"""Which SGLang release a unit runs: the `sglang_version` key, the interpreter probe and its
cache, and the flags spelled for the release."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

from svcdiag.config.service import UnitsDir
from svcdiag.errors import SvcdiagError
from svcdiag.ops.host.sglang_version import CACHE_FILE, probe, resolve
from svcdiag.sglang.flag_tables import known_versions
from svcdiag.sglang.flags import exec_argv, sglang_args

from .conftest import assert_one_line_error

NEWEST = known_versions()[-1]


@pytest.fixture(autouse=True)
def state(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    d = tmp_path / "state"
    monkeypatch.setenv("SVCDIAG_STATE_DIR", str(d))
    return d


def fake_python(path: Path, body: str) -> Path:
    """An "interpreter": a shell script that ignores its arguments and runs `body`."""
    path.write_text(f"#!/bin/sh\n{body}\n")
    path.chmod(0o755)
    return path


def variant(units: Path, name: str, *lines: str) -> UnitsDir:
    (units / f"{name}.toml").write_text("\n".join(['extends = "dflash-smoke"', *lines]) + "\n")
    return UnitsDir(units, "test")


# ------------------------------------------------------------------ the config key

@pytest.mark.parametrize("value", ["0.5.23", "0.4.6.post1", "0.5.0rc2", "v0.5.1", "0.5.1.dev3"])
def test_sglang_version_key_accepts_versions(units: Path, value: str) -> None:
    cfg = variant(units, "v", f'sglang_version = "{value}"').load("v")
    assert cfg.sglang_version == value
    assert resolve(cfg).source == "config" and resolve(cfg).version == value


@pytest.mark.parametrize("value,needle", [('"latest"', "not a version"), ("5", "must be a string"),
                                          ('""', "must not be empty"), ('"0.5.x"', "not a version")])
def test_bad_sglang_version_names_file_and_field(cli, units: Path, value: str, needle: str) -> None:
    variant(units, "bad", f"sglang_version = {value}")
    r = cli("render", "bad")
    assert_one_line_error(r, str(units / "bad.toml"), "sglang_version", needle)


def test_misspelt_key_still_refused(cli, units: Path) -> None:
    variant(units, "bad", 'sglang_versoin = "0.5.23"')
    assert_one_line_error(cli("check", "bad"), "bad.toml", "sglang_versoin", "did you mean 'sglang_version'")


def test_sglang_version_changes_the_config_hash(units: Path) -> None:
    u = variant(units, "v", 'sglang_version = "0.5.12"')
    assert u.load("v").config_hash != u.load("dflash-smoke").config_hash


# ------------------------------------------------------------------ resolution

def test_option_beats_config(units: Path) -> None:
    cfg = variant(units, "v", 'sglang_version = "0.5.12"').load("v")
    v = resolve(cfg, override="0.5.20")
    assert (v.version, v.source) == ("0.5.20", "option")
    with pytest.raises(SvcdiagError, match="--sglang-version"):
        resolve(cfg, override="newest")


def test_interpreter_probe(units: Path, tmp_path: Path, state: Path) -> None:
    py = fake_python(tmp_path / "python", "echo 0.5.22")
    cfg = variant(units, "p", f'python = "{py}"').load("p")
    v = resolve(cfg)
    assert (v.version, v.source) == ("0.5.22", "interpreter") and str(py) in v.detail
    cache = json.loads((state / CACHE_FILE).read_text())
    assert cache[str(py)]["version"] == "0.5.22" and cache[str(py)]["mtime_ns"] == py.stat().st_mtime_ns
    assert v.figures() == {"sglang_version": "0.5.22", "sglang_version_source": "interpreter"}


def test_the_probe_runs_the_real_command_line(tmp_path: Path) -> None:
    """The probe is `python -c "import sglang …"`: a real interpreter with a stub package."""
    pkg = tmp_path / "site" / "sglang"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text('__version__ = "0.5.19"\n')
    py = fake_python(tmp_path / "python", f'PYTHONPATH={tmp_path / "site"} exec {sys.executable} "$@"')
    assert probe(str(py))[0] == "0.5.19"


@pytest.mark.parametrize("body,needle", [
    ("echo \"ModuleNotFoundError: No module named 'sglang'\" >&2; exit 1", "No module named 'sglang'"),
    ("echo not-a-version", "not a version"),
    ("exit 3", "exit status 3"),
])
def test_a_failing_interpreter_means_newest_assumed(units: Path, tmp_path: Path, state: Path,
                                                    body: str, needle: str) -> None:
    py = fake_python(tmp_path / "python", body)
    cfg = variant(units, "p", f'python = "{py}"').load("p")
    v = resolve(cfg)
    assert (v.version, v.source) == (NEWEST, "assumed-newest") and v.assumed
    assert needle in v.detail and "assumed" in v.describe()
    assert not (state / CACHE_FILE).exists()  # a failure is asked again next time


def test_missing_interpreter_and_timeout(units: Path, tmp_path: Path) -> None:
    cfg = variant(units, "p", f'python = "{tmp_path}/nope"').load("p")
    v = resolve(cfg)
    assert v.source == "assumed-newest" and "No such file" in v.detail
    slow = fake_python(tmp_path / "slow", "sleep 5; echo 0.5.23")
    version, why = probe(str(slow), timeout=0.3)
    assert version is None and "did not answer" in why


def test_the_stand_in_is_not_asked(units: Path) -> None:
    v = resolve(UnitsDir(units, "t").load("demo-smoke"))
    assert v.source == "assumed-newest" and "stand-in" in v.detail


def test_cache_holds_until_the_interpreter_changes(tmp_path: Path, state: Path) -> None:
    py = fake_python(tmp_path / "python", "echo 0.5.20")
    assert probe(str(py)) == ("0.5.20", f"{py} has sglang 0.5.20")
    st = py.stat()
    fake_python(py, "echo 0.5.23")
    os.utime(py, ns=(st.st_atime_ns, st.st_mtime_ns))  # same mtime: the cached answer stands
    version, why = probe(str(py))
    assert version == "0.5.20" and "cached" in why
    os.utime(py, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000_000))  # reinstalled: asked again
    assert probe(str(py))[0] == "0.5.23"
    assert json.loads((state / CACHE_FILE).read_text())[str(py)]["version"] == "0.5.23"


def test_cache_drops_when_the_sglang_package_changes(tmp_path: Path) -> None:
    pkg = tmp_path / "sglang"
    pkg.mkdir()
    py = fake_python(tmp_path / "python", f"cat {tmp_path}/v; echo {pkg}")
    (tmp_path / "v").write_text("0.5.19\n")
    assert probe(str(py))[0] == "0.5.19"
    (tmp_path / "v").write_text("0.5.22\n")
    assert probe(str(py))[0] == "0.5.19"  # cached
    st = pkg.stat()
    os.utime(pkg, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000_000))  # pip replaced the package
    assert probe(str(py))[0] == "0.5.22"


def test_unwritable_state_dir_still_answers(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    monkeypatch.setenv("SVCDIAG_STATE_DIR", str(blocker / "state"))
    py = fake_python(tmp_path / "python", "echo 0.5.21")
    assert probe(str(py))[0] == "0.5.21"


# ------------------------------------------------------------------ flags per release

def _bs_flag(argv: list[str]) -> str:
    (flag,) = [a for a in argv if a.startswith("--cuda-graph-max-bs")]
    assert argv[argv.index(flag) + 1] == "4"
    return flag


@pytest.mark.parametrize("version,flag", [
    ("0.3.6", "--cuda-graph-max-bs"), ("0.5.12", "--cuda-graph-max-bs"),
    ("0.5.15", "--cuda-graph-max-bs"),          # the 0.5.12 table stands in: the old spelling, still taken
    ("0.5.19", "--cuda-graph-max-bs-decode"),   # the old one is a deprecated alias there
    ("0.5.20", "--cuda-graph-max-bs-decode"), ("0.5.21", "--cuda-graph-max-bs-decode"),
    ("0.5.23", "--cuda-graph-max-bs-decode"), ("0.6.0", "--cuda-graph-max-bs-decode"),
])
def test_cuda_graph_flag_spelled_for_the_release(units: Path, version: str, flag: str) -> None:
    cfg = UnitsDir(units, "t").load("dflash-smoke")
    assert _bs_flag(sglang_args(cfg, version)) == flag


def test_unknown_release_renders_for_the_newest_and_config_wins(units: Path) -> None:
    u = variant(units, "old", 'sglang_version = "0.5.12"')
    assert _bs_flag(sglang_args(u.load("dflash-smoke"))) == "--cuda-graph-max-bs-decode"
    assert _bs_flag(sglang_args(u.load("old"))) == "--cuda-graph-max-bs"
    assert _bs_flag(sglang_args(u.load("old"), "0.5.23")) == "--cuda-graph-max-bs-decode"


def test_the_stand_in_gets_the_same_flags_and_the_release(units: Path) -> None:
    u = variant(units, "sim", 'simulate = "healthy-hybrid-dflash"', 'sglang_version = "0.5.12"')
    argv = exec_argv(u.load("sim"))
    assert argv[argv.index("--sglang-version") + 1] == "0.5.12"
    assert argv[-len(sglang_args(u.load("sim"))):] == sglang_args(u.load("sim"))
    assert "--cuda-graph-max-bs" in argv
