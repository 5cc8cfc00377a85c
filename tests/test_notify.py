"""What the supervisor tells systemd, and how often (svcdiag.systemd.notify): one STATUS= per
read of the server's output, so PID 1 and every D-Bus client hear of a burst of lines once."""

from __future__ import annotations

import os
import sys
from pathlib import Path

from svcdiag.config.service import UnitsDir
from svcdiag.ops.serve.supervise import Supervisor
from svcdiag.systemd.notify import Notifier


def test_held_messages_go_out_in_one_datagram_the_last_of_each_kind_status_first() -> None:
    sent: list[str] = []
    n = Notifier(send=sent.append)
    with n.held():
        n.extend(10)
        n.status("loading weights 0 s")
        n.extend(12)
        n.status("kv cache 0 s · KV 94,126 tokens")
        assert sent == []  # nothing leaves while held
    # one datagram (sd_notify takes several assignments, one a line): one message for PID 1 to read
    assert sent == ["STATUS=kv cache 0 s · KV 94,126 tokens\nEXTEND_TIMEOUT_USEC=12000000"]
    n.status("cuda graph 0 s")
    assert sent[-1] == "STATUS=cuda graph 0 s"  # not held: at once


def test_flush_sends_what_is_held_so_far_and_keeps_holding() -> None:
    sent: list[str] = []
    n = Notifier(send=sent.append)
    with n.held():
        n.status("ready 0 s · HTTP cross-check")
        n.flush()
        assert sent == ["STATUS=ready 0 s · HTTP cross-check"]
        n.status("ready 1 s")
        assert len(sent) == 1
    assert sent[-1] == "STATUS=ready 1 s"


#: the child's next write waits for the supervisor's STATUS= on the one before (the test touches the file named
#: by argv[1]): a fixed sleep let a supervisor stalled on a loaded machine read both writes as one
AFTER_STATUS = r"""
import os, sys, time
deadline = time.monotonic() + 60
while not os.path.exists(sys.argv[1]) and time.monotonic() < deadline:
    time.sleep(0.01)
"""

BURST = r"""
import os, sys, time
os.write(1, b"[2026-12-03 10:00:00.100] Load weight begin. avail mem=94.50 GB\n"
            b"[2026-12-03 10:00:00.200] Load weight end. elapsed=41.90 s, type=Qwen3_5ForCausalLM, avail mem=44.21 GB, mem usage=50.29 GB.\n"
            b"[2026-12-03 10:00:00.300] KV Cache is allocated. dtype: torch.bfloat16, #tokens: 94126, K size: 2.87 GB, V size: 2.87 GB\n")
""" + AFTER_STATUS + r"""
os.write(1, b"[2026-12-03 10:00:00.400] Memory pool end. avail mem=23.63 GB\n")
"""


def test_a_burst_of_milestone_lines_in_one_read_is_one_status(units: Path, tmp_path: Path) -> None:
    (units / "b.toml").write_text('extends = "demo-dense"\nreadiness = "notify"\n')
    child = tmp_path / "child.py"
    child.write_text(BURST)
    said = tmp_path / "said"
    sent: list[str] = []

    def send(msg: str) -> None:
        sent.append(msg)
        if "KV 94,126 tokens" in msg:
            said.touch()

    out = tmp_path / "out"
    with out.open("wb") as f:
        sup = Supervisor(UnitsDir(units, "t").load("b"), [sys.executable, str(child), str(said)], out_fd=f.fileno(),
                         notifier=Notifier(send=send), environ={})
        sup.run()
    statuses = [m for m in sent if m.startswith("STATUS=")]  # STATUS= leads each datagram it is in
    # starting; the three lines of the first read (weights loaded, KV sized) as one; the fourth; the end
    assert len(statuses) == 4, statuses
    assert "KV 94,126 tokens" in statuses[1] and "STATUS=failed" in statuses[-1]
    assert out.read_bytes().count(b"\n") == 4  # every line passed through


FLOOD = r"""
import os
os.write(1, b"[2026-12-03 10:00:00.100] Load weight begin. avail mem=94.50 GB\n")
""" + AFTER_STATUS + r"""
os.write(1, b"x" * 40000 + b"\n[2026-12-03 10:00:00.200] Load weight end. elapsed=41.90 s, type=Qwen3_5ForCausalLM, avail mem=44.21 GB, mem usage=50.29 GB.\n")
"""


def test_a_small_reads_status_leaves_before_its_bytes_and_a_big_read_passes_through_first(
        units: Path, tmp_path: Path) -> None:
    (units / "b.toml").write_text('extends = "demo-dense"\nreadiness = "notify"\n')
    child = tmp_path / "child.py"
    child.write_text(FLOOD)
    out = tmp_path / "out"
    said = tmp_path / "said"
    written: list[tuple[str, int]] = []  # each STATUS= and how many bytes had been passed through when it left
    with out.open("wb") as f:
        def send(msg: str) -> None:
            written.append((msg, os.fstat(f.fileno()).st_size))
            if msg.startswith("STATUS=loading weights"):
                said.touch()

        Supervisor(UnitsDir(units, "t").load("b"), [sys.executable, str(child), str(said)], out_fd=f.fileno(),
                   notifier=Notifier(send=send), environ={}).run()
    begin = next(n for m, n in written if m.startswith("STATUS=loading weights"))
    assert begin == 0  # the milestone's news left before its line: `up` is awake when journald has it
    end = next(n for m, n in written if "KV" in m or m.startswith("STATUS=kv cache"))
    assert end == out.stat().st_size > 40000  # 40 kB in one read: passed through, then judged
