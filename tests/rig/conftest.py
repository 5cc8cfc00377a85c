"""The private systemd rig, shared by every test in this folder: booted once a session."""

from __future__ import annotations

import os
import shutil
import uuid
from pathlib import Path

import pytest

from ..conftest import ROOT, UNITS

#: a rig's boot, at most: four workers boot theirs at once, on CI's two loaded cores (Rig's own default is 60 s)
BOOT_S = 180


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
    r = Rig(ROOT, name=f"svcdiag-test-{os.getpid()}").boot(timeout=BOOT_S)
    yield r
    r.down()


RUNNING = ("active", "activating", "deactivating", "reloading")
#: the distribution's own services (D-Bus activated on demand: polkit, hostnamed, ...), never a test's
DISTRO_UNIT_DIRS = ("/usr/lib/systemd/", "/lib/systemd/")


def running_services(rig) -> set[str]:
    out = rig.run(["systemctl", "list-units", "--type=service", "--all", "--plain", "--no-legend", "--no-pager",
                   f"--state={','.join(RUNNING)}"], check=False).stdout.decode()
    return {line.split()[0] for line in out.splitlines() if line.strip()}


def started_by_tests(rig, units: list[str]) -> list[str]:
    """Those of `units` a test or svcdiag made (in /etc, /run: installed or systemd-run), not the distribution's."""
    def fragment(unit: str) -> str:
        return rig.run(["systemctl", "show", "-P", "FragmentPath", unit], check=False).stdout.decode().strip()

    return [u for u in units if not fragment(u).startswith(DISTRO_UNIT_DIRS)]


_booted_with: dict[str, set[str]] = {}


@pytest.fixture(autouse=True)
def no_unit_left_running(request):
    """A unit a test leaves running keeps its port into later tests (CI once saw test_rig_remote's
    journal start fail on port_in_use, a leftover holding it). After each test, every rig it used
    is checked against the services it had when first seen: any more are stopped, and the test
    errors naming them."""
    rigs = []
    if "rig" in request.fixturenames:
        rigs.append(request.getfixturevalue("rig"))
    if "test_hosts" in request.fixturenames:
        rigs += [h.rig for h in request.getfixturevalue("test_hosts")]
    for r in rigs:
        _booted_with.setdefault(r.name, running_services(r))
    yield
    left = {}
    for r in rigs:
        extra = sorted(running_services(r) - _booted_with[r.name])
        extra = extra and started_by_tests(r, extra)
        if extra:
            r.run(["systemctl", "stop", *extra], check=False)
            left[r.name] = extra
    if left:
        pytest.fail("left running after the test (now stopped): "
                    + "; ".join(f"{name}: {', '.join(units)}" for name, units in left.items()), pytrace=False)


@pytest.fixture
def rig_units(rig):
    """A units folder inside the project (the rig sees the project at the same path)."""
    d = ROOT / ".rig-tmp" / uuid.uuid4().hex[:8]
    shutil.copytree(UNITS, d)
    yield d
    # the units of the configs this test made are stopped whatever it asserted (a failed assert before its
    # `down` once left http-mismatch-….service running under load); no_unit_left_running catches the rest
    ours = tests_units(d)
    if ours:
        rig.run(["systemctl", "stop", *ours], check=False, timeout=180)
    shutil.rmtree(d, ignore_errors=True)


def tests_units(units_dir: Path) -> list[str]:
    """The units of the configs a test made in its units folder (not the bundled ones it copied), as glob patterns
    systemctl and journalctl take: a multi-node config's units are NAME-node0.service, NAME-node1.service."""
    return sorted(f"{p.stem}*.service" for p in units_dir.glob("*.toml") if not (UNITS / p.name).exists())


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """A failed rig test shows what systemd and the journal said of its units (CI prints only the test's
    output: "wdok failed to start" alone does not say why). Read before its fixtures stop them."""
    outcome = yield
    report = outcome.get_result()
    rig, units_dir = item.funcargs.get("rig"), item.funcargs.get("rig_units")
    if report.when != "call" or not report.failed or rig is None or units_dir is None:
        return
    ours = tests_units(units_dir)
    if not ours:
        return
    try:
        loaded = rig.run(["systemctl", "list-units", "--all", "--plain", "--no-legend", "--no-pager", *ours],
                         check=False, timeout=30).stdout.decode().split("\n")
        ids = [line.split()[0] for line in loaded if line.strip()]
        status = rig.run(["systemctl", "show", *ids, "--property=Id,ActiveState,SubState,Result,ExecMainStatus,"
                          "StatusText,NRestarts"], check=False, timeout=30).stdout.decode() if ids else ""
        log = rig.run(["journalctl", "--no-pager", "-o", "short-monotonic", "-n", "150",
                       *(a for u in ours for a in ("-u", u))], check=False, timeout=30).stdout.decode()
    except Exception as e:  # the report must not fail for want of the journal
        status, log = "", f"(the rig could not be read: {e})"
    report.sections.append(("rig: the test's units, as systemd and the journal say (last 150 lines)",
                            status.strip() + "\n\n" + log.strip()))


@pytest.fixture
def units(rig_units: Path) -> Path:
    """Here, the units folder is the one the rig can see (it overrides tests/conftest.py's)."""
    return rig_units


@pytest.fixture(scope="session")
def test_hosts():
    """Two more private systemds, gpu-a and gpu-b, booted as the rig is, each with an sshd on its
    own loopback address (127.0.0.2, 127.0.0.3), keys and known_hosts made for this run
    (tests/rig/sshd.py). Booted once a session, when a test first asks; torn down at its end."""
    from concurrent.futures import ThreadPoolExecutor

    from svcdiag.systemd.rig import Rig, available

    from .sshd import make_sshds

    why = available()
    if not why and (not Path("/usr/sbin/sshd").exists() or shutil.which("ssh") is None):
        why = "openssh-server and openssh-client are needed (scripts/setup rig installs them)"
    if why:
        if os.environ.get("SVCDIAG_REQUIRE_RIG"):
            pytest.fail(why)
        pytest.skip(why)
    rigs = [Rig(ROOT, name=f"svcdiag-test-{h}-{os.getpid()}") for h in ("gpu-a", "gpu-b")]
    hosts = []
    try:
        with ThreadPoolExecutor(len(rigs)) as pool:
            list(pool.map(lambda r: r.boot(timeout=BOOT_S), rigs))
        hosts = make_sshds(list(zip(rigs, ("127.0.0.2", "127.0.0.3"), strict=True)), ROOT)
        yield tuple(hosts)
    finally:
        for h in hosts:
            h.kill()
        for r in rigs:
            r.down()
        if hosts:
            shutil.rmtree(hosts[0].dir, ignore_errors=True)
