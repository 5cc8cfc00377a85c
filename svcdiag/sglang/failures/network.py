"""The network: the Hugging Face hub not reachable, a port already taken."""

from __future__ import annotations

from collections.abc import Mapping

from svcdiag.sglang import lazy_re
from svcdiag.sglang.failures._model import Cause, FailureClass, Family, Own, Place, said

#: the families whose rows this module files
FAMILIES = (Family.NETWORK,)


def _pd_bootstrap_port(w: Mapping[str, str]) -> tuple[str, ...]:
    return (f"{w['message'][:1].upper()}{w['message'][1:]}: the server went on and said ready, but no decode server can "
            "reach this prefill.",
            "Two prefill servers on one host share the bootstrap port unless told otherwise: give each its own "
            "--disaggregation-bootstrap-port (extra_args), or end what holds it (`ss -ltnp 'sport = :PORT'`).")


def _zmq(w: Mapping[str, str]) -> tuple[str, ...]:
    where = f" {w['addr']}" if w["addr"] else ""
    return (f"SGLang could not bind one of its own ZMQ sockets{where} (the pipes between its tokenizer, scheduler and "
            "detokenizer processes): another process holds that port.",
            "On a multi-node or DP start they are TCP ports just above dist_init_addr's (or --port's); most often a "
            "server still running from an earlier start (its scheduler processes outlive a killed launcher: "
            "`nvidia-smi` and `ss -ltnp` name them), or a second server on this host with a neighbouring port. End the "
            "leftovers, or give each server ports at least 100 apart.")


def _internal_port(w: Mapping[str, str]) -> tuple[str, ...]:
    argv = " ".join(a.strip(" '\"") for a in w["argv"].split(","))[:120] if w["pid"] else ""
    who = f" by pid {w['pid']} ({argv})" if w["pid"] else ""
    return (f"SGLang's {w['what']} ({w['port']}) stayed taken for {w['secs']} s{who}: it derives its internal ports "
            "(tokenizer, detokenizer, NCCL, RPC, metrics) from dist_init_addr's port (or --port), and another process "
            "holds one of them.",
            "Most often a server of an earlier start still running (a killed launcher leaves its scheduler processes "
            "behind: `ss -ltnp 'sport = :PORT'`, `nvidia-smi`): end it; or give this server a dist_init_addr port (and "
            "--port) at least 100 away from any other server's.")


ROWS: tuple[FailureClass, ...] = (
    FailureClass(Cause.PORT_IN_USE, priority=70, line=lazy_re.compile(
        r"\[Errno 98\]|[Aa]ddress already in use|is not available in [\d.]+ seconds"),
        alone=(Own(Place.UVICORN),),  # uvicorn's HTTP port, taken
        doc="`ERROR:    [Errno 98] error while attempting to bind on address ('0.0.0.0', 30000): address "
            "already in use` (uvicorn's HTTP port); torch's rendezvous store `DistNetworkError: The "
            "server socket has failed to listen on any local network address. port: 29500, …, name: "
            "EADDRINUSE` (the diagnosis names --nccl-port, or dist_init_addr's port on several nodes, not"
            " the HTTP port); `zmq.error.ZMQError: Address already in use (addr='tcp://…:5002')` "
            "(SGLang's own sockets between its processes: a leftover of an earlier start); `ValueError: "
            "dist_init_port at 5000 is not available in 30 seconds. … process.cmdline()=[…] … pid=N` (the"
            " diagnosis names the port and the process holding it"),
    # the hub itself out of reach: rate-limited (429), no route, a proxy; the repo id may well be right
    FailureClass(Cause.HUB_UNREACHABLE, priority=100, line=lazy_re.compile(
        r"429 Client Error|Too Many Requests for url|There was a specific connection error when trying to load"
        r"|host='(?:huggingface\.co|hf-mirror\.com|cdn-lfs[\w.-]*|[\w.-]*\.hf\.co)', port=\d+\): Max retries exceeded"),
        doc="the Hugging Face hub out of reach, the repo id not in question: "
            "`huggingface_hub.errors.HfHubHTTPError: 429 Client Error: Too Many Requests for url: "
            "https://huggingface.co/…` (anonymous rate limit), `ConnectionError: "
            "(MaxRetryError(\"HTTPSConnectionPool(host='huggingface.co', port=443): Max retries exceeded "
            "…` (no route, DNS, proxy)",
        explain=("The server could not reach the Hugging Face hub to fetch {model}: {message}",
                 "Nothing is wrong with the model name: this host has no route to the hub (no network, a firewall, "
                 "DNS, or a proxy it is not told about). Put HTTPS_PROXY/NO_PROXY in [env], or HF_ENDPOINT for a "
                 "mirror; or download the model where the hub is reachable and point model_path at the folder."),
        fixes=(({"env.HF_HUB_OFFLINE": "1"}, "once the model is in the unit's HF cache: ask the hub nothing"),)),
    FailureClass(Cause.HUB_UNREACHABLE, "rate_limited", priority=660, said=said(r"429|Too Many Requests"),
                 doc="huggingface_hub.errors.HfHubHTTPError: 429 Client Error: Too Many Requests for url: …",
                 explain=("The Hugging Face hub refused to serve {model} for now: HTTP 429, too many requests. Anonymous "
                          "requests share a small per-IP quota (every rank and every restart asks again).",
                          "Give the unit a token (`[secrets] HF_TOKEN`: a logged-in quota is larger), or download the "
                          "model once (`huggingface-cli download`) and start with HF_HUB_OFFLINE=1, which asks the hub "
                          "nothing."),
                 fixes=(({"env.HF_HUB_OFFLINE": "1"}, "once the model is in the unit's HF cache: ask the hub nothing"),)),
    FailureClass(Cause.PORT_IN_USE, "pd_bootstrap", priority=860, said=said(r"\A.*PD bootstrap server"),
                 # the bootstrap server's thread, its address and port: the grammar words the message above
                 alone=(Own(Place.MESSAGE, lazy_re.compile(
                     r"Server error: \[Errno 98\] error while attempting to bind on address \('([^']*)', (\d+)\)"),
                     says="the PD bootstrap server could not bind {0}:{1} (--disaggregation-bootstrap-port): address "
                          "already in use"),),
                 doc="the PD bootstrap server could not bind 0.0.0.0:8998 (--disaggregation-bootstrap-port): address "
                     "already in use",
                 explain=_pd_bootstrap_port),
    FailureClass(Cause.PORT_IN_USE, "rendezvous_store", priority=870, said=said(r"server socket has failed|EADDRINUSE|TCPStore"
                                                                    r"|DistNetworkError"),
                 read=(said(r"port: (?P<port>\d+)|:(?P<errno_port>\d+) \(errno: 98"),),
                 doc="torch.distributed.DistNetworkError: The server socket has failed to listen on any local network "
                     "address. port: 29500, useIpv6: false, code: -98, name: EADDRINUSE"),
    FailureClass(Cause.PORT_IN_USE, "internal_port", priority=880,
                 said=said(r"(?P<what>\w+) at (?P<port>\d+) is not available in (?P<secs>\d+) seconds"),
                 read=(said(r"process\.cmdline\(\)=\[(?P<argv>[^\]]*)\].*?pid=(?P<pid>\d+)"),),
                 doc="ValueError: dist_init_port at 5000 is not available in 30 seconds.", explain=_internal_port),
    FailureClass(Cause.PORT_IN_USE, "zmq", priority=890, said=said(r"ZMQError"), read=(said(r"addr='(?P<addr>[^']+)'"),),
                 doc="zmq.error.ZMQError: Address already in use (addr='tcp://10.0.0.1:5002')",
                 explain=_zmq),
    # a port named by its flag, taken, said only as an exception's message: raised in a flag check's frame or naming
    # the flag, which at the frame's place would say bad_arguments (the final line is asked first)
    FailureClass(Cause.PORT_IN_USE, "strict_ports", priority=893, where=frozenset({Place.FINAL, Place.TAIL}),
                 line=lazy_re.compile(r"port \d+ is unavailable and --strict-ports is enabled"),
                 said=said(r"(?P<name>\w+(?:\[\d+\])?) port (?P<port>\d+) is unavailable and --strict-ports"),
                 doc="RuntimeError: HTTP port 30000 is unavailable and --strict-ports is enabled. Either use a different "
                     "port or disable --strict-ports.",
                 explain=("The diffusion server's {name} port {port} is held by another process, and --strict-ports "
                          "forbids it to move to a free one: stop what holds it, or give another port.",)),
    FailureClass(Cause.PORT_IN_USE, "engine_info_bootstrap", priority=896, where=frozenset({Place.FINAL, Place.TAIL}),
                 line=lazy_re.compile(r"engine_info_bootstrap_port \d+ is already in use"),
                 said=said(r"engine_info_bootstrap_port (?P<port>\d+) is already in use"),
                 doc="RuntimeError: engine_info_bootstrap_port 6789 is already in use. When running multiple instances "
                     "on the same node, each instance must use a different --engine-info-bootstrap-port.",
                 explain=("A weight-transfer seed's engine-info bootstrap server could not bind port {port}: another "
                          "instance on this node holds it. Give each instance its own --engine-info-bootstrap-port.",)),
)
