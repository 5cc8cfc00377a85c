"""Configs: loading, extends, and every bad-input case as a one-line error with exit 2."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from svcdiag.config.service import TOP_LEVEL, UnitsDir, find_units_dir
from svcdiag.errors import ConfigError, SvcdiagError

from .conftest import assert_one_line_error, run_svcdiag


def write(units: Path, name: str, text: str) -> None:
    (units / f"{name}.toml").write_text(text)


def test_shipped_configs_load_with_their_figures(units: Path) -> None:
    u = UnitsDir(units, "test")
    smoke = u.load("dflash-smoke")
    assert smoke.baseline and smoke.tp_size == 1 and smoke.gpus == (0,)
    assert smoke.model_path == "/dev/shm/Qwen3.6-27B"
    assert (smoke.mem_fraction_static, smoke.max_running_requests, smoke.context_length,
            smoke.max_mamba_cache_size) == (0.75, 4, 32768, 24)
    assert smoke.speculative and smoke.speculative.algorithm == "DFLASH"
    mr8 = u.load("dflash-tp1-mr8")
    assert (mr8.max_running_requests, mr8.max_mamba_cache_size) == (8, 2)
    assert not mr8.baseline, "a variant of the baseline is not itself the baseline"
    assert mr8.speculative == smoke.speculative and mr8.context_length == 32768
    assert u.load("dflash-tp8").gpus == tuple(range(8))
    assert u.load("nospec-tp1").speculative is None
    assert u.baseline().name == "dflash-smoke"


def test_list_says_which_folder_it_used(cli, units: Path) -> None:
    r = cli("list")
    assert r.exit_code == 0, r.output
    assert f"configs in {units} (--units)" in r.output
    assert "dflash-smoke" in r.output and "yes" in r.output


def test_units_folder_lookup_order(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir()
    b.mkdir()
    monkeypatch.setenv("SVCDIAG_UNITS", str(b))
    assert find_units_dir(str(a)).path == a.resolve()
    assert find_units_dir(None).reason == "$SVCDIAG_UNITS"
    monkeypatch.delenv("SVCDIAG_UNITS")
    monkeypatch.chdir(tmp_path)
    (tmp_path / "units").mkdir()
    assert find_units_dir(None).path == (tmp_path / "units").resolve()


BAD_CASES = [
    ("mem_fraction_static = 0.75\nmem_fraction_statc = 0.8\n", "mem_fraction_statc", "did you mean 'mem_fraction_static'"),
    ('tp_size = "4"\n', "tp_size", "must be an integer"),
    ("mem_fraction_static = 1.2\n", "mem_fraction_static", "strictly between 0 and 1"),
    ("mem_fraction_static = 0\n", "mem_fraction_static", "strictly between 0 and 1"),
    ("port = 70000\n", "port", "1–65535"),
    ("port = 0\n", "port", "1–65535"),
    ("tp_size = 4\ngpus = [0, 1]\n", "tp_size", "needs 4 GPUs, but gpus lists 2"),
    ('served_model_name = "a\\nExecStartPre=/bin/rm"\n', "served_model_name", "newlines and NUL"),
    ('extra_args = ["--x", "a\\u0000b"]\n', "extra_args", "newlines and NUL"),
    ('[env]\nFOO = "x\\ny"\n', "env.FOO", "newlines and NUL"),
    ('[speculative]\nalgorithm = "DFLSH"\n', "speculative.algorithm", "must be one of"),
    ('[speculative]\nalgoritm = "DFLASH"\n', "speculative.algoritm", "did you mean 'algorithm'"),
    ('[timeouts]\nloading_weight = 5\n', "timeouts.loading_weight", "did you mean 'loading_weights'"),
    ('python = "python3"\n', "python", "absolute path"),
    ('simulate = "helthy-dense"\n', "simulate", "did you mean 'healthy-dense'"),
    ('extra_args = ["--port", "1"]\n', "extra_args", "--port is set by its own field"),
]


@pytest.mark.parametrize("body,field,message", BAD_CASES)
def test_bad_field_is_one_line_naming_file_and_field(cli, units: Path, body: str, field: str, message: str) -> None:
    write(units, "bad", 'extends = "dflash-smoke"\n' + body)
    r = cli("render", "bad")
    assert_one_line_error(r, f"{units / 'bad.toml'}: {field}", message)


def test_bad_value_in_a_base_names_the_base_file(cli, units: Path) -> None:
    write(units, "base", 'model_path = "/m"\nport = "x"\n')
    write(units, "child", 'extends = "base"\n')
    assert_one_line_error(cli("render", "child"), f"{units / 'base.toml'}: port", "must be an integer")


def test_extends_cycle_and_missing_base(cli, units: Path) -> None:
    write(units, "a", 'extends = "b"\nmodel_path = "/m"\n')
    write(units, "b", 'extends = "a"\n')
    assert_one_line_error(cli("render", "a"), "extends", "cycle: a → b → a")
    write(units, "c", 'extends = "dflash-smok"\n')
    assert_one_line_error(cli("render", "c"), f"{units / 'c.toml'}: extends", "not found",
                          "did you mean 'dflash-smoke'")


def test_invalid_unit_name_and_invalid_toml(cli, units: Path) -> None:
    write(units, "bad@name", 'model_path = "/m"\n')
    assert_one_line_error(cli("render", "bad@name"), "name", "not a valid systemd unit name")
    write(units, "broken", 'model_path = "/m\n')
    assert_one_line_error(cli("render", "broken"), f"{units / 'broken.toml'}", "invalid TOML")


def test_unknown_config_name(cli) -> None:
    assert_one_line_error(cli("render", "dflash-smok"), "no config 'dflash-smok'", "did you mean 'dflash-smoke'")


def test_bad_input_through_the_real_entry_point(units: Path) -> None:
    write(units, "bad", 'extends = "dflash-smoke"\nport = 99999\n')
    r = run_svcdiag("--units", str(units), "render", "bad")
    assert_one_line_error(r, "bad.toml: port", "1–65535")
    assert r.stdout == b""


def test_no_baseline_lists_candidates(tmp_path: Path) -> None:
    d = tmp_path / "u"
    d.mkdir()
    (d / "x.toml").write_text('model_path = "/m"\n')
    with pytest.raises(SvcdiagError, match="no config in .* has `baseline = true`; name one of: x"):
        UnitsDir(d, "t").baseline()


VALUES = st.one_of(st.none(), st.booleans(), st.integers(-10, 100000), st.floats(allow_nan=True),
                   st.text(max_size=20), st.lists(st.integers(-2, 9), max_size=9), st.lists(st.text(max_size=5), max_size=3),
                   st.dictionaries(st.text(max_size=5), st.text(max_size=5), max_size=3))


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(st.dictionaries(st.sampled_from(sorted(TOP_LEVEL) + ["bogus", "tp", "gpu"]), VALUES, max_size=6))
def test_validation_never_raises_anything_but_config_error(tmp_path_factory, raw) -> None:

    from svcdiag.config.service import check_raw, config_from_keys

    raw = {k: v for k, v in raw.items() if v is not None}
    path = Path("/virtual/x.toml")
    try:
        check_raw(path, raw)
        if "extends" in raw:
            return
        cfg = config_from_keys("x", path, {"model_path": "/m", **raw})
    except ConfigError as e:
        assert str(e).startswith(f"{path}"), e
        assert "\n" not in str(e)
        return
    # what validation let through is usable: in range and renderable
    assert 1 <= cfg.port <= 65535
    assert cfg.mem_fraction_static is None or 0 < cfg.mem_fraction_static < 1
    if cfg.gpus is not None:
        assert len(cfg.gpus) == cfg.tp_size * cfg.dp_size


# ---------------------------------------------------------------- readiness: notify by default


def test_unset_readiness_is_notify_and_every_view_says_so(cli, units: Path) -> None:
    write(units, "j", 'extends = "demo-smoke"\nreadiness = "journal"\n')
    write(units, "n", 'extends = "demo-smoke"\nreadiness = "notify"\n')
    u = UnitsDir(units, "t")
    unset, journal, notify = u.load("demo-smoke"), u.load("j"), u.load("n")
    assert unset.readiness == notify.readiness == "notify" and unset.config_hash == notify.config_hash
    assert unset.flat()["readiness"] == "notify" and journal.flat()["readiness"] == "journal"
    assert "Type=notify" in cli("render", "demo-smoke").output  # not a Type=exec unit labelled otherwise
    # unset and "notify" are one config; journal is another, and diff names both modes
    assert cli("diff", "demo-smoke", "n").output.endswith("have the same effective config\n")
    diff = cli("diff", "demo-smoke", "j").output
    assert '  readiness' in diff and '"notify"  →  "journal"' in diff


def test_a_journal_config_keeps_the_hash_it_had_before_readiness_existed(units: Path) -> None:
    import hashlib
    import json

    write(units, "j", 'extends = "demo-smoke"\nreadiness = "journal"\n')
    u = UnitsDir(units, "t")
    journal, unset = u.load("j"), u.load("demo-smoke")
    legacy = {k: v for k, v in journal.flat().items() if k != "readiness"}  # what the hash was made of then
    blob = json.dumps(legacy, sort_keys=True, separators=(",", ":")).encode()
    assert journal.config_hash == hashlib.sha256(blob).hexdigest()[:16]
    # the same file read with notify as its default renders another unit: its hash moves, so an
    # installed Type=exec unit of it shows as drift
    assert unset.config_hash != journal.config_hash


def test_multinode_defaults_to_notify_each_node_supervised_by_rank(cli, units: Path) -> None:
    from svcdiag.systemd.render import supervise_argv

    u = UnitsDir(units, "t")
    multi = u.load("demo-multinode")
    assert multi.readiness == "notify"
    assert {n.readiness for n in multi.node_configs()} == {"notify"}
    rendered = cli("render", "demo-multinode").output.split("# node ")[1:]
    assert len(rendered) == 2 and all("Type=notify" in r for r in rendered)
    for node, text in zip(multi.node_configs(), rendered, strict=True):
        argv = supervise_argv(node)
        assert argv[-6:] == ["supervise", "--config", "demo-multinode", "--node-rank", str(node.node_rank), "--"]
        assert f"--node-rank {node.node_rank} -- " in text
    write(units, "mn", 'extends = "demo-multinode"\nreadiness = "journal"\n')
    assert all("Type=exec" in r for r in cli("render", "mn").output.split("# node ")[1:])  # journal, when asked


def test_a_fifo_or_a_link_to_dev_zero_in_the_config_folder_is_named_and_the_others_still_list(units: Path) -> None:
    """`list` read a FIFO named x.toml (blocked forever) and a link to /dev/zero (read until memory
    ran out). Only regular files are read, each at most 1 MiB: one line per such file, the rest listed."""
    import os
    import subprocess
    import sys

    os.mkfifo(units / "pipe.toml")
    (units / "zero.toml").symlink_to("/dev/zero")
    (units / "huge.toml").write_bytes(b"# " + b"x" * (1024 * 1024) + b"\n")
    r = subprocess.run([sys.executable, "-m", "svcdiag", "--units", str(units), "list"], capture_output=True,
                       text=True, timeout=30, check=False)  # a hang fails here, not at the suite's timeout
    assert r.returncode == 2 and "dflash-smoke" in r.stdout and "demo-smoke" in r.stdout, r
    errors = r.stderr.splitlines()
    assert sorted(errors) == sorted([
        f"svcdiag: error: {units}/huge.toml: {1024 * 1024 + 3} bytes, more than the 1048576 a file here may hold: not read",
        f"svcdiag: error: {units}/pipe.toml: a FIFO, not a regular file: not read",
        f"svcdiag: error: {units}/zero.toml: a device, not a regular file: not read"]), r.stderr
    with pytest.raises(ConfigError, match=r"pipe\.toml: a FIFO"):
        UnitsDir(units, "t").load("pipe")
