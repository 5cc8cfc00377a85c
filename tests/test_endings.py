"""How a start ends when no fatal line says so (issue 28 §3.5, 3.6, 3.7, 3.9): a traceback SGLang retried or gave up on
and went past, a stop from outside after ready (however SGLang words its children's end), processes that vanish with
only Python's shutdown notice or a launcher's exit code, and a stop long after a phase's deadline."""

from __future__ import annotations

import io
import re
import tomllib
from datetime import datetime, timedelta
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from svcdiag.config.service import DEFAULT_TIMEOUTS
from svcdiag.judge.diagnosis import diagnose
from svcdiag.judge.pipeline import Judge
from svcdiag.ops.offline.replay import NoStartFound, replay

T0 = datetime(2026, 3, 2, 9, 0, 0)
SLOW = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def at(s: float) -> str:
    return f"{T0 + timedelta(seconds=s):%Y-%m-%d %H:%M:%S}"


def judge(lines: list[str]):
    return replay(io.BytesIO(("\n".join(lines) + "\n").encode()), "t.log").verdict


def start(load_s: float = 20.0) -> list[str]:
    """A 0.5.6 start up to its weight load, and what follows the load, `load_s` later."""
    head = [f"[{at(0)}] server_args=ServerArgs(model_path='Qwen/Qwen3-8B', tp_size=1, port=30000)",
            f"[{at(8)}] Init torch distributed begin.", f"[{at(9)}] Init torch distributed ends. mem usage=0.00 GB",
            f"[{at(9)}] Load weight begin. avail mem=78.68 GB",
            "Loading safetensors checkpoint shards:   0% Completed | 0/5 [00:00<?, ?it/s]"]
    t = 9 + load_s
    tail = ["Loading safetensors checkpoint shards: 100% Completed | 5/5 [00:08<00:00,  1.61s/it]",
            f"[{at(t)}] Load weight end. type=Qwen3ForCausalLM, dtype=torch.bfloat16, avail mem=63.26 GB, mem usage=15.42 GB.",
            f"[{at(t)}] KV Cache is allocated. #tokens: 413340, K size: 28.38 GB, V size: 28.38 GB",
            f"[{at(t)}] Memory pool end. avail mem=6.50 GB",
            f"[{at(t)}] Capture cuda graph begin. This can take up to several minutes. avail mem=5.92 GB",
            f"[{at(t + 8)}] Capture cuda graph end. Time elapsed: 7.48 s. mem usage=0.71 GB. avail mem=5.21 GB.",
            f"[{at(t + 8)}] max_total_num_tokens=413340, chunked_prefill_size=8192, max_prefill_tokens=16384, "
            "max_running_requests=4096, context_len=40960, available_gpu_mem=5.21 GB",
            f"[{at(t + 9)}] INFO:     Uvicorn running on http://127.0.0.1:30000 (Press CTRL+C to quit)",
            f'[{at(t + 10)}] INFO:     127.0.0.1:58223 - "POST /generate HTTP/1.1" 200 OK',
            f"[{at(t + 10)}] The server is fired up and ready to roll!"]
    return head + tail


HEAD = 5  # start()'s lines before the load ends
READY_AT = 9 + 20 + 10


# ---------------------------------------------------------------- §3.5 a traceback SGLang went past

def traceback(final: str) -> list[str]:
    return ["Traceback (most recent call last):",
            '  File "/usr/local/lib/python3.12/dist-packages/sglang/srt/utils/common.py", line 2573, in retry',
            "    return fn()",
            '  File "/usr/local/lib/python3.12/dist-packages/huggingface_hub/hf_api.py", line 3017, in file_exists',
            "    get_hf_file_metadata(url, token=token)", final]


FINALS = ["requests.exceptions.ReadTimeout: (ReadTimeoutError(\"HTTPSConnectionPool(host='huggingface.co', port=443): "
          "Read timed out. (read timeout=10)\"), '(Request ID: 3c5e0f29)')",
          "httpx.ReadTimeout: The read operation timed out",
          "huggingface_hub.errors.HfHubHTTPError: 429 Client Error: Too Many Requests for url: "
          "https://huggingface.co/api/models/Qwen/Qwen3-8B/revision/main",
          "requests.exceptions.ConnectionError: (MaxRetryError(\"HTTPSConnectionPool(host='huggingface.co', port=443): "
          "Max retries exceeded with url: /api/models/Qwen/Qwen3-8B\"), '(Request ID: 1b2c)')"]
#: the line after the traceback that says it was retried or given up on, at SGLang's prefix (any rank) or a logger's own
CLOSERS = ["{p}retry() failed once (0th try, maximum 2 retries). Will delay 0.84s and retry. Error: timed out",
           "{p}retry() failed once (1th try, maximum 2 retries). Will delay 1.72s and retry. Error: timed out",
           "{p}Failed to check hf_quant_config.json: Qwen/Qwen3-8B retry() exceed maximum number of retries.",
           "{p}Failed to load hf_quant_config.json for model Qwen/Qwen3-8B: retry() exceed maximum number of retries.",
           "{p}Retrying in 2s [Retry 2/5].",
           "{p}Invalidating cache entry and retrying uncached.",
           "{p}Multimodal preprocessing ran out of GPU memory on cuda:0; retrying on CPU"]
PREFIXES = ["[{t}] ", "[{t} TP1] ", "[{t} DP0 TP3 EP3] ", "WARNING:huggingface_hub.utils._http:",
            "ERROR:sglang.srt.utils.common:", "{t},123 - WARNING - ", "INFO "]


@SLOW
@given(st.sampled_from(FINALS), st.sampled_from(CLOSERS), st.sampled_from(PREFIXES), st.floats(31, 800))
def test_a_traceback_retried_or_given_up_on_is_recovered(final: str, closer: str, prefix: str, load_s: float) -> None:
    """However SGLang or the hub says it retries (or that its caller gave up and carries on), at any level and in
    any logger's format: the traceback before it is no cause, even with minutes of loading and no milestone after."""
    lines = start(load_s)
    said = closer.format(p=prefix.format(t=at(12)))
    v = judge([*lines[:HEAD], *traceback(final), said, *lines[HEAD:]])
    assert (v.verdict, v.cause) == ("healthy", None), (v.message, said)


@SLOW
@given(st.sampled_from(FINALS), st.floats(31, 800))
def test_the_same_traceback_with_no_word_after_it_is_the_cause(final: str, load_s: float) -> None:
    """The other side: no notice after it, and nothing but a progress bar for more than 30 s: judged by what followed."""
    lines = start(load_s)
    v = judge([*lines[:HEAD], *traceback(final), *lines[HEAD:]])
    assert v.verdict == "failed" and v.phase == "loading_weights", v.message


@SLOW
@given(st.sampled_from(FINALS), st.sampled_from(PREFIXES), st.floats(31, 800))
def test_a_notice_that_it_gave_up_after_retrying_is_no_recovery(final: str, prefix: str, load_s: float) -> None:
    lines = start(load_s)
    said = prefix.format(t=at(12)) + "Failed to reach the hub after retrying 3 times"
    v = judge([*lines[:HEAD], *traceback(final), said, *lines[HEAD:]])
    assert v.verdict == "failed", (v.message, said)


# ---------------------------------------------------------------- §3.6 a stop after ready is no crash

STOPS = ["[{t}] SIGTERM received. signum=None frame=None. Draining requests and shutting down...",
         "[{t}] INFO:     Shutting down", "^C[{t}] INFO:     Shutting down", "^C", "^C^C[{t}] INFO:     Shutting down",
         "^CGracefully stopping... (press Ctrl+C again to force)", "Gracefully stopping... (press Ctrl+C again to force)",
         "Aborting on container exit..."]
#: how SGLang words a child's end by a stop's signal (TERM, INT, HUP): its watchdog, the launcher's SIGCHLD
STOP_DEATHS = ["[{t}] Subprocess scheduler_0 (pid=4562) crashed with exit code -{n}. Triggering SIGQUIT for cleanup...",
               "[{t}] Subprocess detokenizer (pid=4570) crashed with exit code -{n}. Triggering SIGQUIT for cleanup...",
               "[{t}] Exit code: -{n}"]
AFTER_STOP = ["[{t}] Received sigquit from a child process. It usually means the child failed.",
              "[{t}] Rank 0 scheduler is dead. Please check if there are relevant logs.",
              "[{t}] Subprocess scheduler_1 (pid=4563) crashed with exit code -9. Triggering SIGQUIT for cleanup..."]


@SLOW
@given(st.sampled_from(STOP_DEATHS), st.sampled_from([15, 2, 1]), st.floats(1, 36000))
def test_a_child_ended_by_a_stop_signal_after_ready_is_a_stop(death: str, signum: int, later: float) -> None:
    """systemd, docker and the kubelet stop with SIGTERM, a terminal with SIGINT or SIGHUP; SGLang may call the child's
    end a crash: the start stays healthy, and says what stopped it."""
    t = READY_AT + later
    v = judge([*start(), death.format(t=at(t), n=signum)])
    assert (v.verdict, v.cause) == ("healthy", None), v.message
    assert v.figures.stopped_after_ready_by == {15: "SIGTERM", 2: "SIGINT", 1: "SIGHUP"}[signum]


@SLOW
@given(st.sampled_from(STOPS), st.sampled_from(STOP_DEATHS + AFTER_STOP), st.floats(1, 36000))
def test_after_a_stop_every_death_is_the_stops(stop: str, death: str, later: float) -> None:
    t = READY_AT + later
    v = judge([*start(), stop.format(t=at(t)), death.format(t=at(t + 1), n=9)])
    assert (v.verdict, v.cause) == ("healthy", None), v.message
    assert v.figures.stopped_after_ready_by in ("SIGTERM", "uvicorn", "Ctrl-C", "docker compose")


@SLOW
@given(st.sampled_from(STOP_DEATHS), st.sampled_from([11, 6, 7]), st.floats(1, 36000))
def test_a_death_no_stop_caused_is_still_died_after_ready(death: str, signum: int, later: float) -> None:
    v = judge([*start(), death.format(t=at(READY_AT + later), n=signum)])
    assert (v.verdict, v.cause) == ("failed", "died_after_ready"), v.message


KILLS_AFTER_READY = [*STOP_DEATHS, "[{t}] Child process unexpectedly failed with an exit code {n}. pid=4571"]


@SLOW
@given(st.sampled_from(KILLS_AFTER_READY), st.lists(st.sampled_from(AFTER_STOP), max_size=3), st.floats(1, 36000))
def test_a_process_killed_while_serving_is_a_post_ready_incident(kill: str, after: list[str], later: float) -> None:
    """SIGKILL from outside after ready (the OOM killer, kill -9; `exit code -9`, a raw wait status 9): the start
    was healthy and the verdict says the incident; the deaths after it are the kill's (issue 41 §4)."""
    t = READY_AT + later
    line = kill.format(t=at(t), n=9)
    v = judge([*start(), line, *(a.format(t=at(t + 1)) for a in after)])
    assert (v.verdict, v.cause) == ("healthy", None), v.message
    assert v.figures.killed_after_ready and v.figures.killed_after_ready in line
    assert "post-ready incident" in v.message


def test_a_line_after_an_echoed_ctrl_c_is_read_whole() -> None:
    """`^C` glued before a line that begins with C is still that line (the echo is cut, not every C)."""
    from svcdiag.sglang.events import CudaGraph, StopRequested
    from svcdiag.sglang.grammar import LineParser

    evs = LineParser().feed_line("^C^CCapture cuda graph end. Time elapsed: 7.48 s. mem usage=0.71 GB. avail mem=5.21 GB.")
    assert [type(e) for e in evs] == [StopRequested, CudaGraph] and evs[1].stage == "end", evs


def test_systemd_stopping_the_unit_after_ready_keeps_it_healthy() -> None:
    """The journal's own order: PID 1 says it stops the unit, then the children's -15 and the main's SIGKILL."""
    j = Judge()
    for line in start():
        j.service_line(line)
    end = T0.timestamp() + READY_AT + 3600
    j.systemd_line("Stopping demo.service - SGLang...", end)
    j.service_line(f"[{at(READY_AT + 3601)}] Subprocess scheduler_0 (pid=4562) crashed with exit code -15. "
                   "Triggering SIGQUIT for cleanup...")
    j.systemd_line("Main process exited, code=killed, status=9/KILL", end + 2)
    v = j.finish()
    assert (v.verdict, v.figures.stopped_after_ready_by) == ("healthy", "systemd")
    assert "Stopping demo.service - SGLang..." in v.evidence


# ---------------------------------------------------------------- §3.7 silent deaths

NOTICES = ["/usr/lib/python{py}/multiprocessing/resource_tracker.py:{ln}: UserWarning: resource_tracker: There appear "
           "to be {n} leaked {what} objects to clean up at shutdown",
           "/opt/conda/lib/python{py}/multiprocessing/resource_tracker.py:{ln}: UserWarning: resource_tracker: There "
           "appear to be {n} leaked {what} objects to clean up at shutdown: {{'/mp-usl2673p'}}",
           "/usr/lib/python{py}/multiprocessing/semaphore_tracker.py:{ln}: UserWarning: semaphore_tracker: There appear "
           "to be {n} leaked semaphores to clean up at shutdown"]
CUTS = {"loading_weights": HEAD, "cuda_graph": HEAD + 5, "scheduler": HEAD + 6}


@SLOW
@given(st.sampled_from(NOTICES), st.sampled_from(["3.7", "3.10", "3.12", "3.13"]), st.integers(1, 400),
       st.integers(1, 64), st.sampled_from(["semaphore", "shared_memory", "folder"]), st.sampled_from(sorted(CUTS)))
def test_processes_gone_with_only_pythons_shutdown_notice_is_a_silent_death(
        notice: str, py: str, ln: int, n: int, what: str, phase: str) -> None:
    """No traceback, no exit line, the resource tracker's notice (any Python, any count, any kind): failed, in the phase
    it stopped in, and the diagnosis says what kills quietly and where to look."""
    said = notice.format(py=py, ln=ln, n=n, what=what)
    v = judge([*start()[:CUTS[phase]], said, "  warnings.warn('resource_tracker: There appear to be %d '"])
    assert (v.verdict, v.cause, v.phase) == ("failed", "died_silently", phase), v.message
    d = diagnose(v)
    assert d is not None and any("OOM killer" in x for x in d["explanation"])
    assert any("GPU memory is host memory" in x for x in d["explanation"]), d


def test_processes_gone_after_the_phases_deadline_is_timed_out_in_it() -> None:
    """Stuck past its deadline, then gone without a word (a `docker stop`, a kill): the start was given up on."""
    gone = "/usr/lib/python3.12/multiprocessing/resource_tracker.py:224: UserWarning: resource_tracker: There appear to " \
           "be 1 leaked semaphore objects to clean up at shutdown"
    j = Judge()
    for line in start()[:HEAD]:
        j.service_line(line)
    j.service_line(gone, T0.timestamp() + 9 + DEFAULT_TIMEOUTS["loading_weights"] + 60)
    v = j.finish()
    assert (v.verdict, v.phase) == ("timed_out", "loading_weights") and "ended without a word" in v.message, v.message


def test_the_notice_after_a_traceback_is_not_part_of_its_message() -> None:
    lines = [*start()[:HEAD], *traceback("ValueError: bad shape (4096, 11008)"),
             "/usr/lib/python3.10/multiprocessing/resource_tracker.py:224: UserWarning: resource_tracker: There appear to "
             "be 1 leaked semaphore objects to clean up at shutdown"]
    v = judge(lines)
    assert (v.verdict, v.message) == ("failed", "ValueError: bad shape (4096, 11008)"), v.message


def test_a_cause_said_before_the_notice_still_wins() -> None:
    lines = [*start()[:HEAD], f"[{at(12)}] Rank 0 scheduler is dead. Please check if there are relevant logs.",
             f"[{at(12)}] Exit code: -9",
             "/usr/lib/python3.10/multiprocessing/resource_tracker.py:224: UserWarning: resource_tracker: There appear to "
             "be 1 leaked semaphore objects to clean up at shutdown"]
    v = judge(lines)
    assert (v.verdict, v.cause, v.figures.signal) == ("failed", "killed_by_signal", "KILL")


@SLOW
@given(st.sampled_from(["sglang-1 exited with code {c}", "sglang_server_1 exited with code {c}",
                        "command terminated with exit code {c}"]),
       st.sampled_from([(137, "host_oom", "KILL"), (139, "killed_by_signal", "SEGV"), (134, "killed_by_signal", "ABRT"),
                        (135, "killed_by_signal", "BUS"), (1, "exited", None)]), st.sampled_from(sorted(CUTS)))
def test_a_launchers_word_for_its_childs_exit_ends_the_start(line: str, end: tuple[int, str, str | None],
                                                            phase: str) -> None:
    code, cause, sig = end
    v = judge([*start()[:CUTS[phase]], line.format(c=code)])
    assert (v.verdict, v.cause, v.phase, v.figures.signal) == ("failed", cause, phase, sig), v.message


@SLOW
@given(st.sampled_from([("srun: error: gpu-node-06: task 1: Exited with exit code 1", "exited", None),
                        ("srun: error: gpu-node-06: tasks 0-3: Killed", "host_oom", "KILL"),
                        ("srun: error: node-2: task 0: Segmentation fault", "killed_by_signal", "SEGV"),
                        ("slurmstepd: error: Detected 1 oom_kill event in StepId=4242.0. Some of the step tasks have "
                         "been OOM Killed.", "host_oom", "KILL"),
                        ("mpirun noticed that process rank 7 with PID 0 on node ip-10-0-0-5 exited on signal 9 (Killed).",
                         "host_oom", "KILL"),
                        ("mpirun noticed that process rank 0 with PID 4242 on node n1 exited on signal 11 (Segmentation "
                         "fault).", "killed_by_signal", "SEGV")]), st.sampled_from(sorted(CUTS)))
def test_slurms_and_mpiruns_word_for_a_tasks_end_ends_the_start(said: tuple[str, str, str | None], phase: str) -> None:
    line, cause, sig = said
    v = judge([*start()[:CUTS[phase]], line])
    assert (v.verdict, v.cause, v.phase, v.figures.signal) == ("failed", cause, phase, sig), v.message


# ---------------------------------------------------------------- §3.9 stopped long after a deadline

PHASE_AT = {"loading_weights": (HEAD, 9), "cuda_graph": (HEAD + 5, 29)}  # cut index, when that phase began


@SLOW
@given(st.sampled_from(sorted(PHASE_AT)), st.floats(1, 7200), st.booleans(),
       st.sampled_from(["systemd", "[{t}] SIGTERM received. signum=None frame=None. Draining requests and shutting "
                        "down...", "^C", "Gracefully stopping... (press Ctrl+C again to force)"]))
def test_a_stop_long_after_the_phases_deadline_is_timed_out_in_it(phase: str, past: float, late: bool,
                                                                 stop: str) -> None:
    """The operator gave up on a stuck start: past the phase's deadline with no progress, timed_out in that phase;
    within it, `stopped`."""
    cut, began = PHASE_AT[phase]
    limit = DEFAULT_TIMEOUTS[phase]
    when = began + (limit + past if late else min(past, limit - 1))
    j = Judge()
    for line in start()[:cut]:
        j.service_line(line)
    if stop == "systemd":
        j.systemd_line("Stopping demo.service - SGLang...", T0.timestamp() + when)
    else:
        j.service_line(stop.format(t=at(when)), T0.timestamp() + when)
    v = j.finish()
    assert (v.verdict, v.cause, v.phase) == (("timed_out", None) if late else ("failed", "stopped")) + (phase,), \
        v.message
    if late:
        assert f"deadline {limit:.0f} s" in v.message and "then " in v.message
        d = diagnose(v)
        assert d is not None and "stopped from outside" in d["explanation"][0], d


# ---------------------------------------------------------------- the same, on every real log that judges right

FIXTURES = Path(__file__).parent / "fixtures" / "sglang"
#: the plain real logs judged right today (a class not fixed yet, `xfail`, joins when it is)
REAL = [c for c in tomllib.loads((FIXTURES / "cases.toml").read_text())["case"]
        if "xfail" not in c and c.get("format", "plain") == "plain"]
HEALTHY = [c for c in REAL if c["verdict"] == "healthy"]
CUTTABLE = [c for c in REAL if c["verdict"] in ("healthy", "incomplete")]
STAMP_RE = re.compile(r"\[(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d)")


@SLOW
@given(st.sampled_from(HEALTHY), st.sampled_from([*STOPS, ""]), st.sampled_from(STOP_DEATHS + AFTER_STOP))
def test_any_healthy_real_start_stopped_after_ready_stays_healthy(case: dict, stop: str, death: str) -> None:
    """Every healthy fixture, then a stop and what SGLang prints as its processes end: still healthy (a death no stop
    explains, `-9` with no stop line, is the one exception)."""
    text = (FIXTURES / case["file"]).read_text(errors="replace")
    stamps = STAMP_RE.findall(text)
    last = datetime.fromisoformat(stamps[-1]) if stamps else T0
    t = f"{last + timedelta(minutes=30):%Y-%m-%d %H:%M:%S}"
    after = [stop.format(t=t)] if stop else []
    said = death.format(t=t, n=15 if stop == "" else 9)
    if not stop and death in AFTER_STOP:
        return  # no stop and no stop's signal: a death while serving (test_a_death_no_stop_caused_…)
    v = judge([*text.splitlines(), *after, said])
    assert (v.verdict, v.cause) == ("healthy", None), (v.message, after, said)


@SLOW
@given(st.sampled_from(CUTTABLE), st.floats(0.05, 0.95))
def test_any_real_start_cut_short_and_gone_is_a_silent_death_in_its_phase(case: dict, where: float) -> None:
    """Cut any real start where it would be `incomplete`, then Python's shutdown notice: `died_silently`, same phase."""
    lines = (FIXTURES / case["file"]).read_text(errors="replace").splitlines()
    cut = lines[:max(1, int(len(lines) * where))]
    try:
        before = judge(cut)
    except NoStartFound:  # a cut with no SGLang line left is no start
        return
    if before.verdict != "incomplete":
        return
    v = judge([*cut, "/usr/lib/python3.10/multiprocessing/resource_tracker.py:224: UserWarning: resource_tracker: "
                     "There appear to be 2 leaked semaphore objects to clean up at shutdown"])
    assert (v.verdict, v.cause, v.phase) == ("failed", "died_silently", before.phase), v.message
