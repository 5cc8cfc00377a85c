"""Progress within a phase on the private rig: the live line's bar moving through the
stand-in's shard loading, and `svcdiag top` showing every demo unit while one starts, one
has failed and one is healthy."""

from __future__ import annotations

import json
import re
import subprocess
import time
from pathlib import Path

import pytest

from .helpers import config, json_lines, sv, unit_name, verdict_of, wait_for_phase

pytestmark = pytest.mark.rig

_CSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b[()][A-Z0-9]|\x1b[=>]")


def test_the_live_line_shows_a_bar_moving_through_the_shard_load(rig, units: Path) -> None:
    name = config(units, unit_name("bar"), "demo-slow", sim_time_scale=0.05)  # 12 shards in ~5 s
    p = rig.run(f"python tests/rig/pty_run.py svcdiag --units {units} up {name} --wait-ready", check=False, timeout=90)
    screen = p.stdout.decode()
    assert p.returncode == 0, screen
    lines = [_CSI.sub("", s) for s in screen.split("\x1b[2K")]
    bars = [s for s in lines if f"{name}  phase loading_weights  [" in s]
    seen = [int(m.group(1)) for s in bars if (m := re.search(r"\] \d+% \((\d+)/12 shards\)", s))]
    assert len(set(seen)) >= 4 and seen == sorted(seen), seen  # it moves, forwards
    assert any("█" in s for s in bars) and any(re.search(r"ETA \d+ s", s) for s in bars)
    assert re.search(r"\d+\.\d s  \d+ s left on th", bars[-1])  # the bar joins the line (cut at 80 columns)
    assert "% (" not in screen.rsplit("HEALTHY", 1)[-1]  # gone with the verdict
    # --json: no progress unless asked; --progress: records, ≤ 4 a second
    plain = json_lines(sv(rig, units, "up", name, "--wait-ready", "--restart", "--json"))
    assert not [r for r in plain if r["event"] == "progress"]
    asked = json_lines(sv(rig, units, "up", name, "--wait-ready", "--restart", "--json", "--progress"))
    prog = [r for r in asked if r["event"] == "progress"]
    shards = [r["figures"] for r in prog if r["phase"] == "loading_weights"]
    assert shards and (shards[-1]["done"], shards[-1]["total"]) == (12, 12)
    assert len(shards) <= 4 * 6  # ≤ 4 a second over a ~5 s load
    sv(rig, units, "down", name)


def board_rows(screen: str, names: list[str]) -> dict[str, str]:
    """The last drawn line of each unit on the board, without colour or cursor moves."""
    text = _CSI.sub(lambda m: "" if m.group().endswith("m") else "\n", screen)
    rows: dict[str, str] = {}
    for line in text.splitlines():
        for n in names:
            if line.strip().startswith(n + " ") or line.strip() == n:
                rows[n] = line
    return rows


def test_top_shows_every_unit_starting_failed_and_healthy(rig, units: Path) -> None:
    ok = config(units, unit_name("top-ok"), "demo-smoke")
    bad = config(units, unit_name("top-bad"), "demo-segfault")
    slow = config(units, unit_name("top-slow"), "demo-slow", sim_time_scale=0.3)  # ~30 s of weight load
    assert verdict_of(sv(rig, units, "up", ok, "--wait-ready", "--json"))["verdict"] == "healthy"
    assert sv(rig, units, "up", bad, "--wait-ready", "--json").returncode == 1
    waiting = rig.popen(["svcdiag", "--units", str(units), "up", slow, "--wait-ready", "--json"],
                        stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    wait_for_phase(waiting, slow, "loading_weights", timeout=30)

    # piped, --json: one object per config in the folder, failing first; asked until a shard is in (one each 2.5 s)
    deadline = time.monotonic() + 20
    while True:
        snap = json_lines(sv(rig, units, "top", "--json"))
        by = {r["name"]: r for r in snap}
        if (by.get(slow, {}).get("progress") or {}).get("done", 0) >= 1 or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    assert set(by) == {p.stem for p in units.glob("*.toml")}
    assert (by[ok]["state"], by[bad]["state"], by[slow]["state"]) == ("healthy", "failed", "starting")
    assert by[bad]["cause"] == "killed_by_signal" and by[slow]["phase"] == "loading_weights"
    assert by[slow]["progress"]["what"] == "shards" and 0 < by[slow]["progress"]["done"] < 12
    assert by[ok]["kv_tokens"] > 0 and by[ok]["max_running_requests"] >= 1
    assert by[ok]["usual_s"] is not None  # its own healthy start is the usual time
    states = [r["state"] for r in snap]
    assert states.index("failed") < states.index("starting") < states.index("healthy")
    # piped, no --json: the same, as a table
    table = sv(rig, units, "top").stdout.decode()
    assert re.search(rf"{bad}\s+failed\s+loading_weights", table) and re.search(rf"{ok}\s+healthy\s+ready", table)
    assert "\x1b[" not in table

    # on a terminal: the full-screen board, `q` quits with 0 (typed once the board shows the shard count: after a
    # fixed 4 s, a loaded machine could have `top` still starting, or drawing its first board without it)
    p = rig.run(f"python tests/rig/pty_keys.py --until shards --after 60 --keys q -- svcdiag --units {units} top",
                check=False, timeout=120)
    screen = p.stdout.decode()
    assert p.returncode == 0, screen[-2000:]
    rows = board_rows(screen, [ok, bad, slow])
    assert "healthy" in rows[ok] and "ready" in rows[ok], rows
    assert "failed" in rows[bad] and "killed_by_signal" in rows[bad], rows
    assert "starting" in rows[slow] and "loading_weights" in rows[slow] and "shards" in rows[slow], rows
    assert "\x1b[?1049h" in screen and "\x1b[?1049l" in screen  # the alternate screen, left on exit
    assert re.search(r"\x1b\[[0-9;]*3[12]m", screen)  # coloured by state ...
    nc = rig.run(f"NO_COLOR=1 python tests/rig/pty_keys.py --until {ok} --after 60 --keys q -- svcdiag --units {units} top",
                 check=False, timeout=120)
    assert nc.returncode == 0 and not re.search(r"\x1b\[[0-9;]*3[0-7]m", nc.stdout.decode())  # ... unless NO_COLOR
    for n in (ok, bad, slow):
        sv(rig, units, "down", n)
    waiting.communicate(timeout=30)


def test_top_json_is_one_object_per_unit_even_with_nothing_installed(rig, units: Path) -> None:
    out = sv(rig, units, "top", "--json")
    assert out.returncode == 0
    recs = [json.loads(x) for x in out.stdout.decode().splitlines()]
    assert {r["event"] for r in recs} == {"board"} and len(recs) == len(list(units.glob("*.toml")))
    assert {r["schema"] for r in recs} == {1}  # as every --json record (issue 39 item 12)
