"""Progress within a phase: tqdm's bars read by the grammar, kept by the readiness machine
(never a milestone, never a deadline's reprieve), published at most four times a second,
and drawn as a bar on the live line."""

from __future__ import annotations

import io
import json
import re

from svcdiag.judge.pipeline import Judge
from svcdiag.judge.progress import PhaseProgress
from svcdiag.judge.readiness import Readiness
from svcdiag.output.live_line import LiveTerminal
from svcdiag.output.progress import bar_text, progress_text
from svcdiag.output.publish import Publisher
from svcdiag.output.report import JsonLines, Lines
from svcdiag.output.schema import JOURNALED, MESSAGE_IDS
from svcdiag.sglang.events import ProgressBar
from svcdiag.sglang.grammar import LineParser

from .conftest import run_svcdiag
from .test_events import Pty, pty_out  # noqa: F401  (the fixture)

SHARD = "Loading safetensors checkpoint shards: {pct:3d}% Completed | {n}/4 [00:{e:02d}<00:{r:02d},  4.12s/it]"
BATCH = "Capturing batches (bs={bs} avail_mem=56.61 GB): {pct:3d}%|███▌  | {n}/4 [00:01<00:00,  2.1it/s]"


def bars(text: str, ts: float | None = 1.0) -> list[ProgressBar]:
    evs = LineParser().feed(text, ts)
    assert all(isinstance(e, ProgressBar) for e in evs), evs
    return evs  # type: ignore[return-value]


# ---------------------------------------------------------------- the grammar


def test_the_shard_bar_in_sglangs_own_format() -> None:
    [b] = bars("Loading safetensors checkpoint shards:  25% Completed | 1/4 [00:04<00:12,  4.12s/it]")
    assert (b.what, b.label, b.done, b.total, b.elapsed_s, b.ranks) == \
        ("shards", "Loading safetensors checkpoint shards", 1, 4, 4.0, "")
    assert abs(b.rate - 1 / 4.12) < 1e-9  # s/it is turned into it/s
    [pt] = bars("Loading pt checkpoint shards:   0% Completed | 0/2 [00:00<?, ?it/s]")
    assert (pt.label, pt.done, pt.total, pt.rate) == ("Loading pt checkpoint shards", 0, 2, None)


def test_the_cuda_graph_bar_in_tqdms_default_format() -> None:
    [b] = bars("Capturing batches (bs=4 avail_mem=56.61 GB): 75%|███████▌  | 3/4 [00:01<00:00,  2.1it/s]")
    assert (b.what, b.done, b.total, b.rate, b.elapsed_s) == ("cuda_graph", 3, 4, 2.1, 1.0)
    [sim] = bars("Capturing batches (bs=8 avail_mem=34.83 GB):  12%|█| 1/8")  # no [elapsed<left, rate] at all
    assert (sim.done, sim.total, sim.rate) == (1, 8, None)


def test_carriage_returns_in_one_message_give_the_last_complete_update() -> None:
    msg = "\r".join(["", BATCH.format(bs=8, pct=0, n=0), BATCH.format(bs=4, pct=25, n=1),
                     BATCH.format(bs=2, pct=50, n=2), "Capturing batches (bs=1 avail_mem=5"])  # cut off mid-update
    [b] = bars(msg)
    assert (b.done, b.total) == (2, 4) and "\r" not in b.line
    [last] = bars(msg.rsplit("\r", 1)[0] + "\r")  # a trailing \r: the update before it
    assert last.done == 2


def test_a_log_line_glued_after_a_bar_is_still_read() -> None:
    evs = LineParser().feed(SHARD.format(pct=100, n=4, e=16, r=0) + "[2026-05-23 09:42:51] Load weight end. "
                            "elapsed=16.1 s, type=Qwen3ForCausalLM, avail mem=40.00 GB, mem usage=15.00 GB.")
    assert [e.kind for e in evs] == ["progress", "weights_end"]


def test_rank_prefixes_give_each_rank_its_own_bar() -> None:
    [a] = bars("[rank1]:" + SHARD.format(pct=50, n=2, e=8, r=8))
    [b] = bars("[TP3] " + BATCH.format(bs=2, pct=50, n=2))
    assert (a.ranks, b.ranks) == ("TP1", "TP3")


def test_what_is_not_a_bar_is_left_alone() -> None:
    p = LineParser()
    for line in ("Loading weights took 3 s", "Capture cuda graph begin. This can take up to several minutes.",
                 "model-00001-of-00004.safetensors:  45%|████▌     | 2.21G/4.90G [00:10<00:12, 210MB/s]",
                 "[rank9]:[E917 10:00:00.000] something"):
        assert not any(isinstance(e, ProgressBar) for e in p.feed(line, 1.0)), line
    # a windows line ending is not a bar either: the line is read as before
    assert [e.kind for e in p.feed("The server is fired up and ready to roll!\r", 2.0)] == ["ready"]


# ---------------------------------------------------------------- the readiness machine


def _judge(timeouts: dict[str, float] | None = None) -> Judge:
    j = Judge(None, start_ts=0.0)
    j.readiness.timeouts.update(timeouts or {})
    return j


def feed(j: Judge, ts: float, text: str) -> list:
    return j.service_line(text, ts)


def test_progress_is_kept_per_phase_and_is_never_a_milestone() -> None:
    j = _judge()
    feed(j, 1.0, "[2026-05-23 09:42:00] Load weight begin. avail mem=94.50 GB")
    out = feed(j, 2.0, SHARD.format(pct=25, n=1, e=4, r=12))
    [p] = out
    assert isinstance(p, PhaseProgress) and (p.phase, p.done, p.total, p.percent) == ("loading_weights", 1, 4, 25)
    assert abs(p.eta_s - 3 * 4.12) < 0.01 and p.slowest_rank is None
    r = j.readiness
    assert r.phase == "loading_weights" and r.verdict is None and r.progress.latest["loading_weights"] is p
    assert "loading_weights" not in r.phase_seconds


def test_progress_does_not_extend_the_phase_deadline() -> None:
    j = _judge({"loading_weights": 10.0})
    feed(j, 1.0, "[2026-05-23 09:42:00] Load weight begin. avail mem=94.50 GB")
    since = j.readiness._deadline.since
    for i in range(1, 4):
        feed(j, 1.0 + 3 * i, SHARD.format(pct=25 * i, n=i, e=3 * i, r=3))
        assert j.readiness._deadline.since == since  # bars move, the deadline does not
    v = j.tick(11.5)[-1]
    assert v.verdict == "timed_out" and v.phase == "loading_weights"
    assert v.last_line.startswith("Loading safetensors checkpoint shards:  75% Completed | 3/4")


def test_ranks_interleaved_name_the_slowest_one() -> None:
    j = _judge()
    feed(j, 1.0, "[2026-05-23 09:42:00 TP0] Load weight begin. avail mem=94.50 GB")
    feed(j, 1.0, "[2026-05-23 09:42:00 TP1] Load weight begin. avail mem=94.50 GB")
    updates = [(0, 1), (1, 1), (0, 2), (1, 2), (0, 3), (0, 4), (1, 3)]
    seen = []
    for t, (rank, n) in enumerate(updates):
        seen += feed(j, 2.0 + t, f"[rank{rank}]:" + SHARD.format(pct=25 * n, n=n, e=4 * n, r=16 - 4 * n))
    last = seen[-1]
    assert (last.done, last.slowest_rank, last.ranks_done) == (3, 1, {"TP0": 4, "TP1": 3})
    assert seen[1].slowest_rank is None  # both at 1/4: no rank is behind
    assert seen[4].slowest_rank == 1 and seen[4].done == 2


def test_an_observed_rate_gives_an_eta_when_tqdm_gives_none() -> None:
    j = _judge()
    feed(j, 0.5, "[2026-05-23 09:42:00] Capture cuda graph begin. avail mem=40.00 GB")
    feed(j, 1.0, "Capturing batches (bs=8 avail_mem=34.83 GB):  12%|█| 1/8")
    [p] = feed(j, 3.0, "Capturing batches (bs=6 avail_mem=34.83 GB):  37%|███| 3/8")
    assert p.phase == "cuda_graph" and p.rate == 1.0 and p.eta_s == 5.0


def test_a_replayed_log_reaches_the_same_verdict_with_its_bars(tmp_path) -> None:
    from .conftest import ROOT

    log = ROOT / "tests" / "fixtures" / "sglang" / "v043-kv-line-without-tokens.log"
    out = run_svcdiag("replay", str(log), "--json", "--progress").stdout.decode().splitlines()
    recs = [json.loads(x) for x in out]
    progress = [r for r in recs if r["event"] == "progress"]
    assert {r["phase"] for r in progress} == {"loading_weights", "cuda_graph"}
    assert progress[-1]["figures"]["done"] == progress[-1]["figures"]["total"] == 23
    plain = [json.loads(x) for x in run_svcdiag("replay", str(log), "--json").stdout.decode().splitlines()]
    assert [r for r in recs if r["event"] != "progress"] == plain  # --progress adds, changes nothing


# ---------------------------------------------------------------- publishing


def _pp(done: int, ts: float, total: int = 12, **kw) -> PhaseProgress:
    return PhaseProgress(ts=ts, phase="loading_weights", what="shards", label="Loading safetensors checkpoint shards",
                         done=done, total=total, **kw)


def test_progress_text_for_the_live_line_and_notify_mode() -> None:
    assert progress_text(_pp(5, 0.0, eta_s=4.2, slowest_rank=3)) == "41% (5/12 shards), ETA 4 s, slowest TP3"
    assert progress_text(_pp(12, 0.0, eta_s=0.0)) == "100% (12/12 shards)"
    assert progress_text(_pp(1, 0.0, total=4, eta_s=125)) == "25% (1/4 shards), ETA 2:05"
    assert bar_text(0.5, 10) == "█████     " and bar_text(1.0, 4) == "████" and bar_text(0.0625, 2) == "▏ "


def test_progress_is_throttled_and_only_in_json_when_asked() -> None:
    out, asked = io.StringIO(), io.StringIO()
    lines = io.StringIO()
    pub = Publisher([JsonLines(out), JsonLines(asked, progress=True), Lines(lines)], unit="a.service")
    pub.start("a.service", "f" * 32)
    for i in range(41):  # 40 updates in one second of the log's time, the last one the bar's end
        pub.event(_pp(i, 100.0 + i / 40, total=40))
    recs = [json.loads(x) for x in asked.getvalue().splitlines()]
    assert out.getvalue() == "" and lines.getvalue() == ""
    assert 4 <= len(recs) <= 6 and recs[-1]["figures"]["done"] == 40  # ≤ 4 a second, the end always
    assert recs[0]["event"] == "progress" and recs[0]["message"].startswith("0% (0/40 shards)")
    assert "progress" in MESSAGE_IDS and "progress" not in JOURNALED


def test_the_live_line_draws_the_bar_with_eta_and_slowest_rank(pty_out: Pty) -> None:  # noqa: F811
    from .test_events import drive

    term = LiveTerminal(pty_out.out)
    drive(term)
    pub = Publisher([term], config="tp8", unit="tp8.service")
    pub.start("tp8.service", "e" * 32)
    pub.phase = "loading_weights"
    pub.event(_pp(5, 5043.0, eta_s=7.0, slowest_rank=3, ranks_done={"TP0": 6, "TP3": 5}))
    screen = re.sub(r"\x1b\[[0-9;]*m", "", pty_out.read().rsplit("\x1b[2K", 1)[-1])
    assert "tp8  phase loading_weights  [██████▋         ] 41% (5/12 shards), ETA 7 s, slowest TP3" in screen
    for i in range(40):  # 40 updates within a second: at most 4 redraws
        pub.event(_pp(6 + i // 8, 5043.3 + i / 40))
    assert pty_out.read().count("shards") <= 4


def test_a_readiness_fed_directly_ignores_bars_outside_any_phase_change() -> None:
    r = Readiness(start_ts=0.0)
    [p] = r.feed(ProgressBar(ts=1.0, what="shards", label="x", done=1, total=2))
    assert r.phase == "starting" and p.phase == "starting" and r.verdict is None
