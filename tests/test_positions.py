"""Where a line stands is the registry's (issue 41 §1): each row's patterns are tagged with the places they speak at
(`Place`), the grammar asks a place's rows and names no cause itself, and a class that depends on position is one
row with its places."""

from __future__ import annotations

import ast
from dataclasses import replace
from pathlib import Path
from unittest import mock

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from svcdiag.sglang import failures, lazy_re
from svcdiag.sglang.events import Failure
from svcdiag.sglang.failures import FAILURES, Cause, FailureClass, Own, Place, Raised
from svcdiag.sglang.grammar import LineParser
from svcdiag.sglang.traceback import CLOSE_ORDER, RULES, Took, Traceback, take

ROOT = Path(__file__).resolve().parents[1]
#: the modules that decide where a line stands: they ask the registry, and name no cause
POSITION_MODULES = ("svcdiag/sglang/grammar.py", "svcdiag/sglang/traceback.py", "svcdiag/sglang/endings.py",
                    "svcdiag/sglang/milestone_lines.py")
CAUSE_IDS = frozenset(c.value for c in Cause)


def causes_named(source: str) -> list[str]:
    """Where a module's code names a cause: `Cause.X`, an import of `Cause`, or a cause id as a string."""
    out = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "Cause":
            out.append(f"line {node.lineno}: Cause.{node.attr}")
        elif isinstance(node, ast.ImportFrom) and any(a.name == "Cause" for a in node.names):
            out.append(f"line {node.lineno}: imports Cause")
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value in CAUSE_IDS:
            out.append(f"line {node.lineno}: {node.value!r}")
    return out


@pytest.mark.parametrize("path", POSITION_MODULES)
def test_the_grammar_names_no_cause_the_rows_do(path: str) -> None:
    assert causes_named((ROOT / path).read_text()) == []


def test_the_scan_finds_a_cause_named_in_code() -> None:
    src = 'from svcdiag.sglang.failures import Cause\nx = Cause.CUDA_OOM if y == "port_in_use" else z\n'
    assert causes_named(src) == ["line 1: imports Cause", "line 2: Cause.CUDA_OOM", "line 2: 'port_in_use'"]


def _judged(lines: list[str]) -> list[Failure]:
    p = LineParser()
    out = [e for line in lines for e in p.feed(line)] + p.close()
    return [e for e in out if isinstance(e, Failure)]


_T = "[2025-03-07 10:00:01] "
_CUT = [f"{_T}Scheduler hit an exception: Traceback (most recent call last):",
        '  File "/x/sglang/srt/managers/scheduler.py", line 3, in run_scheduler_process', "    s()"]
#: a line of each row's own (`alone`), where its place is: (cause, detail, its index in `alone`) -> lines
OWN_LINES: dict[tuple[str, str, int], list[str]] = {
    (Cause.BAD_ARGUMENTS, "", 0): ["launch_server.py: error: unrecognized arguments: --enable-magic"],
    (Cause.BAD_ARGUMENTS, "", 1): [f"{_T}ERROR:    [Errno 99] error while attempting to bind on address ('10.9.9.9', "
                               "30000): cannot assign requested address"],
    (Cause.ACCESS_DENIED, "", 0): [f"{_T}ERROR:    [Errno 13] error while attempting to bind on address ('0.0.0.0', 80): "
                               "permission denied"],
    (Cause.PORT_IN_USE, "", 0): [f"{_T}ERROR:    [Errno 98] error while attempting to bind on address ('0.0.0.0', 30000): "
                             "address already in use"],
    (Cause.HOST_OOM, "", 0): ["slurmstepd: error: Detected 1 oom_kill event in StepId=4242.0. Some of your processes may "
                          "have been killed by the cgroup out-of-memory handler."],
    (Cause.ROUTER_FAILED, "", 0): ["[Router (Python)] 2025-03-07 10:00:01 - ERROR - Failed to start router: no workers - "
                               "launch_server.py:177"],
    (Cause.ROUTER_FAILED, "worker_timeout", 0): [
        "2025-11-04 10:05:37  ERROR sglang_router_rs::core::worker_manager: src/core/worker_manager.rs:120: Timeout "
        "1800s waiting for workers [\"http://127.0.0.1:31000\"] to become healthy"],
    (Cause.PD_BOOTSTRAP_FAILED, "", 0): [f"{_T}Prefill instance failed to register to bootstrap server: 503"],
    (Cause.PD_BOOTSTRAP_FAILED, "", 1): [f"{_T}Error fetching prefill parallel info from bootstrap: 500", *_CUT],
    (Cause.WARMUP_FAILED, "", 0): [f"{_T}Initialization failed. warmup error: Traceback (most recent call last):",
                               '  File "/x/sglang/srt/entrypoints/http_server.py", line 9, in _wait_and_warmup',
                               "    assert res.status_code == 200", "AssertionError: res=<Response [500]>"],
    (Cause.WARMUP_FAILED, "", 1): [f"{_T}Server warmup failed; aborting startup: HTTP server did not become ready at "
                               "http://[::1]:10454/health"],
    (Cause.WARMUP_FAILED, "pd_warmup", 0): [f"{_T}Prefill disaggregation mode warm Up Failed, status code: 400"],
    (Cause.WATCHDOG_TIMEOUT, "", 0): [f"{_T[:-2]} TP0] Scheduler debug info: running_reqs=1, waiting_reqs=0"],
    (Cause.WATCHDOG_TIMEOUT, "", 1): [f"{_T[:-2]} TP0] Scheduler watchdog timeout (self.watchdog_timeout=300, "
                                  "self.soft=False)"],
    (Cause.PORT_IN_USE, "pd_bootstrap", 0): [f"{_T}Server error: [Errno 98] error while attempting to bind on address "
                                         "('0.0.0.0', 8998): address already in use"],
    (Cause.NVSHMEM_FAILED, "", 0): ["/sgl-workspace/nvshmem/src/modules/transport/ibrc/ibrc.cpp:420: non-zero status: 22 "
                                "ibv_modify_qp failed"],
}
OWNS = [(r.cause, r.detail, i) for r in FAILURES for i, _ in enumerate(r.alone)]


@pytest.mark.parametrize("key", OWNS, ids=[f"{c}/{d}/{i}" for c, d, i in OWNS])
def test_a_line_of_its_own_is_judged_its_rows_cause_where_it_stands(key: tuple[str, str, int]) -> None:
    """Each row's own line (its words kept in the registry only), where its place is, reads as that cause."""
    assert key in OWN_LINES, f"add a line of {key}'s own to OWN_LINES"
    out = _judged(OWN_LINES[key])
    assert [f.cause for f in out] == [key[0]], out
    assert key[1] in ("", out[0].detail)


MESSAGES = [(r.cause, r.detail, i) for r in FAILURES for i, o in enumerate(r.alone) if o.place is Place.MESSAGE]


@pytest.mark.parametrize("key", MESSAGES, ids=[f"{c}/{d}/{i}" for c, d, i in MESSAGES])
def test_an_sglang_message_of_its_own_names_its_cause_without_its_prefix_too(key: tuple[str, str, int]) -> None:
    """Place.MESSAGE is SGLang's message wherever its prefix went (a paste, a journal entry timed by the journal)."""
    line = OWN_LINES[key][0]
    assert [f.cause for f in _judged([line[line.index("] ") + 2:]])] == [key[0]]


#: a traceback ending in `final` raised under these frames (innermost last)
def _raised(frames: list[str], final: str) -> list[str]:
    return [f"{_T}Scheduler hit an exception: Traceback (most recent call last):",
            *(f'  File "{f}' for f in frames), final]


RAISED_CASES = {  # (cause, index in `raised`) -> lines
    (Cause.BAD_ARGUMENTS, 0): _raised(['/x/sglang/srt/server_args.py", line 812, in __post_init__'],
                                  "ValueError: topk must be 1 here"),
    (Cause.BAD_ARGUMENTS, 1): _raised(['/x/sglang/srt/managers/scheduler.py", line 3, in __init__'],
                                  "ValueError: --enable-dp-attention requires --dp-size above 1"),
    (Cause.BAD_CHECKPOINT, 0): _raised(['/x/sglang/srt/models/llama.py", line 512, in load_weights'],
                                   "KeyError: 'model.layers.0.mlp.gate.weight'"),
    (Cause.BAD_CHECKPOINT, 1): _raised(['/x/sglang/srt/layers/linear.py", line 90, in weight_loader'],
                                   "RuntimeError: The size of tensor a (4096) must match the size of tensor b (2048)"),
    (Cause.CUDA_ERROR, 0): _raised(['/x/sglang/srt/distributed/device_communicators/custom_all_reduce.py", line 9, in '
                                "__init__", '/x/torch/cuda/__init__.py", line 3, in f'],
                               "RuntimeError: invalid argument"),
    (Cause.UNSUPPORTED_MODEL, 0): _raised(['/x/transformers/models/auto/configuration_auto.py", line 1, in __getitem__'],
                                      "KeyError: 'qwen9'"),
}
RAISES = [(r.cause, i) for r in FAILURES for i, _ in enumerate(r.raised)]


@pytest.mark.parametrize("key", RAISES, ids=[f"{c}/{i}" for c, i in RAISES])
def test_a_frame_names_its_rows_cause_when_no_line_does(key: tuple[str, int]) -> None:
    assert key in RAISED_CASES, f"add a traceback raised under {key}'s frame to RAISED_CASES"
    assert [f.cause for f in _judged(RAISED_CASES[key])] == [key[0]]


def test_a_flag_checks_frame_names_bad_arguments_only_where_it_raised() -> None:
    """The raising frame's place: a traceback cut off in server_args.py did not raise there (it has no final line)."""
    lines = _raised(['/x/sglang/srt/server_args.py", line 812, in __post_init__'], "")[:-1] + ["    self.check()"]
    assert [f.cause for f in _judged(lines)] == [Cause.EXCEPTION]


def test_close_asks_its_places_in_order_the_final_line_before_the_head() -> None:
    head = f"{_T}Scheduler hit an exception: CUDA out of memory: Traceback (most recent call last):"
    frame = '  File "/x/sglang/srt/managers/scheduler.py", line 3, in run'
    assert CLOSE_ORDER.index(Place.FINAL) < CLOSE_ORDER.index(Place.HEAD)
    assert [f.cause for f in _judged([head, frame, "RuntimeError: NCCL error: unhandled system error"])] == [Cause.NCCL_ERROR]
    assert [f.cause for f in _judged([head, frame, "RuntimeError: something odd"])] == [Cause.CUDA_OOM]


@given(st.booleans(), st.booleans(), st.booleans(), st.text(max_size=40))
def test_take_has_a_row_for_any_line_in_either_state(final: bool, headless: bool, lone: bool, text: str) -> None:
    """Each state of RULES ends in a row that takes any line: no line leaves an open traceback without an answer."""
    tb = Traceback("", "", None, role=None, headless=headless, lone=lone and final)
    if final:
        tb.final = "ValueError: x"
        tb.finals.append(tb.final)
    assert {state for state, *_ in RULES} == {"frames", "tail"}
    assert isinstance(take(tb, text, lambda t: t.startswith("INFO:")), Took)


# ---------------------------------------------------------------- a class that depends on position is one row

#: a test-only row: words that name a cause only as the head that logged a traceback (a handler's own summary),
#: never as a line of their own
HEAD_ONLY = FailureClass(Cause.BROKEN_INSTALL, "frobnicator", priority=99_999, where=frozenset({Place.HEAD}),
                         line=lazy_re.compile(r"the frobnicator refused to start"), said=failures._model.said(r"frob"))
_HEADED = [f"{_T}Scheduler hit an exception (the frobnicator refused to start): Traceback (most recent call last):",
           '  File "/x/sglang/srt/managers/scheduler.py", line 3, in run', "RuntimeError: init failed"]
_ALONE = ["RuntimeError: the frobnicator refused to start"]


def test_a_row_tagged_with_its_place_changes_the_judgement_there_only(monkeypatch: pytest.MonkeyPatch) -> None:
    """Adding one row (in a test-only registry) with a place tag changes what the grammar judges at that place, and
    nowhere else, with no code changed."""
    assert [f.cause for f in _judged(_HEADED)] == [Cause.EXCEPTION]
    assert [f.cause for f in _judged(_ALONE)] == []
    monkeypatch.setattr(failures, "PLACES", failures.by_place((*FAILURES, HEAD_ONLY)))
    assert [f.cause for f in _judged(_HEADED)] == [Cause.BROKEN_INSTALL]
    assert [f.cause for f in _judged(_ALONE)] == []  # a lone line is no head: the row does not speak there
    monkeypatch.setattr(failures, "PLACES", failures.by_place((*FAILURES, replace(HEAD_ONLY, where=frozenset(Place)))))
    assert [f.cause for f in _judged(_ALONE)] == [Cause.BROKEN_INSTALL]  # tagged everywhere, it does


def test_a_line_of_its_own_added_at_a_place_is_judged_there(monkeypatch: pytest.MonkeyPatch) -> None:
    """The same for a line of its own (`alone`): a test-only row at the MESSAGE place, its words never a cause
    elsewhere, and a frame (`raised`)."""
    said = f"{_T}Watchdog: frobnicator stuck"
    row = FailureClass(Cause.WATCHDOG_TIMEOUT, "frob", priority=99_998,
                       alone=(Own(Place.MESSAGE, lazy_re.compile(r"Watchdog: frobnicator stuck"), says="stuck: {line}"),),
                       raised=(Raised(lazy_re.compile(r"/frobnicator\.py\""), final=lazy_re.compile(r"^OSError")),))
    framed = _raised(['/x/frobnicator.py", line 1, in go'], "OSError: [Errno 5] Input/output error")
    assert _judged([said]) == [] and [f.cause for f in _judged(framed)] == [Cause.EXCEPTION]
    monkeypatch.setattr(failures, "PLACES", failures.by_place((*FAILURES, row)))
    assert [(f.cause, f.message) for f in _judged([said])] == [(Cause.WATCHDOG_TIMEOUT, f"stuck: {said[len(_T):]}")]
    assert _judged([said[len(_T):].replace("Watchdog", "watchdog")]) == []
    assert [f.cause for f in _judged(framed)] == [Cause.WATCHDOG_TIMEOUT]


def test_a_row_that_cannot_say_its_failure_is_refused_at_import() -> None:
    from types import SimpleNamespace

    with pytest.raises(ValueError, match="event is one of root, suspect, death, not 'fatal'"):
        Own(Place.LONE, lazy_re.compile("x"), event="fatal")
    lineless = FailureClass(Cause.PORT_IN_USE, "lineless", priority=1, alone=(Own(Place.UVICORN),))
    with pytest.raises(ValueError, match="network: the row port_in_use/lineless has an own line of its `line`"):
        failures.filed((SimpleNamespace(__name__="network", FAMILIES=(failures.FAMILY[Cause.PORT_IN_USE],),
                                        ROWS=(lineless,)),))


@settings(deadline=None)  # (each example indexes the whole registry again: slow on a loaded CI)
@given(st.sets(st.sampled_from(sorted(failures.EVERYWHERE))), st.sampled_from(sorted(failures.EVERYWHERE)))
def test_a_rows_line_speaks_exactly_at_its_places(where: set[Place], place: Place) -> None:
    """classify at a place asks the rows tagged with it only, and every one of them (a test-only row, its own words)."""
    row = FailureClass(Cause.DISK_FULL, "tagged", priority=99_997, where=frozenset(where),
                       line=lazy_re.compile(r"quux volume overfull"))
    with mock.patch.object(failures, "PLACES", failures.by_place((*FAILURES, row))):
        named = failures.classify("OSError: quux volume overfull", place)
    assert (named == Cause.DISK_FULL) == (place in where)
    assert failures.classify("OSError: quux volume overfull", place) is None  # the registry's own rows: none of them
