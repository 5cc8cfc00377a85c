"""#31 §1: `svcdiag supervise` as a pod's PID 1, without a cluster. Each test runs the supervisor
as a container does, as PID 1 of a fresh PID and mount namespace (`unshare --pid --fork
--mount-proc`), with no systemd and no NOTIFY_SOCKET, in front of the stand-in: the probes phase
by phase, deadlines it enforces itself, the termination message, SIGTERM's grace, orphans."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from .children import CHILD
from .conftest import ROOT
from .ports import free_port

SIM = [sys.executable, "-m", "svcdiag.sim"]


def _can_unshare() -> bool:
    if not shutil.which("unshare"):
        return False
    r = subprocess.run(["unshare", "--pid", "--fork", "--mount-proc", "true"], capture_output=True, check=False)
    return r.returncode == 0


pytestmark = pytest.mark.skipif(not _can_unshare(), reason="needs unshare --pid --mount-proc (root)")


class Pod:
    """The supervisor as a container's main process: PID 1 of its own PID namespace."""

    def __init__(self, tmp: Path, argv: list[str], *, probe_port: int | None = None, env: dict[str, str] | None = None):
        self.term = tmp / "termination-log"
        self.term.write_text("")
        self.events = tmp / "events.jsonl"
        self.probe_port = probe_port
        opts = ["--termination-log", str(self.term), "--events", str(self.events)]
        if probe_port is not None:
            opts += ["--probe-port", str(probe_port)]
        full_env = {k: v for k, v in os.environ.items() if k != "NOTIFY_SOCKET"} | {"PYTHONUNBUFFERED": "1"} | (env or {})
        self.p = subprocess.Popen(["unshare", "--pid", "--fork", "--mount-proc", "--kill-child",
                                   sys.executable, "-m", "svcdiag", "supervise", *opts, "--", *argv],
                                  env=full_env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=ROOT)

    def signal(self, sig: int) -> None:
        """As the container runtime signals a container: its PID 1, from outside (unshare does not forward)."""
        deadline = time.monotonic() + 60
        while True:
            children = Path(f"/proc/{self.p.pid}/task/{self.p.pid}/children").read_text().split()
            if children:
                os.kill(int(children[0]), sig)
                return
            assert time.monotonic() < deadline, "the supervisor never started"
            time.sleep(0.05)

    def probe(self, path: str) -> tuple[int, str]:
        """The probe's status and body; (0, "") while nothing answers (the kubelet's own limit is seconds: on a
        loaded machine an answer may take that long)."""
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.probe_port}{path}", timeout=10) as r:
                return r.status, r.read().decode().strip()
        except urllib.error.HTTPError as e:
            return e.code, e.read().decode().strip()
        except OSError:
            return 0, ""

    def end(self, timeout: float = 60) -> tuple[bytes, bytes]:
        try:
            return self.p.communicate(timeout=timeout)
        finally:
            self.p.kill()

    def records(self) -> list[dict]:
        return [json.loads(line) for line in self.events.read_text().splitlines()]


def sim(scenario: str, port: int, *flags: str, scale: float = 0.02) -> list[str]:
    return [*SIM, scenario, "--time-scale", str(scale), "--model-path", "/dev/shm/Qwen3-8B", "--port", str(port),
            "--context-length", "32768", *flags]


def test_probes_phase_by_phase_then_sigterm_ends_the_pod_cleanly(tmp_path: Path) -> None:
    probe_port = free_port()
    pod = Pod(tmp_path, sim("slow-start", free_port(), scale=0.03), probe_port=probe_port)
    seen: list[tuple[int, int, int, str]] = []
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            (startup, body), (live, live_body), (ready, ready_body) = (pod.probe(p) for p in ("/startupz", "/livez",
                                                                                                 "/readyz"))
            seen.append((startup, live, ready, body, live_body, ready_body))
            if startup == 200:
                break
            time.sleep(0.1)
        cli = subprocess.run([sys.executable, "-m", "svcdiag", "probe", "ready", "--port", str(probe_port)],
                             capture_output=True, text=True, cwd=ROOT, check=False)
        pod.signal(signal.SIGTERM)
        out, err = pod.end()
    finally:
        pod.p.kill()
    # the three probes of one turn all during the weight load (a start may move on between them)
    loading = [s for s in seen if all(b.startswith("loading weights") for b in s[3:])]
    assert loading and all(s[:3] == (503, 200, 503) for s in loading), seen  # a slow load: not started, alive
    assert seen[-1][:3] == (200, 200, 200) and seen[-1][3].startswith("ready · KV "), seen[-1]
    assert cli.returncode == 0 and cli.stdout.startswith("ready · KV ")
    assert pod.p.returncode == 0  # the stand-in exits 0 on SIGTERM, as SGLang does
    assert b"The server is fired up and ready to roll!" in out
    assert pod.term.read_text() == "STOPPED by SIGTERM after ready (status 0)\n"
    assert err.decode().splitlines()[-1] == "svcdiag: STOPPED by SIGTERM after ready (status 0)"
    assert [r["event"] for r in pod.records()][-1] == "verdict" and pod.records()[-1]["verdict"] == "healthy"


def test_max_running_zero_ends_the_pod_with_its_diagnosis_judged_as_replay_judges_it(tmp_path: Path) -> None:
    pod = Pod(tmp_path, sim("max-running-zero", free_port(), "--sglang-version", "0.5.12", "--mem-fraction-static", "0.75",
                            "--max-running-requests", "8", "--max-mamba-cache-size", "2",
                            "--speculative-algorithm", "DFLASH"))
    out, err = pod.end()
    assert pod.p.returncode == 1, err
    first, fix, why = pod.term.read_text().splitlines()
    assert first.startswith("FAILED [max_running_zero] in phase scheduler: ")
    assert fix.startswith("fix: --mem-fraction-static 0.8 --max-mamba-cache-size 5 --max-running-requests 1")
    assert why.startswith("why: The KV cache holds 11,893 tokens")
    assert err.decode().splitlines()[-1] == f"svcdiag: {first}"
    # the pod's own output, judged afterwards as a log, gets the verdict the pod got
    log = tmp_path / "pod.log"
    log.write_bytes(out)
    replayed = subprocess.run([sys.executable, "-m", "svcdiag", "replay", str(log), "--json"], capture_output=True,
                              text=True, cwd=ROOT, check=False)
    verdict = json.loads(replayed.stdout.splitlines()[-1])
    pod_verdict = pod.records()[-1]
    assert (verdict["verdict"], verdict["cause"], verdict["phase"]) == \
        (pod_verdict["verdict"], pod_verdict["cause"], pod_verdict["phase"]) == ("failed", "max_running_zero", "scheduler")
    assert verdict["figures"]["kv_tokens"] == pod_verdict["figures"]["kv_tokens"] == 11893


def test_a_stuck_start_is_stopped_at_its_deadline_and_exits_3(tmp_path: Path) -> None:
    # a deadline of 6 s: a loaded machine's stall of a few seconds still leaves /livez asked within it
    pod = Pod(tmp_path, sim("hang", free_port()), probe_port=free_port(), env={"SVCDIAG_TIMEOUT_LOADING_WEIGHTS": "6"})
    lives = []
    began = time.monotonic()
    while pod.p.poll() is None and time.monotonic() - began < 60:
        lives.append(pod.probe("/livez")[0])
        time.sleep(0.2)
    _, err = pod.end()
    assert pod.p.returncode == 3, err  # stopped by the supervisor at its deadline (its TIMED_OUT below)
    assert 200 in lives and 503 not in lives[: lives.index(200) + 1]  # alive while within its deadline
    first = pod.term.read_text().splitlines()[0]
    assert first.startswith("TIMED_OUT in phase loading_weights: no progress in phase loading_weights"), first


def test_sigterm_gives_the_child_its_grace_then_kills_it(tmp_path: Path) -> None:
    stubborn = [sys.executable, "-c", "import signal, time; signal.signal(signal.SIGTERM, lambda *a: print('term', "
                                      "flush=True)); print('up', flush=True); time.sleep(60)"]
    pod = Pod(tmp_path, stubborn, env={"SVCDIAG_GRACE_S": "1.5"})
    assert pod.p.stdout is not None
    assert pod.p.stdout.readline() == b"up\n"
    began = time.monotonic()
    pod.signal(signal.SIGTERM)
    out, _ = pod.end()
    took = time.monotonic() - began
    assert out == b"term\n"  # the child heard SIGTERM
    assert took >= 1.4, took  # ...and had its grace before SIGKILL (a floor: load only lengthens it)
    assert pod.p.returncode == 128 + signal.SIGKILL
    assert pod.term.read_text() == "STOPPED by SIGTERM during the start (killed by SIGKILL)\n"


ORPHANS = r"""
import os, sys, time
r, w = os.pipe()
for _ in range(5):
    if os.fork() == 0:           # a child that leaves a grandchild behind, as SGLang's workers can
        pid = os.fork()
        if pid == 0:
            time.sleep(0.2)
            os._exit(0)          # the orphan ends: PID 1 must reap it
        os.write(w, f"{pid}\n".encode())
        os._exit(0)
    os.wait()
os.close(w)
orphans = os.read(r, 4096).split()
deadline = time.monotonic() + 60  # until every orphan is gone (reaped), not a fixed second: load may stall PID 1
while any(os.path.exists(f"/proc/{int(p)}") for p in orphans) and time.monotonic() < deadline:
    time.sleep(0.05)
zombies = [p for p in os.listdir("/proc") if p.isdigit() and open(f"/proc/{p}/stat").read().rsplit(")", 1)[1].split()[0] == "Z"]
print(f"pid 1: {open('/proc/1/cmdline').read().split(chr(0))[2]} zombies: {len(zombies)}", flush=True)
"""


def test_pid_1_reaps_orphans(tmp_path: Path) -> None:
    script = tmp_path / "orphans.py"
    script.write_text(ORPHANS)
    pod = Pod(tmp_path, [sys.executable, str(script)])
    out, _ = pod.end()
    assert out == b"pid 1: svcdiag zombies: 0\n"


def test_output_passes_through_byte_for_byte_and_an_early_exit_is_a_failed_start(tmp_path: Path) -> None:
    child = tmp_path / "child.py"
    child.write_text(CHILD)
    bare = subprocess.run([sys.executable, str(child), "3"], capture_output=True, check=False)
    pod = Pod(tmp_path, [sys.executable, str(child), "3"])
    out, err = pod.end()
    tail = b"tail without newline"
    assert out == bare.stdout[: -len(tail)] + bare.stderr + tail  # one pipe, in the order written, byte for byte
    assert pod.p.returncode == 1  # the start failed: svcdiag's code, not the child's 3
    assert pod.term.read_text().startswith("FAILED [exited] in phase starting: ")
    assert err.decode().splitlines()[-1].startswith("svcdiag: FAILED [exited]")


def test_a_worker_node_is_ready_on_its_log_alone(tmp_path: Path) -> None:
    """A LeaderWorkerSet's worker pod (--node-rank 1) serves no HTTP: its healthy log is the verdict."""
    pod = Pod(tmp_path, sim("healthy-dense", free_port(), "--tp-size", "2", "--nnodes", "2", "--node-rank", "1",
                            "--dist-init-addr", "127.0.0.1:5000"), probe_port=free_port())
    try:
        deadline = time.monotonic() + 60
        while pod.probe("/startupz")[0] != 200:
            assert time.monotonic() < deadline and pod.p.poll() is None, pod.probe("/startupz")
            time.sleep(0.1)
        status, body = pod.probe("/readyz")
        assert status == 200 and body.startswith("ready · KV ") and body.endswith("node 1: no HTTP of its own")
        pod.signal(signal.SIGTERM)
        pod.end()
    finally:
        pod.p.kill()
    assert pod.term.read_text().startswith("STOPPED by SIGTERM after ready")


def test_a_failed_start_that_leaves_sglang_running_is_stopped(tmp_path: Path) -> None:
    """SGLang printed why it failed but did not exit (a process left hanging): the pod ends anyway."""
    script = tmp_path / "hangs.py"
    script.write_text(f"import sys, time\nsys.stdout.write(open({str(ROOT / 'svcdiag/examples/cuda-oom-tp8.log')!r}).read())\n"
                      "sys.stdout.flush()\ntime.sleep(60)\n")
    pod = Pod(tmp_path, [sys.executable, str(script)])
    pod.end()
    assert pod.p.returncode == 1  # ended by the supervisor on the failure, not by the script's 60 s sleep
    assert pod.term.read_text().startswith("FAILED [cuda_oom] in phase cuda_graph: ")


def test_a_shell_wrappers_start_is_judged_with_sglangs_arguments_from_its_log(tmp_path: Path) -> None:
    """#42 §5: `bash -c '… --port $PORT --tp-size $TP …; echo done'` once exited 2 (`--tp-size: must be an
    integer, got '$TP'`), a crash-looping pod. Now SGLang's own server_args line says which port the HTTP
    cross-check asks (not the default 30000), and SIGTERM reaches the server behind the shell."""
    port = free_port()
    script = f"{' '.join(SIM)} healthy-dense --time-scale 0.02 --model-path /dev/shm/Qwen3-8B --port $PORT --tp-size $TP; echo done"
    pod = Pod(tmp_path, ["bash", "-c", script], probe_port=free_port(), env={"PORT": str(port), "TP": "2"})
    try:
        deadline = time.monotonic() + 60
        while (startup := pod.probe("/startupz"))[0] != 200:
            assert time.monotonic() < deadline and pod.p.poll() is None, startup
            time.sleep(0.1)
        pod.signal(signal.SIGTERM)
        out, err = pod.end()
    finally:
        pod.p.kill()
    assert startup[1].startswith("ready · KV ") and " · HTTP agrees" in startup[1], startup
    assert "(bash -c: the shell expands its words): they are taken from its server_args= line" in err.decode()
    assert out.endswith(b"done\n")  # the server heard SIGTERM and ended; the shell then ran its next command
    assert pod.p.returncode == 0 and pod.term.read_text() == "STOPPED by SIGTERM after ready (status 0)\n"
    (verdict,) = [r for r in pod.records() if r["event"] == "verdict"]
    assert verdict["verdict"] == "healthy" and verdict["figures"]["tp_size"] == 2


def test_a_wedged_pod_fails_its_liveness_probe_and_its_metrics_parse(tmp_path: Path) -> None:
    """#42: stops-serving after ready (silent, /health 503): /livez fails within the watch's detection time
    (health_failures × interval + the check's limit) of the first failed /health, says what and since when;
    /metrics parses with Prometheus's own parser, in the textfile's names."""
    from prometheus_client.parser import text_string_to_metric_families

    probe_port = free_port()
    # /health each second, given a second: a loaded machine's stall is neither a failed check nor past the bound;
    # serving 3.2 s (40 s × 0.08) before the wedge, so the first checks answer 200 even when they come late
    interval, failures = 1.0, 3
    pod = Pod(tmp_path, sim("stops-serving", free_port(), scale=0.08), probe_port=probe_port,
              env={"SVCDIAG_HEALTH_INTERVAL_S": str(interval), "SVCDIAG_HEALTH_FAILURES": str(failures)})
    seen: list[tuple[float, int, str]] = []
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            live, body = pod.probe("/livez")
            seen.append((time.time(), live, body))
            if live == 503 and body.startswith("wedged"):
                break
            time.sleep(0.05)
        cli = subprocess.run([sys.executable, "-m", "svcdiag", "probe", "live", "--port", str(probe_port)],
                             capture_output=True, text=True, cwd=ROOT, check=False)
        with urllib.request.urlopen(f"http://127.0.0.1:{probe_port}/metrics", timeout=30) as r:
            kind, metrics = r.headers["Content-Type"], r.read().decode()
        pod.signal(signal.SIGTERM)
        pod.end()
    finally:
        pod.p.kill()
    serving = [s for s in seen if s[1] == 200 and "· serving " in s[2]]
    assert serving, seen  # after ready, alive and serving before the wedge
    assert seen[-1][1] == 503 and seen[-1][2].startswith("wedged [health_failed] since "), seen[-1]
    said = cli.stdout + cli.stderr  # a failing probe says why on stderr
    assert cli.returncode == 1 and "wedged [health_failed] since " in said and "HTTP 503" in said, said
    [incident] = [r for r in pod.records() if r["event"] == "incident"]
    assert (incident["verdict"], incident["cause"], incident["kind"]) == ("wedged", "health_failed", "wedged"), incident
    assert incident["action"] == "restart (the kubelet: /livez fails)"
    assert incident["ts"] - incident["since"] <= failures * interval + interval + 1.0  # the documented bound (+ slack)
    assert kind.startswith("text/plain; version=0.0.4")
    samples = {(s.name, tuple(sorted(s.labels.items()))): s.value
               for fam in text_string_to_metric_families(metrics) for s in fam.samples}
    unit = (("config", "Qwen3-8B"), ("unit", "Qwen3-8B.service"))
    assert samples[("svcdiag_watch_state", tuple(sorted((*unit, ("state", "wedged")))))] == 1
    assert samples[("svcdiag_incidents_total", tuple(sorted((*unit, ("kind", "wedged")))))] == 1
    assert samples[("svcdiag_verdict", tuple(sorted((*unit, ("verdict", "healthy")))))] == 1
    assert samples[("svcdiag_health_checks_total", unit)] >= failures + 1  # at least one answered, then the failures
    assert samples[("svcdiag_health_failures_total", unit)] >= failures
    assert samples[("svcdiag_health_latency_seconds", unit)] >= 0
    assert any(name == "svcdiag_phase_duration_seconds" for name, _ in samples)
    first, stopped = pod.term.read_text().splitlines()  # why the kubelet restarted it, then how it ended
    assert first.startswith("WEDGED [health_failed]: /health failed 3 times in a row") and stopped.startswith("STOPPED by SIGTERM")


def test_a_silent_hangs_probe_text_counts_on_instead_of_freezing_at_its_last_line(tmp_path: Path) -> None:
    pod = Pod(tmp_path, sim("hang", free_port()), probe_port=free_port(), env={"SVCDIAG_TIMEOUT_LOADING_WEIGHTS": "20"})
    bodies: list[str] = []
    try:
        began = time.monotonic()
        while time.monotonic() - began < 30:
            code, body = pod.probe("/livez")
            if body.startswith("loading weights"):
                bodies.append(body)
            if len(bodies) >= 2 and bodies[-1].split(" s")[0] != bodies[0].split(" s")[0]:
                break
            time.sleep(0.5)
        pod.signal(signal.SIGTERM)
        pod.end()
    finally:
        pod.p.kill()
    seconds = [int(b.split(" s")[0].rsplit(" ", 1)[1]) for b in bodies]
    assert len(seconds) >= 2 and seconds[-1] > seconds[0], bodies  # the phase's seconds go on while nothing is printed
