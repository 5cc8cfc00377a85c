"""`svcdiag campaign PLAN.toml`: the baseline first, then each phase's configs, each brought
up, judged, benchmarked and taken down, every one recorded (docs/campaign.md).

Configs that share a GPU (or a port) never run at once; within a phase marked `parallel`,
disjoint ones run side by side, each in a thread with its own D-Bus connection. Ctrl-C
stops what runs (recorded `interrupted`) and records the rest as `not_run`; a rerun skips
what is recorded for the same config hash, unless --rerun.

On a remote host (`--host`, or each config's `remote_host`) every run is there: one SSH
connection per host for the whole campaign, a D-Bus connection over it per run, GPU hygiene
with that host's nvidia-smi, and the benchmark run here against the server's port forwarded
through the SSH connection. GPUs and ports of different hosts never clash.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import threading
import time
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from svcdiag.config.campaign import Phase, Plan
from svcdiag.config.service import ServiceConfig, UnitsDir
from svcdiag.errors import SvcdiagError
from svcdiag.files import open_append, write_atomic
from svcdiag.ops.fleet import baseline as baseline_ops
from svcdiag.ops.host.gpu_hygiene import config_gpus
from svcdiag.ops.host.history import History, db_path
from svcdiag.ops.serve import start
from svcdiag.ops.serve.nodes import Hosts
from svcdiag.output.publish import LockedSink, Publisher
from svcdiag.systemd.dbus import Systemd

BENCH_TAIL = 4000  # characters of a benchmark's output kept in the record (all of it in the results folder)


@dataclass(frozen=True, slots=True)
class RunRow:
    """One config's run in a campaign (or why it did not run)."""

    phase: str
    config: str
    config_hash: str
    status: str  # healthy | failed | timed_out | incomplete | refused | interrupted | not_run
    gpus: tuple[int, ...] = ()
    verdict: str | None = None
    cause: str | None = None
    message: str | None = None
    phase_seconds: dict[str, float] = field(default_factory=dict)
    figures: dict[str, Any] = field(default_factory=dict)
    degraded: tuple[str, ...] = ()
    diagnosis: dict[str, Any] | None = None
    benchmark: dict[str, Any] | None = None  # {command, exit_code, output, figures, log}
    started: float | None = None
    ended: float | None = None
    invocation: str | None = None
    start_id: int | None = None
    skipped: bool = False  # recorded by an earlier run of the campaign, not run again

    def to_json(self) -> dict[str, Any]:
        return {k: getattr(self, k) for k in self.__slots__}  # type: ignore[attr-defined]


@dataclass(frozen=True, slots=True)
class CampaignOutcome:
    """A campaign's run: each start's row, and whether it was cut short and why."""

    name: str
    baseline: dict[str, Any] | None
    rows: tuple[RunRow, ...]
    interrupted: bool
    stopped_by_baseline: bool
    results_dir: Path
    files: tuple[str, ...] = ()

    @property
    def ok(self) -> bool:
        return not self.interrupted and not self.stopped_by_baseline and all(r.status == "healthy" for r in self.rows)


def resources(cfg: ServiceConfig, host: str = "local") -> set[tuple[str, int]]:
    """What two configs must not share at once: a GPU, or a port (of the same host)."""
    at = "" if host == "local" else f"@{host}"
    return {(f"gpu{at}", g) for g in config_gpus(cfg)} | {(f"port{at}", cfg.port)}


def benchmark_argv(template: str, cfg: ServiceConfig, output_file: Path, *, host: str | None = None,
                   port: int | None = None) -> list[str]:
    """The benchmark's command; `host`/`port`: where this machine reaches the server (a forwarded port)."""
    text = template.format(port=port or cfg.port, host=host or cfg.host,
                           served_model_name=cfg.served_model_name or cfg.model_path,
                           name=cfg.name, output_file=str(output_file))
    return shlex.split(text)


def bench_figures(stdout: str, output_file: Path | None) -> dict[str, Any]:
    """Numbers from the command's JSON: its output file (bench_serving's JSON Lines: the last
    line), else stdout whole, else stdout's last line that is a JSON object."""
    candidates = []
    if output_file is not None and output_file.exists():
        lines = [ln for ln in output_file.read_text(errors="replace").splitlines() if ln.strip()]
        candidates += [lines[-1]] if lines else []
    candidates += [stdout.strip(), *[ln for ln in reversed(stdout.splitlines()) if ln.strip().startswith("{")][:1]]
    for text in candidates:
        try:
            obj = json.loads(text)
        except ValueError:
            continue
        if isinstance(obj, dict):
            return {k: v for k, v in obj.items() if isinstance(v, int | float) and not isinstance(v, bool)}
    return {}


class Runner:
    def __init__(self, plan: Plan, units: UnitsDir, base: Publisher, *, rerun: bool, force: bool, state: str | None,
                 host: str | None = None):
        self.plan, self.units, self.base = plan, units, base
        self.rerun, self.force, self.state = rerun, force, state
        self.hosts = Hosts(host)
        self.lock = threading.RLock()
        self.stop = threading.Event()
        self.benches: dict[str, subprocess.Popen[str]] = {}
        self.rows: list[RunRow] = []
        self.sinks = [LockedSink(s, self.lock) for s in base.sinks]
        self.events: IO[str] | None = None

    def _open(self) -> None:
        """Reach every host's systemd first: a campaign that cannot start (no systemd, a host
        unreachable) is one error and leaves nothing beside the plan. Then the results folder."""
        configs = [*([self.plan.baseline] if self.plan.baseline else []), *(c for p in self.plan.phases for c in p.configs)]
        for cfg in configs:
            self.hosts.get(cfg)
        with open_append(self.plan.results_dir / "events.jsonl", mode=0o644, make=0o755) as fd:  # no planted symlink
            self.events = os.fdopen(os.dup(fd), "a", encoding="utf-8")
        from svcdiag.output.report import JsonLines

        self.sinks.append(LockedSink(JsonLines(self.events), self.lock))

    def pub(self, cfg: ServiceConfig) -> Publisher:
        return Publisher(self.sinks, config=cfg.name, unit=cfg.unit)

    def connect(self, cfg: ServiceConfig) -> Systemd:
        """A systemd connection of its own for one run, on the config's host (over that host's one
        SSH connection, opened on first use)."""
        with self.lock:
            sd = self.hosts.get(cfg)
        return sd.another()

    def resources(self, cfg: ServiceConfig) -> set[tuple[str, int]]:
        return resources(cfg, self.hosts.key(cfg))

    def record(self, row: RunRow) -> RunRow:
        with self.lock:
            self.rows.append(row)
            if not row.skipped:
                with History(db_path(self.state)) as h:
                    h.campaign_record({"campaign": self.plan.name, "phase": row.phase, "config": row.config,
                                       "config_hash": row.config_hash, "status": row.status, "started": row.started,
                                       "ended": row.ended, "start_id": row.start_id, "result": row.to_json()})
        return row

    # ------------------------------------------------------------ the campaign

    def run(self) -> CampaignOutcome:
        try:
            self._open()
        except BaseException:
            self.hosts.close()
            raise
        note = self.base.note
        note(f"campaign {self.plan.name}: {sum(len(p.configs) for p in self.plan.phases)} config(s) in "
             f"{len(self.plan.phases)} phase(s); results in {self.plan.results_dir}")
        base_result, stopped, interrupted = None, False, False
        try:
            if self.plan.baseline is not None:
                base_result = self._baseline()
                stopped = base_result is None or base_result["verdict"] != "healthy"
                if stopped:
                    why = "interrupted" if base_result is None else f"baseline {self.plan.baseline.name} is not healthy"
                    note(f"campaign {self.plan.name} stops: {why}; no variant is run")
                    interrupted = base_result is None
            for phase in self.plan.phases:
                if stopped or interrupted:
                    self._not_run(phase, "baseline not healthy" if stopped and not interrupted else "interrupted")
                    continue
                interrupted = self._phase(phase)
        finally:
            if self.events is not None:
                self.events.close()
            self.hosts.close()
        files = self._results(base_result)
        return CampaignOutcome(self.plan.name, base_result, tuple(self.rows), interrupted, stopped and not interrupted,
                               self.plan.results_dir, files)

    def _baseline(self) -> dict[str, Any] | None:
        cfg = self.plan.baseline
        assert cfg is not None
        with self.connect(cfg) as sd:
            out = baseline_ops.check(sd, cfg, self.units, self.pub(cfg), candidate=None, keep_running=False,
                                     state=self.state, timeout=None)
        if out.verdict is None:
            return None
        return {"config": cfg.name, "verdict": out.verdict.verdict, "cause": out.verdict.cause,
                "holds": out.holds, "drift": list(out.drift), "summary": out.result.get("summary")}

    def _not_run(self, phase: Phase, why: str, configs: list[ServiceConfig] | None = None) -> None:
        for cfg in configs if configs is not None else phase.configs:
            self.record(RunRow(phase.name, cfg.name, cfg.config_hash, "not_run", config_gpus(cfg), message=why))

    def _phase(self, phase: Phase) -> bool:
        """Run one phase; True when interrupted."""
        todo: list[ServiceConfig] = []
        for cfg in phase.configs:
            done = None
            if not self.rerun:
                tuned = self._earlier_tuned(phase, cfg)
                with History(db_path(self.state)) as h:
                    done = h.campaign_done(self.plan.name, cfg.name, cfg.config_hash) or (
                        h.campaign_done(self.plan.name, tuned.name, tuned.config_hash) if tuned else None)
            if done is not None:
                self.base.note(f"{cfg.name}: recorded {done['status']} in an earlier run (same config hash); "
                               "skipped (--rerun to run it again)")
                res = {k: v for k, v in done["result"].items() if k in RunRow.__slots__}  # type: ignore[attr-defined]
                res.update(skipped=True, phase=phase.name, gpus=tuple(res.get("gpus") or ()),
                           degraded=tuple(res.get("degraded") or ()))
                self.record(RunRow(**res))
            else:
                todo.append(cfg)
        busy: dict[Future[RunRow], ServiceConfig] = {}
        limit = len(todo) if phase.parallel else 1
        with ThreadPoolExecutor(max_workers=max(limit, 1), thread_name_prefix="campaign") as pool:
            try:
                while todo or busy:
                    held = set().union(*(self.resources(c) for c in busy.values())) if busy else set()
                    for cfg in list(todo):
                        if len(busy) < limit and not self.resources(cfg) & held:
                            todo.remove(cfg)
                            held |= self.resources(cfg)
                            busy[pool.submit(self._one, phase, cfg)] = cfg
                    done_, _ = wait(list(busy), timeout=0.5, return_when=FIRST_COMPLETED)
                    for fut in done_:
                        busy.pop(fut)
                        self.record(fut.result())
            except KeyboardInterrupt:
                self._interrupt(busy)
                for fut in busy:
                    self.record(fut.result())
                self._not_run(phase, "interrupted", todo)
                return True
        return False

    def _interrupt(self, busy: dict[Future[RunRow], ServiceConfig]) -> None:
        """Ctrl-C: stop the running configs (and their benchmarks); their threads record them."""
        self.stop.set()
        self.base.note("interrupted: stopping " + (", ".join(c.name for c in busy.values()) or "nothing")
                       + "; the rest is recorded as not run")
        with self.lock:
            for p in self.benches.values():
                p.kill()
        for cfg in busy.values():
            try:
                with self.connect(cfg) as sd:
                    sd.wait_job(sd.stop(cfg.unit), 90.0)
                    tuned = f"{cfg.name}-tuned.service"  # a tune phase's candidate (ops.fleet.tune.tuned_name)
                    if sd.props(tuned).running:
                        sd.wait_job(sd.stop(tuned), 90.0)
            except Exception as e:  # a unit that is already gone
                self.base.note(f"{cfg.unit}: {e}")
        for _ in range(2):
            try:
                wait(list(busy), timeout=None)
                break
            except KeyboardInterrupt:  # a second Ctrl-C while the threads finish: wait still
                continue

    def _earlier_tuned(self, phase: Phase, cfg: ServiceConfig) -> ServiceConfig | None:
        """A tune phase's config as an earlier run of this target tuned it (None: not tuned, or not a tune phase)."""
        if phase.tune is None:
            return None
        from svcdiag.ops.fleet import tune

        try:
            target = tune.parse_target([f"{k}={v}" for k, v in phase.tune["target"].items()], cfg)
            return tune.earlier(self.state, self.units, cfg, target)
        except SvcdiagError:
            return None

    def _tuned(self, phase: Phase, cfg: ServiceConfig) -> ServiceConfig | RunRow:
        """A `tune` phase: the config tuned to the phase's target; its tuned config, or the row of why none."""
        from svcdiag.ops.fleet import tune

        spec = phase.tune or {}
        t = spec["target"]
        base = {"phase": phase.name, "config": cfg.name, "config_hash": cfg.config_hash, "gpus": config_gpus(cfg),
                "started": time.time()}
        try:
            target = tune.parse_target([f"{k}={v}" for k, v in t.items()], cfg)
            with self.connect(cfg) as sd:
                res = tune.tune(sd, cfg, self.units, self.pub(cfg), target=target,
                                keep=tune.parse_keep(spec.get("keep", [])),
                                allow=tune.parse_keep(spec.get("allow", []), "--allow"),
                                budget_s=tune.parse_budget(spec.get("budget")),
                                max_starts=spec.get("max_starts"), state=self.state, should_stop=self.stop.is_set)
        except SvcdiagError as e:
            return RunRow(**base, status="refused", cause="tune", message=str(e), ended=time.time())
        self.base.note(f"{cfg.name}: tune {res.status}: {res.message} ({res.starts} start(s))")
        if res.status != "met" or self.stop.is_set():
            return RunRow(**base, status="interrupted" if res.status == "interrupted" or self.stop.is_set() else "refused",
                          cause=f"tune_{res.status}", message=res.message, ended=time.time(),
                          diagnosis={"tune": res.to_json()})
        return self.units.load(tune.tuned_name(cfg))

    def _one(self, phase: Phase, cfg: ServiceConfig) -> RunRow:
        if phase.tune is not None:
            tuned = self._tuned(phase, cfg)
            if isinstance(tuned, RunRow):
                return tuned
            cfg = tuned
        pub = self.pub(cfg)
        t0 = time.time()
        base: dict[str, Any] = {"phase": phase.name, "config": cfg.name, "config_hash": cfg.config_hash,
                                "gpus": config_gpus(cfg), "started": t0}
        with self.connect(cfg) as sd:
            try:
                try:
                    out = start.up(sd, cfg, self.units, pub, wait=True, restart=True, force=self.force, gpu_memory=None,
                                   timeout=None, command="campaign", campaign=self.plan.name)
                except SvcdiagError as e:  # GPU hygiene, the flag check: not started
                    pub.note(f"{cfg.name}: not started: {e}")
                    return RunRow(**base, status="refused", cause=type(e).__name__, message=str(e), ended=time.time())
                if out.refused is not None:
                    pred = out.refused.prediction
                    return RunRow(**base, status="refused", cause="preflight", message="; ".join(pred.reasons),
                                  diagnosis={"preflight": out.refused.to_json()}, ended=time.time())
                v = out.verdict
                assert v is not None
                status = "interrupted" if self.stop.is_set() else v.verdict
                bench = None
                if v.verdict == "healthy" and phase.benchmark and not self.stop.is_set():
                    bench = self._bench(phase.benchmark, cfg, pub, sd)
                figures = v.figures.pick(("kv_tokens", "max_running_requests", "context_len", "startup_s",
                                          "sglang_version"))
                return RunRow(**base, status=status, verdict=v.verdict, cause=v.cause, message=v.message,
                              phase_seconds=dict(v.phase_seconds), figures=figures,
                              degraded=tuple(d.get("reason") for d in v.degraded), diagnosis=v.diagnosis,
                              benchmark=bench, ended=time.time(), invocation=v.invocation, start_id=out.history_id)
            finally:
                if not self.stop.is_set():  # taken down before the next; a refused config's unit, never
                    from svcdiag.ops.serve.service import down  # installed, is not loaded: nothing to stop, not an error

                    down(sd, [cfg])

    def _bench(self, template: str, cfg: ServiceConfig, pub: Publisher, sd: Systemd) -> dict[str, Any]:
        logs = self.plan.results_dir / "bench"
        logs.mkdir(exist_ok=True)
        out_file = logs / f"{cfg.name}.json"
        out_file.unlink(missing_ok=True)
        local = sd.remote.forward(cfg.host, cfg.port) if sd.remote is not None else None  # here, through SSH
        argv = benchmark_argv(template, cfg, out_file, host="127.0.0.1" if local else None, port=local)
        pub.note(f"benchmark: {shlex.join(argv)}")
        try:
            proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        except OSError as e:
            return {"command": shlex.join(argv), "exit_code": None, "output": str(e), "figures": {}}
        with self.lock:
            self.benches[cfg.name] = proc
        try:
            output, _ = proc.communicate(timeout=self.plan.benchmark_timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            output, _ = proc.communicate()
            output += f"\n[svcdiag: killed after {self.plan.benchmark_timeout:.0f} s]"
        finally:
            with self.lock:
                self.benches.pop(cfg.name, None)
        log = logs / f"{cfg.name}.log"
        write_atomic(log, output, mode=0o644)
        figs = bench_figures(output, out_file if "{output_file}" in template else None)
        pub.note(f"benchmark exited {proc.returncode}" + (f": {len(figs)} figure(s)" if figs else ""))
        return {"command": shlex.join(argv), "exit_code": proc.returncode, "output": output[-BENCH_TAIL:],
                "figures": figs, "log": str(log)}

    def _results(self, base_result: dict[str, Any] | None) -> tuple[str, ...]:
        from svcdiag.output import campaign as render

        d = self.plan.results_dir
        rows = [r.to_json() for r in self.rows]
        write_atomic(d / "results.md", render.markdown(self.plan.name, base_result, rows), mode=0o644)
        write_atomic(d / "results.csv", render.csv_text(rows), mode=0o644)
        write_atomic(d / "results.json", json.dumps({"campaign": self.plan.name, "baseline": base_result, "rows": rows},
                                                    indent=2, default=str) + "\n", mode=0o644)
        files = ["results.md", "results.csv", "results.json", "events.jsonl"]
        chart = render.chart(rows, d / "startup")
        if isinstance(chart, str):
            self.base.note(chart)
        else:
            files += [p.name for p in chart]
        return tuple(str(d / f) for f in files)


def run(plan: Plan, units: UnitsDir, base: Publisher, *, rerun: bool, force: bool, state: str | None,
        host: str | None = None) -> CampaignOutcome:
    """`host`: every run on that host (over SSH); else each config's remote_host, else here."""
    return Runner(plan, units, base, rerun=rerun, force=force, state=state, host=host).run()
