"""Serving: warm-up, the router, HTTP, a death after ready."""

from __future__ import annotations

from svcdiag.sglang import lazy_re
from svcdiag.sglang.failures._model import Cause, FailureClass, Family, Own, Place, Role, said

#: the families whose rows this module files
FAMILIES = (Family.SERVING,)


#: what every warmup failure's explanation says first
_WARMUP_SAY = ("The server loaded and listened, then its own warmup request to itself failed, and SGLang shut down "
               "(`Initialization failed. warmup error`).")

ROWS: tuple[FailureClass, ...] = (
    FailureClass(Cause.WARMUP_FAILED, priority=250,
        alone=(Own(Place.HANDLER, lazy_re.compile(r"Initialization failed\W+warmup error")),),  # its traceback follows
        doc="`Initialization failed. warmup error: Traceback …` ending in `AssertionError: res=<Response "
            "[502]>` (a proxy without `no_proxy`); a PD server's `Prefill disaggregation mode warm Up "
            "Failed, status code: 500` (it prints ready after it, but is UnHealthy: `/health` 503)",
        explain=(_WARMUP_SAY, "It said: {message}")),
    FailureClass(Cause.ROUTER_FAILED, priority=260,
        alone=(Own(Place.ROUTER, lazy_re.compile(r"Failed to start router|Error starting router|Failed to create router"),
                   deferred=True),),
        doc="`sglang_router.launch_server` gave up and killed its workers: `[Router (Python)] … - ERROR -"
            " Failed to start router: Timeout 300s waiting for workers [...] to become healthy. Please "
            "set --router-worker-startup-timeout-secs …`",
        explain=("sglang_router could not start, and killed its workers: {message}",
                 "Its words name the router argument to change (the --router-* flags).")),
    FailureClass(Cause.HTTP_UNREACHABLE, priority=350,
        doc="the live path's HTTP cross-check after the log says ready: the server does not answer"),
    FailureClass(Cause.HTTP_MISMATCH, priority=360,
        doc="the live path's HTTP cross-check after the log says ready: it answers, but not as the log said"),
    FailureClass(Cause.DIED_AFTER_READY, priority=370, role=Role.CONSEQUENCE,
        doc="the log says ready, then the server dies in it (`Scheduler hit an exception` in its event "
            "loop, `Received sigquit`, a rank dead; `figures.died_of` is that failure's own cause, the "
            "failure record says it), or, live (`wait` on a unit that has ended since), systemd's result "
            "says the unit died while serving (watchdog, signal, OOM killer) ([live.md](live.md)); a "
            "clean stop stays healthy: after `Stopping …`, `SIGTERM received`, uvicorn's `Shutting down`, `^C` or "
            "compose's `Gracefully stopping…`, "
            "the deaths that follow are the stop's, and a child that dies of SIGTERM, SIGINT or SIGHUP (`Subprocess "
            "scheduler_0 (pid=…) crashed with exit code -15`) was stopped (`figures.stopped_after_ready_by`); a "
            "process SIGKILLed while serving (`… exit code 9`, `… crashed with exit code -9`) leaves it healthy with a "
            "post-ready incident (`figures.killed_after_ready`)"),
    FailureClass(Cause.ROUTER_FAILED, "worker_timeout", priority=720, said=said(r"Timeout (?P<secs>\d+)s waiting for workers"),
                 # the Rust router's own words, without the Python launcher's `Failed to start router`
                 alone=(Own(Place.ROUTER, lazy_re.compile(r".*?Timeout \d+s waiting for workers"), deferred=True),),
                 doc="Failed to start router: Timeout 300s waiting for workers ['http://127.0.0.1:31000'] to become healthy",
                 explain=("sglang_router waited {secs} s for its workers' /health and gave up, killing them all; the "
                          "workers had not failed, they were still starting (phase {phase}).",
                          "Raise --router-worker-startup-timeout-secs above the workers' start-up time (torch.compile, a "
                          "first kernel JIT and a large checkpoint take minutes), or start them faster. If the workers did "
                          "print ready, the router could not reach them: an http_proxy in its environment without no_proxy "
                          "for their addresses.")),
    FailureClass(Cause.WARMUP_FAILED, "pd_warmup", priority=730,
                 alone=(Own(Place.MESSAGE, lazy_re.compile(r"Prefill disaggregation mode warm Up Failed")),),
                 said=said(r"disaggregation mode warm Up Failed(?:.*?status code: (?P<status>\d+))?"),
                 doc="Prefill disaggregation mode warm Up Failed, status code: 400"),
    FailureClass(Cause.WARMUP_FAILED, "proxy", priority=740, said=said(r"Response \[(?P<status>502|503|403|407)\]"),
                 doc="AssertionError: res=<Response [502]>, res.text=''",
                 explain=(_WARMUP_SAY,
                          "It got HTTP {status} from 127.0.0.1: that is a proxy answering, not SGLang. The unit's "
                          "environment sets http_proxy/https_proxy without no_proxy for the local address."),
                 fixes=(({"env.no_proxy": "127.0.0.1,localhost", "env.NO_PROXY": "127.0.0.1,localhost"},
                         "the warmup then reaches the server directly"),)),
)
