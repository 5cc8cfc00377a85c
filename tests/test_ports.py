"""A server port inside the kernel's ephemeral range: `svcdiag check` warns (any outgoing connection may
hold it when the server binds), unless the port is reserved; nothing is refused."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from svcdiag.ops.host import ports
from svcdiag.ops.host.ports import _ports, ephemeral_clash, ephemeral_range


def proc(tmp_path: Path, span: str = "32768\t60999\n", reserved: str | None = "\n") -> Path:
    d = tmp_path / "proc"
    d.mkdir(exist_ok=True)
    (d / "ip_local_port_range").write_text(span)
    if reserved is not None:
        (d / "ip_local_reserved_ports").write_text(reserved)
    return d


def test_a_port_in_the_range_is_warned_of_naming_the_range_and_the_way_out(tmp_path: Path) -> None:
    said = ephemeral_clash(33400, proc(tmp_path))
    assert said is not None
    assert "port 33400" in said and "32768-60999" in said and "below 32768" in said
    assert "net.ipv4.ip_local_reserved_ports" in said


@pytest.mark.parametrize("port", [30000, 32767, 61000])
def test_a_port_outside_the_range_is_not(tmp_path: Path, port: int) -> None:
    assert ephemeral_clash(port, proc(tmp_path)) is None
    assert ephemeral_clash(32768, proc(tmp_path)) and ephemeral_clash(60999, proc(tmp_path))  # both ends are in


def test_a_reserved_port_is_not(tmp_path: Path) -> None:
    d = proc(tmp_path, reserved="8000,33300-33500\n")
    assert ephemeral_clash(33400, d) is None and ephemeral_clash(33501, d) is not None


def test_no_proc_no_warning(tmp_path: Path) -> None:
    assert ephemeral_range(tmp_path / "none") is None and ephemeral_clash(40000, tmp_path / "none") is None
    assert ephemeral_range(proc(tmp_path, span="garbage")) is None
    assert ephemeral_clash(33400, proc(tmp_path, reserved=None)) is not None  # no reserved file: none reserved


@given(st.lists(st.tuples(st.integers(1, 65535), st.integers(0, 50)), max_size=6))
def test_reserved_ports_parse_as_the_kernel_writes_them(spans: list[tuple[int, int]]) -> None:
    text = ",".join(f"{lo}-{lo + n}" if n else str(lo) for lo, n in spans)
    assert _ports(text + "\n") == {p for lo, n in spans for p in range(lo, lo + n + 1)}


def test_check_warns_and_passes(cli, units: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ports, "PROC", proc(tmp_path))
    (units / "eph.toml").write_text('extends = "demo-smoke"\nport = 33400\n')
    r = cli("check", "eph", "--json")
    assert r.exit_code == 0, r.output
    out = json.loads(next(ln for ln in r.output.splitlines() if ln.startswith("{")))
    assert out["ok"] and any("ephemeral port range 32768-60999" in w for w in out["warnings"])
    monkeypatch.setattr(ports, "PROC", proc(tmp_path, reserved="33400"))
    out = json.loads(next(ln for ln in cli("check", "eph", "--json").output.splitlines() if ln.startswith("{")))
    assert out["warnings"] == []
