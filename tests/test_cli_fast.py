"""`svcdiag status` runs without click (svcdiag.cli.fast): for every argv the fast path accepts it
must call the command with what click's own parsing gives, and end the same way; everything else
is left to click. Errors print the same one line and exit code either way."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from svcdiag.cli import fast, plain
from svcdiag.cli.app import main

ROOT = Path(__file__).resolve().parent.parent
NAMES = sorted(p.stem for p in (ROOT / "units").glob("*.toml"))
#: the click group, run as the `svcdiag` script would run it if there were no fast path
VIA_CLICK = "import sys; from svcdiag.cli.app import main; sys.argv[0] = 'svcdiag'; main()"

# argv as a user types it: the group's --units, the command, then its names and options in any
# order, with a share of what the fast path must leave to click (short options, typos, -h, ...)
units_opt = st.one_of(st.just([]), st.sampled_from(["units", str(ROOT / "units"), "/nonexistent", ""]).flatmap(
    lambda d: st.sampled_from([["--units", d], [f"--units={d}"]])))
host = st.sampled_from(["gpu-a", "root@gpu-a:2222", "[::1]:22", "", "localhost", "a b", "gpu-a:99999", "-x"])
word = st.one_of(st.sampled_from([*NAMES, "nosuch", "-", "", "ünïcode", "a=b"]), st.text(max_size=6))
token = st.one_of(
    word.map(lambda w: [w]),
    st.just(["--json"]),
    host.flatmap(lambda h: st.sampled_from([["--host", h], [f"--host={h}"]])),
    st.sampled_from([["--"], ["-h"], ["--help"], ["--jsn"], ["-j"], ["--json=1"], ["--host"], ["--units", "u"],
                     ["--version"], ["---"], ["--host=a", "--host", "b"]]),
)
argvs = st.tuples(units_opt, st.sampled_from([["status"], ["statu"], ["list"], []]),
                  st.lists(token, max_size=6)).map(lambda t: [*t[0], *t[1], *(x for tok in t[2] for x in tok)])


def outcome(run: Any, capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    """(exit code, stdout, stderr) of one in-process run that ends in sys.exit."""
    try:
        run()
        code: Any = "returned"
    except SystemExit as e:
        code = e.code or 0
    out, err = capsys.readouterr()
    return code, out, err


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(argv=argvs)
def test_the_fast_path_calls_status_as_click_does(argv: list[str], monkeypatch: pytest.MonkeyPatch,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    def record(units_opt: str | None, names: tuple[str, ...], host: str | None, as_json: bool) -> None:
        print(repr({"units_opt": units_opt, "names": names, "host": host, "as_json": as_json}))

    def record_list(units_opt: str | None, as_json: bool) -> None:
        print(repr({"list": True, "units_opt": units_opt, "as_json": as_json}))

    monkeypatch.setattr(plain, "status", record)
    monkeypatch.setitem(plain.SERVED, "status", record)
    monkeypatch.setattr(plain, "list_configs", record_list)  # `list` is served too
    monkeypatch.setitem(plain.SERVED, "list", record_list)
    parsed = fast.parse(argv)
    # a generated word that names another served command (`top`, `logs`, `replay`) is that command's test's
    assume(parsed is None or parsed[0] in ("status", "list"))
    if parsed is None:
        assert outcome(lambda: fast.serve(argv), capsys) == ("returned", "", "")  # click's to parse
        return
    assert parsed[0] in ("status", "list")
    assert outcome(lambda: fast.serve(argv), capsys) == \
        outcome(lambda: main.main(argv, prog_name="svcdiag", standalone_mode=True), capsys)


def test_common_argv_is_served() -> None:
    """What people type is served: a test that cannot fail for lack of accepted argv."""
    for argv in (["status"], ["status", "--json"], ["--units", "units", "status", NAMES[0], "--host=gpu-a"],
                 ["status", "--", "-odd-name"]):
        assert fast.parse(argv) is not None, argv
    for argv in (["status", "-h"], ["--version"], ["status", "--host", "--json"], ["status", "--jsn"], []):
        assert fast.parse(argv) is None, argv


def test_shell_completion_is_clicks(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("_SVCDIAG_COMPLETE", "bash_complete")
    assert fast.parse(["status"]) is None


def test_a_stale_manifest_is_not_used(monkeypatch: pytest.MonkeyPatch) -> None:
    from svcdiag.cli import help_manifest

    monkeypatch.setattr(help_manifest, "SOURCES", help_manifest.SOURCES + 1)
    assert fast.parse(["status"]) is None


def run(args: list[str], *, click: bool) -> tuple[int, str, str, bool]:
    """(exit code, stdout, stderr, click imported) of `svcdiag ARGS`, through the fast path or click's."""
    cmd = [sys.executable, "-X", "importtime", *(["-c", VIA_CLICK] if click else ["-m", "svcdiag"]), *args]
    p = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, env={**os.environ, "COLUMNS": "80"})
    lines = p.stderr.splitlines()
    imported = any(ln.startswith("import time:") and ln.rsplit("|", 1)[-1].strip() == "click" for ln in lines)
    err = "".join(ln + "\n" for ln in lines if not ln.startswith("import time:"))
    return p.returncode, p.stdout, err, imported


NO_BUS = not os.path.isdir("/run/systemd/system")
ERRORS = {
    "unknown config": ["status", "nosuch-config"],
    "misspelt config": ["status", NAMES[0][:-1]],
    "bad units dir": ["--units", "/nonexistent", "status"],
    "bad --host": ["status", "--host", "a b"],
    "no bus": ["status", "--json"],
}


@pytest.mark.parametrize("args", ERRORS.values(), ids=ERRORS.keys())
def test_errors_are_clicks_one_line_and_code(args: list[str]) -> None:
    if args == ERRORS["no bus"] and not NO_BUS:
        pytest.skip("this host has a system bus")
    code, out, err, imported = run(args, click=False)
    assert not imported, "status imported click"
    assert (code, out, err) == run(args, click=True)[:3]
    assert code == 2 and err.startswith("svcdiag: error: ") and err.count("\n") == 1, err


FIXTURE = str(ROOT / "tests" / "fixtures" / "sglang" / "v0523-kv-below-context.log")
#: `replay`, `list`, `render` and `check` argv, served without click: the same output, errors and exit code as click's
REPLAYS = {
    "example": ["replay", "--example", "dflash-smoke"],
    "json": ["replay", "--example", "max-running-zero", "--json"],
    "with a config": ["--units", "units", "replay", "--example", "max-running-zero", "--config", "dflash-tp1-mr8"],
    "a path, strict": ["replay", FIXTURE, "--strict"],
    "--start N": ["replay", "--example", "two-starts", "--start", "1", "--progress"],
    "--start=N": ["replay", "--example=two-starts", "--start=2", "--json"],
    "--invocation": ["replay", "--example", "two-starts", "--invocation", "2"],
    "--list-examples": ["replay", "--list-examples"],
    "no such file": ["replay", "/nonexistent.log"],
    "--start 0": ["replay", "--example", "two-starts", "--start", "0"],
    "--start x": ["replay", "--example", "two-starts", "--start", "x"],
    "both picks": ["replay", "--example", "two-starts", "--start", "1", "--invocation", "2"],
    "path and example": ["replay", FIXTURE, "--example", "dflash-smoke"],
    "no start matches": ["replay", "--example", "two-starts", "--start", "3"],
    "unknown config": ["replay", "--example", "dflash-smoke", "--config", "nosuch"],
    "list": ["list"],
    "list --json": ["--units", "units", "list", "--json"],
    "list, bad units dir": ["--units", "/nonexistent", "list"],
    "render": ["render", "demo-smoke"],
    "render --json, nodes": ["render", "demo-multinode", "--json"],
    "render, unknown config": ["render", "nosuch"],
    "check": ["check", "demo-smoke"],
    "check --json, a release": ["check", "dflash-smoke", "--json", "--sglang-version", "0.5.23"],
    "check, unknown config": ["check", "nosuch"],
}


@pytest.mark.parametrize("args", REPLAYS.values(), ids=REPLAYS.keys())
def test_replay_list_render_and_check_are_served_as_click_serves_them(args: list[str]) -> None:
    code, out, err, imported = run(args, click=False)
    assert not imported, f"{args} imported click"
    assert (code, out, err) == run(args, click=True)[:3]


def test_replay_argv_click_must_parse_is_left_to_it() -> None:
    for argv in (["replay", "-h"], ["replay", "a.log", "b.log"], ["replay", "--start"], ["replay", "--jsn"],
                 ["render"], ["list", "x"]):
        assert fast.parse(argv) is None, argv
    assert fast.parse(["replay", "-"]) is not None  # stdin
    assert fast.parse(["replay"]) is not None  # its own one-line error, as click's


# preflight: its numbers (common.Bounded) are converted by the fast path as click converts them, and a
# value click would refuse (not a number, nan, inf, out of range; a directory for --model-config) is click's
number = st.sampled_from(["80", "80.5", "0", "4096", "4097", "1e3", "nan", "inf", "x", "", "65536", "1073741824",
                          "1073741825", " 7 ", "0x10", "-1"])
preflight_token = st.one_of(
    word.map(lambda w: [w]),
    st.sampled_from(["--gpu-memory", "--kv-bytes-per-token", "--weights-gb"]).flatmap(
        lambda o: number.flatmap(lambda n: st.sampled_from([[o, n], [f"{o}={n}"]]))),
    st.sampled_from([["--model-config", str(ROOT)], ["--model-config", str(ROOT / "pyproject.toml")],
                     ["--model-config", "/nonexistent/config.json"], ["--calibration"], ["--json"],
                     ["--state-dir", "/nonexistent"], ["-h"], ["--gpu-memory"]]),
)
preflight_argvs = st.tuples(units_opt, st.lists(preflight_token, max_size=5)).map(
    lambda t: [*t[0], "preflight", *(x for tok in t[1] for x in tok)])


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(argv=preflight_argvs)
def test_the_fast_path_calls_preflight_as_click_does(argv: list[str], monkeypatch: pytest.MonkeyPatch,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    def record(units_opt: str | None, name: str | None, gpu_memory: float | None, kv_bytes_per_token: int | None,
               weights_gb: float | None, model_config: str | None, calibration: bool, host: str | None,
               state_dir: str | None, as_json: bool) -> None:
        args = (units_opt, name, gpu_memory, kv_bytes_per_token, weights_gb, model_config, calibration, host,
                state_dir, as_json)
        print(repr(args))  # the values, converted, as the command receives them (80 and 80.0 told apart)
        print(repr(tuple(type(a).__name__ for a in args)))

    monkeypatch.setattr(plain, "preflight", record)
    monkeypatch.setitem(plain.SERVED, "preflight", record)
    parsed = fast.parse(argv)
    if parsed is None:
        assert outcome(lambda: fast.serve(argv), capsys) == ("returned", "", "")
        return
    assert outcome(lambda: fast.serve(argv), capsys) == \
        outcome(lambda: main.main(argv, prog_name="svcdiag", standalone_mode=True), capsys)


def test_preflight_as_people_type_it_is_served() -> None:
    assert fast.parse(["preflight", NAMES[0], "--gpu-memory", "80", "--weights-gb=50"]) is not None
    for argv in (["preflight", NAMES[0], "--gpu-memory", "nan"], ["preflight", "--model-config", str(ROOT)]):
        assert fast.parse(argv) is None, argv
