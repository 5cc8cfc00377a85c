"""`svcdiag setup`: a host prepared step by step, idempotently, and `--dry-run` changing nothing."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

from svcdiag.config.service import UnitsDir
from svcdiag.ops.host.setup import RULE_SOURCE, Setup, unreachable

from .conftest import ROOT, UNITS
from .model_fixtures import seed_models


class FakeHost:
    """useradd and groupadd, as the accounts they create."""

    def __init__(self) -> None:
        self.accounts: set[str] = {"root"}
        self.ran: list[list[str]] = []

    def run(self, argv: list[str]) -> None:
        self.ran.append(argv)
        self.accounts.add(argv[-1])

    def kw(self, root: Path, **more) -> dict:
        return {"root": root, "run": self.run, "user_exists": self.accounts.__contains__,
                "group_exists": self.accounts.__contains__, "checkout": None,
                "smi": lambda args: "0, NVIDIA H200, 143771 MiB\n", **more}


def configs(units: Path = UNITS, names=("dflash-smoke", "demo-smoke")):
    u = UnitsDir(units, "t")
    return [u.load(n) for n in names]


def test_setup_prepares_the_host_once_and_then_finds_it_prepared(tmp_path: Path) -> None:
    (tmp_path / "etc" / "polkit-1").mkdir(parents=True)
    host = FakeHost()
    first = Setup(configs(), dry_run=False, **host.kw(tmp_path)).run_all()
    done = {s.what.split(" (")[0]: s.status for s in first}
    assert done["group svcdiag"] == "done" and done["service user sglang"] == "done"
    assert ["useradd", "--system", "--home-dir", "/var/lib/sglang", "--no-create-home", "--shell", "/usr/sbin/nologin",
            "--user-group", "sglang"] in host.ran
    assert (tmp_path / "etc/svcdiag/units").is_dir() and (tmp_path / "var/lib/svcdiag").stat().st_mode & 0o7777 == 0o2770
    rule = tmp_path / "etc/polkit-1/rules.d/50-svcdiag.rules"
    assert rule.read_text() == (ROOT / "contrib/polkit/50-svcdiag.rules").read_text()
    again = Setup(configs(), dry_run=False, **host.kw(tmp_path)).run_all()
    changes = [s for s in again if s.status in ("done", "would", "present")]
    assert changes and all(s.status == "present" for s in changes), again
    assert len(host.ran) == 2  # nothing run the second time


def test_dry_run_says_what_it_would_do_and_changes_nothing(tmp_path: Path) -> None:
    (tmp_path / "etc" / "polkit-1").mkdir(parents=True)
    host = FakeHost()
    steps = Setup(configs(), dry_run=True, **host.kw(tmp_path)).run_all()
    assert {s.status for s in steps if not s.what.startswith(("SGLang", "model", "GPUs", "svcdiag's"))} == {"would"}
    assert host.ran == [] and sorted(p.name for p in tmp_path.rglob("*")) == ["etc", "polkit-1"]


def test_the_checks_name_what_is_missing(tmp_path: Path) -> None:
    host = FakeHost()
    steps = {s.what: s for s in Setup(configs(), dry_run=True, **host.kw(tmp_path)).run_all()}
    sg = next(s for w, s in steps.items() if w.startswith("SGLang interpreter /opt/sglang/.venv/bin/python"))
    assert sg.bad and "set python =" in sg.detail
    model = next(s for w, s in steps.items() if w.startswith("model /dev/shm/Qwen3.6-27B ("))
    assert model.bad and "config.json: no such file" in model.detail
    assert steps["GPUs 0 (the configs' gpus)"].status == "ok"
    assert "polkitd" in next(s for w, s in steps.items() if w == "polkit rule").detail
    seed_models(tmp_path / "dev" / "shm")
    steps = {s.what: s for s in Setup(configs(), dry_run=True, **host.kw(tmp_path)).run_all()}
    assert next(s for w, s in steps.items() if w.startswith("model /dev/shm/Qwen3.6-27B (")).status == "ok"


def test_a_checkout_or_a_private_home_is_no_interpreter_for_the_units(tmp_path: Path) -> None:
    host = FakeHost()
    steps = Setup(configs(), dry_run=True, **{**host.kw(tmp_path), "checkout": ROOT}).run_all()
    (own,) = [s for s in steps if s.what.startswith("svcdiag's interpreter")]
    assert own.bad and "source checkout" in own.detail and "docs/install.md" in own.detail
    home = tmp_path / "root"
    (home / "venv" / "bin").mkdir(parents=True)
    home.chmod(0o700)
    assert unreachable(Path("/root/venv/bin/python"), tmp_path) == home
    steps = Setup(configs(), dry_run=True, **{**host.kw(tmp_path), "python": "/root/venv/bin/python"}).run_all()
    (own,) = [s for s in steps if s.what.startswith("svcdiag's interpreter")]
    assert own.bad and "User=sglang cannot run it" in own.detail


def test_a_config_folder_the_service_user_cannot_read_is_named(tmp_path: Path) -> None:
    import dataclasses

    home = tmp_path / "root"
    (home / "units").mkdir(parents=True)
    home.chmod(0o700)
    moved = [dataclasses.replace(c, path=Path("/root/units") / f"{c.name}.toml") for c in configs()]
    steps = Setup(moved, dry_run=True, **FakeHost().kw(tmp_path)).run_all()
    (folder,) = [s for s in steps if s.what.startswith("config folder")]
    assert folder.bad and "User=sglang" in folder.detail and "/etc/svcdiag/units" in folder.detail


def test_bash_completion_is_installed_where_bash_completion_looks(tmp_path: Path) -> None:
    (tmp_path / "etc" / "bash_completion.d").mkdir(parents=True)
    host = FakeHost()
    script = "_svcdiag_completion() { :; }\n"
    (step,) = [s for s in Setup(configs(), dry_run=False, completion=script, **host.kw(tmp_path)).run_all()
               if s.what.startswith("bash completion")]
    assert step.status == "done" and (tmp_path / "etc/bash_completion.d/svcdiag").read_text() == script
    (step,) = [s for s in Setup(configs(), dry_run=False, completion=script, **host.kw(tmp_path)).run_all()
               if s.what.startswith("bash completion")]
    assert step.status == "present"


def test_the_packaged_polkit_rule_is_contribs() -> None:
    assert RULE_SOURCE.read_text() == (ROOT / "contrib/polkit/50-svcdiag.rules").read_text()


def test_setup_cli_dry_run_json(cli) -> None:
    r = cli("setup", "--dry-run", "--json")
    rows = [json.loads(ln) for ln in r.output.splitlines() if ln.startswith("{")]
    assert rows and all(x["event"] == "setup" and x["schema"] == 1 for x in rows)
    assert r.exit_code == 1  # here: a checkout, no /opt/sglang, no GPU


def test_setup_under_umask_077_leaves_the_modes_it_says(tmp_path: Path) -> None:
    """Under umask 077 mkdir -p made /etc/svcdiag 0700 while setup said "(755)": members could not
    list the units. Each folder's mode is set and read back; an existing wrong one is put right."""
    (tmp_path / "etc" / "polkit-1").mkdir(parents=True)
    old = os.umask(0o077)
    try:
        steps = Setup(configs(), dry_run=False, **FakeHost().kw(tmp_path)).run_all()
    finally:
        os.umask(old)
    mode = {p: stat.S_IMODE((tmp_path / p).stat().st_mode) for p in
            ("etc/svcdiag", "etc/svcdiag/units", "etc/svcdiag/secrets", "var/lib/svcdiag", "var/lib",
             "etc/polkit-1/rules.d", "etc/polkit-1/rules.d/50-svcdiag.rules")}
    assert mode == {"etc/svcdiag": 0o755, "etc/svcdiag/units": 0o755, "etc/svcdiag/secrets": 0o700,
                    "var/lib/svcdiag": 0o2770, "var/lib": 0o755, "etc/polkit-1/rules.d": 0o755,
                    "etc/polkit-1/rules.d/50-svcdiag.rules": 0o644}, steps
    assert not [s for s in steps if s.bad and s.what.startswith("directory")], steps
    # a units folder an earlier run left 0700 (and its parent) is named and put right, not "present"
    os.chmod(tmp_path / "etc/svcdiag/units", 0o700)
    again = Setup(configs(), dry_run=False, **FakeHost().kw(tmp_path)).run_all()
    units = next(s for s in again if s.what.startswith(f"directory {tmp_path}/etc/svcdiag/units"))
    assert (units.status, units.detail) == ("done", "was 700")
    assert stat.S_IMODE((tmp_path / "etc/svcdiag/units").stat().st_mode) == 0o755
    os.chmod(tmp_path / "etc/svcdiag", 0o700)
    third = Setup(configs(), dry_run=False, **FakeHost().kw(tmp_path)).run_all()
    blocked = [s for s in third if s.bad and s.what == f"directory {tmp_path}/etc/svcdiag/units"]
    assert blocked and f"{tmp_path}/etc/svcdiag is 700" in blocked[0].detail and "chmod 755" in blocked[0].detail
