"""How a process's end is worded, wherever it is said: the shell's word for a signal, faulthandler's and a
native runtime's last lines, a kernel library's check, a launcher's exit report (docker compose, kubectl,
Slurm, Open MPI), SGLang's own reports of a child's exit, and the notices that say the processes are gone
or that a failure was retried. Each reader takes one line and returns the events it says (most often a
Failure whose role is DEATH: the consequence of a cause said elsewhere), or None when the line is not its.
Pure: the grammar (`LineParser`) decides where in a log each reader is asked.
"""

from __future__ import annotations

import re

from svcdiag.sglang import lazy_re
from svcdiag.sglang.causes import EXIT_STATUS, KERNEL_CHECK, SIGKILLED, SIGNALLED, UNNAMED, Place
from svcdiag.sglang.events import DEATH, SUSPECT, Event, Failure, ProcessesGone, Recovered, StopRequested
from svcdiag.sglang.registry import classify, own
from svcdiag.sglang.traceback import exit_cause
from svcdiag.signals import signal_name

#: what a shell prints when its child dies of a signal: alone (`Killed`, `Segmentation fault (core dumped)`),
#: from a script (`./serve.sh: line 7: 48211 Killed    python3 -m sglang…`), or in zh_CN (`已杀死`, `段错误 (核心已转储)`);
#: not `Terminated`: a shell says it too when systemd stops the unit on purpose
SHELL_SIGNALS = {"Killed": "KILL", "已杀死": "KILL", "Segmentation fault": "SEGV", "段错误": "SEGV", "Aborted": "ABRT",
                 "已放弃": "ABRT", "Bus error": "BUS", "Illegal instruction": "ILL", "Floating point exception": "FPE"}
#: (a script's line keeps its command after one space where a console squeezed the padding: `… 28 Killed python3 …`)
SHELL_SIGNAL_RE = lazy_re.compile(r"^(?P<script>\S+: line \d+: +\d+ )?(" + "|".join(map(re.escape, SHELL_SIGNALS)) + r")"
                             r"(?: ?[(（](?:core dumped|核心已转储)[)）])?(?:(?(script) +| {2,})\S.*)?$")
#: faulthandler's report of the signal that is killing the interpreter (it prints the threads' stacks after it)
FAULTHANDLER_SIGNALS = {"Segmentation fault": "SEGV", "Bus error": "BUS", "Aborted": "ABRT",
                        "Floating point exception": "FPE", "Illegal instruction": "ILL"}
FATAL_PYTHON = "Fatal Python error: "
#: what a native runtime prints as it kills the process with a signal, other than faulthandler: absl's handler
#: (`*** SIGSEGV received at time=…`), torch's (`!!!!!!! Segfault encountered !!!!!!!`), C++'s terminate with no
#: exception, glibc's heap checks and stack protector (each then abort()s)
NATIVE_SIGNAL_RE = lazy_re.compile(
    r"\*\*\* SIG(?P<sig>[A-Z]+) received at time=|!+ Segfault encountered !+"
    r"|(?P<abrt>terminate called (?:without an active exception|recursively)|\*\*\* stack smashing detected \*\*\*"
    r"|(?:free\(\)|malloc\(\)|munmap_chunk\(\)|realloc\(\)): [\w ]+$|double free or corruption\b"
    r"|corrupted (?:size vs\. prev_size|double-linked list))")
#: C++'s std::terminate on an uncaught exception (`terminate called after throwing an instance of 'c10::Error'`),
#: then its `  what():  …` line: the process aborts (SIGABRT) right after
TERMINATE_RE = lazy_re.compile(r"terminate called after throwing an instance of '([^']+)'")
#: a kernel library's own check, printed then exit(1) (sgl-kernel's CUDACHECK/NCCLCHECK: `Failed: Cuda error
#: /…/custom_all_reduce.cuh:411 'an illegal memory access was encountered'`)
KERNEL_CHECK_RE = lazy_re.compile(r"Failed: (Cuda|CUDA|HIP|NCCL) error (\S+:\d+) '([^']*)'")
#: what a native runtime prints just before it aborts the process: C++'s terminate, ROCm's HSA fault
NATIVE_ABORTS = ("terminate called after throwing", "Memory access fault by GPU")
#: a traceback SGLang (or the hub) goes on after, in the words of the line that closes it, wherever that line's words
#: begin: `retry() failed once … Will delay 0.84s and retry`, the caller giving up on retry() and carrying on (`Failed to
#: check hf_quant_config.json: … retry() exceed maximum number of retries.`), huggingface_hub's `Retrying in 1s [Retry 1/5].`,
#: SGLang's own `…; retrying`, `retrying without trust_remote_code` (not `… after retrying 3 times`: that gave up)
RETRY_SAID_RE = lazy_re.compile(r"retry\(\) failed once|retry\(\) exceed maximum number of retries\.? *$|\[Retry \d+/\d+\]"
                           r"|Will delay [\d.]+ ?s and retry"
                           r"|(?<!after )[Rr]etrying\b(?!.*\b(?:after|times|exhausted|exceeded|giving up|gave up)\b)")
#: the multiprocessing resource tracker's notice at its own exit, under any Python's path and line:
#: `/usr/lib/python3.10/multiprocessing/resource_tracker.py:224: UserWarning: resource_tracker: There appear to be 8
#: leaked semaphore objects to clean up at shutdown` (semaphore, shared_memory, folder; Python ≤ 3.7: semaphore_tracker)
TRACKER_NOTICE_RE = lazy_re.compile(r"(?:resource|semaphore)_tracker: There appear to be \d+ leaked \w+")
#: a launcher's word that its child (the whole server) exited: docker compose's `sglang-1 exited with code 137`
#: (v1: `sglang_server_1 exited with code 137`), kubectl's `command terminated with exit code 137`, Slurm's
#: `srun: error: node-06: task 1: Exited with exit code 1` / `srun: error: node-06: tasks 0-3: Killed`, Open MPI's
#: `mpirun noticed that process rank 7 with PID 0 on node n1 exited on signal 9 (Killed).`
LAUNCHER_EXIT_RE = lazy_re.compile(r"^(?:[\w.-]+ exited|command terminated) with (?:exit )?code (\d+)$"
                              r"|^srun: error: \S+: tasks? [\d,-]+: (?:Exited with exit code (\d+)|(\w[\w ]*\w))$"
                              r"|^mpirun noticed that process rank \d+ with PID \d+ on node \S+ exited on signal (\d+)\b")
#: docker compose's word that it stops its services: `docker compose up`'s Ctrl-C, `--abort-on-container-exit`
COMPOSE_STOPS = ("Gracefully stopping... (press Ctrl+C again to force)", "Aborting on container exit...")
WAIT_STATUS_RE = lazy_re.compile(r"Child process unexpectedly failed with (?:an exit code |exitcode=)(\d+)")
DIED_RE = lazy_re.compile(r"exit code: (-?\d+)|Exit code: (-?\d+)|crashed with exit code (-?\d+)")
#: the words of the resource tracker's notice a quick test finds (TRACKER_NOTICE_RE reads it)
TRACKER_MARK = "_tracker: There appear"


def last_words(text: str, ts: float | None) -> list[Event] | None:
    """A line that is fatal on its own, printed as the process dies: faulthandler's, a native runtime's signal
    line, the shell's word for a signal, a kernel library's check, a native abort (an empty list: not ours to
    judge, but no line of anything else either)."""
    if text.startswith(FATAL_PYTHON):
        what = text[len(FATAL_PYTHON):]
        sig = next((s for name, s in FAULTHANDLER_SIGNALS.items() if what.startswith(name)), None)
        return [Failure(ts=ts, line=text, cause=SIGNALLED if sig else UNNAMED, message=text,
                        evidence=(text,), signal=sig, role=DEATH)]
    if (n := NATIVE_SIGNAL_RE.match(text)) is not None:
        sig = n.group("sig") or ("ABRT" if n.group("abrt") else "SEGV")
        return [Failure(ts=ts, line=text, cause=SIGNALLED, message=f"the process died of SIG{sig}: {text}",
                        evidence=(text,), signal=sig, role=DEATH)]
    if (sh := SHELL_SIGNAL_RE.match(text)) is not None:  # the shell's word for the signal that ended it
        sig = SHELL_SIGNALS[sh.group(2)]
        if sig == "KILL":  # the kernel's OOM killer, most often
            return [Failure(ts=ts, line=text, cause=SIGKILLED, message="the process was killed (SIGKILL) without "
                            "a word of its own: most often the kernel's OOM killer (host RAM)", evidence=(text,),
                            signal="KILL", role=DEATH)]
        return [Failure(ts=ts, line=text, cause=SIGNALLED, message=f"the process died of SIG{sig}: {text}",
                        evidence=(text,), signal=sig, role=DEATH)]
    if (k := KERNEL_CHECK_RE.match(text)) is not None:  # then exit(1): the cause, ahead of the launcher's EOF
        lib, what = k.group(1).upper(), k.group(3)
        cause = classify(f"{lib} error: {what}", Place.LONE) or KERNEL_CHECK[lib]
        return [Failure(ts=ts, line=text, cause=cause, message=text, evidence=(text,))]
    if text.startswith(NATIVE_ABORTS):
        cause = classify(text, Place.LONE)  # ROCm's runtime on a bad address (then SIGABRT)
        return [Failure(ts=ts, line=text, cause=cause, message=text, evidence=(text,), role=SUSPECT)] if cause else []
    return None


def is_last_words(text: str) -> bool:
    """Whether a line is one of the lines that end a process (`last_words`'s, the tracker's notice): never the
    tail of a message or a traceback before it."""
    return SHELL_SIGNAL_RE.match(text) is not None or TRACKER_MARK in text \
        or NATIVE_SIGNAL_RE.match(text) is not None or KERNEL_CHECK_RE.match(text) is not None


def terminate_what(head: str, kind: str, text: str, ts: float | None) -> list[Event]:
    """C++'s terminate (`head`, of an uncaught `kind`), then its `what():` line (`text`): what() names the root
    cause (a device out of memory, a CUDA error) or, when it names none, the process is aborted for it (SIGABRT)."""
    what = text.removeprefix("what():").strip()
    cause = classify(what, Place.LONE)
    if cause is not None:
        return [Failure(ts=ts, line=text, cause=cause, message=f"{what} (C++ {kind}, then abort)",
                        evidence=(head, text))]
    return [Failure(ts=ts, line=text, cause=SIGNALLED, signal="ABRT", role=DEATH, evidence=(head, text),
                    message=f"an uncaught C++ {kind} aborted the process (SIGABRT): what(): {what}")]


def from_outside(text: str, ts: float | None) -> list[Event] | None:
    """What the process's surroundings say of its end: docker compose stopping its services, the resource
    tracker's notice (the processes are gone), a launcher's exit report, Slurm's OOM-killer count."""
    if text.startswith(COMPOSE_STOPS):  # docker compose stops its services (Ctrl-C, another one exited)
        return [StopRequested(ts=ts, line=text, by="docker compose")]
    if TRACKER_MARK in text and TRACKER_NOTICE_RE.search(text) is not None:
        return [ProcessesGone(ts=ts, line=text)]
    if text.startswith(("srun: error: ", "slurmstepd: error: ", "mpirun noticed")) or text[-1].isdigit():
        if (x := LAUNCHER_EXIT_RE.match(text)) is not None:
            code = x.group(1) or x.group(2) or (str(128 + int(x.group(4))) if x.group(4) else None)
            sig = SHELL_SIGNALS.get(x.group(3) or "")  # srun's words for the signal: `Killed`, `Segmentation fault`
            if code is not None or sig is not None:
                return launcher_exit(text, int(code) if code is not None else None, sig, ts)
        if (said := own(text, Place.OUTSIDE)) is not None:  # Slurm's OOM-killer count, as the rows word it
            return [Failure(ts=ts, line=text, cause=said.cause, signal=said.signal, evidence=(text,), role=said.event,
                            message=said.message)]
    return None


def launcher_exit(text: str, code: int | None, sig: str | None, ts: float | None) -> list[Event]:
    """A launcher's word for how the server's process ended (an exit code, 128 + N for signal N, or the signal's
    name), the server having said nothing: a consequence, as the shell's `Killed` is."""
    if code is not None and code > 128:
        sig = signal_name(code - 128)
    if sig is not None:
        if sig == "KILL":
            return [Failure(ts=ts, line=text, cause=SIGKILLED, signal=sig, evidence=(text,), role=DEATH,
                            message=f"the server's process was killed (SIGKILL, {text!r}) without a word of its own: "
                                    "most often the kernel's OOM killer (host RAM, or the container's memory limit)")]
        return [Failure(ts=ts, line=text, cause=SIGNALLED, message=f"the process died of SIG{sig}: {text}",
                        evidence=(text,), signal=sig, role=DEATH)]
    return [Failure(ts=ts, line=text, cause=EXIT_STATUS, message=text, evidence=(text,), status=code, role=DEATH)] \
        if code else []


def died(msg: str, ranks: str, ts: float | None) -> Event | None:
    """A process's end as SGLang reports it (`… exit code: -9`, `Child process unexpectedly failed with an exit
    code 9`, `Rank 0 scheduler is dead`): always the consequence of something said elsewhere."""
    if (w := WAIT_STATUS_RE.match(msg)) is not None:
        return child_status(msg, ranks, ts, int(w.group(1)))
    m = DIED_RE.search(msg)
    if m is None:
        return Failure(ts=ts, ranks=ranks, line=msg, cause=UNNAMED, message=msg, evidence=(msg,),
                       role=DEATH) if msg.startswith(("Rank ", "Scheduler or")) and " dead" in msg else None
    code = int(next(g for g in m.groups() if g is not None))
    cause, sig = exit_cause(code)
    return Failure(ts=ts, ranks=ranks, line=msg, cause=cause, message=msg, evidence=(msg,), signal=sig,
                   status=None if sig else code, role=DEATH)


def child_status(msg: str, ranks: str, ts: float | None, status: int) -> Event | None:
    """SGLang's SIGCHLD handler prints os.waitpid's raw status (≥ 0.4): `exit code 256` is exit 1, `9` is
    SIGKILL, `139` SIGSEGV with a core. An exit code says little (a JIT compiler child fails and the start
    goes on), a signal names what killed a rank: a suspect, cleared if the start goes on."""
    sig = status & 0x7F
    if sig in (0, 0x7F):  # exited, or stopped: no signal killed it
        return None
    name = signal_name(sig)
    return Failure(ts=ts, ranks=ranks, line=msg, cause=SIGNALLED, message=f"{msg} (SIG{name})",
                   evidence=(msg,), signal=name, role=SUSPECT)


def sigquit(msg: str, ranks: str, ts: float | None) -> Event | None:
    """The tokenizer manager's SIGQUIT handler, told by a child that failed: `Received sigquit from a child
    process. …` (0.4.x-0.5.x), `SIGQUIT received. signum=…, frame=…. It usually means one child failed.` (0.5.1x)."""
    if msg.startswith("Received sigquit from a child proces") or (  # 0.4.3 spells it "proces"
            msg.startswith("SIGQUIT received") and msg.endswith("child failed.")):
        return Failure(ts=ts, ranks=ranks, line=msg, cause=UNNAMED, message=msg, evidence=(msg,), role=DEATH)
    return None


def sigterm(msg: str, ranks: str, ts: float | None) -> Event | None:
    """0.5.x's tokenizer manager: `SIGTERM received. signum=None frame=None. Draining requests and shutting down...`"""
    return StopRequested(ts=ts, ranks=ranks, line=msg, by="SIGTERM") if msg.startswith("SIGTERM received") else None


def recovered(msg: str, ranks: str, ts: float | None) -> Event | None:
    """`retry() failed once … Will delay … and retry`, `Retrying in 1s [Retry 1/5].`"""
    if msg.startswith("retry() exceed"):
        return None
    return Recovered(ts=ts, ranks=ranks, line=msg)
