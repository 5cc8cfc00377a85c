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
        alone=(Own(Place.HANDLER, lazy_re.compile(r"Initialization failed\W+warmup error")),  # its traceback follows
               # the diffusion runtime's (multimodal_gen, 0.5.13+): its HTTP server never answered its own /health
               Own(Place.MESSAGE, lazy_re.compile(r"Server warmup failed; aborting startup"))),
        doc="the server's own warm-up request after start-up failed"),
    FailureClass(Cause.ROUTER_FAILED, priority=260,
        alone=(Own(Place.ROUTER, lazy_re.compile(r"Failed to start router|Error starting router|Failed to create router"),
                   deferred=True),),
        doc="sglang_router gave up on its workers and killed them"),
    FailureClass(Cause.HTTP_UNREACHABLE, priority=350,
        doc="the live path's HTTP cross-check after the log says ready: the server does not answer"),
    FailureClass(Cause.HTTP_MISMATCH, priority=360,
        doc="the live path's HTTP cross-check after the log says ready: it answers, but not as the log said"),
    FailureClass(Cause.DIED_AFTER_READY, priority=370, role=Role.CONSEQUENCE,
        doc="the log says ready, then the server crashes or systemd's watchdog kills it (a kill from outside is no death)"),
    FailureClass(Cause.ROUTER_FAILED, "worker_timeout", priority=720, said=said(r"Timeout (?P<secs>\d+)s waiting for workers"),
                 # the Rust router's own words, without the Python launcher's `Failed to start router`
                 alone=(Own(Place.ROUTER, lazy_re.compile(r".*?Timeout \d+s waiting for workers"), deferred=True),),
                 doc="Failed to start router: Timeout 300s waiting for workers ['http://127.0.0.1:31000'] to become healthy"),
    FailureClass(Cause.ROUTER_FAILED, "config", priority=725,
                 # the router's Rust core refusing one of its arguments, raised through launch_router (a PD
                 # prefill given as `URL,PORT` instead of `URL PORT`): no worker was started or asked
                 line=lazy_re.compile(r"Configuration error: Invalid value for field '\w+'"),
                 said=said(r"Invalid value for field '(?P<field>\w+)': (?P<value>\S+) - (?P<why>.+)$"),
                 doc="Configuration error: Invalid value for field 'worker_url': http://10.0.0.1:30000,8998 - Invalid URL"),
    FailureClass(Cause.WARMUP_FAILED, "pd_warmup", priority=730,
                 alone=(Own(Place.MESSAGE, lazy_re.compile(r"Prefill disaggregation mode warm Up Failed")),),
                 said=said(r"disaggregation mode warm Up Failed(?:.*?status code: (?P<status>\d+))?"),
                 doc="Prefill disaggregation mode warm Up Failed, status code: 400"),
    FailureClass(Cause.WARMUP_FAILED, "proxy", priority=740, said=said(r"Response \[(?P<status>502|503|403|407)\]"),
                 doc="AssertionError: res=<Response [502]>, res.text=''",
                 fixes=(({"env.no_proxy": "127.0.0.1,localhost", "env.NO_PROXY": "127.0.0.1,localhost"},
                         "the warmup then reaches the server directly"),)),
)
