"""The STATUS= line as the follower reads it (svcdiag.ops.serve.status_line): a notify unit's `up`
watches the journal after a new STATUS= until it has read the line that STATUS= announces. It
knows that line by the news at the STATUS='s end, which it computes from the same judge's events."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from svcdiag.config.service import UnitsDir
from svcdiag.judge.pipeline import Judge
from svcdiag.ops.serve.status_line import SEP, fit, news, tells
from svcdiag.ops.serve.supervise import Supervisor
from svcdiag.systemd.notify import STATUS_MAX, Notifier, one_line

from .conftest import EXAMPLES, UNITS

LOGS = sorted(EXAMPLES.glob("*.log"))


@pytest.mark.parametrize("log", LOGS, ids=[p.stem for p in LOGS])
def test_each_status_tells_its_own_line_and_not_the_one_before(log: Path) -> None:
    # the supervisor judges the server's lines one read at a time and says STATUS=; the follower
    # judges the same lines from the journal: after reading line k it must see that line k's
    # STATUS= says nothing newer, and after line k-1 only, that it does (or it would sleep past it)
    sent: list[str] = []
    sup = Supervisor(UnitsDir(UNITS, "t").load("dflash-smoke"), ["true"], notifier=Notifier(send=sent.append),
                     environ={}, clock=lambda: 1_800_000_000.0)
    follower = Judge(None, unit="dflash-smoke.service")
    said: str | None = None
    checked = 0
    for line in log.read_text().splitlines():
        before = len(sent)
        sup._judge(line.encode() + b"\n")
        out = follower.service_line(line, 1_800_000_000.0)
        previous, said = said, news(out) or said
        statuses = [m.split("\n")[0].removeprefix("STATUS=") for m in sent[before:] if m.startswith("STATUS=")]
        if not statuses or follower.verdict is not None:
            continue
        assert tells(statuses[-1], said), (line, statuses[-1], said)
        if said != previous and previous is not None:
            assert not tells(statuses[-1], previous), (line, statuses[-1], previous)
            checked += 1
    assert checked >= 3  # the start's milestones were each announced


texts = st.text(st.characters(blacklist_categories=("Cs", "Cc", "Zl", "Zp")), min_size=1, max_size=300)


@given(head=st.lists(texts, max_size=3), said=texts)
def test_a_status_cut_to_one_line_still_tells_its_news(head: list[str], said: str) -> None:
    status = fit([*head, said])
    assert len(status) <= STATUS_MAX and status == one_line(status)
    if said.strip():
        assert tells(status, said)
    if len(SEP.join([*head, said])) <= STATUS_MAX // 2:
        assert status == one_line(SEP.join([*head, said]))  # a line that fits is left as it is


def test_a_long_head_is_cut_before_the_news_never_the_news() -> None:
    """Hypothesis found it: heads of 10, 12 and 210 characters cut the news '0' away (the line ended
    '… 000 ·…'), and `tells` said the status announced a later line."""
    status = fit(["loading weights 12 s", "0" * 12, "0" * 210, "KV cache: 94,126 tokens"])
    assert len(status) == STATUS_MAX and status.startswith("loading weights 12 s")
    assert status.endswith("… · KV cache: 94,126 tokens") and tells(status, "KV cache: 94,126 tokens")
    assert not tells(status, "Mamba cache: 24 slots")
    assert fit(["loading weights 12 s", "Loading safetensors 3/10 …"]) == "loading weights 12 s · Loading safetensors 3/10 …"


def test_other_news_is_not_told() -> None:
    assert not tells("kv cache 0 s · KV 94,126 tokens · Mamba cache: 24 slots", "KV cache: 94,126 tokens (KV 5.74 GB)")
    assert tells("kv cache 0 s · Mamba cache: 24 slots", None)  # no news known: the time decides
    cut = one_line("cuda graph 0 s · KV 94,126 tokens · " + "KV cache: 94,126 tokens " * 20)
    assert cut.endswith("…") and tells(cut, "KV cache: 94,126 tokens " * 20)
    assert not tells(cut, "Mamba cache: 24 slots")
