"""#31 §3: multi-node configs under the notifier, without systemd. Each node's unit runs
`svcdiag supervise --config NAME --node-rank R`, talking sd_notify to a socket the test holds:
node 0 is READY=1 once its HTTP agrees (SGLang serves it only when every rank has joined), a
worker node once its own log says ready; a failing node says so in STATUS=."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

from svcdiag.config.service import UnitsDir
from svcdiag.sglang.flags import exec_argv

from .conftest import ROOT, assert_one_line_error, run_svcdiag
from .ports import free_port
from .test_supervise import NotifySocket


def node_supervisor(units: Path, name: str, rank: int, sock: NotifySocket) -> subprocess.Popen:
    node = next(n for n in UnitsDir(units, "t").load(name).node_configs() if n.node_rank == rank)
    env = {**os.environ, "NOTIFY_SOCKET": str(sock.path), "PYTHONUNBUFFERED": "1"}
    return subprocess.Popen([sys.executable, "-m", "svcdiag", "--units", str(units), "supervise", "--config", name,
                             "--node-rank", str(rank), "--", *exec_argv(node)], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, cwd=ROOT)


def test_each_node_is_ready_by_its_own_account(units: Path, tmp_path: Path) -> None:
    (units / "mn.toml").write_text(f'extends = "demo-multinode"\nport = {free_port()}\nsim_time_scale = 0.02\n')
    socks = [NotifySocket(tmp_path / f"notify{r}") for r in (0, 1)]
    procs = [node_supervisor(units, "mn", r, socks[r]) for r in (0, 1)]
    try:
        worker = socks[1].until("READY=1", timeout=60)
        assert "STATUS=ready · KV " in worker and worker.rstrip().endswith("node 1: no HTTP of its own")
        leader = socks[0].until("READY=1", timeout=60)
        assert "HTTP agrees" in leader  # node 0: its HTTP, the whole start's
    finally:
        for p in procs:
            p.send_signal(signal.SIGTERM)
        for p in procs:
            p.communicate(timeout=30)


def test_a_failing_node_says_so_and_a_bad_rank_is_one_line(units: Path, tmp_path: Path) -> None:
    (units / "mn.toml").write_text(f'extends = "demo-multinode"\nport = {free_port()}\nsim_time_scale = 0.02\n'
                                   '[[nodes]]\nnode_rank = 0\n[[nodes]]\nnode_rank = 1\nsimulate = "segfault"\n')
    sock = NotifySocket(tmp_path / "notify")
    p = node_supervisor(units, "mn", 1, sock)
    p.communicate(timeout=60)
    assert p.returncode == -signal.SIGSEGV
    assert any(m.startswith("STATUS=failed [killed_by_signal]") for m in sock.drain())
    assert_one_line_error(run_svcdiag("--units", str(units), "supervise", "--config", "mn", "--node-rank", "2",
                                      "--", "true"), "--node-rank 2: mn has no such node (ranks 0, 1)", code=2)
