"""readiness = "notify" (#16): svcdiag supervise as the unit's main process, on a real systemd.

systemd itself knows what svcdiag knows: `systemctl start` returns at READY, `After=` means
ready, `systemctl status` shows the phase, the supervisor stops a start stuck in a phase at that
phase's deadline (systemd's own limit is the whole start's, which no daemon-reload shortens), and the journal holds exactly what an unwrapped server would have printed.
After ready, the watchdog fails a server that stopped answering /ready; SIGHUP and SIGQUIT reach
SGLang and end the unit as they end a bare one.
"""

from __future__ import annotations

import json
import textwrap
import time
from pathlib import Path

import pytest

from .helpers import config, json_lines, sv, unit_name, verdict_of

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


def test_a_hang_is_stopped_by_the_supervisor_at_the_phase_deadline(rig, units: Path) -> None:
    name = config(units, unit_name("nhang"), "demo-hang", readiness="notify", timeouts={"loading_weights": 4})
    unit = install(rig, units, name)
    p = sv(rig, units, "up", name, "--wait-ready", "--json")
    v = verdict_of(p)
    assert p.returncode == 3 and (v["verdict"], v["phase"]) == ("timed_out", "loading_weights"), v
    got = until(rig, unit, "ActiveState", lambda s: s in ("failed", "inactive"), timeout=30)
    # the supervisor enforced the phase's deadline: the server stopped, the supervisor exited 3
    assert (got["Result"], show(rig, unit, "ExecMainStatus")["ExecMainStatus"]) == ("exit-code", "3"), got
    # killed at 4 s in the phase by the supervisor (exit 3, its STATUS=), not by systemd's whole-start timeout
    # (that would be Result=timeout): the machinery, not a wall-clock ceiling
    assert got["StatusText"].startswith("timed_out") and "loading_weights" in got["StatusText"]
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
            rig.run(["systemctl", "stop", unit], timeout=120)
            # forwarded SIGTERM: the server stopped on it, not SIGKILLed at TimeoutStopSec (Result=timeout)
            got = show(rig, unit, "ActiveState", "Result")
            assert got["ActiveState"] in ("inactive", "failed") and got["Result"] != "timeout", got
        else:
            rig.run(["systemctl", "kill", "--kill-whom=main", "--signal=SIGKILL", unit])
            until(rig, unit, "ActiveState", lambda s: s in ("inactive", "failed"), timeout=60)
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
from svcdiag.ops.serve.follow import follow, start_unit
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


#: the healthy unit's WatchdogSec: WATCHDOG=1 every 4 s, so a 3 s stall of a loaded machine (CI: 2 cores at load
#: 15) is not a missed ping; at 2 s (a ping a second) such a stall once failed it with Result=watchdog
FED_WATCHDOG_S = 8
#: the wedged unit's: WATCHDOG=trigger acts at once, so its period only has to outlast any stall
TRIGGER_WATCHDOG_S = 30


def test_watchdog_fails_a_server_that_stopped_serving_and_status_says_so(rig, units: Path) -> None:
    # no restart: the failed unit's own word is the test; /health each second, each given a second (at 0.5 s a
    # loaded machine's slow answer could be the wedge's last failure, "timed out" instead of "HTTP 503")
    stuck = config(units, unit_name("wdstop"), "demo-smoke", simulate="stops-serving", watchdog_s=TRIGGER_WATCHDOG_S,
                   restart="no", health_interval_s=1)
    ok = config(units, unit_name("wdok"), "demo-smoke", watchdog_s=FED_WATCHDOG_S)
    units_ = [install(rig, units, stuck), install(rig, units, ok)]
    assert rig.run(["systemctl", "start", *units_], check=False, timeout=120).returncode == 0  # both were ready
    got = until(rig, units_[0], "ActiveState", lambda s: s in ("failed", "inactive"), timeout=60)
    assert got["Result"] == "watchdog", got  # systemd's watchdog, told at once the server is wedged
    said = rig.run(["journalctl", "--no-pager", "-o", "cat", "-u", units_[0]]).stdout.decode()
    # asked (WATCHDOG=trigger), not timed out: systemd's own account of why it aborted the supervisor
    assert "Watchdog request" in said and "Watchdog timeout" not in said, said
    assert got["StatusText"].startswith("wedged [health_failed] since ") and "HTTP 503" in got["StatusText"], got
    st_ = json_lines(sv(rig, units, "status", stuck, "--json"))[0]
    # the start's verdict as its journal reads now, replay's and `wait`'s (svcdiag.judge.ending): it served, then
    # systemd's watchdog killed it
    v = st_["verdict"]
    assert (st_["active_state"], st_["result"], v["verdict"], v["cause"]) == ("failed", "watchdog", "failed",
                                                                             "died_after_ready"), st_
    assert v["figures"]["incident"] == "wedged", v
    assert "failed (watchdog)" in sv(rig, units, "status", stuck).stdout.decode()
    # the healthy one is fed: still active, same process, past two watchdog periods (unfed, systemd would have
    # killed it at the first), and a WATCHDOG=1 came after the first period
    first = show(rig, units_[1], "MainPID", "ActiveEnterTimestampMonotonic")
    up_since = int(first["ActiveEnterTimestampMonotonic"]) / 1e6
    while time.clock_gettime(time.CLOCK_MONOTONIC) < up_since + 2 * FED_WATCHDOG_S:
        time.sleep(0.5)
    later = show(rig, units_[1], "MainPID", "ActiveState", "Result", "WatchdogTimestampMonotonic")
    assert (later["ActiveState"], later["Result"], later["MainPID"]) == ("active", "success", first["MainPID"]), later
    assert int(later["WatchdogTimestampMonotonic"]) / 1e6 > up_since + FED_WATCHDOG_S  # a WATCHDOG=1 came lately
    st_ok = json_lines(sv(rig, units, "status", ok, "--json"))[0]
    assert (st_ok["active_state"], st_ok["result"], st_ok["verdict"]["verdict"]) == ("active", "success", "healthy")
    rig.run(["systemctl", "stop", *units_])


def _server_pid(rig, unit: str, wrapped: bool) -> str:
    main = rig.run(["systemctl", "show", "-P", "MainPID", unit]).stdout.decode().strip()
    if not wrapped:
        return main
    [child] = rig.run(["cat", f"/proc/{main}/task/{main}/children"]).stdout.decode().split()
    return child


#: systemd's ExecMainCode: the main process was killed (CLD_KILLED) or dumped core (CLD_DUMPED)
CLD_KILLED, CLD_DUMPED = "2", "3"


@pytest.mark.parametrize("sig,whom,when", [("SIGHUP", "all", "loading"), ("SIGHUP", "main", "ready"),
                                           ("SIGQUIT", "main", "loading"), ("SIGQUIT", "all", "ready")])
def test_sighup_and_sigquit_reach_the_server_and_end_the_unit_as_unwrapped(rig, units: Path, sig: str, whom: str,
                                                                           when: str) -> None:
    ended = {}
    for readiness in ("notify", "journal"):
        base, extra = ("demo-hang", {"timeouts": {"loading_weights": 60}}) if when == "loading" else ("demo-smoke", {})
        name = config(units, unit_name(f"{sig[3:].lower()}{readiness[0]}"), base, readiness=readiness, **extra)
        unit = install(rig, units, name)
        if when == "ready":
            assert sv(rig, units, "up", name, "--wait-ready").returncode == 0
        else:
            rig.run(["systemctl", "start", "--no-block", unit])
            deadline = time.monotonic() + 30
            while b"Loading safetensors" not in rig.run(["journalctl", "--no-pager", "-o", "cat", "-u", unit]).stdout:
                assert time.monotonic() < deadline, f"{unit} never reached the weight load"
                time.sleep(0.1)
        server = _server_pid(rig, unit, readiness == "notify")
        rig.run(["systemctl", "kill", f"--signal={sig}", f"--kill-whom={whom}", unit])
        until(rig, unit, "ActiveState", lambda s: s in ("failed", "inactive"), timeout=30)
        assert rig.run(["test", "-d", f"/proc/{server}"], check=False).returncode != 0, "the server outlived it"
        ended[readiness] = show(rig, unit, "ActiveState", "Result", "ExecMainCode", "ExecMainStatus", "StatusText")
        if readiness == "notify" and when == "loading":  # the supervisor saw its child die of it, and said so
            assert ended["notify"]["StatusText"].startswith("failed [killed_by_signal]") \
                and sig in ended["notify"]["StatusText"], ended
            v = verdict_of(sv(rig, units, "wait", name, "--json"))
            assert (v["verdict"], v["cause"], v["figures"].get("signal")) == ("failed", "killed_by_signal", sig[3:]), v
        elif readiness == "notify" and ended["notify"]["ActiveState"] == "failed":  # a healthy start, then this
            assert ended["notify"]["StatusText"] == f"stopped: the server exited (killed by {sig}) after it was ready " \
                f"({sig}: not an incident)"
            st_ = json_lines(sv(rig, units, "status", name, "--json"))[0]
            assert (st_["verdict"]["verdict"], st_["result"]) == ("healthy", ended["notify"]["Result"]), st_
    n, j = ended["notify"], ended["journal"]
    if (sig, when) == ("SIGHUP", "loading"):
        # SIGHUP is a clean end to systemd: a bare unit is just inactive. A Type=notify unit that ends
        # cleanly before READY=1 is failed with result 'protocol' (systemd's rule); the process's end is the same
        assert (j["ActiveState"], j["Result"]) == ("inactive", "success"), ended
        assert (n["ActiveState"], n["Result"], n["ExecMainCode"], n["ExecMainStatus"]) == \
            ("failed", "protocol", CLD_KILLED, "1"), ended
        return
    assert (n["ActiveState"], n["Result"]) == (j["ActiveState"], j["Result"]), ended
    if sig == "SIGQUIT":  # not a clean signal: the unit failed as a bare one does, of SIGQUIT
        assert n["Result"] in ("signal", "core-dump") and n["ExecMainStatus"] == j["ExecMainStatus"] == "3", ended
        assert n["ExecMainCode"] == j["ExecMainCode"] in (CLD_KILLED, CLD_DUMPED), ended
    else:
        assert (n["ActiveState"], n["Result"]) == ("inactive", "success"), ended


def test_a_silent_hang_is_called_slow_before_its_deadline_with_no_timer(rig, units: Path) -> None:
    name = config(units, unit_name("nslow"), "demo-smoke")
    for _ in range(3):  # the history that says how long the weight load usually takes (~2 s here)
        assert sv(rig, units, "up", name, "--wait-ready", "--restart").returncode == 0
    cfg = units / f"{name}.toml"
    cfg.write_text(cfg.read_text() + 'simulate = "hang"\n[timeouts]\nloading_weights = 12\n')
    t0 = time.monotonic()
    p = sv(rig, units, "up", name, "--wait-ready", "--restart", "--json")
    recs = json_lines(p)
    slow = [r for r in recs if r["event"] == "slow_phase"]
    # nothing is printed after the third shard: only the follower's own wake-up can say it
    assert [r["phase"] for r in slow] == ["loading_weights"], recs
    # said past the usual time (its threshold) and before the 12 s deadline: the follower's own wake-up fired
    assert slow[0]["threshold_s"] < slow[0]["seconds"] < 12 and slow[0]["seconds"] >= 5.0, slow
    assert (recs[-1]["verdict"], recs[-1]["phase"]) == ("timed_out", "loading_weights")
    assert time.monotonic() - t0 > 12  # said ~6 s before the deadline, not at it
    sv(rig, units, "down", name)


@pytest.mark.parametrize(("jit_compile", "ends"), [(30, "healthy"), (1, "timed_out")])
def test_a_first_start_compiling_deepgemm_gets_the_allowance_from_systemd_too(rig, units: Path, jit_compile: int,
                                                                              ends: str) -> None:
    # the stand-in compiles DeepGEMM kernels for ~9 s at this scale inside CUDA-graph capture, whose own
    # deadline is 3 s: with SGLang's announcement the phase gets jit_compile more, and systemd's timeout follows
    name = config(units, unit_name("ndg"), "demo-dense", readiness="notify", simulate="deepgemm-first-start",
                  sim_time_scale=0.01, timeouts={"cuda_graph": 3, "jit_compile": jit_compile})
    unit = install(rig, units, name)
    p = sv(rig, units, "up", name, "--wait-ready", "--json")
    v = verdict_of(p)
    assert v["verdict"] == ends, v
    if ends == "healthy":
        assert v["phase_seconds"]["cuda_graph"] > 3 and v["figures"]["precompile_extra_s"] == {"cuda_graph": 30}
        assert show(rig, unit, "ActiveState")["ActiveState"] == "active"  # systemd did not kill it at 3 s
    else:
        assert v["phase"] == "cuda_graph" and "sglang.compile_deep_gemm" in " ".join(v["diagnosis"]["explanation"])
        got = until(rig, unit, "ActiveState", lambda s: s in ("failed", "inactive"), timeout=30)
        assert got["Result"] == "exit-code", got  # the supervisor enforced 3 + 1 s, long before the compile ended
    rig.run(["svcdiag", "--units", str(units), "down", name], check=False)
