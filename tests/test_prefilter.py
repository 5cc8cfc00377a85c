"""Replay's two pre-filter engines (sglang.prefilter: Hyperscan where the `fast` extra is installed, CPython's
searches elsewhere, SVCDIAG_PREFILTER picks): the same judgement on every fixture, on noisy logs at any chunk
size, and a bad SVCDIAG_PREFILTER is a one-line error."""

from __future__ import annotations

import io
from datetime import datetime
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from svcdiag.errors import SvcdiagError
from svcdiag.ops.offline import replay as replay_mod
from svcdiag.sglang import prefilter

from .conftest import EXAMPLES
from .journal_formats import as_export, entry
from .test_replay_fast import INPUTS, LOGS, as_journal, outcome, serving_line, splice_noise

ENGINES = [pytest.param("python"),
           pytest.param("hyperscan", marks=pytest.mark.skipif(not prefilter.available(),
                                                               reason="the hyperscan wheel is not installed"))]


def judged(data: bytes, engine: str, monkeypatch: pytest.MonkeyPatch, **kw) -> str:
    with monkeypatch.context() as m:
        m.setenv(prefilter.ENV, engine)
        return outcome(data, **kw)


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("path", INPUTS, ids=lambda p: p.name)
def test_each_engine_judges_every_fixture_as_the_reference(path: Path, engine: str, monkeypatch: pytest.MonkeyPatch) -> None:
    data = path.read_bytes()
    want = outcome(data, fast=False)
    for chunk in (None, 64, 7):
        assert judged(data, engine, monkeypatch, fast=True, chunk=chunk) == want


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("path", INPUTS, ids=lambda p: p.name)
def test_each_engine_judges_every_fixture_as_export_as_the_reference(path: Path, engine: str,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """Export's walk: PID 1's records, CRs, colour codes, tracebacks and each record naming another start."""
    lines = path.read_text().splitlines()
    for systemd in (True, False):  # two starts, two invocations, with PID 1's records between them or not
        data = as_journal(lines + lines, "export", 1, systemd=systemd, ascii_json=False)
        want = outcome(data, fast=False)
        for chunk in (None, 200):
            assert judged(data, engine, monkeypatch, fast=True, chunk=chunk) == want


@pytest.mark.parametrize("engine", ENGINES)
def test_a_start_whose_first_records_are_routine_is_a_start_of_its_own(engine: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """A second invocation's records, all of them decode batches and access lines (its start cut off): the record
    naming it is found in the run of routine ones, and a start of its own begins there, as the reference reads it."""
    t0 = datetime(2026, 5, 23, 9, 42).timestamp()
    first = [entry(ln, t0 + i / 10) for i, ln in enumerate((EXAMPLES / "dflash-smoke.log").read_text().splitlines())]
    serving = [serving_line(f"2026-05-23 10:{i // 60 % 60:02d}:{i % 60:02d}", i * 15) for i in range(800)]
    first += [entry(ln, t0 + 3600 + i) for i, ln in enumerate(serving[:400])]
    then = [entry(ln, t0 + 4000 + i, invocation="b" * 32) for i, ln in enumerate(serving[400:])]
    data = as_export(first + then)
    want = outcome(data, fast=False)
    assert '"starts": [[1, "' + "a" * 32 in want and '[2, "' + "b" * 32 in want, want
    for chunk in (None, 4096, 200):
        assert judged(data, engine, monkeypatch, fast=True, chunk=chunk) == want


@pytest.mark.skipif(not prefilter.available(), reason="the hyperscan wheel is not installed")
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(st.sampled_from(LOGS), st.lists(st.tuples(st.integers(0, 400), st.integers(0, 6), st.integers(0, 30),
                                                 st.integers(-5, 4000)), max_size=6),
       st.integers(40, 3000), st.booleans(), st.integers(0, 9))
def test_the_engines_agree_on_noisy_exports(monkeypatch: pytest.MonkeyPatch, path: Path, splices, chunk: int,
                                            systemd: bool, seed: int) -> None:
    lines = path.read_text().splitlines() * 2
    splice_noise(lines, splices)
    data = as_journal(lines, "export", seed, systemd=systemd, ascii_json=False)
    fast = judged(data, "hyperscan", monkeypatch, chunk=chunk)
    assert fast == judged(data, "python", monkeypatch, chunk=chunk)
    assert fast == outcome(data, fast=False)


@pytest.mark.skipif(not prefilter.available(), reason="the hyperscan wheel is not installed")
@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(st.sampled_from(LOGS), st.lists(st.tuples(st.integers(0, 400), st.integers(0, 6), st.integers(0, 30),
                                                 st.integers(-5, 4000)), max_size=8),
       st.integers(8, 3000))
def test_the_engines_agree_on_noisy_logs(monkeypatch: pytest.MonkeyPatch, path: Path, splices, chunk: int) -> None:
    """Bars glued by CRs, tracebacks, colour codes, CRLF lines and restarts among serving lines: both engines, the
    reference."""
    lines = path.read_text().splitlines() * 2
    splice_noise(lines, splices)
    data = ("\n".join(lines) + "\n").encode()
    fast = judged(data, "hyperscan", monkeypatch, chunk=chunk)
    assert fast == judged(data, "python", monkeypatch, chunk=chunk)
    assert fast == outcome(data, fast=False)


@pytest.mark.parametrize("value", ["re2", "HYPERSCAN-ish", "1"])
def test_an_unknown_engine_is_a_one_line_error(value: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(prefilter.ENV, value)
    with pytest.raises(SvcdiagError, match=r"SVCDIAG_PREFILTER=.*expected hyperscan, python or auto") as e:
        replay_mod.replay(io.BytesIO(b"x\n"), "x")
    assert "\n" not in str(e.value)


def test_hyperscan_asked_for_where_the_wheel_is_missing_is_a_one_line_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(prefilter, "_HS", [None])
    monkeypatch.setenv(prefilter.ENV, "hyperscan")
    with pytest.raises(SvcdiagError, match=r"SVCDIAG_PREFILTER=hyperscan: the hyperscan wheel is not installed"):
        replay_mod.replay(io.BytesIO(b"x\n"), "x")


@pytest.mark.skipif(not prefilter.available(), reason="the hyperscan wheel is not installed")
def test_a_cpu_hyperscan_does_not_run_on_is_judged_with_cpythons_searches(monkeypatch: pytest.MonkeyPatch) -> None:
    """hyperscan installs as a dependency on every x86-64 Linux; on a CPU its library refuses (ArchitectureError at
    compile) replay says so when it is asked for, and judges with CPython's searches when it is not."""
    import hyperscan

    class Refused(hyperscan.Database):
        def compile(self, *a, **kw):
            raise hyperscan.ArchitectureError("not supported on this CPU")

    monkeypatch.setattr(hyperscan, "Database", Refused)
    monkeypatch.setattr(prefilter, "_HS", [])
    assert not prefilter.available()
    monkeypatch.setenv(prefilter.ENV, "hyperscan")
    with pytest.raises(SvcdiagError, match=r"SVCDIAG_PREFILTER=hyperscan: .* does not run on this CPU"):
        replay_mod.replay(io.BytesIO(b"x\n"), "x")
    monkeypatch.delenv(prefilter.ENV)
    lines = [serving_line(f"2026-05-23 09:{i // 600 % 60:02d}:{i // 10 % 60:02d}", i) for i in range(6000)]
    data = (INPUTS[0].read_text() + "\n".join(lines) + "\n").encode()
    assert outcome(data, chunk=len(data) // 2) == outcome(data, fast=False)


def test_auto_falls_back_to_python_where_the_wheel_is_missing(monkeypatch: pytest.MonkeyPatch) -> None:
    """Without the wheel a large input is judged all the same (CPython's searches)."""
    monkeypatch.setattr(prefilter, "_HS", [None])
    monkeypatch.delenv(prefilter.ENV, raising=False)
    lines = [serving_line(f"2026-05-23 09:{i // 600 % 60:02d}:{i // 10 % 60:02d}", i) for i in range(6000)]
    data = (INPUTS[0].read_text() + "\n".join(lines) + "\n").encode()
    assert outcome(data, chunk=len(data) // 2) == outcome(data, fast=False)


@pytest.mark.skipif(not prefilter.available(), reason="the hyperscan wheel is not installed")
def test_needles_give_one_position_per_line_in_order() -> None:
    found = prefilter.needles((b"\r", b"Traceback (most recent call last):"))
    data = b"\nok\na\rb\rc\nTraceback (most recent call last):\r\nok\nx\r"
    at = found.lines(data, 0, len(data))
    assert [data[p:data.find(b"\n", p) % (len(data) + 1)] for p in at] == [
        b"a\rb\rc", b"Traceback (most recent call last):\r", b"x\r"]
    assert found.lines(data, 8, len(data)) == at[1:]  # a range: only its own lines


@pytest.mark.skipif(not prefilter.available(), reason="the hyperscan wheel is not installed")
def test_other_value_finds_the_lines_naming_another_value() -> None:
    key = b"\n_SYSTEMD_INVOCATION_ID="
    data = b"\nA=1" + key + b"ab\n" + key + b"abc\n" + key + b"a\n" + key + b"\n" + key + b"ab\n\n"
    other = prefilter.needles((), prefilter.other_value(key, b"ab"))
    assert [data[p:data.find(b"\n", p)] for p in other.lines(data, 0, len(data))] == [
        b"_SYSTEMD_INVOCATION_ID=abc", b"_SYSTEMD_INVOCATION_ID=a", b"_SYSTEMD_INVOCATION_ID="]
