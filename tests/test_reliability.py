"""Issue #30 without the rig: the parts of the fault matrix that pure functions and the CLI decide
(docs/reliability.md; the rig's rows are in tests/rig/test_rig_reliability.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from svcdiag.config.service import UnitsDir
from svcdiag.judge.diagnosis import diagnose
from svcdiag.judge.pipeline import Judge
from svcdiag.systemd.notify import start_limit_s

from .conftest import UNITS


def _hung(cfg=None) -> Judge:
    j = Judge(cfg, unit="n.service", start_ts=1000.0)
    j.line("[2026-12-03 10:00:00] Load weight begin. avail mem=94.50 GB", 1000.5)
    j.line("Loading safetensors checkpoint shards:  25% Completed | 3/12", 1001.0)
    return j


def test_a_server_stopped_at_its_deadline_timed_out_it_did_not_crash() -> None:
    # svcdiag supervise stops a notify start at its phase's deadline and exits 3: the journal then says
    # the main process exited, past the deadline. That death is the consequence; the start timed out.
    cfg = UnitsDir(UNITS, "t").load("demo-hang")  # loading_weights: 8 s
    j = _hung(cfg)
    j.systemd_line("Main process exited, code=exited, status=3/NOTIMPLEMENTED", 1000.5 + 8.1)
    v = j.verdict
    assert v is not None and (v.verdict, v.phase) == ("timed_out", "loading_weights")
    d = diagnose(v, cfg)
    assert d is not None and "left running" not in " ".join(d["explanation"])
    assert "svcdiag supervise stopped the server" in d["explanation"][0]
    # ...while one that died before its deadline crashed
    early = _hung(cfg)
    early.systemd_line("Main process exited, code=exited, status=1/FAILURE", 1000.5 + 3.0)
    assert early.verdict is not None and early.verdict.verdict == "failed"


def test_systemds_timeout_blames_the_real_limit_and_a_reload_not_a_default() -> None:
    j = _hung()
    j.systemd_line("n.service: start operation timed out. Terminating.", 1066.0)
    v = j.verdict
    assert v is not None and v.verdict == "timed_out"
    said = " ".join(diagnose(v)["explanation"])
    assert "90 s unless set" not in said  # the unit said 60: svcdiag cannot know, systemctl show can
    assert "systemctl show -p TimeoutStartUSec n.service" in said and "daemon-reload" in said
    assert "while none of its starts runs" in said  # never "install now", which would kill a running start


def test_a_notify_units_own_limit_is_the_whole_starts() -> None:
    t = dict(UnitsDir(UNITS, "t").load("dflash-smoke").timeout)
    every_phase = sum(v for k, v in t.items() if k not in ("jit_compile", "http_check"))
    assert start_limit_s(t) > every_phase + t["http_check"] + t["jit_compile"]


def test_a_history_store_that_cannot_be_used_is_one_line_never_a_traceback(tmp_path, cli) -> None:
    from svcdiag.ops.host.history import load_usual, record_start

    state = tmp_path / "state"
    (state / "history.sqlite3").mkdir(parents=True)  # as unusable as root's store is to a user (root reads all)
    cfg = UnitsDir(UNITS, "t").load("demo-smoke")
    said: list[str] = []
    u = load_usual(cfg, None, str(state), warn=said.append)
    assert u.healthy == 0 and len(said) == 1 and said[0].startswith(f"history: cannot use {state}/history.sqlite3 (")
    v = _hung(cfg).finish()
    row, why = record_start(cfg, v, "up", state=str(state))
    assert row is None and why is not None and "\n" not in why and "SVCDIAG_STATE_DIR" in why
    r = cli("history", "--state-dir", str(state))
    assert r.exit_code == 2 and r.output.count("\n") == 1 and "history: cannot use" in r.output, r.output


def test_one_name_rule_for_configs_and_the_polkit_rule() -> None:
    import re

    from svcdiag.config.service import UNIT_NAME_RE

    rules = (UNITS.parent / "contrib" / "polkit" / "50-svcdiag.rules").read_text()
    js = re.search(r"if \(!/(.+?)\\\.service\$/\.test\(unit\)\)", rules)
    assert js is not None, "the polkit rule's name test is not where this test looks"
    assert js.group(1) + "$" == UNIT_NAME_RE.pattern  # the same rule, character for character
    for bad in ("-rf", "back\\slash", ".hidden", "a b", "x@y", ""):
        assert not UNIT_NAME_RE.match(bad), bad


@pytest.mark.parametrize("name", ["-rf", "back\\slash", "a b", "n" * 300])
def test_a_name_no_unit_can_have_is_one_line_in_every_command(cli, units, name: str) -> None:
    (units / f"{name[:200]}.toml").write_text('extends = "demo-smoke"\n') if len(name) < 200 else None
    for args in (("render", "--", name), ("check", "--", name), ("diff", "--", name, "demo-smoke"),
                 ("preflight", "--", name)):
        r = cli(*args)
        assert r.exit_code == 2 and r.output.count("\n") == 1, (args, r.output)
        assert ("Traceback" not in r.output and "is not a valid systemd unit name" in r.output) \
            or "characters long" in r.output, (args, r.output)


def test_a_key_with_a_newline_is_escaped_in_its_one_line_error(cli, units) -> None:
    (units / "k.toml").write_text('extends = "demo-smoke"\n[env]\n"A\\nB" = "1"\n')
    r = cli("render", "k")
    assert r.exit_code == 2 and r.output.count("\n") == 1 and "A\\nB" in r.output, r.output


def test_one_bad_config_hides_no_other_from_list(cli, units) -> None:
    (units / "a b.toml").write_text('extends = "demo-smoke"\n')
    (units / "typo.toml").write_text('extends = "demo-smoke"\nprot = 1\n')
    r = cli("list", "--json")
    assert r.exit_code == 2
    listing = json.loads(r.output.splitlines()[0])
    assert {"demo-smoke", "dflash-smoke"} <= {c["name"] for c in listing["configs"]}
    assert len(listing["errors"]) == 2 and any("a b.toml" in e for e in listing["errors"])
    errors = [ln for ln in r.output.splitlines() if ln.startswith("svcdiag: error: ")]
    assert len(errors) == 2 and any("typo.toml: prot: unknown key" in e for e in errors), r.output


def _tar_gz(path: Path, members: list[tuple[str, bytes]]) -> Path:
    import io
    import tarfile

    with tarfile.open(path, "w:gz") as tar:
        for name, data in members:
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return path


def test_a_decompression_bomb_is_refused_in_one_line_and_fast(tmp_path, cli, monkeypatch) -> None:
    # refused before the junk is unpacked (no timing asserted: tests/test_inputs_bounded.py measures memory)
    from svcdiag.ops.offline import bundle_read

    bomb = _tar_gz(tmp_path / "bomb.tar.gz", [("b/junk", bytes(80 * 1024 * 1024)), ("b/journal.export", b"x\n")])
    assert bomb.stat().st_size < 200_000  # 80 MB of zeros, packed small
    r = cli("replay", str(bomb))
    assert r.exit_code == 2 and r.output.count("\n") == 1 and "refused" in r.output, r.output
    assert "more than 67,108,864 bytes unpacked before its journal.export" in r.output
    monkeypatch.setattr(bundle_read, "BUNDLE_JOURNAL_MAX", 1000)  # a slice larger than any start's journal
    big = _tar_gz(tmp_path / "big.tar.gz", [("b/journal.export", b"MESSAGE=x\n\n" * 200)])
    r = cli("replay", str(big))
    assert r.exit_code == 2 and r.output.count("\n") == 1 and "would unpack to 2,200 bytes" in r.output, r.output


def test_json_nested_100000_deep_is_one_line(tmp_path, cli) -> None:
    deep = tmp_path / "deep.json"
    deep.write_text('{"MESSAGE": ' + "[" * 100_000 + "]" * 100_000 + "}\n")
    r = cli("replay", str(deep))
    assert r.exit_code == 2 and r.output.count("\n") == 1 and "nested too deep" in r.output, r.output
