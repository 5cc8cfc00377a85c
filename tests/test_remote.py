"""Remote hosts and multi-node configs without a rig (docs/remote.md): parsing `--host`,
validating `nnodes`/`[[nodes]]`, rendering one unit per node, SSH's failures in one line, and
the stand-in's worker node judged healthy from its scheduler lines alone. The live paths
(sshd in the rig) are in tests/rig/test_rig_remote.py."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from svcdiag.errors import SvcdiagError
from svcdiag.systemd.remote import Connection, Target, _esc, _explain

from .conftest import assert_one_line_error

USER = st.from_regex(r"[a-z_][a-z0-9_.\-]{0,12}", fullmatch=True)
HOST = st.from_regex(r"[a-z0-9][a-z0-9.\-]{0,20}", fullmatch=True)


@settings(max_examples=200, deadline=None)
@given(st.one_of(st.none(), USER), HOST, st.one_of(st.none(), st.integers(1, 65535)))
def test_host_specs_parse_and_print_back(user, host, port) -> None:
    spec = f"{user + '@' if user else ''}{host}{f':{port}' if port else ''}"
    t = Target.parse(spec)
    assert (t.user, t.host, t.port) == (user, host, port)
    assert str(t) == spec
    args = t.args()
    assert args[-2:] == ["--", host]  # the host is never taken for an ssh option


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=30))
def test_anything_else_is_refused_in_one_sentence(text: str) -> None:
    try:
        t = Target.parse(text)
    except SvcdiagError as e:
        assert "\n" not in str(e) and "[user@]HOST[:port]" in str(e)
        return
    assert not t.host.startswith("-")


@pytest.mark.parametrize("spec", ["-oProxyCommand=x", "root@", "@host", "host:0", "host:70000", "a b", "root@host:x"])
def test_option_like_or_broken_hosts_are_refused(spec: str) -> None:
    with pytest.raises(SvcdiagError):
        Target.parse(spec)


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=40))
def test_dbus_address_values_are_fully_escaped(value: str) -> None:
    out = _esc(value)
    assert all(c.isascii() and (c.isalnum() or c in "_/.-%") for c in out)
    assert not any(c in out for c in ",;=")


def test_the_dbus_address_runs_the_bridge_over_the_master(monkeypatch) -> None:
    monkeypatch.setenv("SVCDIAG_SSH_CONFIG", "/etc/x y/ssh_config")
    c = Connection(Target.parse("root@gpu-a:2222"))
    try:
        addr = c.dbus_address().decode()
    finally:
        c.close()
    assert addr.startswith("unixexec:path=/") and "argv0=" in addr
    assert "BatchMode%3dyes" in addr and "ControlMaster%3dno" in addr and "argv2=/etc/x%20y/ssh_config," in addr
    assert "systemd-stdio-bridge" in addr and "StrictHostKeyChecking" not in addr  # never loosened by us


@pytest.mark.parametrize(("stderr", "words"), [
    ("ssh: connect to host 10.0.0.9 port 22: Connection refused\r\n", "unreachable"),
    ("ssh: Could not resolve hostname gpu-z: Name or service not known\n", "unreachable"),
    ("root@10.0.0.9: Permission denied (publickey).\n", "authentication refused"),
    ("No ED25519 host key is known for [127.0.0.1]:2222 and you have requested strict checking.\n"
     "Host key verification failed.\n", "host key unknown"),
    ("@@@@@@@@@@@\n@    WARNING: REMOTE HOST IDENTIFICATION HAS CHANGED!     @\nHost key verification failed.\n",
     "host key unknown or changed"),
])
def test_ssh_failures_are_one_line_each(stderr: str, words: str) -> None:
    line = _explain(Target.parse("root@gpu-a"), stderr, 255)
    assert words in line and "\n" not in line and line.startswith("root@gpu-a: ")


# ---------------------------------------------------------------- multi-node configs


def write(units: Path, name: str, body: str) -> None:
    (units / f"{name}.toml").write_text(body)


MN = 'extends = "demo-smoke"\ntp_size = 2\ngpus = [0]\nnnodes = 2\n'
NODES = '[[nodes]]\nnode_rank = 0\n\n[[nodes]]\nnode_rank = 1\nhost = "root@gpu-b:2222"\n'


def test_a_multinode_config_renders_one_unit_per_node(cli, units: Path) -> None:
    write(units, "mn", MN + 'dist_init_addr = "10.0.0.1:5000"\n' + NODES)
    r = cli("render", "mn", "--json")
    assert r.exit_code == 0, r.output
    rows = [json.loads(x) for x in r.output.splitlines()]
    assert [(x["unit"], x["node_rank"], x["host"]) for x in rows] == [
        ("mn-node0.service", 0, "localhost"), ("mn-node1.service", 1, "root@gpu-b:2222")]
    for rank, x in enumerate(rows):
        argv = x["sglang_argv"]
        i = argv.index("--nnodes")
        assert argv[i:i + 6] == ["--nnodes", "2", "--node-rank", str(rank), "--dist-init-addr", "10.0.0.1:5000"]
    assert rows[0]["config_hash"] != rows[1]["config_hash"]


def test_dist_init_addr_defaults_to_the_rank0_host(units: Path) -> None:
    from svcdiag.config.service import find_units_dir

    write(units, "mn", MN + '[[nodes]]\nnode_rank = 1\nhost = "b"\n[[nodes]]\nnode_rank = 0\nhost = "root@gpu-a:22"\n')
    nodes = find_units_dir(str(units)).load("mn").node_configs()
    assert [(n.node_rank, n.remote_host, n.dist_init_addr) for n in nodes] == [
        (0, "root@gpu-a:22", "gpu-a:20000"), (1, "b", "gpu-a:20000")]


def test_a_single_node_config_is_unchanged(units: Path) -> None:
    from svcdiag.config.service import find_units_dir

    cfg = find_units_dir(str(units)).load("demo-smoke")
    assert cfg.node_configs() == [cfg] and not cfg.multinode
    assert "--nnodes" not in " ".join(json.dumps(cfg.flat()))


@pytest.mark.parametrize(("body", "field", "words"), [
    (MN + '[[nodes]]\nnode_rank = 0\n', "nodes", "needs 2 [[nodes]] tables"),
    (MN + '[[nodes]]\nnode_rank = 0\n[[nodes]]\nnode_rank = 0\n', "nodes", "each once"),
    (MN + '[[nodes]]\nnode_rank = 0\n[[nodes]]\nnode_rank = 1\nhost = "-oProxyCommand=x"\n', "nodes[1].host",
     "[user@]HOST[:port]"),
    (MN + '[[nodes]]\nnode_rank = 0\n[[nodes]]\nnode_rank = 1\nhots = "b"\n', "nodes[1].hots", "did you mean 'host'"),
    (MN + '[[nodes]]\nnode_rank = 0\n[[nodes]]\nhost = "b"\n', "nodes[1].node_rank", "is required"),
    (MN + '[[nodes]]\nnode_rank = 0\ngpus = [0, 1]\n[[nodes]]\nnode_rank = 1\n', "nodes[0].gpus", "needs 1 GPUs per node"),
    ('extends = "demo-smoke"\ntp_size = 3\ngpus = [0]\nnnodes = 2\n' + NODES, "nnodes", "does not split"),
    ('extends = "demo-smoke"\n' + NODES, "nodes", "nnodes is 1"),
    (MN + 'extra_args = ["--node-rank", "1"]\n' + NODES, "extra_args", "--node-rank is set by its own field"),
    (MN + 'dist_init_addr = "nowhere"\n' + NODES, "dist_init_addr", "HOST:PORT"),
    ('extends = "demo-smoke"\nremote_host = "root@@x"\n', "remote_host", "[user@]HOST[:port]"),
])
def test_bad_multinode_configs_are_one_line_naming_the_field(cli, units: Path, body: str, field: str, words: str) -> None:
    write(units, "bad", body)
    r = cli("render", "bad")
    assert_one_line_error(r, "bad.toml", field, words)


def test_status_with_a_bad_host_is_one_line(cli) -> None:
    assert_one_line_error(cli("status", "--host", "root@@gpu"), "[user@]HOST[:port]")


def test_an_unreachable_host_is_one_line(cli, tmp_path: Path, monkeypatch) -> None:
    (tmp_path / "cfg").write_text("Host *\n  ConnectTimeout 3\n")
    monkeypatch.setenv("SVCDIAG_SSH_CONFIG", str(tmp_path / "cfg"))
    r = cli("status", "demo-smoke", "--host", "root@127.0.0.1:1")  # nothing listens on port 1
    assert_one_line_error(r, "root@127.0.0.1:1: unreachable")


# ---------------------------------------------------------------- a notify unit's host


def test_a_notify_units_host_must_have_svcdiag_and_the_same_config(units: Path, tmp_path: Path, monkeypatch) -> None:
    """The probe Connection.check_supervisor runs there, run here by `sh` instead of over SSH."""
    from svcdiag.config.service import find_units_dir

    conn = Connection(Target("gpu-a", "root"))
    monkeypatch.setattr(conn, "run", lambda cmd, input=None, timeout=60: subprocess.run(
        ["sh", "-c", cmd], input=input, capture_output=True, cwd=tmp_path, check=False))
    good = find_units_dir(str(units)).load("demo-smoke").config_hash
    try:
        conn.check_supervisor(sys.executable, str(units), "demo-smoke", good)  # all there: no error
        (tmp_path / "empty").mkdir()
        for python, where, config_hash, words in [
                ("/nonexistent/bin/python", str(units), good, "/nonexistent/bin/python is not there"),
                ("/usr/bin/python3", str(units), good, "/usr/bin/python3 there cannot import svcdiag"),
                (sys.executable, str(tmp_path / "empty"), good, f"cannot load config demo-smoke from {tmp_path / 'empty'}"),
                (sys.executable, str(units), "0" * 16, f"differs from this one (hash {good} there, {'0' * 16} here)")]:
            with pytest.raises(SvcdiagError) as e:
                conn.check_supervisor(python, where, "demo-smoke", config_hash)
            msg = str(e.value)
            assert msg.startswith("root@gpu-a: demo-smoke is a notify unit") and words in msg and "\n" not in msg, msg
            assert 'readiness = "journal"' in msg
    finally:
        conn.close()


# ---------------------------------------------------------------- the stand-in's worker node


def sim(*extra: str) -> str:
    argv = [sys.executable, "-m", "svcdiag.sim", "healthy-hybrid-dflash", "--virtual-clock", "2026-01-01T00:00:00",
            "--no-http", "--model-path", "/m", "--tp-size", "2", "--context-length", "32768",
            "--max-mamba-cache-size", "24", "--max-running-requests", "4", *extra]
    return subprocess.run(argv, capture_output=True, text=True, timeout=60, check=True).stdout


def test_the_stand_in_worker_node_prints_only_scheduler_lines_and_is_judged_healthy(tmp_path: Path) -> None:
    from svcdiag.ops.offline.replay import replay_path  # noqa: F401 -- the replay entry point exists

    log = sim("--nnodes", "2", "--node-rank", "1", "--dist-init-addr", "10.0.0.1:5000")
    assert "'node_rank': 1" in log and "'nnodes': 2" in log
    assert "Uvicorn" not in log and "max_total_num_tokens=" not in log and "fired up" not in log
    (tmp_path / "n1.log").write_text(log)
    p = subprocess.run([sys.executable, "-m", "svcdiag", "replay", str(tmp_path / "n1.log"), "--json"],
                       capture_output=True, text=True, timeout=60, check=False)
    v = json.loads(p.stdout.splitlines()[-1])
    assert p.returncode == 0 and v["verdict"] == "healthy" and "worker node 1" in v["message"], p.stdout[-800:]
    head = sim("--nnodes", "2", "--node-rank", "0", "--dist-init-addr", "10.0.0.1:5000")
    assert "'node_rank': 0" in head and "fired up" in head
