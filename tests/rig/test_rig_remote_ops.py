"""The rest of the commands over SSH (docs/remote.md): preflight, baseline-check, bundle, campaign
and top against a test host (gpu-a), and [secrets] written there from this machine.

svcdiag runs on the host, where there is no systemd; the test host is its own private systemd
(tests/rig/conftest.py `test_hosts`). What must come from the remote host is put only there:
the model directory and the fake nvidia-smi are written inside gpu-a's overlay, and the secret
file exists only here (removed from gpu-a's view before the start).
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
import tarfile
import uuid
from pathlib import Path

import pytest

from ..conftest import ROOT
from ..model_fixtures import DENSE_QWEN3_8B
from .helpers import json_lines, verdict_of
from .test_rig_remote import SVCDIAG, host_env, is_active, on_host, sshd, variant, write  # noqa: F401 -- sshd: a fixture

# ruff: noqa: F811 -- `sshd`, the imported fixture, is every test's argument

#: one worker boots gpu-a and gpu-b and runs every test of theirs (the "hosts" group, tests/xdist_groups.py)
pytestmark = pytest.mark.rig

#: what the fake nvidia-smi reports: one 80 GB GPU, 1 MiB in use (free: 81,558 MiB = 79.65 GiB)
SMI_TOTAL_MIB, SMI_USED_MIB = 81559, 1
FAKE_SMI = f"""#!/bin/sh
# a stand-in for nvidia-smi on a test host: the CSV the real one prints for the queries svcdiag makes
case "$*" in
  *--query-gpu=memory.total,memory.used*) printf 'memory.total [MiB], memory.used [MiB]\\n{SMI_TOTAL_MIB} MiB, {SMI_USED_MIB} MiB\\n' ;;
  *--query-gpu=index,uuid*) echo '0, GPU-00000000-b1b1-b1b1-b1b1-000000000000' ;;
  *--query-compute-apps*) cat /run/fake-smi-apps 2>/dev/null ;;
  -q) echo 'Attached GPUs : 1 (fake)' ;;
esac
"""


@pytest.fixture
def fake_smi(sshd):
    """A fake nvidia-smi on gpu-a's PATH for one test (other tests see none there)."""
    sshd.rig.run("cat > /usr/local/bin/nvidia-smi && chmod 755 /usr/local/bin/nvidia-smi", input=FAKE_SMI.encode())
    yield
    sshd.rig.run("rm -f /usr/local/bin/nvidia-smi /run/fake-smi-apps", check=False)


def remote_model(sshd) -> str:
    """A model directory (config.json + safetensors index, 16 GB) that exists on gpu-a only."""
    d = f"/srv/svcdiag-models-{uuid.uuid4().hex[:6]}/Qwen3-8B"
    index = {"metadata": {"total_size": 16 * 1024**3}, "weight_map": {}}
    sshd.rig.run(f"mkdir -p {d} && cat > {d}/config.json && echo {shlex.quote(json.dumps(index))} "
                 f"> {d}/model.safetensors.index.json", input=json.dumps(DENSE_QWEN3_8B).encode())
    assert not Path(d).exists()
    return d


def one_line_error(p: subprocess.CompletedProcess[bytes], *words: str) -> str:
    err = p.stderr.decode().strip().splitlines()
    assert p.returncode == 2 and len(err) == 1 and err[0].startswith("svcdiag: error: "), p.stderr.decode()
    for w in words:
        assert w in err[0], err[0]
    return err[0]


# ---------------------------------------------------------------- preflight, GPU hygiene


def test_preflight_reads_the_model_and_the_gpus_of_the_remote_host(units: Path, sshd, fake_smi) -> None:
    d = remote_model(sshd)
    name = write(units, f"pf-{uuid.uuid4().hex[:6]}", f'extends = "demo-dense"\nmodel_path = "{d}"\n')
    one_line_error(on_host(sshd, units, "preflight", name), "config.json")  # not here: only over SSH

    sshd.rig.run("mv /usr/local/bin/nvidia-smi /usr/local/bin/nvidia-smi.off")
    try:  # no nvidia-smi there: the figure it cannot have is asked for, as locally
        one_line_error(on_host(sshd, units, "preflight", name, "--host", sshd.target),
                       f"no nvidia-smi on {sshd.target}", "--gpu-memory GB")
        given = on_host(sshd, units, "preflight", name, "--host", sshd.target, "--gpu-memory", "80", "--json")
    finally:
        sshd.rig.run("mv /usr/local/bin/nvidia-smi.off /usr/local/bin/nvidia-smi")
    row = json.loads(given.stdout)
    assert given.returncode == 0 and row["gpu_source"] == "--gpu-memory", given.stderr
    assert row["sources"]["shape"] == f"{sshd.target}:{d}/config.json (Qwen3ForCausalLM, dense)"
    assert row["sources"]["weights"] == f"{sshd.target}:{d} (safetensors)" and row["weights_gb_per_gpu"] == 16.0

    p = on_host(sshd, units, "preflight", name, "--host", sshd.target, "--json")
    measured = json.loads(p.stdout)
    assert p.returncode == 0 and measured["gpu_source"] == f"nvidia-smi on {sshd.target} (GPUs 0, now)", p.stderr
    read = round((SMI_TOTAL_MIB - SMI_USED_MIB) / 1024, 2)  # less SGLang's own context and the driver's reserve
    assert measured["gpu_free_gb"] == round(read - 1.0, 2) and measured["interval"]["gpu_free_gb"][1] < read
    assert measured["sources"]["gpu_reading"].startswith(f"{read:.2f} GB read")
    assert measured["kv_tokens"] < row["kv_tokens"]  # 79.65 GB free there, not the 80 given before
    human = on_host(sshd, units, "preflight", name, "--host", sshd.target).stdout.decode()
    assert f"nvidia-smi on {sshd.target}" in human


def test_gpu_hygiene_names_a_process_holding_memory_on_the_remote_gpu(units: Path, sshd, fake_smi) -> None:
    hog = f"gpu-hog-{uuid.uuid4().hex[:6]}"
    sshd.rig.run(["systemd-run", f"--unit={hog}", "--collect", "sleep", "300"])
    try:
        pid = sshd.rig.run(["systemctl", "show", "-P", "MainPID", f"{hog}.service"]).stdout.decode().strip()
        sshd.rig.run(f"echo '{pid}, GPU-00000000-b1b1-b1b1-b1b1-000000000000, 2048' > /run/fake-smi-apps")
        name = variant(units, "hyg", "demo-dense")
        p = on_host(sshd, units, "up", name, "--host", sshd.target)
        err = p.stderr.decode()
        assert p.returncode == 1, p.stdout.decode() + err
        assert f"PID {pid} ({hog}.service) holds 2.0 GB on GPU 0 on {sshd.target}" in err and "--force" in err
        assert is_active(sshd.rig, f"{name}.service") in ("inactive", "unknown")  # never started
    finally:
        sshd.rig.run(["systemctl", "stop", f"{hog}.service"], check=False)


# ---------------------------------------------------------------- baseline-check, bundle, top


def test_baseline_check_over_ssh_starts_judges_and_puts_it_back(units: Path, sshd) -> None:
    name = variant(units, "bl", "demo-smoke")
    p = on_host(sshd, units, "baseline-check", name, "--host", sshd.target, "--json")
    recs = json_lines(p)
    r = recs[-1]
    assert p.returncode == 0 and r["event"] == "baseline_result", p.stdout.decode()[-2000:] + p.stderr.decode()
    assert r["verdict"] == "healthy" and r["healthy"] and r["drift"] == []
    assert (r["state_before"], r["state_after"]) == ("inactive", "inactive")
    assert is_active(sshd.rig, f"{name}.service") in ("inactive", "unknown")  # put back: stopped there
    snap = json.loads(Path(r["snapshot"]).read_text())  # the snapshot is kept here
    assert snap["figures"]["kv_tokens"] > 0 and "loading_weights" in snap["phase_seconds"]  # from the remote journal


def test_bundle_and_top_over_ssh_read_the_remote_host(units: Path, sshd, tmp_path: Path) -> None:
    name = variant(units, "bt", "demo-smoke")
    up = on_host(sshd, units, "up", name, "--wait-ready", "--json", "--host", sshd.target)
    v = verdict_of(up)
    assert up.returncode == 0 and v["verdict"] == "healthy", up.stderr.decode()
    try:
        # bundle: that host's journal slice, unit file and status
        out = tmp_path / "b.tar.gz"
        b = on_host(sshd, units, "bundle", name, "--host", sshd.target, "-o", str(out), "--json")
        row = json.loads(b.stdout)
        assert b.returncode == 0 and row["invocation"] == v["invocation"], b.stderr.decode()
        assert {"journal.export", "unit.service", "status.json", "MANIFEST.json"} <= set(row["files"])
        with tarfile.open(out) as tar:
            files = {m.name.rsplit("/", 1)[-1]: tar.extractfile(m).read() for m in tar.getmembers() if m.isfile()}
        assert b"The server is fired up and ready to roll!" in files["journal.export"]
        assert files["unit.service"] == sshd.rig.run(f"cat /etc/systemd/system/{name}.service").stdout
        assert json.loads(files["status.json"])["active_state"] == "active"
        assert json.loads(files["MANIFEST.json"])["host"] == sshd.target
        replayed = on_host(sshd, units, "replay", str(out), "--json")
        assert replayed.returncode == 0 and verdict_of(replayed)["verdict"] == "healthy"

        # top, piped: one snapshot of that host's units, from its D-Bus and journal
        snap = on_host(sshd, units, "top", "--json", "--host", sshd.target)
        by = {r["name"]: r for r in json_lines(snap)}
        assert snap.returncode == 0 and set(by) == {p.stem for p in units.glob("*.toml")}, snap.stderr.decode()
        assert by[name]["state"] == "healthy" and by[name]["phase"] == "ready", by[name]
        assert by[name]["kv_tokens"] == v["figures"]["kv_tokens"] and by[name]["usual_s"] is not None
        assert by["demo-segfault"]["state"] == "not installed"
        # on a terminal: the live board over SSH, redrawn as the journal streamed from there arrives; `q` quits
        live = subprocess.run([sys.executable, str(ROOT / "tests/rig/pty_keys.py"), "--until", "healthy", "--after",
                               "30", "--keys", "q", "--", SVCDIAG, "--units", str(units), "top", "--host", sshd.target],
                              capture_output=True, timeout=90, env=host_env(sshd, units), check=False)
        screen = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", lambda m: "" if m.group().endswith("m") else "\n", live.stdout.decode())
        assert live.returncode == 0, screen[-2000:]
        assert re.search(rf"^ *{name}\s+healthy\s+ready", screen, re.M), screen[-3000:]
    finally:
        on_host(sshd, units, "down", name, "--host", sshd.target)


# ---------------------------------------------------------------- campaign


def test_campaign_over_ssh_runs_each_config_there(units: Path, sshd) -> None:
    base = variant(units, "cb", "demo-smoke")
    a = variant(units, "ca", "demo-smoke")
    bad = variant(units, "cx", "demo-segfault")
    plan = units / "plans" / f"camp-{uuid.uuid4().hex[:6]}.toml"
    plan.parent.mkdir(exist_ok=True)
    plan.write_text(f'name = "{plan.stem}"\nbaseline = "{base}"\n'
                    f'[[phase]]\nname = "one"\nconfigs = ["{a}", "{bad}"]\n'
                    'benchmark = "curl -s http://{host}:{port}/get_model_info"\n')
    p = on_host(sshd, units, "campaign", str(plan), "--json", "--host", sshd.target, timeout=300)
    recs = json_lines(p)
    res = recs[-1]
    assert res["event"] == "campaign_result" and p.returncode == 1, p.stdout.decode()[-3000:] + p.stderr.decode()
    assert res["baseline"]["verdict"] == "healthy"
    rows = {r["config"]: r for r in res["rows"]}
    assert rows[a]["status"] == "healthy" and rows[bad]["status"] == "failed"
    assert rows[a]["benchmark"]["exit_code"] == 0 and "model_path" in rows[a]["benchmark"]["output"]  # through SSH
    assert rows[bad]["invocation"] == sshd.rig.run(["systemctl", "show", "-P", "InvocationID", f"{bad}.service"]
                                                    ).stdout.decode().strip()  # it ran there
    for n in (base, a, bad):
        assert is_active(sshd.rig, f"{n}.service") in ("inactive", "failed", "unknown")  # each taken down


# ---------------------------------------------------------------- [secrets] over SSH


@pytest.fixture
def ssh_argv_log(tmp_path: Path) -> tuple[dict[str, str], Path]:
    """A PATH whose `ssh` records every command line it is given, then runs the real ssh."""
    real = subprocess.run(["sh", "-c", "command -v ssh"], capture_output=True, check=True).stdout.decode().strip()
    d = tmp_path / "bin"
    d.mkdir()
    log = tmp_path / "ssh-argv.log"
    (d / "ssh").write_text(f'#!/bin/sh\nprintf "%s\\n" "$*" >> {log}\nexec {real} "$@"\n')
    (d / "ssh").chmod(0o755)
    return {"PATH": f"{d}:{os.environ.get('PATH', '/usr/bin:/bin')}"}, log


@pytest.mark.parametrize("readiness", ["journal", "notify"])
def test_secrets_are_written_there_0600_and_reach_the_server(units: Path, sshd, ssh_argv_log, readiness: str) -> None:
    env_extra, log = ssh_argv_log
    folder = Path(f"/var/tmp/svcdiag-secret-{uuid.uuid4().hex[:6]}")  # on this machine only
    folder.mkdir(mode=0o700)
    secret = folder / "hf_token"
    token = f"hf_b1{uuid.uuid4().hex[:10]}\"$HOME`id`'x"
    secret.write_text(token + "\n")
    secret.chmod(0o600)
    sshd.rig.run(["rm", "-rf", str(folder)])  # gpu-a's overlay of this machine's / must not show it
    name = variant(units, f"sec{readiness[0]}", "demo-smoke", readiness=readiness,
                   extra=f'\n[secrets]\nHF_TOKEN = "{secret}"\n')
    unit = f"{name}.service"

    def run(*args: str) -> subprocess.CompletedProcess[bytes]:
        return subprocess.run([SVCDIAG, "--units", str(units), *args], capture_output=True, timeout=180,
                              env={**host_env(sshd, units), **env_extra}, check=False)

    def server_env() -> list[bytes]:
        pids = sshd.rig.run(f"p=$(systemctl show -P MainPID {unit}); echo $p $(pgrep -P $p)").stdout.split()
        return [e for pid in pids for e in sshd.rig.run(f"cat /proc/{pid.decode()}/environ").stdout.split(b"\0")]

    try:
        i = run("install", name, "--host", sshd.target)  # what used to be refused: written there, paths named
        assert i.returncode == 0 and f"secret  {sshd.target}:{secret}" in i.stdout.decode(), i.stdout + i.stderr
        p = run("up", name, "--wait-ready", "--json", "--host", sshd.target)
        assert p.returncode == 0 and verdict_of(p)["verdict"] == "healthy", p.stdout.decode()[-2000:] + p.stderr.decode()
        assert f"HF_TOKEN={token}".encode() in server_env()
        # there: a private copy where the unit's LoadCredential= looks, and in journal mode the EnvironmentFile
        assert sshd.rig.run(f"stat -c '%a %U' {secret}").stdout.decode().strip() == "600 root"
        assert sshd.rig.run(f"cat {secret}").stdout.decode() == token + "\n"
        envf = f"/etc/svcdiag/secrets/{name}.env"
        if readiness == "journal":
            modes = sshd.rig.run(f"stat -c '%a %U' {envf} /etc/svcdiag/secrets").stdout.decode().split("\n")
            assert modes[:2] == ["600 root", "700 root"]
        else:  # the supervisor exports it from $CREDENTIALS_DIRECTORY: no file of ours
            assert sshd.rig.run(f"test -e {envf}", check=False).returncode != 0
        # the value was on ssh's stdin only: never an argument, an output line, a process's command line there
        argv = log.read_text()
        assert "systemd-stdio-bridge" in argv and "hf_b1" not in argv
        assert "hf_b1" not in (i.stdout + i.stderr + p.stdout + p.stderr).decode()
        assert sshd.rig.run("cat /proc/[0-9]*/cmdline 2>/dev/null | tr '\\0' ' ' | grep -c 'hf_b[1]'",
                            check=False).stdout.strip() == b"0"

        # rotated here: the next start there has the new value
        rotated = token.replace("hf_b1", "hf_b1r")
        secret.write_text(rotated + "\n")
        r = run("up", name, "--wait-ready", "--restart", "--json", "--host", sshd.target)
        assert r.returncode == 0, r.stderr.decode()
        notes = [e["message"] for e in json_lines(r) if e["event"] == "note"]
        assert f"secret written to {sshd.target}:{secret}" in notes
        assert f"HF_TOKEN={rotated}".encode() in server_env() and f"HF_TOKEN={token}".encode() not in server_env()
        assert "hf_b1" not in log.read_text()
    finally:
        run("down", name, "--host", sshd.target)
        sshd.rig.run(["rm", "-rf", str(folder)], check=False)
        for f in folder.iterdir():
            f.unlink()
        folder.rmdir()


def test_tune_over_ssh_starts_its_candidates_there_and_writes_the_result_here(units: Path, sshd) -> None:
    name = variant(units, "tn", "demo-smoke", 0.02, extra='max_running_requests = 8\nmax_mamba_cache_size = 2\n'
                   'gpu_memory_gb = 94.5\n[speculative]\nalgorithm = "DFLASH"\n')
    p = on_host(sshd, units, "tune", name, "--target", "max_running=4", "--host", sshd.target, "--json", timeout=300)
    r = json_lines(p)[-1]
    assert p.returncode == 0 and r["event"] == "tune_result" and r["status"] == "met", \
        p.stdout.decode()[-3000:] + p.stderr.decode()
    assert r["starts"] == 2  # no model files: the first start measures, the second serves with the least
    logged = sshd.rig.run(["journalctl", "-q", "--no-pager", "-u", f"{name}-tuned.service"]).stdout.decode()
    assert logged.count("The server is fired up and ready to roll!") == 2  # both starts ran there
    assert is_active(sshd.rig, f"{name}-tuned.service") in ("inactive", "unknown")  # and was stopped there
    assert (units / f"{name}-tuned.toml").read_text().startswith(f"# Written by `svcdiag tune {name}`")
