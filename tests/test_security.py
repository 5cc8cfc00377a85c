"""#20 without systemd: [secrets] never reach a unit, secret-looking [env] is refused, the strict
sandbox is rendered (and `off` is off), state is written 0600/0700 (docs/security.md)."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from svcdiag.config.secrets import environment_file_text, value_text
from svcdiag.config.service import UnitsDir
from svcdiag.errors import ConfigError
from svcdiag.files import write_atomic
from svcdiag.ops.serve.secrets import credentials_environment
from svcdiag.systemd.render import render_unit
from svcdiag.systemd.secrets import write_environment_file

from .conftest import assert_one_line_error


def _cfg(units: Path, name: str, body: str):
    (units / f"{name}.toml").write_text(f'extends = "dflash-smoke"\n{body}')
    return UnitsDir(units, "test").load(name)


def _secret(tmp_path: Path, value: str | bytes, mode: int = 0o600) -> Path:
    p = tmp_path / f"s{len(list(tmp_path.iterdir()))}"
    p.write_bytes(value if isinstance(value, bytes) else value.encode())
    p.chmod(mode)
    return p


# ------------------------------------------------------------------------- [env] that looks secret


@pytest.mark.parametrize("key", ["HF_TOKEN", "OPENAI_API_KEY", "hf_token", "DB_PASSWORD", "AWS_SECRET_ACCESS_KEY",
                                 "GOOGLE_APPLICATION_CREDENTIALS", "WANDB_KEY"])
def test_secret_looking_env_is_refused_naming_the_move_and_never_the_value(cli, units: Path, key: str) -> None:
    (units / "leak.toml").write_text(f'extends = "demo-smoke"\n[env]\n{key} = "hf_leakvalue"\n')
    r = cli("render", "leak")
    assert_one_line_error(r, f"leak.toml: env.{key}", "move it to [secrets]")
    assert "hf_leakvalue" not in r.output


@given(st.from_regex(r"[A-Z][A-Z0-9_]{0,20}", fullmatch=True))
def test_only_secret_looking_env_names_are_refused(key: str) -> None:
    from svcdiag.config.service import check_raw

    secretish = any(w in key.upper() for w in ("TOKEN", "KEY", "SECRET", "PASSWORD", "CREDENTIAL"))
    try:
        check_raw(Path("/v/x.toml"), {"env": {key: "v"}})
        refused = False
    except ConfigError as e:
        refused = "[secrets]" in str(e)
    assert refused == secretish


@pytest.mark.parametrize("ref,needle", [
    ("hf_abc123", "absolute path"), ("relative/file", "absolute path"), ("credstore:../x", "credstore name"),
    ("credstore:", "credstore name"),
])
def test_bad_secret_reference_is_a_one_line_error(cli, units: Path, ref: str, needle: str) -> None:
    (units / "bad.toml").write_text(f'extends = "demo-smoke"\n[secrets]\nHF_TOKEN = "{ref}"\n')
    assert_one_line_error(cli("render", "bad"), "bad.toml: secrets.HF_TOKEN", needle)


def test_secret_file_missing_or_readable_by_others_is_refused_at_install(cli, units: Path, tmp_path: Path,
                                                                          monkeypatch) -> None:
    monkeypatch.setenv("SVCDIAG_SECRETS_DIR", str(tmp_path / "secrets"))
    loose = _secret(tmp_path, "hf_x", 0o640)
    for name, path, needle in (("gone", tmp_path / "nope", "no such file"), ("loose", loose, "chmod 600")):
        (units / f"{name}.toml").write_text(f'extends = "demo-smoke"\n[secrets]\nHF_TOKEN = "{path}"\n')
        r = cli("install", name, "--unit-dir", str(tmp_path / "units"))
        assert_one_line_error(r, f"{name}.toml: secrets.HF_TOKEN", str(path), needle)
        assert not (tmp_path / "units" / f"{name}.service").exists()


# ------------------------------------------------------------------------- rendering


def test_secret_renders_as_a_credential_and_journal_mode_gets_an_environment_file(units: Path, tmp_path: Path,
                                                                                   monkeypatch) -> None:
    monkeypatch.setenv("SVCDIAG_SECRETS_DIR", "/etc/svcdiag/secrets")
    tok = _secret(tmp_path, "hf_value_never_rendered\n")
    cfg = _cfg(units, "sec", f'readiness = "journal"\n[secrets]\nHF_TOKEN = "{tok}"\nOTHER = "credstore:other"\n')
    text = render_unit(cfg, "0.5.23")
    assert f"LoadCredential=HF_TOKEN:{tok}\n" in text and "LoadCredential=OTHER:other\n" in text
    assert "EnvironmentFile=/etc/svcdiag/secrets/sec.env\n" in text
    assert "hf_value_never_rendered" not in text
    notify = _cfg(units, "secn", f'readiness = "notify"\n[secrets]\nHF_TOKEN = "{tok}"\n')
    ntext = render_unit(notify, "0.5.23")
    assert "LoadCredential=HF_TOKEN:" in ntext and "EnvironmentFile=" not in ntext  # the supervisor exports it


def test_systemd_creds_blob_renders_load_credential_encrypted(units: Path, tmp_path: Path) -> None:
    import base64

    blob = base64.b64encode(bytes.fromhex("5a1c6a86df9d4096b1d5a65e0862f19a") + os.urandom(64))
    cfg = _cfg(units, "enc", f'[secrets]\nHF_TOKEN = "{_secret(tmp_path, blob)}"\n')
    assert "LoadCredentialEncrypted=HF_TOKEN:" in render_unit(cfg, "0.5.23")


_nasty = st.text(st.characters(blacklist_categories=("Cs",)), min_size=1, max_size=40)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])  # file I/O per example: slow on a loaded machine
@given(name=st.from_regex(r"[A-Za-z_][A-Za-z0-9_]{0,15}", fullmatch=True),
       value=st.one_of(_nasty, st.sampled_from(['"', "'", "%h", "%%", "$HOME", "${X}", "a\nb", "\\", "`id`", "\n"])))
def test_no_secret_value_reaches_a_unit_file(units: Path, tmp_path: Path, name: str, value: str) -> None:
    assume(name not in ("PYTHONUNBUFFERED", "CUDA_VISIBLE_DEVICES", "SGLANG_LOG_MS"))
    marked = f"zz9{value}9zz"
    tok = tmp_path / "tok"
    tok.write_text(marked)
    tok.chmod(0o600)
    path = tmp_path / "u" / "h.toml"
    path.parent.mkdir(exist_ok=True)
    path.write_text(f'model_path = "/m"\n[secrets]\n{name} = {json.dumps(str(tok))}\n')
    cfg = UnitsDir(path.parent, "t").load("h")
    text = render_unit(cfg, "0.5.23")
    assert "zz9" not in text
    # and the EnvironmentFile systemd reads gives it back exactly (when it can be an env value at all)
    try:
        env_value = value_text(path, name, marked.encode())
    except ConfigError:
        return
    assert _parse_env_file(environment_file_text({name: env_value})) == {name: env_value}


def _parse_env_file(text: str) -> dict[str, str]:
    """systemd's parse_env_file() for what environment_file_text writes: KEY="…" where a
    backslash escapes one of " \\ ` $, and a newline inside the quotes is kept."""
    out: dict[str, str] = {}
    i = 0
    while i < len(text):
        if text[i] == "#":
            i = text.index("\n", i) + 1
            continue
        eq = text.index("=", i)
        key = text[i:eq]
        assert text[eq + 1] == '"'
        j, val = eq + 2, []
        while text[j] != '"':
            if text[j] == "\\":
                assert text[j + 1] in '"\\`$', "an escape systemd would keep the backslash of"
                j += 1
            val.append(text[j])
            j += 1
        out[key] = "".join(val)
        assert text[j + 1] == "\n"
        i = j + 2
    return out


def test_strict_hardening_by_default_and_off_is_off(units: Path) -> None:
    strict = render_unit(UnitsDir(units, "t").load("dflash-smoke"), "0.5.23")
    for line in ("NoNewPrivileges=yes", "ProtectSystem=strict", "ProtectHome=read-only", "PrivateTmp=yes",
                 "CapabilityBoundingSet=\n", "UMask=0077", "DevicePolicy=closed", "DeviceAllow=char-nvidia-frontend rw",
                 "DeviceAllow=char-nvidia-uvm rw", "RestrictAddressFamilies=AF_UNIX AF_INET AF_INET6 AF_NETLINK",
                 "ReadWritePaths=-/dev/shm", "ReadWritePaths=-/var/lib/sglang", "ReadWritePaths=-%h/.cache"):
        assert line in strict, line
    for breaks_cuda in ("MemoryDenyWriteExecute", "PrivateDevices", "PrivateNetwork", "char-kfd", "infiniband"):
        assert breaks_cuda not in strict
    off = _cfg(units, "off", 'hardening = "off"\n')
    assert "ProtectSystem" not in render_unit(off, "0.5.23") and "DeviceAllow" not in render_unit(off, "0.5.23")
    more = _cfg(units, "more", 'devices = ["rocm", "infiniband", "/dev/fuse"]\nread_write_paths = ["/data/out"]\n'
                "[env]\nHF_HOME = \"/data/hf\"\n")
    text = render_unit(more, "0.5.23")
    for line in ("DeviceAllow=/dev/kfd rw", "DeviceAllow=char-drm rw", "DeviceAllow=char-infiniband_verbs rw",
                 "DeviceAllow=/dev/fuse rw", "ReadWritePaths=-/data/out", "ReadWritePaths=-/data/hf"):
        assert line in text, line
    root_wd = render_unit(UnitsDir(units, "t").load("demo-smoke"), "0.5.23")
    assert "ReadWritePaths=-/\n" not in root_wd  # working_directory "/" would undo ProtectSystem=strict


@pytest.mark.parametrize("body,needle", [
    ('hardening = "lax"\n', "must be one of 'strict', 'off'"),
    ('devices = ["amd"]\n', "'nvidia', 'rocm', 'infiniband' or a /dev/ path"),
    ('read_write_paths = ["rel/dir"]\n', "absolute path"),
    ('read_write_paths = ["/a b"]\n', "without blanks"),
])
def test_bad_hardening_settings_are_one_line_errors(cli, units: Path, body: str, needle: str) -> None:
    (units / "h.toml").write_text(f'extends = "demo-smoke"\n{body}')
    assert_one_line_error(cli("render", "h"), "h.toml: ", needle)


def test_hash_of_configs_that_set_none_of_it_is_unchanged(units: Path) -> None:
    cfg = UnitsDir(units, "t").load("dflash-smoke")
    assert not any(k.startswith(("secrets", "hardening", "devices", "read_write_paths")) for k in cfg.flat())


# ------------------------------------------------------------------------- values: env file, credentials


def test_environment_file_is_root_only_and_rewritten_when_the_secret_changes(units: Path, tmp_path: Path,
                                                                             monkeypatch) -> None:
    monkeypatch.setenv("SVCDIAG_SECRETS_DIR", str(tmp_path / "secrets"))
    tok = _secret(tmp_path, "hf_one\n")
    cfg = _cfg(units, "envf", f'readiness = "journal"\n[secrets]\nHF_TOKEN = "{tok}"\n')
    path = write_environment_file(cfg)
    assert path is not None and path.read_text().endswith('HF_TOKEN="hf_one"\n')
    assert stat.S_IMODE(path.stat().st_mode) == 0o600 and stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    tok.write_text("hf_two\n")
    write_environment_file(cfg)
    assert 'HF_TOKEN="hf_two"' in path.read_text() and "hf_one" not in path.read_text()


def test_credentials_environment_reads_the_credentials_directory(units: Path, tmp_path: Path) -> None:
    cfg = _cfg(units, "cred", '[secrets]\nHF_TOKEN = "/etc/credstore/hf"\nDB_PASSWORD = "credstore:db"\n')
    creds = tmp_path / "creds"
    creds.mkdir()
    (creds / "HF_TOKEN").write_text("hf_abc\n")
    (creds / "DB_PASSWORD").write_bytes(b"p$w\"d")
    assert credentials_environment(cfg, creds) == {"HF_TOKEN": "hf_abc", "DB_PASSWORD": 'p$w"d'}
    (creds / "DB_PASSWORD").unlink()
    with pytest.raises(ConfigError, match="secrets.DB_PASSWORD"):
        credentials_environment(cfg, creds)


def test_a_secret_that_cannot_be_an_environment_value_is_refused_by_name() -> None:
    for bad in (b"\xff\xfe", b"a\x00b", b"a\x1bb"):
        with pytest.raises(ConfigError, match="secrets.X") as e:
            value_text("/v/x.toml", "X", bad)
        assert bad.decode(errors="replace") not in str(e.value)


# ------------------------------------------------------------------------- state files


def test_state_is_written_private_and_the_textfile_world_readable(tmp_path: Path) -> None:
    from svcdiag.ops.host.preflight import Calibration
    from svcdiag.output.schema import ReadinessEvent
    from svcdiag.output.textfile import Textfile

    write_atomic(tmp_path / "state" / "x.json", "{}")
    assert stat.S_IMODE((tmp_path / "state" / "x.json").stat().st_mode) == 0o600
    assert stat.S_IMODE((tmp_path / "state").stat().st_mode) == 0o700
    Textfile(tmp_path / "s.prom").publish(ReadinessEvent(event="verdict", ts=1, unit="u.service", config="u",
                                                         invocation="a" * 32, phase="ready", verdict="healthy"))
    assert stat.S_IMODE((tmp_path / "s.prom").stat().st_mode) == 0o644  # node_exporter's to read

    from types import SimpleNamespace as NS

    from svcdiag.sglang.figures import Figures

    Calibration(tmp_path / "cal").record(NS(name="c", config_hash="h"), NS(kv_tokens=100, verdict="ok"),  # type: ignore[arg-type]
                                         NS(figures=Figures(kv_tokens=100), invocation="i", verdict="healthy"))
    f = tmp_path / "cal" / "c" / Calibration.FILE
    assert stat.S_IMODE(f.stat().st_mode) == 0o600 and stat.S_IMODE(f.parent.stat().st_mode) == 0o700


def test_what_lives_under_tmp_is_bound_back_into_the_units_private_tmp(units: Path) -> None:
    """PrivateTmp= hides the host's /tmp: a model (or interpreter) there must be bound back in,
    by its top folder, or SGLang finds nothing and the start fails; nothing else is bound."""
    plain = render_unit(_cfg(units, "plain", 'model_path = "/models/x"\n'))
    assert "PrivateTmp=yes" in plain and "BindPaths=-/tmp/scratch" not in plain
    text = render_unit(_cfg(units, "intmp", 'model_path = "/tmp/scratch/models/x"\n'))
    assert "PrivateTmp=yes" in text and "BindPaths=-/tmp/scratch" in text.splitlines()
    off = render_unit(_cfg(units, "off", 'model_path = "/tmp/scratch/x"\nhardening = "off"\n'))
    assert "BindPaths" not in off
