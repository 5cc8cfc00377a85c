"""`svcdiag import` and `svcdiag new`: what an operator already has, adopted as configs (issue #32 §2)."""

from __future__ import annotations

import json
import stat
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from svcdiag.config.service import UnitsDir
from svcdiag.sglang.flags import exec_argv
from svcdiag.systemd.render import quote_exec_word
from svcdiag.systemd.unit_file import exec_words, split_words

from .conftest import assert_one_line_error

HAND_WRITTEN = """\
[Unit]
Description=SGLang Qwen3.6-27B + DFlash smoke test
After=network-online.target

[Service]
Type=simple
User=sglang
Group=sglang
WorkingDirectory=/opt/sglang
Environment="CUDA_VISIBLE_DEVICES=0" "HF_TOKEN=hf_secret123"
Environment=SGLANG_ENABLE_TORCH_COMPILE=0
# a comment
ExecStart=/opt/sglang/.venv/bin/python -m sglang.launch_server \\
    --model-path /dev/shm/Qwen3.6-27B --tp 1 --port 30000 --host 0.0.0.0 \\
    --mem-fraction-static 0.75 --context-length 32768 --max-running-requests 4 \\
    --speculative-algorithm DFLASH --speculative-draft-model-path /dev/shm/Qwen3.6-27B-DFlash \\
    --max-mamba-cache-size 24 --attention-backend flashinfer --enable-metrics --trust-remote-code
Restart=on-failure
TimeoutStartSec=900

[Install]
WantedBy=multi-user.target
"""
ORIGINAL = exec_words(" ".join(ln.strip().rstrip("\\") for ln in HAND_WRITTEN.split("ExecStart=")[1]
                               .split("Restart=", maxsplit=1)[0].splitlines()))


@pytest.fixture
def secrets(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    d = tmp_path / "secrets"
    monkeypatch.setenv("SVCDIAG_SECRETS_DIR", str(d))
    monkeypatch.setenv("SVCDIAG_STATE_DIR", str(tmp_path / "state"))
    return d


def _pairs(argv: list[str]) -> list[tuple[str, ...]]:
    """A launch command as (flag, values…) groups, in any order: what SGLang's argparse sees."""
    i = argv.index("sglang.launch_server") + 1
    groups, cur = [], None
    for w in argv[i:]:
        if w.startswith("--"):
            cur = [w]
            groups.append(cur)
        else:
            assert cur is not None
            cur.append(w)
    alias = {"--tp": "--tp-size"}
    return sorted((alias.get(g[0], g[0]), *g[1:]) for g in groups)


def test_a_hand_written_unit_becomes_a_config_that_starts_the_same_sglang_command(cli, units: Path, tmp_path: Path,
                                                                                    secrets: Path) -> None:
    src = tmp_path / "sglang-dflash-smoke.service"
    src.write_text(HAND_WRITTEN)
    r = cli("import", str(src))
    assert r.exit_code == 0, r.output
    cfg = UnitsDir(units, "t").load("sglang-dflash-smoke")
    argv = exec_argv(cfg)
    assert argv[0] == ORIGINAL[0] == "/opt/sglang/.venv/bin/python"
    assert _pairs(argv) == _pairs(ORIGINAL)
    assert (cfg.user, cfg.group, cfg.working_directory, cfg.gpus) == ("sglang", "sglang", "/opt/sglang", (0,))
    assert dict(cfg.env) == {"SGLANG_ENABLE_TORCH_COMPILE": "0"}
    assert cfg.description == "SGLang Qwen3.6-27B + DFlash smoke test"
    # the secret: out of the unit, into a 0600 file [secrets] names, with a warning
    secret = secrets / "sglang-dflash-smoke.HF_TOKEN"
    assert dict(cfg.secrets) == {"HF_TOKEN": str(secret)}
    assert secret.read_text() == "hf_secret123\n" and stat.S_IMODE(secret.stat().st_mode) == 0o600
    assert "warning: HF_TOKEN was in Environment=" in r.output and "rotate it" in r.output
    assert "hf_secret123" not in (units / "sglang-dflash-smoke.toml").read_text()
    rendered = cli("render", "sglang-dflash-smoke").output
    assert "hf_secret123" not in rendered and "LoadCredential=HF_TOKEN:" in rendered
    # the diff of the old unit and the new one, and what was not carried over
    assert "-Type=simple" in r.output and "+Type=notify" in r.output and "+X-SvcdiagConfig=sglang-dflash-smoke" in r.output
    assert "TimeoutStartSec=900: svcdiag gives each phase" in r.output and "carried over (svcdiag renders its own, " \
        "docs/config.md#the-rendered-unit): Type=" in r.output
    assert cfg.restart == "on-failure"  # the operator's restart policy is config (issue 39)
    pinned = cli("check", "sglang-dflash-smoke", "--sglang-version", "0.5.23")  # no /opt/sglang here: a warning
    assert pinned.exit_code == 0 and "/opt/sglang/.venv/bin/python does not exist here" in pinned.output


def test_a_launch_script_is_imported_with_what_it_exports(cli, units: Path, tmp_path: Path, secrets: Path) -> None:
    script = tmp_path / "start-qwen.sh"
    script.write_text("#!/bin/bash\nset -e\nexport CUDA_VISIBLE_DEVICES=0,1\nexport NCCL_DEBUG=WARN\n"
                      "exec /opt/sglang/.venv/bin/python -m sglang.launch_server --model Qwen/Qwen3-8B \\\n"
                      "  --tensor-parallel-size 2 --port=30100 --cuda-graph-max-bs 64 --enable-torch-compile\n")
    r = cli("import", str(script), "--name", "qwen8b", "--json")
    assert r.exit_code == 0, r.output
    out = json.loads(r.output.splitlines()[-1])
    assert out["event"] == "config_written" and out["written"] and out["old_unit"] is None
    cfg = UnitsDir(units, "t").load("qwen8b")
    assert (cfg.model_path, cfg.tp_size, cfg.port, cfg.gpus, cfg.cuda_graph_max_bs) == ("Qwen/Qwen3-8B", 2, 30100, (0, 1), 64)
    assert cfg.extra_args == ("--enable-torch-compile",) and dict(cfg.env) == {"NCCL_DEBUG": "WARN"}


def test_a_pasted_line_on_stdin_needs_a_name(cli, units: Path, secrets: Path) -> None:
    line = "python3 -m sglang.launch_server --model-path /models/x --port 30200\n"
    assert_one_line_error(cli("import", "-", input=line), "--name")
    r = cli("import", "-", "--name", "x", "--dry-run", input=line)
    assert r.exit_code == 0 and not (units / "x.toml").exists(), r.output
    assert 'model_path = "/models/x"' in r.output and "would write" in r.output
    assert "'python3' is not an absolute path" in r.output


def test_a_script_that_runs_sglang_serve_is_imported(cli, units: Path, tmp_path: Path, secrets: Path) -> None:
    script = tmp_path / "serve.sh"
    script.write_text("#!/bin/sh\necho \"starting sglang's server\necho 'sglang serve, below'\n"
                      "exec /opt/sglang/.venv/bin/sglang serve --model-path /m --tp 2 --port=30300 --enable-metrics\n")
    r = cli("import", str(script), "--dry-run")
    assert r.exit_code == 0, r.output
    assert 'model_path = "/m"' in r.output and "tp_size = 2" in r.output and "port = 30300" in r.output
    assert 'extra_args = ["--enable-metrics"]' in r.output and 'python = "/opt/sglang/.venv/bin/python"' in r.output


def test_import_refusals_are_one_line(cli, units: Path, tmp_path: Path, secrets: Path) -> None:
    src = tmp_path / "dflash-smoke.service"
    src.write_text(HAND_WRITTEN)
    assert_one_line_error(cli("import", str(src)), "dflash-smoke.toml exists", "--force")
    mn = tmp_path / "mn.sh"
    mn.write_text("python -m sglang.launch_server --model-path /m --nnodes 2 --node-rank 0\n")
    assert_one_line_error(cli("import", str(mn)), "--nnodes", "[[nodes]]")
    other = tmp_path / "other.sh"
    other.write_text("vllm serve /m\n")
    assert_one_line_error(cli("import", str(other)), "no `python -m sglang.launch_server")
    assert_one_line_error(cli("import", "no-such-unit"), "no such file, and no unit of that name")
    bad = tmp_path / "bad.sh"
    bad.write_text("/usr/bin/python3 -m sglang.launch_server --model-path /m --port 99999\n")
    assert_one_line_error(cli("import", str(bad)), "bad.toml", "port")
    bad.write_text("/usr/bin/python3 -m sglang.launch_server --model-path /m --tp four\n")
    assert_one_line_error(cli("import", str(bad)), f"{bad}: --tp: must be an integer, got 'four'")


def test_a_unit_svcdiag_rendered_imports_back_to_its_config(cli, units: Path, tmp_path: Path, secrets: Path) -> None:
    (tmp_path / "again.service").write_text(cli("render", "dflash-tp4").output)
    r = cli("import", str(tmp_path / "again.service"))
    assert r.exit_code == 0, r.output
    a, b = UnitsDir(units, "t").load("dflash-tp4"), UnitsDir(units, "t").load("again")
    assert exec_argv(a) == exec_argv(b)


# ------------------------------------------------------------------ the parsers

WORD = st.text(st.characters(blacklist_categories=["Cs"], blacklist_characters="\x00\n\r"), max_size=12)


@settings(max_examples=200, deadline=None)
@given(st.lists(WORD, min_size=1, max_size=6))
def test_execstart_words_read_back_as_rendered(words: list[str]) -> None:
    assert split_words(" ".join(quote_exec_word(w) for w in words)) == words


# ------------------------------------------------------------------ new

def test_new_writes_a_starter_config_that_loads(cli, units: Path, secrets: Path) -> None:
    r = cli("new", "llama8b", "--model", "meta-llama/Llama-3.1-8B-Instruct")
    assert r.exit_code == 0, r.output
    text = (units / "llama8b.toml").read_text()
    assert "# mem_fraction_static" in text and "# [secrets]" in text and "docs/install.md" in text
    cfg = UnitsDir(units, "t").load("llama8b")
    ports = {c.port for c in UnitsDir(units, "t").load_all() if c.name != "llama8b"}
    assert cfg.model_path == "meta-llama/Llama-3.1-8B-Instruct" and cfg.port not in ports
    assert_one_line_error(cli("new", "llama8b", "--model", "x"), "llama8b.toml exists")


def test_new_extends_a_base(cli, units: Path, secrets: Path) -> None:
    r = cli("new", "smoke-b", "--model", "/models/other", "--extends", "dflash-smoke")
    assert r.exit_code == 0, r.output
    cfg = UnitsDir(units, "t").load("smoke-b")
    base = UnitsDir(units, "t").load("dflash-smoke")
    assert cfg.extends == "dflash-smoke" and cfg.model_path == "/models/other"
    assert (cfg.speculative, cfg.max_mamba_cache_size) == (base.speculative, base.max_mamba_cache_size)
    assert_one_line_error(cli("new", "x", "--model", "/m", "--extends", "nope"), "nope")


def test_new_dry_run_writes_nothing(cli, units: Path) -> None:
    r = cli("new", "dry", "--model", "/m", "--dry-run")
    assert r.exit_code == 0 and 'model_path = "/m"' in r.output and not (units / "dry.toml").exists()


def test_the_operators_restart_policy_is_kept_as_config(cli, units: Path, tmp_path: Path, secrets: Path) -> None:
    """Restart=always became Restart=no with a warning; now it is `restart` in the config, rendered back."""
    src = tmp_path / "always.service"
    src.write_text(HAND_WRITTEN.replace("Restart=on-failure", "Restart=always\nRestartSec=1min 30s"))
    r = cli("import", str(src))
    assert r.exit_code == 0, r.output
    cfg = UnitsDir(units, "t").load("always")
    assert (cfg.restart, cfg.restart_sec) == ("always", 90.0)
    unit = cli("render", "always").output
    assert "\nRestart=always\n" in unit and "\nRestartSec=90\n" in unit and "Restart=no" not in unit
    assert "Restart=" not in next(ln for ln in r.output.splitlines() if "not carried over" in ln)
    assert "-Restart=always" not in r.output  # the diff: kept, not lost
    default = cli("render", "dflash-smoke").output  # a config that sets none keeps Restart=no (and its hash)
    assert "\nRestart=no\n" in default and "RestartSec" not in default
    (units / "bad.toml").write_text('extends = "dflash-smoke"\nrestart = "sometimes"\n')
    assert_one_line_error(cli("render", "bad"), "bad.toml: restart", "on-failure")


def test_a_scripts_pipe_to_tee_is_not_extra_args(cli, units: Path, tmp_path: Path, secrets: Path) -> None:
    script = tmp_path / "run.sh"
    script.write_text("#!/bin/sh\nexec /opt/sglang/.venv/bin/python -m sglang.launch_server --model-path /m "
                      "--port 30400 --enable-metrics 2>&1 | tee /var/log/sglang.log\n")
    r = cli("import", str(script))
    assert r.exit_code == 0, r.output
    cfg = UnitsDir(units, "t").load("run")
    assert cfg.extra_args == ("--enable-metrics",) and cfg.port == 30400
    note = next(ln for ln in r.output.splitlines() if "tee" in ln)
    assert "`2>&1 | tee /var/log/sglang.log`" in note and "journald" in note and "svcdiag logs run" in note
    for tail in ("> /var/log/x.log 2>&1", ">>/var/log/x.log", "&", "; echo done", "|& tee x"):
        line = f"python3 -m sglang.launch_server --model-path /m --port 30500 {tail}\n"
        out = cli("import", "-", "--name", "t", "--dry-run", input=line)
        assert out.exit_code == 0 and "extra_args" not in out.output, (tail, out.output)
    quoted = 'python3 -m sglang.launch_server --model-path /m --stop "<|im_end|>"\n'  # a quoted | is a value
    out = cli("import", "-", "--name", "q", "--dry-run", input=quoted)
    assert 'extra_args = ["--stop", "<|im_end|>"]' in out.output, out.output


def test_import_dry_run_works_before_setup_made_the_units_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from .conftest import Cli

    monkeypatch.chdir(tmp_path)  # no ./units here, and /etc/svcdiag/units is not made on this machine
    monkeypatch.delenv("SVCDIAG_UNITS", raising=False)
    monkeypatch.setenv("SVCDIAG_STATE_DIR", str(tmp_path / "state"))
    from svcdiag.config.service import DEFAULT_UNITS_DIRS

    if any(Path(d).is_dir() for d in DEFAULT_UNITS_DIRS):
        pytest.skip("this machine has a units folder")
    line = "/opt/sglang/.venv/bin/python -m sglang.launch_server --model-path /m --port 30600\n"
    r = Cli(None)("import", "-", "--name", "first", "--dry-run", input=line)
    assert r.exit_code == 0, r.output
    assert 'model_path = "/m"' in r.output and "would write /etc/svcdiag/units/first.toml" in r.output
    assert not Path("/etc/svcdiag/units").exists()
    assert_one_line_error(Cli(None)("import", "-", "--name", "first", input=line), "no units folder")


def test_new_extends_a_base_that_leaves_a_key_unset_and_a_taken_name_says_what_to_do(cli, units: Path,
                                                                                      secrets: Path) -> None:
    (units / "a.toml").write_text('model_path = "/models/a"\nport = 31000\n')  # no mem_fraction_static etc.
    r = cli("new", "b", "--model", "/m", "--extends", "a")
    assert r.exit_code == 0, r.output
    text = (units / "b.toml").read_text()
    assert "None" not in text and "# mem_fraction_static = …" in text and "unset in a: SGLang's default" in text
    assert UnitsDir(units, "t").load("b").model_path == "/m"
    taken = cli("new", "a", "--model", "/m")
    assert_one_line_error(taken, "a.toml exists", "svcdiag new OTHER-NAME --model /m", "--force")
    assert "--name" not in taken.output
