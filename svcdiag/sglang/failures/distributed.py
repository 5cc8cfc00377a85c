"""Ranks, nodes and PD: rendezvous, NCCL, NVSHMEM, expert-parallel dispatch, KV transfer, the PD bootstrap."""

from __future__ import annotations

import re

from svcdiag.sglang import lazy_re
from svcdiag.sglang.failures._model import Cause, FailureClass, Family, Own, Place, said

#: the families whose rows this module files
FAMILIES = (Family.DISTRIBUTED,)


def _warn(pattern: str) -> re.Pattern[str]:
    """NCCL's own WARN line, which the grammar keeps as the nccl_error's first evidence line (`NCCL WARN …`)."""
    return said(r"^NCCL WARN (?P<warn>.*?(?:" + pattern + r").*)$")


_NCCL_SAY = "NCCL failed in phase {phase}: "


_NCCL_OWN = "NCCL's own words: {warn}"


_NCCL_IFACE = (({"env.NCCL_SOCKET_IFNAME": "IFACE"}, "the interface (or GID) that reaches the other nodes: set it"),)


ROWS: tuple[FailureClass, ...] = (
    # the PD KV transfer engine could not start: its RDMA NIC(s) missing, unusable or hidden by the sandbox
    FailureClass(Cause.KV_TRANSFER_FAILED, priority=140, line=lazy_re.compile(
        r"(?:Mooncake|Ascend) Transfer Engine initialization failed|NIXL_ERR_BACKEND|nixlBackendError"
        # 0.5.23: an engine's set-up that never returned (SGLANG_DISAGGREGATION_ENGINE_INIT_TIMEOUT)
        r"|(?:Mooncake TransferEngine\.initialize|NIXL create_backend|Mori IOEngine)\(.*\) did not return within"
        r"|NIXL backend '[\w-]+' not found\. Available:"),  # the backend's plugin missing from the NIXL install
        doc="a PD server (`--disaggregation-mode`) whose KV transfer engine cannot start: `RuntimeError: "
            "Mooncake Transfer Engine initialization failed.`, Ascend's `Ascend Transfer Engine initialization failed.`"
            ", NIXL's `NIXL_ERR_BACKEND`, 0.5.23's `NIXL create_backend('UCX', {…}) did not return within 120s on "
            "node-3` (no RDMA NIC it could open: "
            "`--disaggregation-ib-device`, the sandbox's `/dev/infiniband`: the fix adds `devices = "
            "[\"infiniband\"]`)"),
    # DeepEP's all-to-all: an expert-parallel rank never reached the dispatch (dead, slow, or RDMA)
    FailureClass(Cause.EP_DISPATCH_TIMEOUT, priority=150, line=lazy_re.compile(
        r"DeepEP error: (?:CPU recv timeout|timeout \(dispatch CPU\)|timeout)"),
        doc="DeepEP's all-to-all waited for an expert-parallel rank that never came: `RuntimeError: "
            "DeepEP error: CPU recv timeout` (`timeout (dispatch CPU)`): another rank's error first, a "
            "first start's DeepGEMM compile, or RDMA between nodes"),
    # DeepEP's NVSHMEM (expert parallel's all-to-all over RDMA) could not connect its ranks: it prints
    # `/…/nvshmem/src/…/ibrc.cpp:420: non-zero status: 22 ibv_modify_qp failed` and exits, SGLang's
    # `Rank 0 scheduler is dead` and `Exit code: 255` are the consequence
    FailureClass(Cause.NVSHMEM_FAILED, priority=160, line=lazy_re.compile(
        r"nvshmem/src/\S+: non-zero status: \d+|nvshmem initialization failed"
        r"|NVSHMEM API called before NVSHMEM initialization"),
        # its unprefixed error lines, each a source path: the first names the step that failed, the rank's exit follows
        alone=(Own(Place.LONE, lazy_re.compile(r"/(?=.*nvshmem/src/)(?=.*(?:nvshmem/src/\S+: non-zero status: \d+"
                                               r"|nvshmem initialization failed|NVSHMEM API called before NVSHMEM initialization))"),
                   event="suspect"),),
        doc="DeepEP's NVSHMEM (`--moe-a2a-backend deepep`) could not connect the ranks over RDMA: its "
            "unprefixed `/sgl-workspace/nvshmem/src/modules/transport/ibrc/ibrc.cpp:420: non-zero status:"
            " 22 ibv_modify_qp failed`, `nvshmem initialization failed, exiting`; the ranks' exit after "
            "it is the consequence"),
    FailureClass(Cause.RENDEZVOUS_FAILED, priority=170, line=lazy_re.compile(
        r"DistStoreError|DistNetworkError|[Tt]he client socket has timed out|TCP client failed to connect"
        r"|Timed out initializing process group|clients joined|gloo/transport/tcp"),
        doc="a multi-node start whose ranks never met at `dist_init_addr`: "
            "`torch.distributed.DistNetworkError: The client socket has timed out after 120000ms while "
            "trying to connect to (10.0.0.11, 5000).` (a worker node), `DistStoreError: Timed out after "
            "181 seconds waiting for clients. 8/16 clients joined.` (node 0)"),
    FailureClass(Cause.NCCL_ERROR, priority=180, line=lazy_re.compile(
        r"NCCL error|DistBackendError|ncclInternalError|ncclUnhandledCudaError|ncclSystemError"
                              r"|Watchdog caught collective operation timeout|NCCL communicator was aborted"),
        reads_on=True,  # NCCL's own words come after its final line: `Last error:` and what failed
        # the other end went away (ncclRemoteError): on one node most often another rank that died, whose own error may come
        # after this one's
        consequence=lazy_re.compile(r"remote process exited or there was a network error|Connection closed by remote peer"),
        doc="`RuntimeError: NCCL error: unhandled system error …`, `DistBackendError`, `Watchdog caught "
            "collective operation timeout`",
        explain=("NCCL failed in phase {phase}: {message}",
                 "Usual causes: a GPU in the list that another job uses, P2P/IB trouble, or a mismatch of tp_size and "
                 "GPUs."),
        fixes=(({"env.NCCL_DEBUG": "INFO"}, "NCCL then says which rank and transport failed"),)),
    FailureClass(Cause.PD_BOOTSTRAP_FAILED, priority=270,
        alone=(Own(Place.MESSAGE, lazy_re.compile(r"Prefill instance failed to register to bootstrap server")),
               # a PD decode server's word that the prefill's bootstrap server did not answer (audit R12): the scheduler's
               # exception after it, cut or generic, is that failure
               Own(Place.NOTED, lazy_re.compile(r"Error fetching prefill parallel info from bootstrap"))),
        doc="a PD prefill server could not register with its bootstrap server (`Prefill instance failed "
            "to register to bootstrap server: …`): it says ready, but no decode server finds it"),
    FailureClass(Cause.NCCL_ERROR, "no_route", priority=490,
                 said=_warn(r"socketPollConnect: Connect to (?P<addr>[\d.]+)\S* returned 113|No route to host"),
                 doc="NCCL WARN socketPollConnect: Connect to 10.0.0.12<41035> returned 113(No route to host)",
                 explain=(_NCCL_SAY + "this node has no route to the other node's address {addr}: NCCL chose an "
                          "interface that does not reach it, or a firewall drops its ports.", _NCCL_OWN),
                 fixes=_NCCL_IFACE),
    FailureClass(Cause.NCCL_ERROR, "connection_broken",
                 priority=500,
                            said=_warn(r"socketStartConnect: Connect to (?P<addr>[\d.]+)\S* failed|Connection (?:reset|abort|refused)"
                            r"|Software caused connection abort"),
                 doc="NCCL WARN socketStartConnect: Connect to 10.0.0.12<5000> failed : Software caused connection abort",
                 explain=(_NCCL_SAY + "the connection to {addr} broke: the other node's process most often died first "
                          "(read that node's log for its own error), or the link between the nodes dropped.", _NCCL_OWN)),
    FailureClass(Cause.NCCL_ERROR, "gid_index", priority=510, said=_warn(r"ibv_modify_qp failed|local GID"),
                 doc="NCCL WARN NET/IB : mlx5_0:1 ibv_modify_qp failed with 110 Connection timed out",
                 explain=(_NCCL_SAY + "the RDMA queue pair would not connect: on RoCE the GID index NCCL picked is not "
                          "the one the fabric routes (most often 3 for RoCE v2).", _NCCL_OWN),
                 fixes=(({"env.NCCL_IB_GID_INDEX": "3"}, "the interface (or GID) that reaches the other nodes: set it"),)),
    FailureClass(Cause.NCCL_ERROR, "ib_completion", priority=520,
                 said=_warn(r"NET/IB : Got completion from peer (?P<addr>[\d.]+)\S* with status=\d+"),
                 doc="NCCL WARN NET/IB : Got completion from peer 10.0.0.12<52144> with status=12 opcode=0 len=0",
                 explain=(_NCCL_SAY + "an RDMA transfer to {addr} failed on the fabric (a link, a switch, a NIC's "
                          "firmware): `ibstat`, `ibv_devinfo` and the NICs' error counters on both nodes.", _NCCL_OWN)),
    FailureClass(Cause.NCCL_ERROR, "no_interface", priority=530,
                 said=_warn(r"no socket interface found|Bootstrap : no socket interface"),
                 doc="NCCL WARN Bootstrap : no socket interface found",
                 explain=(_NCCL_SAY + "NCCL found no network interface to use: NCCL_SOCKET_IFNAME names one this host "
                          "does not have (`ip -br link`).", _NCCL_OWN),
                 fixes=_NCCL_IFACE),
    FailureClass(Cause.NCCL_ERROR, "shm", priority=540, said=said(r"shared memory segment|/dev/shm"),
                 doc="NCCL error: unhandled system error, Error while creating shared memory segment /dev/shm/nccl-x",
                 explain=("NCCL could not create its shared-memory segments in /dev/shm: {message}",
                          "In a container /dev/shm is 64 MB unless raised (`docker run --shm-size 16g` or `--ipc=host`); "
                          "on a host, `df -h /dev/shm`. NCCL_SHM_DISABLE=1 works around it at some speed."),
                 fixes=(({"env.NCCL_SHM_DISABLE": "1"}, "NCCL then uses sockets/P2P instead of /dev/shm"),)),
    FailureClass(Cause.KV_TRANSFER_FAILED, "nixl", priority=750, said=said(r"NIXL_ERR_BACKEND|nixlBackendError"),
                 doc="RuntimeError: NIXL_ERR_BACKEND"),
    FailureClass(Cause.KV_TRANSFER_FAILED, "ascend", priority=760, said=said(r"Ascend Transfer Engine initialization failed"),
                 doc="RuntimeError: Ascend Transfer Engine initialization failed.",
                 explain=("The PD server's Ascend transfer engine (MemFabric) could not start: {message}",
                          "Its own lines above say why (`hybm core init failed`, `Failed to init smem_trans`, an "
                          "undefined symbol in libra.so): most often the CANN toolkit and the NPU driver do not match, "
                          "or the device memory it maps is taken; a container needs the NPU devices and --privileged or "
                          "the davinci devices, and ASCEND_MF_STORE_URL the prefill's store.")),
    FailureClass(Cause.KV_TRANSFER_FAILED, "nixl_plugin", priority=770,
                 said=said(r"NIXL backend '(?P<backend>[\w-]+)' not found\. Available: (?P<available>\[.*?\])"),
                 doc="ValueError: NIXL backend 'UCX' not found. Available: ['GDS']. Please install the required NIXL "
                     "plugin or choose from: ['GDS']",
                 explain=("The PD server's NIXL transfer engine has no {backend} backend: this NIXL install's plugins "
                          "are {available}: {message}",
                          "Install NIXL with its {backend} plugin into the unit's interpreter (the image's NIXL build), or "
                          "name one it has in SGLANG_DISAGGREGATION_NIXL_BACKEND (env), or run with "
                          "--disaggregation-transfer-backend mooncake.")),
    FailureClass(Cause.KV_TRANSFER_FAILED, "init_timeout", priority=780,
                 said=said(r"(?P<engine>Mooncake TransferEngine\.initialize|NIXL create_backend|Mori IOEngine)\(.*\) "
                            r"did not return within (?P<secs>[\d.]+)s"),
                 doc="RuntimeError: NIXL create_backend('UCX', {'num_threads': '8'}) did not return within 120s on node-3",
                 explain=("The PD server's KV transfer engine ({engine}) did not finish its set-up within {secs} s, and "
                          "SGLang gave up on it: {message}",
                          "The set-up hangs on the RDMA NIC or the network to the other side: the NIC it picked (UCX_NET_DEVICES, "
                          "--disaggregation-ib-device), a firewall, or the sandbox hiding /dev/infiniband; "
                          "SGLANG_DISAGGREGATION_ENGINE_INIT_TIMEOUT only waits longer.")),
    FailureClass(Cause.NVSHMEM_FAILED, "ib_connect", priority=790, said=said(r"ibv_modify_qp|ep_connect"),
                 doc="/sgl-workspace/nvshmem/src/modules/transport/ibrc/ibrc.cpp:420: non-zero status: 22 "
                     "ibv_modify_qp failed"),
    FailureClass(Cause.RENDEZVOUS_FAILED, "gloo_interface", priority=800, said=said(r"Unable to find address for: (?P<iface>\S+)"),
                 doc="RuntimeError: [enforce fail at ../third_party/gloo/gloo/transport/tcp/device.cc:83] ifa != "
                     "nullptr. Unable to find address for: ens5",
                 explain=("gloo (torch's CPU collectives) found no interface named {iface} on this host, so it contacted "
                          "nobody: GLOO_SOCKET_IFNAME (or NCCL_SOCKET_IFNAME, which SGLang copies) names an interface this "
                          "node does not have (`ip -br link`).",
                          "Set GLOO_SOCKET_IFNAME (and NCCL_SOCKET_IFNAME) per node to the interface that reaches the "
                          "others; nodes often name it differently."),
                 fixes=(({"env.GLOO_SOCKET_IFNAME": "IFACE"}, "an interface this node has"),)),
    FailureClass(Cause.RENDEZVOUS_FAILED, "clients_missing", priority=810, said=said(r"(?P<joined>\d+)/(?P<total>\d+) clients joined"),
                 doc="torch.distributed.DistStoreError: Timed out after 181 seconds waiting for clients. 8/16 clients "
                     "joined."),
    # gloo's TCP pair saw the other end close (`pair.cc:534] Connection closed by peer`) after the ranks had met:
    # a rank died (OOM, a crash), and this one's failure is the consequence; not a rendezvous that never happened
    FailureClass(Cause.RENDEZVOUS_FAILED, "peer_closed", priority=1340,
                 said=said(r"gloo/transport/tcp/pair\.cc:\d+\] Connection closed by peer"),
                 doc="Exception: Capture cuda graph failed: [../third_party/gloo/gloo/transport/tcp/pair.cc:534] "
                     "Connection closed by peer [10.0.0.2]:60086",
                 explain=("Another rank closed its gloo (torch's CPU collectives) connection to this one in phase "
                          "{phase}: that rank died, most often of its own error (an OOM, a crash) or was killed, and "
                          "this rank failed because of it: {short}",
                          "Look for the first error of the other ranks (the other node's log, or above in this one); "
                          "the ranks had met, so dist_init_addr and the network are not in question.")),
    # a PD decode server that could not reach the prefill's bootstrap server when a request came (0.4.6-0.5.x:
    # `Error fetching prefill parallel info from bootstrap: …`), then its scheduler died on the request; the
    # bootstrap address is the request's (the router's), so port None is a request that named none
    FailureClass(Cause.PD_BOOTSTRAP_FAILED, "decode_fetch", priority=1350,
                 said=said(r"Error fetching prefill parallel info from bootstrap: "),
                 doc="Error fetching prefill parallel info from bootstrap: Failed to parse: "
                     "http://192.168.80.184:None/route?engine_rank=-1&target_dp_group=-1",
                 explain=("The PD decode server could not get the prefill server's parallel info from its bootstrap "
                          "server when a request came, and its scheduler died on it: {message}",
                          "Each request carries the prefill's bootstrap address from the PD router: a port of None "
                          "is a request that named none (sent to the decode server directly, /health_generate "
                          "included, or a router not given the prefill's bootstrap port: `--prefill URL "
                          "BOOTSTRAP_PORT`); a refused or timed-out connection is a port other than the prefill's "
                          "--disaggregation-bootstrap-port, a prefill server that is down, or the network between "
                          "them.")),
    # torch's c10d store client: connected to the rendezvous at dist_init_addr, then no answer for the store's
    # timeout (`[rank1]:[W623 15:37:01.82 socket.cpp:485] [c10d] waitForInput: socket SocketImpl(…) timed out after
    # 1800000ms`), printed by every rank just before its scheduler's exception
    FailureClass(Cause.RENDEZVOUS_FAILED, "store_wait", priority=1410,
                 line=lazy_re.compile(r"\[c10d\] waitForInput: socket .* timed out after \d+ms"),
                 said=said(r"\[c10d\] waitForInput: socket .*?remote=(?P<store>\S+?)\) timed out after (?P<ms>\d+)ms"),
                 doc="[rank1]:[W623 15:37:01.824135523 socket.cpp:485] [c10d] waitForInput: socket SocketImpl(fd=100, "
                     "addr=[node-0]:43590, remote=[node-0]:20000) timed out after 1800000ms",
                 explain=("This rank reached the rendezvous store ({store}, dist_init_addr) but waited {ms} ms for an "
                          "answer that never came, and its scheduler died of it: {message}",
                          "The ranks never all met: another node not started or stuck before it joined (its own log "
                          "says why), a different --nnodes or dist_init_addr on some node, or a network that resolves "
                          "or routes the nodes' names differently (IPv6 names, a firewall between the nodes); "
                          "`getent hosts` of the store's name on every node should give one address.")),
)
