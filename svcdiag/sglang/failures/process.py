"""How a process ended when no row above names why: a signal, an exit, a stop, a hang SGLang's watchdog saw, a log that
stops.
"""

from __future__ import annotations

from collections.abc import Mapping

from svcdiag.sglang import lazy_re
from svcdiag.sglang.failures._model import Cause, FailureClass, Family, Own, Place, Role, said

#: the families whose rows this module files
FAMILIES = (Family.PROCESS,)

#: the causes the grammar gives a process's end by how it ended, where no line's words name one (the rows name every
#: other cause): a failure whose words name none, a signal, an exit status, SIGKILL with no word (most often the
#: kernel's OOM killer), and a kernel library's own check (`Failed: NCCL error …`) by its library
UNNAMED = Cause.EXCEPTION
SIGNALLED = Cause.KILLED_BY_SIGNAL
EXIT_STATUS = Cause.EXITED
SIGKILLED = Cause.HOST_OOM
KERNEL_CHECK: Mapping[str, Cause] = {"NCCL": Cause.NCCL_ERROR, "CUDA": Cause.CUDA_ERROR, "HIP": Cause.CUDA_ERROR}


def _watchdog(w: Mapping[str, str]) -> tuple[str, ...]:
    secs = f"{float(w['secs']):g} s" if w["secs"] else "watchdog_timeout seconds"
    return (f"SGLang's own watchdog saw no progress on a batch for {secs} in phase {w['phase']}, dumped the stacks and "
            "killed the server: the `Received sigquit` after it is the consequence, the hang the cause.",
            "A first batch that compiles kernels (FlashInfer or DeepGEMM JIT, torch.compile) can take that long once: "
            "warm their caches, or give SGLang `--watchdog-timeout` (extra_args) above it. A batch that never ends is a "
            "hang: ranks waiting on each other in a collective (NCCL, DP attention, expert parallel) or a kernel that "
            "does not return; the py-spy dump printed above the line shows where each rank waits.")


ROWS: tuple[FailureClass, ...] = (
    # SGLang's own watchdog: a forward pass (or the tokenizer) made no progress for --watchdog-timeout s
    FailureClass(Cause.WATCHDOG_TIMEOUT, priority=20, line=lazy_re.compile(r"[Ww]atchdog timeout \(self\.watchdog_timeout="),
        alone=(Own(Place.MESSAGE, lazy_re.compile(r"Scheduler debug info:"),  # its dump of the scheduler, before the timeout
                   says="SGLang's watchdog saw no progress and dumped the scheduler's state (`Scheduler debug info:`): a hang"),
               Own(Place.MESSAGE)),  # its timeout line, where SGLang's own message says it
        doc="SGLang's own watchdog found a batch stuck and SIGQUIT the server: `Watchdog timeout "
            "(self.watchdog_timeout=300)` (≤ 0.4), `Scheduler watchdog timeout "
            "(self.watchdog_timeout=300, self.soft=False)` (0.5); the `Received sigquit …` after it is "
            "the consequence",
        explain=_watchdog),
    FailureClass(Cause.KILLED_BY_SIGNAL, priority=280, role=Role.CONSEQUENCE,
        doc="systemd's `Main process exited, code=killed\\|dumped, status=N/SIG`; `Exit code: -9`; `… "
            "scheduler died during initialization (exit code: -9)`; the shell's `Segmentation fault (core"
            " dumped)`, `Aborted (core dumped)`, `Bus error`, `段错误 (核心已转储)` (a script's `./entrypoint.sh:"
            " line 48: 28 Killed python3 …` too, its padding squeezed by a console), a launcher's `exited with "
            "code 139` (128 + N); SIGBUS's diagnosis "
            "names /dev/shm (`--shm-size`); SGLang's SIGCHLD warning `Child process unexpectedly failed "
            "with an exit code 9. pid=N` / `exitcode=139` (a raw wait status: a signal is a suspect, "
            "cleared if the start goes on; `256`, exit 1, alone is none); torchrun's `ChildFailedError` "
            "summary, by its Root Cause block's `exitcode  : -6` (a consequence: a rank's own error "
            "before it is the cause)"),
    FailureClass(Cause.EXITED, priority=290, role=Role.CONSEQUENCE,
        doc="systemd's `code=exited, status=N` before ready; a launcher's `sglang-1 exited with code 1` (docker "
            "compose), `command terminated with exit code 1` (kubectl), `srun: error: node-06: task 1: Exited with "
            "exit code 1` (Slurm)"),
    FailureClass(Cause.DIED_SILENTLY, priority=300, role=Role.CONSEQUENCE,
        doc="the server's processes ended with no traceback and no exit line: only the multiprocessing resource "
            "tracker's `resource_tracker: There appear to be 8 leaked semaphore objects to clean up at shutdown` (it "
            "prints that once every process of the server is gone; a cause said before or after it still wins). "
            "Something killed them from outside, most often the kernel's OOM killer: on unified-memory machines "
            "(GB10, GH200, GB200) GPU memory is host memory; the diagnosis says where to look (`journalctl -k`, "
            "MemoryMax=, a container's limit)",
        explain=("The server's processes ended in phase {phase} without a word of their own: no traceback, no exit "
                 "line, only Python's resource tracker noting, at its own exit, the semaphores they left. A process "
                 "that can still print does; this one was killed from outside, most often by SIGKILL from the "
                 "kernel's OOM killer.",
                 "The OOM killer acts on host RAM. On unified-memory machines (DGX Spark's GB10, GH200, GB200) GPU "
                 "memory is host memory: mem_fraction_static takes that share of the machine's RAM, and what the GPU "
                 "holds is not in the process's RSS, so the killer may pick a small process and the rest die with it.",
                 "Look at `journalctl -k | grep -i -e 'out of memory' -e oom-kill` (or `dmesg -T`), `systemctl show "
                 "-p MemoryMax {unit}`, and a container's memory limit (`docker inspect` State.OOMKilled)."),
        fixes=(({"mem_fraction_static": 0.7}, "on a unified-memory machine, to leave the host RAM the processes need"),)),
    FailureClass(Cause.STOPPED, priority=310, role=Role.CONSEQUENCE,
        doc="stopped from outside before ready (systemd's `Stopping …`, SGLang's `SIGTERM received`, a terminal's "
            "`^C`, docker compose's `Gracefully stopping…`); stopped after its phase's deadline passed with no "
            "progress, the start is `timed_out` in that phase instead (the operator gave up on a stuck start)"),
    FailureClass(Cause.EXCEPTION, priority=320,
        doc="any other traceback, to its final exception line (even with no \"error\" in it)"),
    FailureClass(Cause.TIMED_OUT, priority=330,
        doc="no progress in a phase past its deadline (SGLang printed no error); systemd's own "
            "TimeoutStartSec= before svcdiag's deadline"),
    FailureClass(Cause.INCOMPLETE, priority=340,
        doc="the log ends before a verdict: no error, no ready line"),
    FailureClass(Cause.WATCHDOG_TIMEOUT, "timeout_said", priority=710, said=said(r"watchdog_timeout=(?P<secs>\d+(?:\.\d+)?)"),
                 doc="Scheduler watchdog timeout (self.watchdog_timeout=300, self.soft=False)", explain=_watchdog),
)
