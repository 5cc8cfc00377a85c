"""`svcdiag supervise` as a container's main process (PID 1 of a Kubernetes pod): no systemd.

The same Supervisor (svcdiag.ops.serve.supervise: byte-exact passthrough, the same judge, signals
forwarded) with what systemd did for it done here instead:

- **deadlines**: systemd's start timeout enforced a phase's deadline; here a start the judge
  calls failed or timed out is stopped by the supervisor (SIGTERM, then SIGKILL after the
  grace), and the container exits with the verdict's code (1 failed, 3 timed out: cli.common);
- **PID 1's duties**: orphans that SGLang's processes leave are reaped (what tini does; not PID
  1, the supervisor makes itself their subreaper); on SIGTERM the child gets the grace the pod
  allows (`grace_s`, a little under terminationGracePeriodSeconds) before SIGKILL;
- **why, where kubectl shows it**: the verdict, its cause and the first fix go to the
  termination message file (/dev/termination-log, or `termination_log`), and as the last line
  of the container's stderr;
- **probes** (svcdiag.ops.containers.probes) on `probe_port`, and the judge's events as JSON Lines where
  the operator asks (`events`: "stderr" or a file), never into SGLang's own stdout;
- **a command line it cannot read** (a shell's `bash -c '… --tp $TP …'`, a wrapper script, a
  flag whose value it cannot parse) never stops the start: SGLang's arguments are then taken
  from its own `server_args=` line (the port the HTTP cross-check asks, a worker node's rank,
  the model the diagnosis sizes), and the start is judged from the log as any other.
- **after ready**, the serving watch (svcdiag.judge.watch): /livez fails once it says wedged, so
  the kubelet restarts the container; each incident is an `incident` event; /metrics on the
  probe port (svcdiag.output.textfile's names).
"""

from __future__ import annotations

import ctypes
import dataclasses
import json
import os
import signal
import subprocess
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

from svcdiag.config.from_argv import ARGV_SOURCE, UNKNOWN_MODEL, from_keys
from svcdiag.config.service import ServiceConfig
from svcdiag.errors import ConfigError, SvcdiagError
from svcdiag.judge.verdict import Verdict
from svcdiag.judge.watch import WEDGED, Incident
from svcdiag.ops.containers.probes import READY_TIMEOUT_S, Answer, ProbeServer
from svcdiag.ops.serve.http_check import answers_ready
from svcdiag.ops.serve.status_line import status_text, verdict_status
from svcdiag.ops.serve.supervise import Supervised, Supervisor
from svcdiag.sglang.command import FLAG_OF, SHELLS, find_launch, read_flags
from svcdiag.sglang.events import Event, ServerArgs
from svcdiag.sglang.flags import SIM_MODULE

PR_SET_CHILD_SUBREAPER = 36
#: where the kubelet reads a container's termination message (terminationMessagePath's default)
TERMINATION_LOG = "/dev/termination-log"
#: the kubelet keeps at most 4096 bytes of it
TERMINATION_MAX = 4096
#: seconds after SIGTERM before the child is killed: the pod's default terminationGracePeriodSeconds
#: (30 s) less 5 s in which the supervisor writes the termination message and exits
DEFAULT_GRACE_S = 25.0
#: after a failed verdict, how long SGLang may take to end on its own before it is stopped
#: (it usually exits at once; a scheduler left hanging after a failure does not)
FAILED_EXIT_WAIT_S = 5.0


@dataclass(frozen=True, slots=True)
class ContainerOptions:
    """How a pod's PID 1 answers its probes and where its events and termination message go."""

    probe_host: str = "0.0.0.0"
    probe_port: int | None = None
    events: str | None = None  # "stderr", or a file path (JSON Lines, appended)
    termination_log: str | None = None  # None: /dev/termination-log where it exists
    grace_s: float = DEFAULT_GRACE_S


@dataclass(frozen=True, slots=True)
class PodConfig:
    """A container's config, and why SGLang's arguments were not read from its command line (then
    its `server_args=` line gives them: `from_log`)."""

    cfg: ServiceConfig
    unread: str | None = None
    from_log: bool = False  # unread, or a wrapper script's argv (no launcher in it): the log says what SGLang got


#: the config's fields SGLang's server_args line gives (svcdiag.sglang.events.ServerArgs), for a
#: command line svcdiag could not read: the HTTP cross-check's host and port, the diagnosis's sizes
LOGGED_FIELDS = ("model_path", "tp_size", "dp_size", "host", "port", "context_length", "mem_fraction_static",
                 "max_running_requests", "max_mamba_cache_size", "cuda_graph_max_bs")


def with_server_args(cfg: ServiceConfig, ev: ServerArgs) -> ServiceConfig:
    """`cfg` with what SGLang says it was started with; a multi-node start's node as it logs it."""
    given: dict[str, Any] = {k: v for k in LOGGED_FIELDS if (v := getattr(ev, k)) is not None}
    if (ev.nnodes or 1) > 1:
        given |= {"nnodes": ev.nnodes, "node_rank": ev.node_rank or 0}
    return dataclasses.replace(cfg, **given)


@dataclass(frozen=True, slots=True)
class ContainerEnd:
    """How the container's start and server ended: the exit status is the caller's (the verdict's
    code, or the child's), the message what the termination message file got."""

    supervised: Supervised
    message: str
    stopped_by: int | None  # the signal (SIGTERM from the kubelet) that asked for a stop before any failure
    stopped_start: bool  # the supervisor stopped the child itself, after a failed or timed-out verdict

    @property
    def verdict(self) -> Verdict | None:
        return self.supervised.verdict


def fix_words(fix: Mapping[str, Any]) -> str:
    """A diagnosis fix in the words a container's command line takes: flags, SVCDIAG_TIMEOUT_*."""
    words = []
    for key, value in fix.get("set", {}).items():
        if key.startswith("timeouts."):
            words.append(f"SVCDIAG_TIMEOUT_{key.split('.', 1)[1].upper()}={value:g}")
        elif key.startswith("env."):
            words.append(f"{key.split('.', 1)[1]}={value}")
        elif key == "extra_args":
            words.append(" ".join(map(str, value)) if isinstance(value, list) else str(value))
        elif key in FLAG_OF:
            flag = FLAG_OF[key]
            words.append(flag if value is True else f"{flag} {value}")
        else:
            words.append(f"{key} = {json.dumps(value)}")
    reason = fix.get("reason")
    return " ".join(words) + (f" ({reason})" if reason else "")


def termination_message(v: Verdict | None, returncode: int, stopped_by: int | None,
                        incident: Incident | None = None) -> str:
    """What `kubectl describe pod` shows as the container's message: the verdict line, then the
    first fix and the first line of why; after ready, the serving watch's incident first (why the
    kubelet restarted it)."""
    if incident is not None:
        cause = f" [{incident.cause}]" if incident.cause else ""
        rest = termination_message(v, returncode, stopped_by)
        return " ".join(f"{incident.kind.upper()}{cause}: {incident.message}".split())[:TERMINATION_MAX // 2] + "\n" + rest
    if stopped_by is not None:  # asked to stop before any failure: what the judge made of the end is moot
        phase = f" after ready ({_how(returncode)})" if v is not None and v.verdict == "healthy" else \
            f" during the start ({_how(returncode)})"
        return f"STOPPED by {signal.Signals(stopped_by).name}{phase}\n"
    if v is None:
        return f"ENDED before any verdict ({_how(returncode)})\n"
    if v.verdict == "healthy":
        return f"HEALTHY start, then the server exited ({_how(returncode)}): {verdict_status(v)}\n"
    cause = f" [{v.cause}]" if v.cause else ""
    lines = [f"{v.verdict.upper()}{cause} in phase {v.phase}: {v.message}"]
    d = v.diagnosis or {}
    if d.get("fixes"):
        lines.append(f"fix: {fix_words(d['fixes'][0])}")
    if d.get("explanation"):
        lines.append(f"why: {d['explanation'][0]}")
    text = "\n".join(" ".join(line.split()) for line in lines) + "\n"
    return text if len(text.encode()) <= TERMINATION_MAX else text.encode()[: TERMINATION_MAX - 4].decode(
        "utf-8", "ignore") + "…\n"


def _how(returncode: int) -> str:
    return f"status {returncode}" if returncode >= 0 else f"killed by {signal.Signals(-returncode).name}"


class ContainerSupervisor(Supervisor):
    def __init__(self, cfg: ServiceConfig, argv: Sequence[str], opts: ContainerOptions, *,
                 environ: Mapping[str, str] | None = None, out_fd: int = 1,
                 diagnose: Callable[[Verdict], dict[str, Any] | None] | None = None, from_log: bool = False):
        super().__init__(cfg, argv, out_fd=out_fd, environ=environ)
        self.opts = opts
        self.from_log = from_log  # SGLang's arguments come from its server_args line, not `argv`
        self._args_logged = False
        self._diagnose = diagnose
        self._events_out: TextIO | None = None
        self._pub: Any = None
        self._published: Verdict | None = None
        self.stop_grace_s = opts.grace_s  # the base supervisor's own stop at a deadline gives the pod's grace too
        self._stop_at: float | None = None
        self._stopped_start = False
        self._stopped_by: int | None = None
        self._probes: ProbeServer | None = None
        self.incidents_published: list[Incident] = []

    # ------------------------------------------------------------ the run

    def run(self) -> Supervised:
        if os.getpid() != 1:  # PID 1 reaps orphans by birth; anyone else must ask
            ctypes.CDLL(None, use_errno=True).prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
        self._open_events()
        if self.opts.probe_port is not None:
            self._probes = ProbeServer(self.opts.probe_host, self.opts.probe_port, {
                "/startupz": self._startupz, "/livez": self._livez, "/readyz": self._readyz},
                metrics=self._metrics).start()
        try:
            result = super().run()
            self._conclude()
            self._reap()
            return result
        finally:
            if self._probes is not None:
                self._probes.close()
            if self._events_out is not None and self._events_out is not sys.stderr:
                self._events_out.close()

    def spawn(self) -> subprocess.Popen[bytes]:
        try:
            return super().spawn()
        except OSError as e:  # no such command: one line, as for any bad input
            raise SvcdiagError(f"supervise: cannot run {self.argv[0]!r}: {e.strerror}") from None

    def end(self, result: Supervised) -> ContainerEnd:
        """The termination message written (where there is a file for it), and said on stderr."""
        msg = termination_message(result.verdict, result.returncode, self._stopped_by,
                                  result.incidents[-1] if result.incidents else None)
        path = self.opts.termination_log or (TERMINATION_LOG if os.path.exists(TERMINATION_LOG) else None)
        if path:
            try:
                with open(path, "w", encoding="utf-8") as f:  # in place: the kubelet bind-mounts the file
                    f.write(msg)
            except OSError as e:
                print(f"svcdiag: warning: cannot write the termination message to {path}: {e.strerror}",
                      file=sys.stderr)
        print(f"svcdiag: {msg.splitlines()[0]}", file=sys.stderr, flush=True)
        return ContainerEnd(result, msg, self._stopped_by, self._stopped_start)

    # ------------------------------------------------------------ hooks of the loop

    def _forward(self, child: subprocess.Popen[bytes], sig: int) -> None:
        # a shell in front of SGLang (bash -c '…; echo done') passes no signal on, and would die of it
        # at once: its children get it, and the shell ends when they have
        if not (self.from_log and _signal_shells_children(child.pid, sig)):
            super()._forward(child, sig)
        if sig in (signal.SIGTERM, signal.SIGINT) and self._kill_at is None:
            if not self._failed():  # a start that had already failed is still told as failed
                self._stopped_by = sig
            self._kill_at = self.clock() + self.opts.grace_s

    def _on_events(self, events: list[Event], now: float) -> None:
        if self.from_log and not self._args_logged:
            for ev in events:
                if isinstance(ev, ServerArgs):  # the first: a router's next worker logs its own
                    self.cfg, self._args_logged = with_server_args(self.cfg, ev), True
                    break
        super()._on_events(events, now)
        if self._pub is not None:
            for ev in events:
                self._pub.event(ev)

    def _after_wake(self, child: subprocess.Popen[bytes]) -> None:
        self._reap()
        now = self.clock()
        if self.verdict is not None and self.verdict is not self._published and self._check is None:
            self._conclude()
            if self.verdict.verdict != "healthy" and self._stop_at is None:
                wait = 0.0 if self.verdict.verdict == "timed_out" else FAILED_EXIT_WAIT_S
                self._stop_at = now + wait
        if child.returncode is not None:
            return
        if self._stop_at is not None and now >= self._stop_at and not self._stopped_start:
            self._stopped_start = True
            if self._kill_at is None:  # a timed-out start the base supervisor has already told to stop
                super()._forward(child, signal.SIGTERM)
                self._kill_at = now + self.opts.grace_s
        if self._kill_at is not None and now >= self._kill_at:
            self._kill_at = float("inf")
            super()._forward(child, signal.SIGKILL)

    def _next_wake(self, now: float) -> float:
        wakes = [super()._next_wake(now)]
        for at in (self._stop_at if self._kill_at is None and not self._stopped_start else None, self._kill_at):
            if at is not None and at != float("inf"):
                wakes.append(max(0.0, at - now))
        return min(wakes)

    def _reap(self) -> None:
        """Wait for every child that has ended: the main one's status goes to its Popen, the rest
        (orphans re-parented to us) are only reaped."""
        child = getattr(self, "child", None)
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            if child is not None and pid == child.pid and child.returncode is None:
                child.returncode = os.waitstatus_to_exitcode(status)

    def _conclude(self) -> None:
        """The final verdict, diagnosed (not healthy) and published once."""
        v = self.verdict
        if v is None or v is self._published:
            return
        if self.cfg.sglang_version:  # the release named (SVCDIAG_CONFIG, --sglang-version): as `up` has it, not guessed
            v = self.verdict = v.with_(figures=v.figures.replace(sglang_version=self.cfg.sglang_version,
                                                                  sglang_version_source="config"))
        if (v.verdict != "healthy" or v.degraded) and v.diagnosis is None and self._diagnose is not None:
            v = self.verdict = v.with_(diagnosis=self._diagnose(v))
        self._published = v
        if self._pub is not None:
            self._pub.verdict(v)

    # ------------------------------------------------------------ events and probes

    def _open_events(self) -> None:
        where = self.opts.events
        if not where:
            return
        from svcdiag.output.publish import Publisher
        from svcdiag.output.report import JsonLines

        self._events_out = sys.stderr if where == "stderr" else Path(where).open("a", encoding="utf-8")  # noqa: SIM115
        self._pub = Publisher([JsonLines(self._events_out)], config=self.cfg.name, unit=self.cfg.unit)
        self._pub.start(self.cfg.unit, None)

    def _status(self) -> str:
        """Now's word (a probe asks from its own thread): the watch's after ready, the phase and its seconds
        so far during the start (not frozen at the last line's: a silent hang's seconds go on)."""
        now = self.clock()
        try:
            if self.watch is not None:
                return self.watch_status(now)
            if self.verdict is None and self._check is None and self.judge.verdict is None:
                return status_text(self.judge, self._news, now, self._phase_since)
        except (RuntimeError, ValueError):  # the loop changed what was being read: its last word stands
            pass
        return self.notify.last_status or f"starting {self.cfg.name}"

    def _action(self, inc: Incident, acts: bool) -> str | None:
        if inc.kind == WEDGED and self.opts.probe_port is not None:
            return "restart (the kubelet: /livez fails)"
        return super()._action(inc, acts)

    def _incident(self, inc: Incident, now: float) -> None:
        super()._incident(inc, now)
        self.incidents_published.append(inc)
        if self._pub is not None:
            self._pub.publish(self.incident_record(inc, self._action(inc, False)))

    def _metrics(self) -> str:
        """/metrics: this start in the textfile's names (svcdiag.output.textfile.render)."""
        from svcdiag.output.textfile import render

        state = self.metrics_state(self.clock())
        return render({state["unit"]: state}, marks=False)

    def _failed(self) -> bool:
        return self.verdict is not None and self.verdict.verdict != "healthy" and self._check is None

    def _healthy(self) -> bool:
        return self.verdict is not None and self.verdict.verdict == "healthy" and self._check is None

    def _startupz(self) -> Answer:
        return Answer(self._healthy(), self._status())

    def _livez(self) -> Answer:
        """Fails on a failed start, and after ready once the watch says wedged (its grace: health_failures
        failed /health in a row, the log silent) or the server is gone."""
        alive = self.watch is None or self.watch.healthy
        return Answer(not self._failed() and alive, self._status())

    def _readyz(self) -> Answer:
        if not self._healthy():
            return Answer(False, self._status())
        if self.cfg.node_rank or answers_ready(self.cfg.host, self.cfg.port, READY_TIMEOUT_S):
            return Answer(True, self._status())
        return Answer(False, f"not serving: {self.cfg.host}:{self.cfg.port} /ready does not answer")


def read_argv(argv: Sequence[str], environ: Mapping[str, str]) -> PodConfig:
    """The config of the server `argv` starts (svcdiag.config.from_argv): SGLang's flags read by
    svcdiag.sglang.command, as one node's where they say so; a wrapper script's argv (no launcher
    in it) is read whole, for whatever flags it passes on. A shell's script, or flags that do not
    read, leave SGLang's arguments to its server_args line (`unread` says why); only svcdiag's own
    settings ($SVCDIAG_*, the mounted config) are errors."""
    try:
        launch = find_launch(argv)
        if launch is not None and launch.shell:
            return PodConfig(from_keys({}, environ), f"{os.path.basename(argv[0])} -c: the shell expands its words", True)
        args = launch.args if launch is not None else tuple(argv)
        sim = launch is None or launch.module == SIM_MODULE  # the stand-in's flags, as a wrapper may pass them on
        keys = read_flags(args, source=ARGV_SOURCE, nodes=True, sim=sim).keys
        return PodConfig(from_keys(keys, environ), None, launch is None)
    except ConfigError as e:
        if e.path != ARGV_SOURCE:
            raise
        unread = str(e)
    except SvcdiagError as e:  # a shell line that does not split (an open quote)
        unread = str(e)
    return PodConfig(from_keys({}, environ), unread, True)


def from_argv(argv: Sequence[str], environ: Mapping[str, str]) -> ServiceConfig:
    """`read_argv`'s config."""
    return read_argv(argv, environ).cfg


def _signal_shells_children(pid: int, sig: int) -> bool:
    """`sig` to each child of process `pid` if it is a shell (svcdiag.sglang.command.SHELLS) that
    has any; whether it was."""
    try:
        if os.path.basename(os.readlink(f"/proc/{pid}/exe")) not in SHELLS:
            return False
        kids = [int(k) for k in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    except (OSError, ValueError):
        return False
    for kid in kids:
        try:
            os.kill(kid, sig)
        except ProcessLookupError:
            pass
    return bool(kids)


def supervise_container(argv: Sequence[str], opts: ContainerOptions,
                        environ: Mapping[str, str] | None = None) -> ContainerEnd:
    """Run SGLang's command line `argv` as a container's main process, to its end."""
    from svcdiag.ops.offline.conclude import diagnoser

    env = dict(os.environ if environ is None else environ)
    pod = read_argv(argv, env)
    cfg = pod.cfg
    if pod.unread is not None:
        print(f"svcdiag: warning: SGLang's arguments are not read from the command line after -- ({pod.unread}): "
              "they are taken from its server_args= line, and the start judged from the log; name it with SVCDIAG_NAME",
              file=sys.stderr, flush=True)
    elif cfg.model_path == UNKNOWN_MODEL:
        print("svcdiag: warning: no --model-path on the command line after --: judged from the log alone, with "
              f"SGLang's defaults for the rest (HTTP on {cfg.host}:{cfg.port}); name it with SVCDIAG_NAME",
              file=sys.stderr, flush=True)

    def diagnose(v: Verdict) -> dict[str, Any] | None:
        return diagnoser(sup.cfg)(v)  # the config as the log has made it by then (its server_args line)

    sup = ContainerSupervisor(cfg, argv, opts, environ=env, from_log=pod.from_log, diagnose=diagnose)
    return sup.end(sup.run())
