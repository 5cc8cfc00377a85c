"""svcdiag as an installable package: `python -m build` makes a versioned wheel and sdist holding
everything a unit and the CLI read at run time (templates, flag tables, examples, the polkit rule)."""

from __future__ import annotations

import tarfile
import zipfile
from pathlib import Path

import pytest

from .conftest import build_dist, run_svcdiag

pytest.importorskip("build")


@pytest.fixture(scope="module")
def dist(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("dist")
    r = build_dist(out)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    return out


def test_the_wheel_and_sdist_carry_the_version_svcdiag_reports(dist: Path) -> None:
    version = run_svcdiag("--version").stdout.decode().split()[-1]
    assert {p.name for p in dist.iterdir()} == {f"svcdiag-{version}-py3-none-any.whl", f"svcdiag-{version}.tar.gz"}


def test_the_wheel_holds_what_svcdiag_reads_at_run_time(dist: Path) -> None:
    names = set(zipfile.ZipFile(next(dist.glob("*.whl"))).namelist())
    for needed in ("svcdiag/templates/sglang.service.j2", "svcdiag/sglang/flag_tables/sglang-0.5.23.json",
                   "svcdiag/examples/max-running-zero.log", "svcdiag/systemd/polkit/50-svcdiag.rules",
                   "svcdiag/cli/help_manifest.py", "svcdiag/sglang/failures/memory.toml"):
        assert needed in names, needed
    assert not [n for n in names if n.startswith(("tests/", "units/", "bench/"))]
    entry = next(n for n in names if n.endswith("entry_points.txt"))
    assert "svcdiag = svcdiag.cli:main" in zipfile.ZipFile(next(dist.glob("*.whl"))).read(entry).decode()


def test_the_sdist_builds_the_same_package(dist: Path) -> None:
    with tarfile.open(next(dist.glob("*.tar.gz"))) as t:
        names = {n.split("/", 1)[1] for n in t.getnames() if "/" in n}
    assert {"pyproject.toml", "svcdiag/templates/sglang.service.j2", "svcdiag/systemd/polkit/50-svcdiag.rules"} <= names
