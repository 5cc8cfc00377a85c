"""readiness = "notify" (#16): svcdiag supervise as the unit's main process, on a real systemd.

systemd itself knows what svcdiag knows: `systemctl start` returns at READY, `After=` means
ready, `systemctl status` shows the phase, systemd kills a start stuck in a phase at that
phase's deadline, and the journal holds exactly what an unwrapped server would have printed.
"""

from __future__ import annotations

import json
import textwrap
import time
from pathlib import Path

import pytest

from .helpers import config, sv, unit_name, verdict_of

pytestmark = pytest.mark.rig


def show(rig, unit: str, *props: str) -> dict[str, str]:
    out = rig.run(["systemctl", "show", unit, *(f"--property={p}" for p in props)]).stdout.decode()
    return dict(line.split("=", 1) for line in out.splitlines() if "=" in line)


def until(rig, unit: str, prop: str, ok, *, timeout: float = 60.0) -> dict[str, str]:
    """Wait for a unit property (ActiveState, StatusText) to satisfy `ok`: systemd's own word."""
    deadline = time.monotonic() + timeout
    while True:
        got = show(rig, unit, prop, "ActiveState", "SubState", "Result", "StatusText")
        if ok(got.get(prop, "")):
            return got
        assert time.monotonic() < deadline, f"{unit}: {prop} never satisfied the test: {got}"
        time.sleep(0.1)


def install(rig, units: Path, name: str) -> str:
    rig.run(["svcdiag", "--units", str(units), "install", name])
    return f"{name}.service"


def test_systemctl_start_blocks_until_ready_and_after_means_ready(rig, units: Path) -> None:
    name = config(units, unit_name("nsmoke"), "demo-smoke", readiness="notify")
    unit = install(rig, units, name)
    dep = f"{unit_name('dep')}.service"
    rig.run(["sh", "-c", f"cat > /etc/systemd/system/{dep} <<'EOF'\n" + textwrap.dedent(f"""\
        [Unit]
        Requires={unit}
        After={unit}
        [Service]
        Type=oneshot
        RemainAfterExit=yes
        ExecStart=/bin/true
        """) + "EOF\nsystemctl daemon-reload"])
    t0 = time.monotonic()
    start = rig.run(["systemctl", "start", dep], check=False, timeout=120)  # pulls in the server, after READY
    took = time.monotonic() - t0
    assert start.returncode == 0, start.stderr
    s = show(rig, unit, "ActiveState", "StatusText", "ActiveEnterTimestampMonotonic",
             "ExecMainStartTimestampMonotonic", "Type")
    d = show(rig, dep, "ExecMainStartTimestampMonotonic")
    assert s["Type"] == "notify" and s["ActiveState"] == "active"
    assert s["StatusText"].startswith("ready · KV ") and "HTTP agrees" in s["StatusText"]
    assert took > 2.0  # the stand-in takes ~3 s at this scale: systemctl waited for it
    # the dependent ran only once the server was ready (not when its process started)
    assert int(s["ExecMainStartTimestampMonotonic"]) + 2_000_000 < int(s["ActiveEnterTimestampMonotonic"]) \
        <= int(d["ExecMainStartTimestampMonotonic"])
    status = rig.run(["systemctl", "status", "--no-pager", unit], check=False).stdout.decode()
    assert "Status: \"ready · KV" in status
    # wait on a notify unit: the same verdict record as in journal mode
    v = verdict_of(sv(rig, units, "wait", name, "--json"))
    assert v["verdict"] == "healthy" and v["figures"]["kv_tokens"] == v["figures"]["http_max_total_num_tokens"]
    # replay of the wrapped unit's journal agrees with the live verdict
    export = rig.run(["journalctl", "--no-pager", "-o", "export", "-u", unit]).stdout
    r = verdict_of(rig.run(["svcdiag", "--units", str(units), "replay", "-", "--config", name, "--json"],
                           input=export, check=False))
    assert (r["verdict"], r["phase"], r["figures"]["kv_tokens"]) == ("healthy", "ready", v["figures"]["kv_tokens"])
    rig.run(["systemctl", "stop", dep, unit])


def test_a_hang_is_killed_by_systemd_at_the_phase_deadline(rig, units: Path) -> None:
    name = config(units, unit_name("nhang"), "demo-hang", readiness="notify", timeouts={"loading_weights": 4})
    unit = install(rig, units, name)
    t0 = time.time()
    p = sv(rig, units, "up", name, "--wait-ready", "--json")
    v = verdict_of(p)
    assert p.returncode == 3 and (v["verdict"], v["phase"]) == ("timed_out", "loading_weights"), v
    got = until(rig, unit, "ActiveState", lambda s: s in ("failed", "inactive"), timeout=30)
    assert got["Result"] == "timeout", got  # systemd enforced the phase's deadline
    assert got["StatusText"].startswith("timed_out") and "loading_weights" in got["StatusText"]
    assert time.time() - t0 < 25  # killed at 4 s in the phase, not at a whole-start timeout
    export = rig.run(["journalctl", "--no-pager", "-o", "export", "-u", unit]).stdout
    r = verdict_of(rig.run(["svcdiag", "--units", str(units), "replay", "-", "--config", name, "--json"],
                           input=export, check=False))
    assert (r["verdict"], r["phase"]) == ("timed_out", "loading_weights"), r
    assert any("timed out" in ln for ln in r["evidence"]) or r["stalled_s"] >= 3.9


def test_segfault_in_the_child_is_a_signal_result(rig, units: Path) -> None:
    name = config(units, unit_name("nseg"), "demo-segfault", readiness="notify")
    unit = install(rig, units, name)
    start = rig.run(["systemctl", "start", unit], check=False, timeout=60)
    assert start.returncode != 0
    got = show(rig, unit, "Result", "ExecMainCode", "ExecMainStatus", "StatusText")
    assert got["Result"] in ("signal", "core-dump") and got["ExecMainStatus"] == "11", got  # as unwrapped
    assert got["StatusText"].startswith("failed [killed_by_signal]"), got
    v = verdict_of(sv(rig, units, "wait", name, "--json"))
    assert (v["verdict"], v["cause"]) == ("failed", "killed_by_signal")
    again = sv(rig, units, "up", name, "--wait-ready", "--restart", "--json")  # live, on D-Bus
    v = verdict_of(again)
    assert again.returncode == 1 and (v["cause"], v["phase"]) == ("killed_by_signal", "loading_weights"), v


def test_sigterm_during_the_load_and_sigkill_of_the_supervisor(rig, units: Path) -> None:
    name = config(units, unit_name("nstop"), "demo-hang", readiness="notify", timeouts={"loading_weights": 60})
    unit = install(rig, units, name)
    for how in ("stop", "kill-main"):
        rig.run(["systemctl", "start", "--no-block", unit])
        until(rig, unit, "StatusText", lambda s: s.startswith("loading weights"))
        main = rig.run(["systemctl", "show", "-P", "MainPID", unit]).stdout.decode().strip()
        procs = [main, *rig.run(["cat", f"/proc/{main}/task/{main}/children"]).stdout.decode().split()]
        assert len(procs) == 2  # the supervisor and the server
        if how == "stop":
            t0 = time.monotonic()
            rig.run(["systemctl", "stop", unit], timeout=60)
            assert time.monotonic() - t0 < 10  # forwarded SIGTERM: the server stopped at once
            assert show(rig, unit, "ActiveState")["ActiveState"] in ("inactive", "failed")
        else:
            rig.run(["systemctl", "kill", "--kill-whom=main", "--signal=SIGKILL", unit])
            until(rig, unit, "ActiveState", lambda s: s in ("inactive", "failed"), timeout=15)
        alive = rig.run(["sh", "-c", " ".join(f"test -d /proc/{p} && echo {p};" for p in procs) + " true"])
        assert alive.stdout.strip() == b"", f"{how}: left behind {alive.stdout!r}"


CHILD = r"""
import sys
w = sys.stdout.buffer.write
w(b"plain line\n")
w(b"x" * 1_000_000 + b"\n")
w(b"not utf-8: \xff\xfe\xc3(\n")
w(b"Loading shards:  10%|#   | 1/10\rLoading shards:  50%|#####| 5/10\rLoading shards: 100%|##########| 10/10\n")
w(b"no newline at the end")
"""


def test_wrapped_and_unwrapped_give_byte_identical_journal_messages(rig, units: Path) -> None:
    name = config(units, unit_name("nbytes"), "demo-dense", readiness="notify")
    child = units / "child.py"
    child.write_text(CHILD)
    py = f"{Path(__file__).resolve().parents[2]}/.venv/bin/python"
    messages = {}
    for kind in ("bare", "wrapped"):
        unit = f"{unit_name(kind)}.service"
        argv = [py, str(child)]
        if kind == "wrapped":
            argv = [py, "-m", "svcdiag", "--units", str(units), "supervise", "--config", name, "--", *argv]
        props = ["-p", "Type=notify", "-p", "NotifyAccess=main"] if kind == "wrapped" else []
        rig.run(["systemd-run", "--wait", "--quiet", "--unit", unit, *props, *argv], check=False, timeout=60)
        out = rig.run(["journalctl", "--no-pager", "--all", "-o", "json", "_TRANSPORT=stdout", f"_SYSTEMD_UNIT={unit}"])
        messages[kind] = [json.loads(ln)["MESSAGE"] for ln in out.stdout.decode().splitlines() if ln.strip()]
    assert len(messages["bare"]) >= 5 and messages["wrapped"] == messages["bare"]


NO_TIMER = """
import time
from svcdiag.config.service import find_units_dir
from svcdiag.ops.follow import follow, start_unit
from svcdiag.systemd.dbus import Systemd
cfg = find_units_dir({units!r}).load({name!r})
with Systemd.connect() as sd:
    props = start_unit(sd, cfg.unit, restart=False, notify=True)
    t0 = time.process_time()
    res = follow(sd, cfg, cfg.unit, props, emit=lambda ev: None)
    print(res.wakeups, res.verdict.verdict, res.verdict.phase, round(time.process_time() - t0, 3))
"""


def test_up_on_a_notify_unit_waits_with_no_timer(rig, units: Path) -> None:
    name = config(units, unit_name("nidle"), "demo-hang", readiness="notify", timeouts={"loading_weights": 6})
    install(rig, units, name)
    out = rig.run(["python", "-c", NO_TIMER.format(units=str(units), name=name)], timeout=60).stdout.decode()
    wakeups, verdict, phase, _cpu = out.split()
    assert (verdict, phase) == ("timed_out", "loading_weights")
    # ~25 lines and a dozen STATUS= signals before the hang, then 6 s of nothing: a journal-mode
    # follower ticks 25-50 times a second through those 6 s (> 150 wakeups); this one wakes for events
    assert int(wakeups) < 80, out  # measured: 43
    rig.run(["systemctl", "stop", f"{name}.service"])
