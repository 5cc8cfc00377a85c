"""The private systemd rig, shared by every test in this folder: booted once a session."""

from __future__ import annotations

import os
import shutil
import uuid
from pathlib import Path

import pytest

from ..conftest import ROOT, UNITS


@pytest.fixture(scope="session")
def rig():
    """One private systemd for the session; skipped (with why) only where the machine
    cannot boot it, and a failure instead when SVCDIAG_REQUIRE_RIG is set (CI)."""
    from svcdiag.systemd.rig import Rig, available

    why = available()
    if why:
        if os.environ.get("SVCDIAG_REQUIRE_RIG"):
            pytest.fail(f"the private systemd rig is required here but unavailable: {why}")
        pytest.skip(why)
    r = Rig(ROOT, name=f"svcdiag-test-{os.getpid()}").boot()
    yield r
    r.down()


@pytest.fixture
def rig_units(rig):
    """A units folder inside the project (the rig sees the project at the same path)."""
    d = ROOT / ".rig-tmp" / uuid.uuid4().hex[:8]
    shutil.copytree(UNITS, d)
    yield d
    shutil.rmtree(d, ignore_errors=True)


@pytest.fixture
def units(rig_units: Path) -> Path:
    """Here, the units folder is the one the rig can see (it overrides tests/conftest.py's)."""
    return rig_units
