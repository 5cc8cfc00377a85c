"""Rendered units: accepted by systemd-analyze, argv exactly as configured, drift detectable."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from svcdiag.config.service import UnitsDir
from svcdiag.sglang.flags import exec_argv
from svcdiag.systemd.install import drift, install_units
from svcdiag.systemd.render import installed_hash, render_unit, supervise_argv

from .conftest import UNITS, sglang_here
from .systemd_quoting import split_exec

OWNED_FLAGS = {"--port", "--host", "--model-path", "--model", "--tp-size", "--tp", "--tensor-parallel-size",
               "--nnodes", "--node-rank", "--dist-init-addr", "--nccl-init-addr"}
SHIPPED = sorted(p.stem for p in UNITS.glob("*.toml"))


def exec_start(unit_text: str) -> str:
    return next(ln for ln in unit_text.split("\n") if ln.startswith("ExecStart="))[len("ExecStart="):]


def with_local_python(units: Path, name: str) -> str:
    """A child of the shipped config that runs this machine's interpreter, so that verify can
    check everything else (the GPU host's venv does not exist here)."""
    child = f"verify-{name}"
    (units / f"{child}.toml").write_text(f'extends = "{name}"\npython = "{sys.executable}"\n')
    return child


@pytest.mark.skipif(shutil.which("systemd-analyze") is None, reason="systemd-analyze not installed")
@pytest.mark.parametrize("name", SHIPPED)
def test_shipped_config_renders_and_systemd_analyze_verify_accepts_it(units: Path, tmp_path: Path, name: str) -> None:
    u = UnitsDir(units, "t")
    cfg = u.load(with_local_python(units, name)) if not u.load(name).simulate else u.load(name)
    unit = tmp_path / f"{name}.service"
    unit.write_text(render_unit(cfg))
    r = subprocess.run(["systemd-analyze", "verify", str(unit)], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert f"{name}.service" not in r.stderr, r.stderr  # no warning about our unit at all
    wrapper = supervise_argv(cfg) if cfg.readiness == "notify" else []
    assert split_exec(exec_start(unit.read_text())) == wrapper + exec_argv(cfg)


def test_unit_has_what_an_operator_expects(units: Path) -> None:
    cfg = UnitsDir(units, "t").load("dflash-tp4")
    text = render_unit(cfg)
    for line in ("Restart=no", "StandardOutput=journal", "StandardError=journal", "SyslogIdentifier=dflash-tp4",
                 'Environment="PYTHONUNBUFFERED=1"', 'Environment="CUDA_VISIBLE_DEVICES=0,1,2,3"',
                 "KillMode=mixed", "TimeoutStopSec=60", "User=sglang", f"X-SvcdiagConfigHash={cfg.config_hash}",
                 "Type=notify", "NotifyAccess=main"):  # notify by default: svcdiag supervise in front
        assert line in text.splitlines(), line
    wrapped = split_exec(exec_start(text))
    assert wrapped[:len(supervise_argv(cfg))] == supervise_argv(cfg)
    argv = wrapped[len(supervise_argv(cfg)):]
    assert argv[:3] == ["/opt/sglang/.venv/bin/python", "-m", "sglang.launch_server"]
    assert argv[argv.index("--tp-size") + 1] == "4"
    assert argv[argv.index("--speculative-algorithm") + 1] == "DFLASH"


def test_simulate_keeps_every_flag_and_swaps_the_program(units: Path) -> None:
    (units / "sim.toml").write_text('extends = "dflash-smoke"\nsimulate = "healthy-hybrid-dflash"\nsim_time_scale = 0.05\n')
    u = UnitsDir(units, "t")
    real, sim = exec_argv(u.load("dflash-smoke")), exec_argv(u.load("sim"))
    assert sim[:6] == [sys.executable, "-m", "svcdiag.sim", "healthy-hybrid-dflash", "--sglang-version", "0.5.23"]
    assert sim[8:] == real[3:]


def test_config_change_changes_hash_and_shows_as_drift(units: Path, tmp_path: Path) -> None:
    u = UnitsDir(units, "t")
    res = install_units([u.load("dflash-smoke")], tmp_path)
    assert res["units"][0]["action"] == "installed"
    assert drift(u.load("dflash-smoke"), tmp_path) is None
    before = installed_hash((tmp_path / "dflash-smoke.service").read_text())
    cfg_file = units / "dflash-smoke.toml"
    cfg_file.write_text(cfg_file.read_text().replace("mem_fraction_static = 0.75", "mem_fraction_static = 0.8"))
    now = u.load("dflash-smoke")
    assert now.config_hash != before
    assert "config is now" in drift(now, tmp_path)
    assert install_units([now], tmp_path)["units"][0]["action"] == "updated"
    assert install_units([now], tmp_path)["units"][0]["action"] == "unchanged"


def test_install_of_a_bad_set_writes_nothing(cli, units: Path, tmp_path: Path) -> None:
    (units / "zz-bad.toml").write_text('extends = "dflash-smoke"\nport = 0\n')
    out = tmp_path / "system"
    r = cli("install", "--unit-dir", str(out))
    assert r.exit_code == 2
    assert not out.exists() or not any(out.iterdir())


def test_install_cli_json(cli, units: Path, tmp_path: Path) -> None:
    sglang_here(units, tmp_path)
    r = cli("install", "dflash-smoke", "nospec-tp1", "--unit-dir", str(tmp_path), "--json")
    assert r.exit_code == 0, r.output
    data = json.loads(r.output)
    assert [x["action"] for x in data["units"]] == ["installed", "installed"]
    assert (tmp_path / "nospec-tp1.service").exists()
    assert "skipped" in data["reload"]


def test_diff_marks_memory_keys(cli) -> None:
    r = cli("diff", "dflash-smoke", "dflash-tp1-mr8", "--json")
    rows = {x["key"]: x for x in json.loads(r.output)["differences"]}
    assert rows["max_running_requests"] == {"key": "max_running_requests", "a": 4, "b": 8, "memory": True}
    assert rows["max_mamba_cache_size"]["b"] == 2 and rows["max_mamba_cache_size"]["memory"]
    assert rows["port"]["memory"] is False
    human = cli("diff", "dflash-smoke", "dflash-tp1-mr8").output
    assert "* max_mamba_cache_size" in human and "24  →  2" in human


ARG = st.text(st.characters(blacklist_categories=["Cs"], blacklist_characters="\x00\n\r"
                            + "".join(chr(c) for c in range(1, 32) if c != 9) + "\x7f"), max_size=24)


def config_with(extra_args: list[str], served: str, env_value: str):
    from svcdiag.config.service import config_from_keys

    raw = {"model_path": "/dev/shm/m", "extra_args": extra_args, "served_model_name": served,
           "env": {"SVCDIAG_T": env_value}}
    return config_from_keys("t", Path("/virtual/t.toml"), raw)


@settings(max_examples=400, deadline=None)
@given(st.lists(ARG, max_size=6), ARG.filter(str.strip), ARG)
def test_exec_start_is_exactly_the_configured_argv(args: list[str], served: str, env_value: str) -> None:
    assume(not any(a.split("=", 1)[0] in OWNED_FLAGS for a in args))
    cfg = config_with(args, served, env_value)
    text = render_unit(cfg)
    baseline = render_unit(config_with([], "x", "y"))
    # systemd splits unit files on \n only (U+0085 and friends are ordinary characters to it)
    assert len(text.split("\n")) == len(baseline.split("\n")), "a value added or removed a line"
    assert split_exec(exec_start(text)) == supervise_argv(cfg) + exec_argv(cfg)
    env_line = next(ln for ln in text.split("\n") if ln.startswith('Environment="SVCDIAG_T='))
    assert split_exec(env_line[len("Environment="):].replace("$", "$$")) == [f"SVCDIAG_T={env_value}"]


def test_install_never_replaces_a_unit_it_did_not_write(cli, units: Path, tmp_path: Path) -> None:
    from .conftest import assert_one_line_error

    sglang_here(units, tmp_path / "py")
    theirs = tmp_path / "dflash-smoke.service"
    theirs.write_text("[Service]\nExecStart=/usr/bin/true\n")
    assert_one_line_error(cli("install", "dflash-smoke", "nospec-tp1", "--unit-dir", str(tmp_path)),
                          "was not written by svcdiag", "--force")
    assert theirs.read_text() == "[Service]\nExecStart=/usr/bin/true\n"
    assert not (tmp_path / "nospec-tp1.service").exists()  # nothing half-done
    assert cli("install", "dflash-smoke", "--unit-dir", str(tmp_path), "--force").exit_code == 0
    assert "X-SvcdiagConfig=dflash-smoke" in theirs.read_text()


# ---------------------------------------------------------------- the template compiled ahead (#40)

def test_the_compiled_template_is_current() -> None:
    """`python -m svcdiag.systemd.template_compile` after editing svcdiag/templates/sglang.service.j2."""
    from svcdiag.systemd import template_compile

    source = (Path(template_compile.__file__).parent.parent / "templates" / "sglang.service.j2").read_text()
    assert template_compile.OUT.read_text() == template_compile.compile_template(source), \
        "template_compiled.py is stale: run python -m svcdiag.systemd.template_compile"


def _by_jinja2(monkeypatch: pytest.MonkeyPatch):
    from svcdiag.systemd import render

    monkeypatch.setattr(render, "_compiled", lambda: None)


def test_every_shipped_config_renders_alike_compiled_and_by_jinja2(units: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    u = UnitsDir(units, "t")
    configs = [node for name in u.names() for node in u.load(name).node_configs()]
    compiled = [render_unit(cfg, v) for cfg in configs for v in (None, "0.5.6")]
    _by_jinja2(monkeypatch)
    assert compiled == [render_unit(cfg, v) for cfg in configs for v in (None, "0.5.6")]
    assert len(configs) > 10


_text = st.text(st.characters(blacklist_categories=("Cs",)), max_size=12)
_value = st.one_of(_text, st.none(), st.booleans(), st.integers(-3, 3), st.sampled_from(["no", "on-failure"]))


@settings(max_examples=300, deadline=None)
@given(values=st.fixed_dictionaries(
    {k: _value for k in ("name", "source", "description", "config_hash", "hash_key", "exec_start", "user", "group",
                         "working_directory", "simulate", "notify", "start_timeout", "restart", "restart_sec",
                         "start_limit_interval", "start_limit_burst", "watchdog")}
    | {k: st.lists(_text, max_size=3) for k in ("environment", "hardening", "credentials")}))
def test_the_compiled_template_renders_any_values_as_jinja2_does(values: dict) -> None:
    from svcdiag.systemd import template_compiled
    from svcdiag.systemd.render import TEMPLATE_NAME, _environment

    assert template_compiled.render(values) == _environment().get_template(TEMPLATE_NAME).render(**values)


def test_an_operators_own_template_is_rendered_by_jinja2(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from svcdiag.systemd.render import TEMPLATE_NAME, template_dirs

    bundled = next(d / TEMPLATE_NAME for d in template_dirs() if (d / TEMPLATE_NAME).is_file())
    (tmp_path / TEMPLATE_NAME).write_text(bundled.read_text().replace("[Install]", "# site: {{ name | upper }}\n[Install]"))
    monkeypatch.setenv("SVCDIAG_TEMPLATES", str(tmp_path))
    cfg = UnitsDir(UNITS, "t").load("dflash-smoke")
    assert "# site: DFLASH-SMOKE\n[Install]" in render_unit(cfg)


def test_render_imports_no_jinja2() -> None:
    code = ("import sys; from svcdiag.config.service import UnitsDir; from svcdiag.systemd.render import render_unit; "
            f"import pathlib; render_unit(UnitsDir(pathlib.Path({str(UNITS)!r}), 't').load('dflash-smoke')); print('jinja2' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"
