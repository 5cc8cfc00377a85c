"""`svcdiag check`: the rendered arguments against the release that will run them; `install`
and `up` run the same check before writing or starting anything."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from svcdiag.config.service import ServiceConfig, Speculative, UnitsDir
from svcdiag.ops.host.check import FlagCheckError, check, parse_with_sglang
from svcdiag.sglang.flag_tables import known_versions, table_for, version_key
from svcdiag.sglang.flags import sglang_args

from .conftest import UNITS, assert_one_line_error, sglang_here

OLD_FLAG = 'extra_args = ["--cuda-graph-max-bs", "4"]'


@pytest.fixture(autouse=True)
def state(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    d = tmp_path / "state"
    monkeypatch.setenv("SVCDIAG_STATE_DIR", str(d))
    return d


def variant(units: Path, name: str, *lines: str, base: str = "dflash-smoke") -> None:
    (units / f"{name}.toml").write_text("\n".join([f'extends = "{base}"', *lines]) + "\n")


def fake_sglang(tmp_path: Path, version: str = "0.5.23", flags: list[str] | None = None, srt: bool = True) -> Path:
    """An interpreter whose sglang is a stub: `__version__`, and a ServerArgs whose
    add_cli_args registers `flags` (each taking a value, but --trust-remote-code)."""
    site = tmp_path / "site"
    (site / "sglang" / "srt").mkdir(parents=True)
    (site / "sglang" / "__init__.py").write_text(f"__version__ = {version!r}\n")
    if srt:
        (site / "sglang" / "srt" / "__init__.py").write_text("")
        lines = ["class ServerArgs:", "    @staticmethod", "    def add_cli_args(parser):"]
        for f in flags or []:
            kind = "action='store_true'" if f == "--trust-remote-code" else "type=str"
            lines.append(f"        parser.add_argument({f!r}, {kind})")
        lines.append("        return parser")
        (site / "sglang" / "srt" / "server_args.py").write_text("\n".join(lines) + "\n")
    py = tmp_path / "python"
    py.write_text(f'#!/bin/sh\nPYTHONPATH={site} exec {sys.executable} "$@"\n')
    py.chmod(0o755)
    return py


def rendered_flags(units: Path, name: str, version: str) -> list[str]:
    argv = sglang_args(UnitsDir(units, "t").load(name), version)
    return [a for a in argv if a.startswith("--")]


# ------------------------------------------------------------------ check

def test_dflash_smoke_on_0_5_23_passes(cli, units: Path, tmp_path: Path) -> None:
    py = fake_sglang(tmp_path, srt=False)
    variant(units, "smoke23", 'sglang_version = "0.5.23"', f'python = "{py}"')
    r = cli("check", "smoke23")
    assert r.exit_code == 0, r.output
    assert "OK for sglang 0.5.23 (config)" in r.output and "0 error(s)" in r.output
    r = cli("check", "smoke23", "--sglang-version", "0.5.23", "--json")
    assert r.exit_code == 0, r.output
    out = json.loads(next(ln for ln in r.output.splitlines() if ln.startswith("{")))
    assert out["ok"] and out["sglang_version"] == "0.5.23" and out["sglang_version_source"] == "option"
    assert "--cuda-graph-max-bs-decode" in out["argv"] and "--cuda-graph-max-bs" not in out["argv"]


def test_older_release_gets_the_older_spelling(cli, units: Path, tmp_path: Path) -> None:
    variant(units, "here", f'python = "{fake_sglang(tmp_path, srt=False)}"')
    r = cli("check", "here", "--sglang-version", "0.5.12", "--json")
    assert r.exit_code == 0, r.output
    out = json.loads(next(ln for ln in r.output.splitlines() if ln.startswith("{")))
    assert "--cuda-graph-max-bs" in out["argv"] and out["table"] == "0.5.12"


def test_old_flag_on_0_5_23_is_refused_naming_the_replacement(cli, units: Path) -> None:
    variant(units, "old", 'sglang_version = "0.5.23"', OLD_FLAG)
    assert_one_line_error(cli("check", "old"), "old:", "--cuda-graph-max-bs ", "sglang 0.5.23",
                          "--cuda-graph-max-bs-decode")
    r = cli("check", "old", "--json")
    assert r.exit_code == 2
    out = json.loads(next(ln for ln in r.output.splitlines() if ln.startswith("{")))
    assert not out["ok"] and out["problems"][0]["kind"] == "removed"
    assert out["problems"][0]["replacement"][0] == "--cuda-graph-max-bs-decode"


def test_unknown_version_says_it_was_assumed(cli, units: Path) -> None:
    variant(units, "old", OLD_FLAG, 'python = "/nonexistent/python"')
    assert_one_line_error(cli("check", "old"), "--cuda-graph-max-bs-decode", "assumed", "--sglang-version")


def test_deprecated_flag_warns_and_passes(cli, units: Path, tmp_path: Path) -> None:
    variant(units, "dpa", 'sglang_version = "0.5.23"', 'extra_args = ["--enable-dp-attention"]',
            f'python = "{fake_sglang(tmp_path, srt=False)}"')
    r = cli("check", "dpa")
    assert r.exit_code == 0, r.output
    assert "warning: --enable-dp-attention is deprecated in sglang 0.5.23" in r.output
    assert "--attn-dp-size" in r.output and "1 warning(s)" in r.output


def test_bad_version_option(cli) -> None:
    assert_one_line_error(cli("check", "dflash-smoke", "--sglang-version", "newest"), "--sglang-version", "newest")


# ------------------------------------------------------------------ SGLang's own parser

def test_sglangs_own_parser_accepts(cli, units: Path, tmp_path: Path) -> None:
    flags = rendered_flags(units, "dflash-smoke", "0.5.22")
    py = fake_sglang(tmp_path, "0.5.22", flags)
    variant(units, "real", f'python = "{py}"')
    r = cli("check", "real")
    assert r.exit_code == 0, r.output
    assert "sglang 0.5.22 (interpreter" in r.output and "SGLang's own parser accepts them" in r.output


def test_sglangs_own_parser_rejects(cli, units: Path, tmp_path: Path) -> None:
    flags = [f for f in rendered_flags(units, "dflash-smoke", "0.5.23") if f != "--max-mamba-cache-size"]
    py = fake_sglang(tmp_path, "0.5.23", flags)
    variant(units, "real", f'python = "{py}"')
    assert_one_line_error(cli("check", "real"), "SGLang's own parser", "unrecognized arguments: --max-mamba-cache-size")


def test_no_server_args_module_is_one_note_and_the_table_judges(cli, units: Path, tmp_path: Path) -> None:
    py = fake_sglang(tmp_path, "0.5.23", srt=False)
    variant(units, "real", f'python = "{py}"')
    r = cli("check", "real")
    assert r.exit_code == 0, r.output
    (note,) = [ln for ln in r.output.splitlines() if "own parser not run" in ln]
    assert "cannot import sglang.srt.server_args" in note and "ModuleNotFoundError" in note
    assert "flag table alone" in note


def test_an_interpreter_without_sglang_is_refused_not_ok(cli, units: Path, tmp_path: Path) -> None:
    """`python` unset runs /usr/bin/python3, which has no sglang: the unit could not start, and no
    release is known to check the flags against: `check`, `install` and `up` refuse it alike (exit 2,
    one line; they used to disagree: check refused, install went on)."""
    bare = tmp_path / "bare-python"
    bare.write_text(f'#!/bin/sh\nPYTHONPATH= exec {sys.executable} -I "$@"\n')
    bare.chmod(0o755)
    variant(units, "nosg", f'python = "{bare}"')
    variant(units, "gone", 'python = "/nonexistent/bin/python"')
    for name, said in (("nosg", f"{bare} cannot import sglang"), ("gone", "/nonexistent/bin/python does not exist here")):
        for argv in (["check", name], ["install", name, "--unit-dir", str(tmp_path / "u")]):
            assert_one_line_error(cli(*argv), f"{name}:", said, "set python =", "pin sglang_version")
        assert not (tmp_path / "u").exists()
        from svcdiag.ops.serve.start import flag_check

        with pytest.raises(FlagCheckError, match=said):  # up, tune, baseline-check: before anything starts
            flag_check(UnitsDir(units, "t").load(name), lambda _: None)


def test_a_pinned_release_is_checked_without_the_interpreter(cli, units: Path, tmp_path: Path) -> None:
    """A config repository's CI has no SGLang: with sglang_version (or --sglang-version) the flags
    are judged by that release's table, and the missing interpreter is a warning, alike in check and install."""
    variant(units, "gone", 'sglang_version = "0.5.23"', 'python = "/nonexistent/bin/python"')
    r = cli("check", "gone")
    assert r.exit_code == 0 and "gone: OK for sglang 0.5.23 (config" in r.output, r.output
    warned = [ln for ln in r.output.splitlines() if ln.startswith("svcdiag: warning:")]
    assert len(warned) == 1 and "/nonexistent/bin/python does not exist here" in warned[0], r.output
    assert "against sglang 0.5.23's table" in warned[0]
    r = cli("install", "gone", "--unit-dir", str(tmp_path / "u"))
    assert r.exit_code == 0 and "/nonexistent/bin/python does not exist here" in r.output, r.output
    variant(units, "old", 'sglang_version = "0.5.23"', 'python = "/nonexistent/bin/python"', OLD_FLAG)
    assert_one_line_error(cli("check", "old"), "--cuda-graph-max-bs-decode")  # the table still judges
    unpinned = cli("check", "dflash-smoke", "--sglang-version", "0.5.12")  # the option pins it too
    assert unpinned.exit_code == 0 and "does not exist here" in unpinned.output, unpinned.output


def test_the_hint_for_more_errors_keeps_the_version_asked_for(cli, units: Path, tmp_path: Path) -> None:
    """From install or up the hint is the check to run; from check itself, not the command just run."""
    variant(units, "here", f'python = "{fake_sglang(tmp_path, srt=False)}"')
    r = cli("check", "here", "--sglang-version", "0.4.0")
    assert r.exit_code == 2 and "more: each is in svcdiag check here --sglang-version 0.4.0 --json)" in r.output, r.output
    variant(units, "old", 'sglang_version = "0.4.0"', f'python = "{fake_sglang(tmp_path / "b", srt=False)}"')
    r = cli("install", "old", "--unit-dir", str(tmp_path / "u"))
    assert r.exit_code == 2 and "more: svcdiag check old)" in r.output, r.output


def test_parser_not_run_for_a_missing_interpreter() -> None:
    v = parse_with_sglang("/nonexistent/python", ["--port", "1"])
    assert v.status == "no_sglang" and "does not exist" in v.detail


# ------------------------------------------------------------------ install and up refuse

def test_install_refuses_and_writes_nothing(cli, units: Path, tmp_path: Path) -> None:
    sglang_here(units, tmp_path)
    variant(units, "old", 'sglang_version = "0.5.23"', OLD_FLAG)
    unit_dir = tmp_path / "systemd"
    assert_one_line_error(cli("install", "dflash-smoke", "old", "--unit-dir", str(unit_dir)),
                          "--cuda-graph-max-bs-decode")
    assert not unit_dir.exists() or not list(unit_dir.iterdir())


def test_install_writes_the_flags_of_the_release(cli, units: Path, tmp_path: Path) -> None:
    sglang_here(units, tmp_path)
    variant(units, "old", 'sglang_version = "0.5.12"')
    unit_dir = tmp_path / "systemd"
    r = cli("install", "old", "dflash-smoke", "--unit-dir", str(unit_dir))
    assert r.exit_code == 0, r.output
    assert "--cuda-graph-max-bs 4" in (unit_dir / "old.service").read_text()
    assert "--cuda-graph-max-bs-decode 4" in (unit_dir / "dflash-smoke.service").read_text()
    assert "flags rendered for sglang 0.5.12 (config" in r.output


def test_render_spells_the_flags_for_the_release(cli, units: Path) -> None:
    variant(units, "old", 'sglang_version = "0.5.12"')
    assert "--cuda-graph-max-bs 4" in cli("render", "old").output
    assert "--cuda-graph-max-bs-decode 4" in cli("render", "dflash-smoke").output


class NoSystemd:
    """Answers "not running"; anything that would start or install is a test failure."""

    def props(self, unit: str) -> SimpleNamespace:
        return SimpleNamespace(running=False, active_state="inactive", invocation="")

    def __getattr__(self, name: str):
        raise AssertionError(f"up touched systemd: {name}")


def test_up_refuses_before_starting(units: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from svcdiag.ops.serve import follow, start

    monkeypatch.setattr(follow, "LOCK_DIR", tmp_path / "locks")
    monkeypatch.setattr(start, "install_units", lambda *a, **k: pytest.fail("installed"))
    monkeypatch.setattr(start, "preflight_gate", lambda *a, **k: pytest.fail("preflight ran"))
    variant(units, "old", 'sglang_version = "0.5.23"', OLD_FLAG)
    u = UnitsDir(units, "t")
    notes: list[str] = []
    pub = SimpleNamespace(note=notes.append)
    with pytest.raises(FlagCheckError, match="--cuda-graph-max-bs-decode") as e:
        start.up(NoSystemd(), u.load("old"), u, pub, wait=False, restart=False, force=False, gpu_memory=None,
                 timeout=None)
    assert e.value.exit_code == 2 and notes == []


def test_ensure_started_checks_when_not_told_the_release(units: Path) -> None:
    from svcdiag.ops.serve import start

    variant(units, "old", 'sglang_version = "0.5.23"', OLD_FLAG)
    with pytest.raises(FlagCheckError):
        start.ensure_started(NoSystemd(), UnitsDir(units, "t").load("old"), lambda m: None, restart=True)


# ------------------------------------------------------------------ property

BETWEEN = ("0.5.13", "0.5.18", "0.5.21", "0.5.24", "0.6.0")


@st.composite
def configs(draw) -> tuple[ServiceConfig, str]:
    version = draw(st.sampled_from((*known_versions(), *BETWEEN)))
    at_least = lambda v: version_key(version) >= version_key(v)  # noqa: E731
    opt = lambda s: draw(st.one_of(st.none(), s))  # noqa: E731
    spec = None
    if at_least("0.4.6.post1") and draw(st.booleans()):
        spec = Speculative(algorithm=draw(st.sampled_from(("EAGLE", "EAGLE3", "NEXTN"))),
                           draft_model_path=opt(st.just("/m/draft")), num_steps=opt(st.integers(1, 8)),
                           eagle_topk=opt(st.integers(1, 8)), num_draft_tokens=opt(st.integers(1, 64)))
    cfg = ServiceConfig(
        name="p", path=Path("/u/p.toml"), model_path=draw(st.sampled_from(("/m/x", "org/model", "/dev/shm/Qwen"))),
        served_model_name=opt(st.just("served")), tp_size=draw(st.integers(1, 8)), dp_size=draw(st.integers(1, 4)),
        host=draw(st.sampled_from(("127.0.0.1", "0.0.0.0"))), port=draw(st.integers(1, 65535)),
        mem_fraction_static=opt(st.floats(0.05, 0.95)), max_running_requests=opt(st.integers(1, 4096)),
        context_length=opt(st.integers(1, 1 << 20)), chunked_prefill_size=opt(st.integers(-1, 65536)),
        cuda_graph_max_bs=opt(st.integers(1, 1024)), trust_remote_code=draw(st.booleans()),
        max_mamba_cache_size=opt(st.integers(1, 4096)) if at_least("0.5.6") else None,
        speculative=spec, sglang_version=draw(st.sampled_from((None, version))),
    )
    return cfg, version


@settings(max_examples=300, deadline=None)
@given(configs())
def test_rendered_argv_checks_clean_for_its_release(case: tuple[ServiceConfig, str]) -> None:
    cfg, version = case
    assert table_for(version).check(sglang_args(cfg, version)) == []
    assert check(cfg, override=version, own_parser=False).ok


@pytest.mark.parametrize("version", [v for v in known_versions() if version_key(v) >= version_key("0.5.12")])
def test_every_shipped_config_checks_clean(version: str) -> None:
    """From 0.5.12 on: `--speculative-algorithm DFLASH` (the seed's) is refused by 0.5.6's choices."""
    for cfg in UnitsDir(UNITS, "shipped").load_all():
        result = check(cfg, override=version, own_parser=False)
        assert result.ok and not result.warnings, (cfg.name, result.errors, result.warnings)
    (err,) = check(UnitsDir(UNITS, "shipped").load("dflash-smoke"), override="0.5.6", own_parser=False).errors
    assert "DFLASH" in err and "0.5.6" in err
