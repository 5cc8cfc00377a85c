"""Start and wait: the story from a config to a verdict, told once for `up`, `wait` and
`baseline-check`.

preflight gate → install if drifted → start (or attach) → follow the journal → HTTP
cross-check → diagnosis → publish. Each step reports through the publisher; the caller
gets a typed outcome and chooses the exit code.
"""

from __future__ import annotations

import os
import select
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from svcdiag.config.service import ServiceConfig, UnitsDir
from svcdiag.errors import SvcdiagError
from svcdiag.files import UnsafePath, state_dir
from svcdiag.judge.verdict import Verdict
from svcdiag.ops.host import gpu_hygiene, history
from svcdiag.ops.host.check import check, require_ok
from svcdiag.ops.host.preflight import Calibration, Plan, plan, predicted_cause
from svcdiag.ops.host.sglang_version import SglangVersion, resolve
from svcdiag.ops.offline.conclude import conclude, diagnoser
from svcdiag.ops.serve.deadline_owner import SUPERVISOR_DEADLINE_GRACE
from svcdiag.ops.serve.follow import follow, judge_ended, start_unit, unit_lock
from svcdiag.ops.serve.http_check import cross_check
from svcdiag.output.publish import Progress, Publisher
from svcdiag.sglang.failures import Cause
from svcdiag.systemd.dbus import Systemd, UnitProps
from svcdiag.systemd.install import SYSTEM_UNIT_DIR, drift, install_remote, install_units
from svcdiag.systemd.render import base_name, supervise_argv
from svcdiag.systemd.secrets import push_remote, write_environment_file

Note = Callable[[str], None]


@dataclass(frozen=True, slots=True)
class StartOutcome:
    """What became of one `up`/`wait`: a verdict, a refusal before starting, or an interruption."""

    verdict: Verdict | None = None
    refused: Plan | None = None  # preflight predicted cannot_serve and nothing was started
    interrupted: bool = False
    started: bool = False
    history_id: int | None = None  # its row in `svcdiag history`


def judge_start(sd: Systemd, cfg: ServiceConfig, props: UnitProps, pub: Publisher, timeout: float | None,
                sglang: SglangVersion | None = None) -> Verdict:
    """The verdict of one start: the journal's, then, if that says healthy, HTTP's. It carries
    the SGLang release and where that came from (the server's own /server_info wins)."""

    sglang = sglang or resolve(cfg)
    watch = history.PhaseWatch(cfg, history.load_usual(cfg, sglang.version, warn=once(pub.note)), pub)

    def progress(judge: Any, now: float) -> float | None:
        r = judge.readiness
        usual_s = watch.tick(r.phase, now)
        pub.progress(Progress(cfg.unit, cfg.name, r.phase, r.started, r.next_deadline(), now, *usual_s))
        return watch.due()  # a notify unit's follower keeps no timer: it wakes for this

    pub.start(cfg.unit, props.invocation)
    followed = follow(sd, watch.cfg, cfg.unit, props, emit=pub.event, total_timeout=timeout, on_progress=progress,
                      batch=pub.terminal_first)
    verdict, end = followed.verdict, followed.props
    assert verdict is not None

    def released(v: Verdict) -> Verdict:
        return v.with_(figures=v.figures.replace(sglang_version=sglang.version, sglang_version_source=sglang.source))

    verdict = released(verdict)
    if verdict.verdict == "healthy" and end.invocation == props.invocation and not end.running:
        if end.result == "success":
            pub.note(f"{cfg.unit} was stopped cleanly after this healthy start: it serves nothing now")
        return released(judge_ended(sd, watch.cfg, cfg.unit, props, end))  # no HTTP to check
    if verdict.figures.verdict_source == "supervisor":
        return verdict  # the supervisor said READY=1 only once HTTP agreed; the journal lacks the figures to compare
    if verdict.verdict == "healthy" and not cfg.node_rank:  # a worker node (rank ≥ 1) serves no HTTP
        host, port = cfg.host, cfg.port
        if sd.remote is not None:  # the server's port there, through the SSH connection
            local = sd.remote.forward(cfg.host, cfg.port)
            host, port = ("127.0.0.1", local) if local else (host, port)
        checked = cross_check(verdict, host, port, cfg.timeout["http_check"])
        if checked.verdict != "healthy":  # the server may have ended while HTTP was asked (a kill after ready)
            now = sd.props(cfg.unit)
            if now.invocation == props.invocation and not now.running:
                return released(judge_ended(sd, watch.cfg, cfg.unit, props, now))
        verdict = checked
    if verdict.verdict == "healthy" and cfg.readiness == "notify":
        limit = cfg.timeout["http_check"] + SUPERVISOR_DEADLINE_GRACE
        now = supervisor_ready(sd, cfg.unit, props.invocation, limit)
        if now.invocation == props.invocation and not now.running:
            return released(judge_ended(sd, watch.cfg, cfg.unit, props, now))
        if now.invocation == props.invocation and now.active_state == "activating":
            pub.note(f"{cfg.unit}: its supervisor has not said READY=1 within {limit:.0f} s of this healthy verdict "
                     "(systemd still says activating)")
    return verdict


def supervisor_ready(sd: Systemd, unit: str, invocation: str, limit: float) -> UnitProps:
    """A notify unit judged healthy from its journal: its props once its supervisor has said READY=1 (active), or
    the start has ended, or `limit` seconds have passed. `up` returns when systemd agrees: the supervisor judges
    each line before journald has it, but a loaded host can run it seconds behind, and until READY=1 its serving
    watch is not on (a kill then is a failed start, not an incident). Woken by the unit's own signals."""
    changed = [True]
    sd.watch(unit, lambda: changed.__setitem__(0, True))
    deadline = time.monotonic() + limit
    while True:
        if changed[0]:
            changed[0] = False
            now = sd.props(unit)
            if now.invocation != invocation or now.active_state != "activating":
                return now
        left = deadline - time.monotonic()
        if left <= 0:
            return now
        select.select([sd.fileno()], [], [], left)
        sd.process()


def flag_check(cfg: ServiceConfig, note: Note) -> SglangVersion:
    """The flag check before anything is written or started: exit 2 (FlagCheckError) on an
    argument the SGLang release will not take; its notes and warnings go to `note`."""
    result = require_ok(check(cfg))
    for line in (*result.notes, *(f"warning: {w}" for w in result.warnings)):
        note(line)
    return result.sglang


def install_note(where: str, why: str) -> str:
    """`installed PATH` for a unit that was not there, `updated PATH (why)` for a drifted one."""
    return f"installed {where}" if why == "not installed" else f"updated {where} ({why})"


def ensure_started(sd: Systemd, cfg: ServiceConfig, note: Note, *, restart: bool,
                   sglang: SglangVersion | None = None) -> UnitProps:
    """Attach to a running start, or install (when missing or drifted) and start a fresh one;
    without `sglang` (the release, already checked), the flag check runs first."""
    props = sd.props(cfg.unit)
    if sglang is None:
        sglang = resolve(cfg) if props.running and not restart else flag_check(cfg, note)
    why = drift(cfg, version=sglang.version, remote=sd.remote)
    if props.running and not restart:
        if why:
            note(f"{cfg.unit} runs a unit that differs from its config ({why}); --restart to apply the config")
        note(f"{cfg.unit} is already {props.active_state} (invocation {props.invocation}); attaching")
        return props
    check_remote_supervisor(sd, cfg)
    if why and sd.remote is not None:
        install_remote(sd, [cfg], versions={cfg.name: sglang.version})
        note(install_note(f"{sd.where}:{SYSTEM_UNIT_DIR / cfg.unit}", why))
    elif why:
        install_units([cfg], SYSTEM_UNIT_DIR, versions={cfg.name: sglang.version})
        note(install_note(str(SYSTEM_UNIT_DIR / cfg.unit), why))
    elif cfg.secrets and os.geteuid() == 0 and sd.remote is None:
        write_environment_file(cfg)  # a rotated secret reaches this start (journal mode; root only)
    elif cfg.secrets and sd.remote is not None:  # read here, written there: a rotated secret reaches this start
        for path in push_remote(sd.remote, cfg):
            note(f"secret written to {sd.where}:{path}")
    props = start_unit(sd, cfg.unit, restart=restart and props.running, notify=cfg.readiness == "notify")
    note(f"started {cfg.unit} (invocation {props.invocation})")
    return props


def check_remote_supervisor(sd: Systemd, cfg: ServiceConfig) -> None:
    """A notify unit on a remote host runs svcdiag there (`svcdiag supervise`, under this
    interpreter's path, reading the config from this units folder's path): refuse in one line,
    before anything is written or started, when that host has no such svcdiag or config."""
    if sd.remote is None or cfg.readiness != "notify":
        return
    python, *_ = supervise_argv(cfg)
    sd.remote.check_supervisor(python, str(cfg.path.parent), base_name(cfg), cfg.config_hash, cfg.node_rank)


def quiet_plan(cfg: ServiceConfig, gpu_memory: float | None = None, remote: Any = None) -> Plan | None:
    """A preflight plan when the model and GPU figures are at hand, else None (`remote`: the
    SSH Connection of the host it runs on)."""
    try:
        return plan(cfg, gpu_memory=gpu_memory, remote=remote)
    except SvcdiagError:
        return None


def preflight_gate(cfg: ServiceConfig, pub: Publisher, *, force: bool, gpu_memory: float | None,
                   remote: Any = None) -> tuple[Plan | None, bool]:
    """Predict the KV pool before a start (on `remote`'s files and GPUs, for a remote host).
    Returns the plan and whether to refuse the start."""
    try:
        p_ = plan(cfg, gpu_memory=gpu_memory, remote=remote)
    except SvcdiagError as e:
        pub.note(f"preflight skipped: {e}")
        return None, False
    p = p_.prediction
    if p_.inputs is None:
        pub.note(f"preflight: {p.verdict} from the config's own limits: {'; '.join(p.reasons)}")
    else:
        spread = f" ± {p.interval['kv_pct']} %" if p.interval and p.interval.get("kv_pct") is not None else ""
        pub.note(f"preflight: {p.verdict}: {p.kv_tokens:,} KV tokens predicted{spread}, max_running_requests "
                 f"{p.max_running_requests} ({p_.inputs.gpu_free_gb:.2f} GB free from {p_.inputs.gpu_source})")
    if p.verdict == "tight":  # not certain to fail: it starts, and the verdict decides
        pub.note("preflight: tight, starting; the verdict decides: " + "; ".join(p.reasons))
    if p.verdict != "cannot_serve":
        return p_, False
    pub.publish(pub.record("diagnosis", ts=time.time(), phase=None, cause=predicted_cause(p),
                           message="preflight: " + "; ".join(p.reasons),
                           data={"explanation": list(p.reasons), "fixes": list(p.fixes), "preflight": p_.to_json()}))
    if force:
        pub.note("--force: starting anyway")
        return p_, False
    return p_, True


def calibrate(cfg: ServiceConfig, plan_: Plan | None, verdict: Verdict, note: Note, state: str | None = None) -> None:
    """Predicted vs. logged KV tokens, kept for `preflight --calibration`."""
    if plan_ is None or plan_.inputs is None:
        return  # nothing predicted (no plan, or the config's own limits only)
    try:
        row = Calibration(state_dir(state)).record(cfg, plan_.prediction, verdict)
    except (OSError, UnsafePath) as e:  # a planted symlink is refused (docs/security.md), the verdict stands
        note(f"calibration not recorded: {e}")
        return
    if row is not None:
        note(f"preflight predicted {row['predicted_kv_tokens']:,} KV tokens, SGLang allocated "
             f"{row['logged_kv_tokens']:,} ({row['error_pct']:+.1f} %)")


def interrupted(name: str, pub: Publisher) -> StartOutcome:
    where = f" (in phase {pub.phase})" if pub.phase else ""
    pub.note(f"interrupted: {name} is left as it is{where}; `svcdiag wait {name}` to resume waiting, "
             f"`svcdiag down {name}` to stop it")
    return StartOutcome(interrupted=True)


def wait_verdict(sd: Systemd, cfg: ServiceConfig, units: UnitsDir, props: UnitProps, pub: Publisher,
                 timeout: float | None, plan_: Plan | None = None, *, started: bool = False,
                 sglang: SglangVersion | None = None, command: str = "wait",
                 campaign: str | None = None, left_running: bool = True) -> StartOutcome:
    """`left_running=False`: the caller stops the unit on Ctrl-C (tune), so "left as it is" is not said."""
    try:
        verdict = judge_start(sd, cfg, props, pub, timeout, sglang)
    except KeyboardInterrupt:
        return interrupted(cfg.name, pub) if left_running else StartOutcome(interrupted=True)
    calibrate(cfg, plan_, verdict, pub.note)  # before the verdict, which stays the last line
    row: list[int | None] = [None]

    def record(v: Verdict) -> None:
        if v.cause != Cause.DIED_AFTER_READY:  # history keeps the start as it was judged: it was ready
            row[0] = remember(cfg, v, pub, command, campaign=campaign)

    verdict = conclude(pub, verdict, diagnoser(cfg, units, sd), before=record)
    return StartOutcome(verdict=verdict, started=started, history_id=row[0])


def remember(cfg: ServiceConfig, v: Verdict, pub: Publisher, command: str, *, state: str | None = None,
             drift: bool = True, campaign: str | None = None) -> int | None:
    """History's part of a verdict: drift against the config's last healthy start, then the row (its id)."""
    note = once(pub.note)
    if drift:
        for d in history.drift(history.load_usual(cfg, v.figures.sglang_version, state, warn=note), v):
            pub.publish(pub.record("drift", ts=v.ts, message=d["message"], data=d))
    row_id, why = history.record_start(cfg, v, command, state=state, campaign=campaign)
    if why:
        note(why)
    return row_id


_said: set[str] = set()


def once(note: Note) -> Note:
    """`note`, but a line already said in this process is not said again (a history store that
    cannot be used: one warning for the start, not one per look at it)."""
    def say(line: str) -> None:
        if line not in _said:
            _said.add(line)
            note(line)
    return say


def up(sd: Systemd, cfg: ServiceConfig, units: UnitsDir, pub: Publisher, *, wait: bool, restart: bool,
       force: bool, gpu_memory: float | None, timeout: float | None, command: str = "up",
       campaign: str | None = None) -> StartOutcome:
    """Flag check, GPU hygiene, preflight, install if missing or drifted, start; with `wait`, the verdict."""
    with unit_lock(cfg.name, pub.note):
        starts = restart or not sd.props(cfg.unit).running
        sglang = flag_check(cfg, pub.note) if starts else resolve(cfg)
        if starts:
            gpu_hygiene.gate(cfg, pub.note, force=force, remote=sd.remote)  # that host's nvidia-smi, over SSH
        plan_, refuse = (preflight_gate(cfg, pub, force=force, gpu_memory=gpu_memory, remote=sd.remote) if starts
                         else (None, False))
        if refuse:
            return StartOutcome(refused=plan_)
        props = ensure_started(sd, cfg, pub.note, restart=restart, sglang=sglang)
        if not wait:
            return StartOutcome(started=starts)
        return wait_verdict(sd, cfg, units, props, pub, timeout, plan_, started=starts, sglang=sglang,
                            command=command, campaign=campaign)


def attach(sd: Systemd, cfg: ServiceConfig, units: UnitsDir, pub: Publisher, timeout: float | None) -> StartOutcome:
    """`wait`: judge the current start, restarting nothing; a stopped unit's last start is judged as it ended."""
    props = sd.props(cfg.unit)
    if not props.invocation:
        raise SvcdiagError(f"{cfg.unit} has no start to judge: {props.why_no_invocation}; "
                           f"start it with: svcdiag up {cfg.name} --wait-ready")
    if not props.running:
        pub.note(f"{cfg.unit} is {props.active_state}; judging its last start (invocation {props.invocation})")
    return wait_verdict(sd, cfg, units, props, pub, timeout)
