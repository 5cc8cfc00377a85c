"""The network: the Hugging Face hub not reachable, a port already taken."""

from __future__ import annotations

from collections.abc import Mapping

from svcdiag.sglang import lazy_re
from svcdiag.sglang.failures._model import Cause, FailureClass, Family, Own, Place, said

#: the families whose rows this module files
FAMILIES = (Family.NETWORK,)


def _pd_bootstrap_port(w: Mapping[str, str]) -> Mapping[str, str]:
    return {"Message": f"{w['message'][:1].upper()}{w['message'][1:]}"}


def _zmq(w: Mapping[str, str]) -> Mapping[str, str]:
    return {"at_addr": f" {w['addr']}" if w["addr"] else ""}


def _internal_port(w: Mapping[str, str]) -> Mapping[str, str]:
    argv = " ".join(a.strip(" '\"") for a in w["argv"].split(","))[:120] if w["pid"] else ""
    return {"by_pid": f" by pid {w['pid']} ({argv})" if w["pid"] else ""}


ROWS: tuple[FailureClass, ...] = (
    FailureClass(Cause.PORT_IN_USE, priority=70, line=lazy_re.compile(
        r"\[Errno 98\]|[Aa]ddress already in use|is not available in [\d.]+ seconds"),
        alone=(Own(Place.UVICORN),),  # uvicorn's HTTP port, taken
        doc="a port the server binds (HTTP, the rendezvous store, ZMQ, PD bootstrap) is taken"),
    # the hub itself out of reach: rate-limited (429), no route, a proxy; the repo id may well be right
    FailureClass(Cause.HUB_UNREACHABLE, priority=100, line=lazy_re.compile(
        r"429 Client Error|Too Many Requests for url|There was a specific connection error when trying to load"
        r"|host='(?:huggingface\.co|hf-mirror\.com|cdn-lfs[\w.-]*|[\w.-]*\.hf\.co)', port=\d+\): Max retries exceeded"
        # gpt-oss's Harmony encoding (openai_harmony in the server, the router's Rust crate) fetching its vocab
        r"|error downloading or loading vocab file"),
        doc="the Hugging Face hub out of reach, the repo id not in question",
        fixes=(({"env.HF_HUB_OFFLINE": "1"}, "once the model is in the unit's HF cache: ask the hub nothing"),)),
    FailureClass(Cause.HUB_UNREACHABLE, "rate_limited", priority=660, said=said(r"429|Too Many Requests"),
                 doc="huggingface_hub.errors.HfHubHTTPError: 429 Client Error: Too Many Requests for url: …",
                 fixes=(({"env.HF_HUB_OFFLINE": "1"}, "once the model is in the unit's HF cache: ask the hub nothing"),)),
    FailureClass(Cause.HUB_UNREACHABLE, "harmony_vocab", priority=665,
                 said=said(r"error downloading or loading vocab file"),
                 doc="openai_harmony.HarmonyError: error downloading or loading vocab file: failed to download or load …"),
    FailureClass(Cause.PORT_IN_USE, "pd_bootstrap", priority=860, said=said(r"\A.*PD bootstrap server"),
                 # the bootstrap server's thread, its address and port: the grammar words the message above
                 alone=(Own(Place.MESSAGE, lazy_re.compile(
                     r"Server error: \[Errno 98\] error while attempting to bind on address \('([^']*)', (\d+)\)"),
                     says="the PD bootstrap server could not bind {0}:{1} (--disaggregation-bootstrap-port): address "
                          "already in use"),),
                 doc="the PD bootstrap server could not bind 0.0.0.0:8998 (--disaggregation-bootstrap-port): address already in …",
                 words=_pd_bootstrap_port),
    FailureClass(Cause.PORT_IN_USE, "rendezvous_store", priority=870, said=said(r"server socket has failed|EADDRINUSE|TCPStore"
                                                                    r"|DistNetworkError"),
                 read=(said(r"port: (?P<port>\d+)|:(?P<errno_port>\d+) \(errno: 98"),),
                 doc="torch.distributed.DistNetworkError: The server socket has failed to listen on any local network address. …"),
    FailureClass(Cause.PORT_IN_USE, "internal_port", priority=880,
                 said=said(r"(?P<what>\w+) at (?P<port>\d+) is not available in (?P<secs>\d+) seconds"),
                 read=(said(r"process\.cmdline\(\)=\[(?P<argv>[^\]]*)\].*?pid=(?P<pid>\d+)"),),
                 doc="ValueError: dist_init_port at 5000 is not available in 30 seconds.", words=_internal_port),
    FailureClass(Cause.PORT_IN_USE, "zmq", priority=890, said=said(r"ZMQError"), read=(said(r"addr='(?P<addr>[^']+)'"),),
                 doc="zmq.error.ZMQError: Address already in use (addr='tcp://10.0.0.1:5002')",
                 words=_zmq),
    # a port named by its flag, taken, said only as an exception's message: raised in a flag check's frame or naming
    # the flag, which at the frame's place would say bad_arguments (the final line is asked first)
    FailureClass(Cause.PORT_IN_USE, "strict_ports", priority=893, where=frozenset({Place.FINAL, Place.TAIL}),
                 line=lazy_re.compile(r"port \d+ is unavailable and --strict-ports is enabled"),
                 said=said(r"(?P<name>\w+(?:\[\d+\])?) port (?P<port>\d+) is unavailable and --strict-ports"),
                 doc="RuntimeError: HTTP port 30000 is unavailable and --strict-ports is enabled. …"),
    FailureClass(Cause.PORT_IN_USE, "engine_info_bootstrap", priority=896, where=frozenset({Place.FINAL, Place.TAIL}),
                 line=lazy_re.compile(r"engine_info_bootstrap_port \d+ is already in use"),
                 said=said(r"engine_info_bootstrap_port (?P<port>\d+) is already in use"),
                 doc="RuntimeError: engine_info_bootstrap_port 6789 is already in use. …"),
)
