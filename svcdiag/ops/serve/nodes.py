"""Multi-node starts and hosts (docs/remote.md): one unit per node, every node followed at once.

`up` of a config with `nnodes = N` installs and starts each node's unit on its host (over SSH
where the node names one), follows every node's journal at the same time (a thread per node,
each with its own D-Bus connection over its host's one SSH connection), and is healthy only
when every node is: rank 0 by the usual milestones and HTTP, rank ≥ 1 by its schedulers'
milestones. The first node that fails, stalls or loses its connection is named by rank and
host, the other nodes are stopped, and the verdict carries each node's own.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # what a start needs (the judge, following, publishing, ops.serve.start) is imported by the
    # commands that start, when they do: `status` of a unit with no start does not pay for it
    from svcdiag.config.service import ServiceConfig, UnitsDir
    from svcdiag.judge.verdict import Verdict
    from svcdiag.ops.serve.start import StartOutcome
    from svcdiag.output.publish import Publisher
    from svcdiag.systemd.dbus import Systemd


class Hosts:
    """One systemd connection per host for this command (SSH connections are opened once)."""

    def __init__(self, default: str | None = None):
        self.default = default
        self._by: dict[str, Systemd] = {}

    def key(self, cfg: ServiceConfig | None = None) -> str:
        host = self.default or (cfg.remote_host if cfg is not None else None)
        if not host:  # (the SSH module's import, ~1.5 ms of `status`, only for a host named)
            return "local"
        from svcdiag.systemd.remote import is_local

        return "local" if is_local(host) else str(host)

    def get(self, cfg: ServiceConfig | None = None) -> Systemd:
        k = self.key(cfg)
        if k not in self._by:
            from svcdiag.systemd.dbus import Systemd

            self._by[k] = Systemd.connect(None if k == "local" else k)
        return self._by[k]

    def close(self) -> None:
        for sd in self._by.values():
            sd.close()
        self._by.clear()

    def __enter__(self) -> Hosts:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def expand(configs: list[ServiceConfig]) -> list[ServiceConfig]:
    """Each config, a multi-node one as its nodes' own configs."""
    return [n for cfg in configs for n in cfg.node_configs()]


def where(hosts: Hosts, cfg: ServiceConfig) -> str:
    k = hosts.key(cfg)
    return "localhost" if k == "local" else k


def status(hosts: Hosts, configs: list[ServiceConfig], units: UnitsDir) -> list[dict[str, Any]]:
    """service.status, one row per node (with its rank and host), each host's units read together."""
    from svcdiag.ops.serve import service

    nodes = expand(configs)
    by_host: dict[str, list[int]] = {}
    for i, cfg in enumerate(nodes):
        by_host.setdefault(hosts.key(cfg), []).append(i)
    rows: list[dict[str, Any]] = [{} for _ in nodes]
    for at in by_host.values():
        for i, row in zip(at, service.status(hosts.get(nodes[at[0]]), [nodes[i] for i in at], units), strict=True):
            cfg = nodes[i]
            if cfg.node_rank is not None:
                row["node_rank"] = cfg.node_rank
            if hosts.key(cfg) != "local" or cfg.node_rank is not None:
                row["host"] = where(hosts, cfg)
            rows[i] = row
    return rows


def down(hosts: Hosts, configs: list[ServiceConfig]) -> list[dict[str, Any]]:
    from svcdiag.ops.serve import service

    rows = []
    for cfg in expand(configs):
        row = service.down(hosts.get(cfg), [cfg])[0]
        if hosts.key(cfg) != "local":
            row["host"] = where(hosts, cfg)
        rows.append(row)
    return rows


@contextmanager
def _node_publishers(pub: Publisher, nodes: list[ServiceConfig]) -> Iterator[dict[int, Publisher]]:
    from svcdiag.output.publish import LockedSink, Publisher

    lock = threading.RLock()
    sinks = [LockedSink(s, lock) for s in pub.sinks]
    yield {n.node_rank or 0: Publisher(sinks, config=n.name, unit=n.unit) for n in nodes}


def node_label(hosts: Hosts, cfg: ServiceConfig) -> str:
    return f"node {cfg.node_rank} ({cfg.unit} on {where(hosts, cfg)})"


def failed_on(hosts: Hosts, node: ServiceConfig, v: Verdict) -> str:
    """`node 1 (NAME-node1.service on HOST) timed out in phase loading_weights: …`"""
    return f"{node_label(hosts, node)} {v.verdict.replace('_', ' ')} in phase {v.phase}: {v.message}"


def combine(hosts: Hosts, cfg: ServiceConfig, verdicts: dict[int, Verdict], nodes: list[ServiceConfig],
            first_bad: int | None) -> Verdict:
    """The start's verdict: the first node that was not healthy, named; else rank 0's, healthy.
    It carries each node's own verdict in figures.nodes."""
    by_rank = {n.node_rank or 0: n for n in nodes}
    each = [{"node_rank": r, "host": where(hosts, by_rank[r]), "unit": by_rank[r].unit,
             "verdict": v.verdict, "phase": v.phase, "cause": v.cause, "message": v.message}
            for r, v in sorted(verdicts.items())]
    if first_bad is None:
        base = verdicts[0]
        msg = f"all {len(nodes)} nodes healthy; node 0: {base.message}"
        return base.with_(unit=cfg.unit, message=msg, figures=base.figures.replace(nodes=each), diagnosis=None)
    bad = verdicts[first_bad]
    msg = failed_on(hosts, by_rank[first_bad], bad)
    return bad.with_(unit=cfg.unit, message=msg, figures=bad.figures.replace(nodes=each, failed_node_rank=first_bad))


def up(hosts: Hosts, cfg: ServiceConfig, units: UnitsDir, pub: Publisher, *, wait: bool, restart: bool,
       timeout: float | None, attach_only: bool = False, command: str = "up") -> StartOutcome:
    """Every node's unit installed (if drifted) and started, rank 0 first; with `wait`, followed together."""
    import queue

    from svcdiag.ops.serve.start import StartOutcome, conclude, diagnoser, ensure_started, flag_check, judge_start, remember
    from svcdiag.systemd.remote import ConnectionLost

    nodes = cfg.node_configs()
    started: dict[int, Any] = {}
    for n in nodes:
        sd = hosts.get(n)
        if attach_only:
            props = sd.props(n.unit)
            if not props.invocation:
                from svcdiag.errors import SvcdiagError

                raise SvcdiagError(f"{node_label(hosts, n)} has not been started; start it with: svcdiag up {cfg.name} --wait-ready")
        else:
            sglang = flag_check(n, pub.note)
            props = ensure_started(sd, n, lambda s, n=n: pub.note(f"node {n.node_rank}: {s}"), restart=restart, sglang=sglang)
        started[n.node_rank or 0] = props
    if not wait:
        return StartOutcome(started=not attach_only)
    verdicts: dict[int, Verdict] = {}
    done: queue.Queue[tuple[int, Verdict]] = queue.Queue()
    with _node_publishers(pub, nodes) as pubs:
        def run(n: ServiceConfig) -> None:
            r = n.node_rank or 0
            sd = hosts.get(n).another()
            try:
                v = judge_start(sd, n, started[r], pubs[r], timeout)
                v = conclude(pubs[r], v, diagnoser(n, units, sd))
            except ConnectionLost as e:
                v = _lost(n, started[r], str(e))
            except Exception as e:
                v = _lost(n, started[r], f"following it failed: {e}")
            finally:
                sd.close()
            done.put((r, v))

        threads = [threading.Thread(target=run, args=(n,), daemon=True) for n in nodes]
        for t in threads:
            t.start()
        first_bad: int | None = None
        try:
            while len(verdicts) < len(nodes):
                r, v = done.get()
                verdicts[r] = v
                if v.verdict != "healthy" and first_bad is None:
                    first_bad = r
                    _stop_others(hosts, nodes, r, verdicts, started, pub.note)
        except KeyboardInterrupt:
            pub.note(f"interrupted: {cfg.name}'s nodes are left as they are; `svcdiag wait {cfg.name}` to resume")
            return StartOutcome(interrupted=True)
        for t in threads:
            t.join(5)
    verdict = combine(hosts, cfg, verdicts, nodes, first_bad)
    verdict = pub.verdict(verdict)
    row = remember(cfg, verdict, pub, command, drift=False)
    return StartOutcome(verdict=verdict, started=not attach_only, history_id=row)


def _lost(n: ServiceConfig, props: Any, why: str) -> Verdict:
    import time

    from svcdiag.judge.verdict import Verdict
    from svcdiag.sglang.failures import Cause

    return Verdict(ts=time.time(), verdict="incomplete", phase="starting", cause=Cause.CONNECTION_LOST,
                   message=why, unit=n.unit, invocation=props.invocation)


def _stop_others(hosts: Hosts, nodes: list[ServiceConfig], bad: int, verdicts: dict[int, Verdict],
                 started: dict[int, Any], note: Callable[[str], None]) -> None:
    """Stop every node but the one that failed (left for its evidence), each told first why
    (svcdiag.systemd.stop_reason): its supervisor says so and its unit ends failed, not stopped."""
    from svcdiag.systemd import stop_reason

    culprit = next(n for n in nodes if (n.node_rank or 0) == bad)
    why = f"the multi-node start failed: {failed_on(hosts, culprit, verdicts[bad])}"
    for n in nodes:
        r = n.node_rank or 0
        if r == bad or (r in verdicts and verdicts[r].verdict != "healthy"):
            continue
        sd = hosts.get(n)
        try:
            stop_reason.leave(n.unit, started[r].invocation, why, sd.remote)
        except Exception as e:  # the stop matters more than its explanation
            note(f"could not tell {node_label(hosts, n)} why it is stopped: {e}")
        try:
            sd.stop(n.unit)
            note(f"stopping {node_label(hosts, n)}: node {bad} did not start")
        except Exception as e:
            note(f"could not stop {node_label(hosts, n)}: {e}")


def install_on_hosts(hosts: Hosts, configs: list[ServiceConfig], *, force: bool = False) -> dict[str, Any]:
    """`install` across hosts: every config checked first (one refusal writes nothing anywhere),
    then each host's units written there (over SSH: temp file + rename, daemon-reload over D-Bus)."""
    from pathlib import Path

    from svcdiag.ops.host.check import check, require_ok
    from svcdiag.ops.serve.start import check_remote_supervisor
    from svcdiag.systemd.install import SYSTEM_UNIT_DIR, install_remote, install_units

    results = {cfg.name: require_ok(check(cfg)) for cfg in configs}
    groups: dict[str, list[ServiceConfig]] = {}
    for cfg in configs:
        groups.setdefault(hosts.key(cfg), []).append(cfg)
    out: dict[str, Any] = {"unit_dir": str(SYSTEM_UNIT_DIR), "units": [], "reload": [], "hosts": sorted(groups),
                           "secrets": []}
    for key, group in groups.items():  # a notify unit's host has svcdiag and the config: checked before any write
        for cfg in group if key != "local" else ():
            check_remote_supervisor(hosts.get(cfg), cfg)
    for key, group in groups.items():
        versions = {cfg.name: results[cfg.name].sglang.version for cfg in group}
        if key == "local":
            got = install_units(group, Path(SYSTEM_UNIT_DIR), force=force, versions=versions)
        else:
            got = install_remote(hosts.get(group[0]), group, force=force, versions=versions)
        out["units"] += got["units"]
        out["secrets"] += got.get("secrets", [])  # the remote paths written (never a value)
        out["reload"].append(got["reload"] if key == "local" else f"{key}: {got['reload']}")
    out["reload"] = "; ".join(out["reload"])
    out["notes"] = [n for r in results.values() for n in r.notes]
    out["warnings"] = [f"{r.name}: {w}" for r in results.values() for w in r.warnings]
    return out


def events_on_hosts(specs: list[str], publish: Callable[[str, Any], None], *, units: tuple[str, ...] = (),
                    since: float | None = None, follow: bool = False) -> None:
    """`events --host A --host B`: svcdiag's records in each host's journal, over one SSH connection
    per host, merged into one stream ordered by time (the history first, sorted; then, following,
    each record as it arrives), each handed to `publish(host, record)`."""
    import select

    from svcdiag.output.schema import SCHEMA_VERSION, ReadinessEvent
    from svcdiag.systemd.remote import RemoteEvents, connect

    wanted = set(units) | {u + ".service" for u in units if not u.endswith(".service")}
    conns = []
    streams: dict[int, tuple[str, RemoteEvents]] = {}
    seen: set[tuple[str, tuple]] = set()

    def take(host: str, stream: RemoteEvents) -> list[tuple[float, str, Any]]:
        out = []
        for fields in stream.read():
            rec = ReadinessEvent.from_journal_fields(fields)
            if rec is None or (wanted and rec.unit not in wanted and rec.config not in wanted):
                continue
            key = (host, rec.key())
            if key not in seen:
                seen.add(key)
                out.append((rec.ts or 0.0, host, rec))
        return out

    try:
        for spec in specs:
            conn = connect(spec)
            conns.append(conn)
            s = RemoteEvents(conn, SCHEMA_VERSION, since=since, follow=follow)
            streams[s.fileno()] = (str(conn.target), s)
        if not follow:
            history = [x for host, s in streams.values() for x in take(host, s)]
            for _, host, rec in sorted(history, key=lambda x: x[0]):
                publish(host, rec)
            return
        while True:
            ready, _, _ = select.select(list(streams), [], [])
            batch = [x for fd in ready for x in take(*streams[fd])]
            for _, host, rec in sorted(batch, key=lambda x: x[0]):
                publish(host, rec)
    finally:
        for _, s in streams.values():
            s.close()
        for conn in conns:
            conn.close()
