"""What SGLang can print, read from its wheels (svcdiag/sglang/message_catalogue/), read by svcdiag.

Each catalogued line is rendered with sample values and fed to the real grammar and readiness
machine: every milestone of every release reads as that milestone, and every start-up fatal is
classed or named in generic.json with a reason (docs/replay.md#what-sglang-can-print).
"""

from __future__ import annotations

import ast
import dataclasses
import importlib.machinery
import importlib.util
import json
import sys
import zipfile
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from svcdiag.judge.catalogue import coverage, judged_cause, minimal_log
from svcdiag.judge.pipeline import Judge
from svcdiag.sglang.grammar import LineParser
from svcdiag.sglang.message_catalogue import CATALOGUE_DIR, GENERIC_FILE, Message, generic, load, releases

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "scripts" / "sglang-message-catalogue"
RELEASES = releases()
OLDEST = ("0.3.6", "0.4.0")  # they print no KV cache line: the scheduler's summary says the pool's size

#: the event each milestone must become
EVENT_OF = {
    "dist_init": "dist_init", "weights_begin": "weights_begin", "weights_end": "weights_end",
    "kv_cache": "kv_cache", "mamba_cache": "mamba_cache", "pool_end": "memory_pool_end",
    "scheduler_info": "scheduler", "max_running_limited": "max_running_limited", "capture": "cuda_graph",
    "sliding_window_pool": "sliding_window_pool", "host_pool": "host_pool", "startup_timings": "startup_timings",
    "draft_runner": "draft_runner", "ready": "ready", "server_args": "server_args",
    "kv_below_context": "kv_below_context", "unified_memory_pool": "unified_memory_pool",
    "kernel_precompile": "kernel_precompile",
}
#: capture lines the grammar does not read yet (milestone_lines.CAPTURE_NAME_RE): the phase stays `capture`
#: through them, so a start is judged the same; listed for issue #28's grammar work
UNREAD = {
    "Capture Frozen-KV MTP draft cuda graph begin.": "a Frozen-KV MTP draft (0.5.12+)",
    "Capture Frozen-KV MTP draft cuda graph end.": "a Frozen-KV MTP draft (0.5.12+)",
    "Capture UNO tree draft CUDA graph begin. num_tokens_per_req={0}, avail mem={1:.2f} GB": "the UNO draft (0.5.20+)",
    "Capture UNO tree draft CUDA graph end. elapsed={0:.2f} s, mem usage={1:.2f} GB, avail mem={2:.2f} GB.":
        "the UNO draft (0.5.20+)",
}


def _script():
    """scripts/sglang-message-catalogue as a module (it has no .py suffix)."""
    loader = importlib.machinery.SourceFileLoader("sglang_message_catalogue", str(SCRIPT))
    spec = importlib.util.spec_from_loader(loader.name, loader)
    assert spec is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules[loader.name] = mod
    loader.exec_module(mod)
    return mod


SCRIPT_MOD = _script()


def milestone_cases() -> list:
    seen: set[tuple[str, str]] = set()
    out = []
    for v in RELEASES:
        for m in load(v).milestones():
            if (m.milestone, m.template) in seen:  # the same line in a later release: tested once
                continue
            seen.add((m.milestone, m.template))
            out.append(pytest.param(m, id=f"{v}-{m.milestone}-{len(out)}"))
    return out


# ---------------------------------------------------------------- the catalogues themselves


def test_every_release_with_a_flag_table_has_a_catalogue() -> None:
    tables = {p.stem.removeprefix("sglang-") for p in (CATALOGUE_DIR.parent / "flag_tables").glob("sglang-*.json")}
    assert set(RELEASES) == tables


def test_the_catalogues_stay_small() -> None:
    """They ship in the wheel: the start-up fatals and milestones only, one copy of each per function."""
    assert sum(p.stat().st_size for p in CATALOGUE_DIR.glob("*.json")) < 1_500_000


@pytest.mark.parametrize("version", RELEASES)
def test_each_release_has_its_milestones_and_start_up_fatals(version: str) -> None:
    cat = load(version)
    kinds = {m.milestone for m in cat.milestones()}
    assert {"weights_begin", "weights_end", "scheduler_info", "capture", "ready"} <= kinds
    assert ("kv_cache" in kinds) == (version not in OLDEST)
    assert cat.counts["startup_fatal"] == len(cat.startup_fatal()) > 0
    assert cat.counts["messages"] > cat.counts["startup"] > cat.counts["startup_fatal"]


# ---------------------------------------------------------------- milestones


@pytest.mark.parametrize("msg", milestone_cases())
def test_every_milestone_line_reads_as_that_milestone(msg: Message) -> None:
    if msg.template in UNREAD:
        pytest.skip(f"not read yet: {UNREAD[msg.template]}")
    for prefix in ("[2026-01-01 00:00:00] ", "[2024-12-13 01:44:59 TP0] ", "[2026-01-01 00:00:00 DP0 TP1 EP1] "):
        line = prefix + msg.render()
        events = LineParser().feed(line)
        assert [e.kind for e in events] == [EVENT_OF[msg.milestone]], (msg.file, msg.fn, line)


MILESTONES = [p.values[0] for p in milestone_cases() if p.values[0].template not in UNREAD]


@settings(max_examples=60, deadline=None)
@given(st.data())
def test_a_milestone_reads_whatever_numbers_it_carries(data) -> None:
    """Token counts and sizes of any width (a 4-digit pool or a 9-digit one) leave the line a milestone."""
    msg = data.draw(st.sampled_from(MILESTONES))
    values: dict[int, object] = {}
    for i, spec in enumerate(msg.specs):
        if spec.endswith("d"):
            values[i] = data.draw(st.integers(0, 10**9))
        elif spec.endswith("f"):
            values[i] = data.draw(st.floats(0, 2e5, allow_nan=False, allow_infinity=False))
    line = "[2026-01-01 00:00:00 TP0] " + msg.render(values)
    assert [e.kind for e in LineParser().feed(line)] == [EVENT_OF[msg.milestone]], line


def test_the_unread_list_names_only_catalogued_lines() -> None:
    templates = {m.template for v in RELEASES for m in load(v).milestones()}
    assert set(UNREAD) <= templates


@pytest.mark.parametrize("version", RELEASES)
def test_a_release_s_own_milestones_in_order_make_a_healthy_start(version: str) -> None:
    """Weights, KV cache, capture, the scheduler's summary (printed once its model runner is up), ready:
    as that release words them."""
    ms = load(version).milestones()

    def first(kind: str, *heads: str) -> list[str]:
        picks = [m for m in ms if m.milestone == kind and m.template.startswith(heads or ("",))]
        return [picks[0].render()] if picks else []

    lines = [*first("weights_begin"), *first("weights_end"), *first("kv_cache"),
             *first("capture", "Capture cuda graph begin", "Capture {0} begin", "Capture {0} {1} begin",
                    "Capture {0} CUDA graph begin"),
             *first("capture", "Capture cuda graph end", "Capture {0} end", "Capture {0} {1} end",
                    "Capture {0} CUDA graph end"),
             *first("scheduler_info"), *first("ready")]
    j = Judge()
    for i, line in enumerate(lines):
        j.line(f"[2026-01-01 00:00:{i * 5:02d} TP0] {line}")
    v = j.finish()
    assert (v.verdict, v.phase) == ("healthy", "ready"), (version, lines, v.message)
    assert {"loading_weights", "cuda_graph"} <= set(v.phase_seconds), v.phase_seconds
    if version not in OLDEST:
        assert "kv_cache" in v.phase_seconds and v.figures.kv_tokens == 4096


# ---------------------------------------------------------------- start-up fatals


@pytest.mark.parametrize("version", RELEASES)
def test_every_start_up_fatal_is_classed_or_named_generic(version: str) -> None:
    cov = coverage(load(version))
    assert cov.classed + cov.generic == cov.total
    assert not cov.unclassed, (
        f"{len(cov.unclassed)} start-up fatal messages of {version} are neither classed nor in generic.json "
        "(a grammar change lost them, or a new catalogue): class them, or run "
        "scripts/sglang-message-catalogue --refresh and review the reasons it gives: "
        + "; ".join(m.name[:120] for m in cov.unclassed[:5]))


def test_generic_names_only_catalogued_messages_no_cause_reads() -> None:
    """A message the grammar has learned to class leaves the list (and the docs' table moves)."""
    fatal = {m.name: m for v in RELEASES for m in load(v).startup_fatal()}
    names = generic()
    missing = [n for n in names if n not in fatal]
    classed = [n for n in names if n in fatal and judged_cause(fatal[n]) is not None]
    assert not missing and not classed, (
        f"generic.json is stale ({len(missing)} names no catalogue holds, {len(classed)} a cause now reads, "
        f"e.g. {(missing + classed)[:3]}): run scripts/sglang-message-catalogue --refresh")


def test_every_generic_entry_gives_a_reason() -> None:
    raw = json.loads(GENERIC_FILE.read_text(encoding="utf-8"))
    assert {m["why"] for m in raw["messages"]} <= set(raw["reasons"])
    assert all(len(text) > 40 for text in raw["reasons"].values())


def test_a_wrapper_is_classed_by_the_error_it_quotes() -> None:
    """`Capture cuda graph failed: {e}` is generic with a sample in its hole; with a CUDA OOM there, it is cuda_oom."""
    raw = json.loads(GENERIC_FILE.read_text(encoding="utf-8"))
    wrappers = {m["name"] for m in raw["messages"] if m["why"] == "wraps_an_error"}
    oom = "'torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB'"
    seen = {}
    for v in RELEASES:
        for m in load(v).startup_fatal():
            if m.name in wrappers:
                quoting = tuple(oom if SCRIPT_MOD.CAUGHT_RE.match(a) else a for a in m.args)
                seen[m.name] = judged_cause(dataclasses.replace(m, args=quoting))
    assert set(seen) == wrappers and set(seen.values()) == {"cuda_oom"}, seen


def test_docs_show_the_coverage_of_every_release() -> None:
    text = (ROOT / "docs" / "replay.md").read_text(encoding="utf-8")
    section = text.split("<!-- coverage: scripts/sglang-message-catalogue --docs -->")[1].split("<!-- end")[0]
    for version in RELEASES:
        cov = coverage(load(version))
        row = next(r for r in section.splitlines() if r.startswith(f"| {version} |"))
        cells = [c.strip() for c in row.strip("|").split("|")]
        assert (cells[3], cells[4].split(" ")[0], cells[5], cells[6]) == \
            (str(cov.total), str(cov.classed), str(cov.generic), str(len(cov.unclassed))), \
            f"docs/replay.md's coverage of {version} is stale: run scripts/sglang-message-catalogue --refresh"


def test_a_catalogued_fatal_is_judged_as_the_journal_shows_it() -> None:
    """A raise in the memory pools dies in the scheduler's traceback; one in a flag check, in the launcher's."""
    pool = Message(template="Not enough memory. Please try to increase --mem-fraction-static. Current value: {0}",
                   args=("self.server_args.mem_fraction_static",), kind="raise", file="srt/model_executor/pool_configurator.py",
                   fn="calculate_pool_sizes", startup=True, fatal=True, exc="RuntimeError")
    log = minimal_log(pool)
    assert any("Scheduler hit an exception" in line for line in log)
    assert log[-3] == "RuntimeError: Not enough memory. Please try to increase --mem-fraction-static. Current value: 0.88"
    assert judged_cause(pool) == "not_enough_memory"
    flag = Message(template="speculative_eagle_topk must be 1 with {0}", args=("algo",), kind="raise",
                   file="srt/server_args.py", fn="_handle_speculative_decoding", startup=True, fatal=True, exc="ValueError")
    assert minimal_log(flag)[1] == "Traceback (most recent call last):"
    assert judged_cause(flag) == "bad_arguments"  # from the frame: the flag check raised it
    internal = Message(template="page_size must be >= 1, got {0}", args=("page_size",), kind="assert",
                       file="srt/mem_cache/memory_pool.py", fn="__init__", startup=True, fatal=True)
    assert judged_cause(internal) is None  # the generic `exception`, quoting it
    logged = Message(template="Not enough memory. Please try to increase --mem-fraction-static.", args=(),
                     kind="error", file="srt/managers/scheduler.py", fn="init_memory_pool", startup=True, fatal=True)
    assert judged_cause(logged) == "not_enough_memory"


# ---------------------------------------------------------------- rendering


def test_render_fills_each_placeholder_as_sglang_would() -> None:
    kv = Message(template="{0} {1}. dtype: {2}, #tokens: {3}, K size: {4:.2f} GB, V size: {5:.2f} GB",
                 args=("cache_name", "'VA upper bound' if self.post_capture_active else 'is allocated'", "self.dtype",
                       "num_tokens", "k_size_GB", "v_size_GB"), kind="info", file="srt/mem_cache/memory_pool.py",
                 fn="_finalize_allocation_log", startup=True, fatal=False, milestone="kv_cache")
    assert kv.render() == "KV Cache is allocated. dtype: torch.bfloat16, #tokens: 4096, K size: 12.50 GB, V size: 12.50 GB"
    sched = Message(template="max_total_num_tokens={0}, max_running_requests={1}, {2}={3:.2f} GB",
                    args=("self.max_total_num_tokens", "self.max_running_requests",
                          "'available_cpu_mem' if self.device == 'cpu' else 'available_gpu_mem'", "avail"),
                    kind="info", file="srt/managers/scheduler.py", fn="init_model_worker", startup=True, fatal=False)
    assert sched.render() == "max_total_num_tokens=4096, max_running_requests=4096, available_gpu_mem=12.50 GB"
    braces = Message(template="cuda_graph={{{0}}}, bs={1}", args=("timings", "capture_bs"), kind="info", file="f",
                     fn="g", startup=True, fatal=False)
    assert braces.render() == "cuda_graph={'decode': 12.5}, bs=[1, 2, 4, 8]"


def test_load_names_the_file_it_cannot_read(tmp_path: Path) -> None:
    (tmp_path / "sglang-9.9.json").write_text("{", encoding="utf-8")
    with pytest.raises(ValueError, match=r"sglang-9\.9\.json: cannot read the message catalogue"):
        load("9.9", tmp_path)


# ---------------------------------------------------------------- the script's reading of a wheel

WHEEL_SOURCE = '''
import logging
logger = logging.getLogger(__name__)

class ModelRunner:
    def load_model(self):
        logger.info(f"Load weight begin. avail mem={avail:.2f} GB")
        logger.info("max_running_requests was reduced from the requested %d to %d (per dp worker) due to x.", a, b)
        if bad:
            raise ValueError("Unknown load_format: {}".format(fmt))
        assert self.max_running_requests > 0, "max_running_request is zero"
        logger.debug("never: debug is not printed")
        x = 1
        if broken:
            logger.error(f"Weights are broken: {path}")
            raise SystemExit(1)
        logger.error("Logged and carried on: %s", err)

    def forward_decode(self):
        raise RuntimeError("at request time: " + str(e))
'''


def test_the_script_reads_messages_kinds_and_the_start_up_path_from_a_wheel(tmp_path: Path) -> None:
    wheel = tmp_path / "sglang-9.9.9-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as z:
        z.writestr("sglang/srt/model_executor/model_runner.py", WHEEL_SOURCE)
        z.writestr("sglang/srt/other.py", "def f():\n    raise ValueError(f'off the path {x}')\n")
    found, counts = SCRIPT_MOD.read_messages(wheel, everything=True)
    by = {e["t"]: e for e in found}
    assert by["Load weight begin. avail mem={0:.2f} GB"] == {
        "t": "Load weight begin. avail mem={0:.2f} GB", "a": ["avail"], "k": "info",
        "file": "srt/model_executor/model_runner.py", "fn": "load_model", "s": 1, "f": 0, "m": "weights_begin"}
    reduced = by["max_running_requests was reduced from the requested {0:d} to {1:d} (per dp worker) due to x."]
    assert (reduced["a"], reduced["m"]) == (["a", "b"], "max_running_limited")
    assert (by["Unknown load_format: {0}"]["k"], by["Unknown load_format: {0}"]["x"]) == ("raise", "ValueError")
    assert by["max_running_request is zero"]["k"] == "assert"
    assert by["Weights are broken: {0}"]["f"] == 1  # an error log its block follows with an exit
    assert by["Logged and carried on: {0}"]["f"] == 0
    assert by["at request time: {0}"]["s"] == 0  # forward_*: serving, not starting
    assert by["off the path {0}"]["s"] == 0
    assert not any("debug" in t for t in by)
    assert counts == {"messages": 8, "startup": 6, "startup_fatal": 3}
    kept, _ = SCRIPT_MOD.read_messages(wheel)
    assert {e["t"] for e in kept} == {t for t, e in by.items() if (e["s"] and e["f"]) or "m" in e}
    out = SCRIPT_MOD.write_catalogue(tmp_path, "9.9.9", wheel.name, kept, counts)
    cat = load("9.9.9", tmp_path)
    assert (cat.version, cat.counts, len(cat.messages)) == ("9.9.9", counts, len(kept)) and out.stat().st_size < 2000


_TEXT = st.text(st.characters(codec="ascii", exclude_characters="\\\"'\n\r{}"), max_size=12)
_VALUES = st.one_of(st.integers(-10**6, 10**6), st.floats(-1e6, 1e6, allow_nan=False, allow_infinity=False),
                    _TEXT)


@settings(max_examples=150, deadline=None)
@given(st.lists(st.tuples(_TEXT, _VALUES), min_size=1, max_size=4), st.booleans(), st.booleans())
def test_a_template_formats_as_the_message_sglang_prints(parts, percent: bool, braces: bool) -> None:
    """f-strings and %-formats alike: the template, formatted with the values the source had, is its text."""
    names = [f"v{i}" for i in range(len(parts))]
    specs = [(".2f" if isinstance(v, float) else "d" if isinstance(v, int) else "") for _t, v in parts]
    if percent:
        fmt = ("{literal} " if braces else "") + "".join(
            t.replace("%", "%%") + {".2f": "%.2f", "d": "%d"}.get(s, "%s") for (t, _v), s in zip(parts, specs, strict=True))
        src = f"logger.info({fmt!r}, {', '.join(names)})"
    else:
        body = ("{{literal}} " if braces else "") + "".join(
            t + "{" + n + (":" + s if s else "") + "}" for (t, _v), n, s in zip(parts, names, specs, strict=True))
        src = "logger.info(f" + repr(body) + ")"
    call = ast.parse(src).body[0].value
    tpl = SCRIPT_MOD.message_of(call, 0)
    values = [v for _t, v in parts]
    env = dict(zip(names, values, strict=True))
    expected = eval(compile(ast.Expression(call.args[0]), "<t>", "eval"), env) if not percent \
        else call.args[0].value % tuple(values)
    if tpl is None:  # too little text of its own to be worth a catalogue line
        assert len("".join(t for t, _v in parts).strip(" .:,-=")) < 3
        return
    assert "".join(tpl.text).format(*[env[a] for a in tpl.args]) == expected


def test_the_rows_release_ranges_agree_with_the_catalogues() -> None:
    """releases.json (scripts/sglang-message-catalogue --releases, read from every message of each catalogued
    release's wheel) agrees with the catalogues: each range is a row's, every catalogue that prints a row's words lies
    in its range, and the releases it names as without them are catalogued releases that do not print them."""
    from svcdiag.sglang.message_catalogue import release_range_disagreements, release_ranges, releases

    ranges = release_ranges()
    assert len(ranges) >= 20, "run scripts/sglang-message-catalogue --releases"
    assert release_range_disagreements(ranges) == []
    known = set(releases())
    assert all({r.first, r.last} <= known for r in ranges.values()), "a range names a release with no catalogue"


def test_a_range_that_contradicts_the_catalogues_is_found() -> None:
    """The check can fail: a range that leaves out a release whose catalogue prints the row's words."""
    from svcdiag.sglang.message_catalogue import ReleaseRange, release_range_disagreements

    wrong = {"not_enough_memory/swa_pool": ReleaseRange("0.5.23", "0.5.23", "0.5.22", None)}
    found = release_range_disagreements(wrong)
    assert any("0.5.19's catalogue prints its words" in w for w in found), found
    assert any("0.5.22 is no catalogued release without its words" in w for w in found), found


def test_the_diagnosis_notes_a_release_that_cannot_have_printed_the_words() -> None:
    """The cause stands; the diagnosis says when the log's release is one the catalogues show without them."""
    from svcdiag.judge.diagnosis import diagnose
    from svcdiag.judge.verdict import Verdict
    from svcdiag.sglang.figures import Figures
    from svcdiag.sglang.message_catalogue import row_releases

    rng = row_releases("not_enough_memory", "swa_pool")
    assert rng is not None and rng.absent_before is not None
    v = Verdict(ts=0.0, verdict="failed", phase="kv_cache", cause="not_enough_memory", detail="swa_pool",
                message="ValueError: SWA pool (659 tokens) cannot hold even one request", captures={"tokens": "659", "window": "1024"},
                figures=Figures(sglang_version=rng.absent_before, sglang_version_source="config"))
    note = [ln for ln in diagnose(v)["explanation"] if ln.startswith("Note: SGLang prints these words only")]
    assert note and rng.absent_before in note[0]
    assert diagnose(v.with_(figures=Figures(sglang_version=rng.last)))["explanation"][-1:] != note
    assert rng.excludes(f"<= {rng.absent_before}") and not rng.excludes(f">= {rng.first}")


def test_a_row_says_its_releases_by_hand_only_where_the_catalogues_cannot() -> None:
    """One source for a row's releases: releases.json where its words are SGLang's, the row's own note elsewhere."""
    from svcdiag.sglang.failures import FAILURES
    from svcdiag.sglang.message_catalogue import release_ranges

    ranges = release_ranges()
    both = [f"{r.cause}/{r.detail}" for r in FAILURES if r.releases and f"{r.cause}/{r.detail}" in ranges]
    assert both == [], f"{both}: the catalogues give their range (releases.json); drop the hand-written one"
