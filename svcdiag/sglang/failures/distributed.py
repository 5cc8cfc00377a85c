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
        doc="a PD server's KV transfer engine (Mooncake, NIXL, Ascend's) cannot start"),
    # DeepEP's all-to-all: an expert-parallel rank never reached the dispatch (dead, slow, or RDMA)
    FailureClass(Cause.EP_DISPATCH_TIMEOUT, priority=150, line=lazy_re.compile(
        r"DeepEP error: (?:CPU recv timeout|timeout \(dispatch CPU\)|timeout)"),
        doc="DeepEP's all-to-all waited for an expert-parallel rank that never came"),
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
        doc="DeepEP's NVSHMEM could not connect the ranks over RDMA"),
    FailureClass(Cause.RENDEZVOUS_FAILED, priority=170, line=lazy_re.compile(
        r"DistStoreError|DistNetworkError|[Tt]he client socket has timed out|TCP client failed to connect"
        r"|Timed out initializing process group|clients joined|gloo/transport/tcp"),
        doc="a multi-node start whose ranks never met at dist_init_addr"),
    FailureClass(Cause.NCCL_ERROR, priority=180, line=lazy_re.compile(
        r"NCCL error|DistBackendError|ncclInternalError|ncclUnhandledCudaError|ncclSystemError"
                              r"|Watchdog caught collective operation timeout|NCCL communicator was aborted"
                              # torch ≥ 2.7's word for the same (a collective timed out or failed on a rank)
                              r"|failure detected by watchdog at work sequence id"),
        reads_on=True,  # NCCL's own words come after its final line: `Last error:` and what failed
        # the other end went away (ncclRemoteError): on one node most often another rank that died, whose own error may come
        # after this one's
        consequence=lazy_re.compile(r"remote process exited or there was a network error|Connection closed by remote peer"),
        doc="NCCL (or torch.distributed's backend) failed between the ranks",
        fixes=(({"env.NCCL_DEBUG": "INFO"}, "NCCL then says which rank and transport failed"),)),
    FailureClass(Cause.PD_BOOTSTRAP_FAILED, priority=270,
        alone=(Own(Place.MESSAGE, lazy_re.compile(r"Prefill instance failed to register to bootstrap server")),
               # a PD decode server's word that the prefill's bootstrap server did not answer (audit R12): the scheduler's
               # exception after it, cut or generic, is that failure
               Own(Place.NOTED, lazy_re.compile(r"Error fetching prefill parallel info from bootstrap"))),
        doc="a PD server could not reach or register with its bootstrap server"),
    FailureClass(Cause.NCCL_ERROR, "no_route", priority=490,
                 said=_warn(r"socketPollConnect: Connect to (?P<addr>[\d.]+)\S* returned 113|No route to host"),
                 doc="NCCL WARN socketPollConnect: Connect to 10.0.0.12<41035> returned 113(No route to host)",
                 fixes=_NCCL_IFACE),
    FailureClass(Cause.NCCL_ERROR, "connection_broken",
                 priority=500,
                            said=_warn(r"socketStartConnect: Connect to (?P<addr>[\d.]+)\S* failed|Connection (?:reset|abort|refused)"
                            r"|Software caused connection abort"),
                 doc="NCCL WARN socketStartConnect: Connect to 10.0.0.12<5000> failed : Software caused connection abort"),
    FailureClass(Cause.NCCL_ERROR, "gid_index", priority=510, said=_warn(r"ibv_modify_qp failed|local GID"),
                 doc="NCCL WARN NET/IB : mlx5_0:1 ibv_modify_qp failed with 110 Connection timed out",
                 fixes=(({"env.NCCL_IB_GID_INDEX": "3"}, "the interface (or GID) that reaches the other nodes: set it"),)),
    FailureClass(Cause.NCCL_ERROR, "ib_completion", priority=520,
                 said=_warn(r"NET/IB : Got completion from peer (?P<addr>[\d.]+)\S* with status=\d+"),
                 doc="NCCL WARN NET/IB : Got completion from peer 10.0.0.12<52144> with status=12 opcode=0 len=0"),
    FailureClass(Cause.NCCL_ERROR, "no_interface", priority=530,
                 said=_warn(r"no socket interface found|Bootstrap : no socket interface"),
                 doc="NCCL WARN Bootstrap : no socket interface found",
                 fixes=_NCCL_IFACE),
    FailureClass(Cause.NCCL_ERROR, "shm", priority=540, said=said(r"shared memory segment|/dev/shm"),
                 doc="NCCL error: unhandled system error, Error while creating shared memory segment /dev/shm/nccl-x",
                 fixes=(({"env.NCCL_SHM_DISABLE": "1"}, "NCCL then uses sockets/P2P instead of /dev/shm"),)),
    FailureClass(Cause.KV_TRANSFER_FAILED, "nixl", priority=750, said=said(r"NIXL_ERR_BACKEND|nixlBackendError"),
                 doc="RuntimeError: NIXL_ERR_BACKEND"),
    FailureClass(Cause.KV_TRANSFER_FAILED, "ascend", priority=760, said=said(r"Ascend Transfer Engine initialization failed"),
                 doc="RuntimeError: Ascend Transfer Engine initialization failed."),
    FailureClass(Cause.KV_TRANSFER_FAILED, "nixl_plugin", priority=770,
                 said=said(r"NIXL backend '(?P<backend>[\w-]+)' not found\. Available: (?P<available>\[.*?\])"),
                 doc="ValueError: NIXL backend 'UCX' not found. Available: ['GDS']. Please install the required NIXL plugin or …"),
    FailureClass(Cause.KV_TRANSFER_FAILED, "init_timeout", priority=780,
                 said=said(r"(?P<engine>Mooncake TransferEngine\.initialize|NIXL create_backend|Mori IOEngine)\(.*\) "
                            r"did not return within (?P<secs>[\d.]+)s"),
                 doc="RuntimeError: NIXL create_backend('UCX', {'num_threads': '8'}) did not return within 120s on node-3"),
    FailureClass(Cause.NVSHMEM_FAILED, "ib_connect", priority=790, said=said(r"ibv_modify_qp|ep_connect"),
                 doc="/sgl-workspace/nvshmem/src/modules/transport/ibrc/ibrc.cpp:420: non-zero status: 22 ibv_modify_qp failed"),
    FailureClass(Cause.RENDEZVOUS_FAILED, "gloo_interface", priority=800, said=said(r"Unable to find address for: (?P<iface>\S+)"),
                 doc="… at ../third_party/gloo/gloo/transport/tcp/device.cc:83] ifa != nullptr. Unable to find address for: ens5",
                 fixes=(({"env.GLOO_SOCKET_IFNAME": "IFACE"}, "an interface this node has"),)),
    FailureClass(Cause.RENDEZVOUS_FAILED, "clients_missing", priority=810, said=said(r"(?P<joined>\d+)/(?P<total>\d+) clients joined"),
                 doc="torch.distributed.DistStoreError: Timed out after 181 seconds waiting for clients. 8/16 clients joined."),
    # gloo's TCP pair saw the other end close (`pair.cc:534] Connection closed by peer`) after the ranks had met:
    # a rank died (OOM, a crash), and this one's failure is the consequence; not a rendezvous that never happened
    FailureClass(Cause.RENDEZVOUS_FAILED, "peer_closed", priority=1340,
                 said=said(r"gloo/transport/tcp/pair\.cc:\d+\] Connection closed by peer"),
                 doc="… failed: [../third_party/gloo/gloo/transport/tcp/pair.cc:534] Connection closed by peer [10.0.0.2]:60086"),
    # a PD decode server that could not reach the prefill's bootstrap server when a request came (0.4.6-0.5.x:
    # `Error fetching prefill parallel info from bootstrap: …`), then its scheduler died on the request; the
    # bootstrap address is the request's (the router's), so port None is a request that named none
    FailureClass(Cause.PD_BOOTSTRAP_FAILED, "decode_fetch", priority=1350,
                 said=said(r"Error fetching prefill parallel info from bootstrap: "),
                 doc="Error fetching prefill parallel info from bootstrap: Failed to parse …"),
    # torch's c10d store client: connected to the rendezvous at dist_init_addr, then no answer for the store's
    # timeout (`[rank1]:[W623 15:37:01.82 socket.cpp:485] [c10d] waitForInput: socket SocketImpl(…) timed out after
    # 1800000ms`), printed by every rank just before its scheduler's exception
    FailureClass(Cause.RENDEZVOUS_FAILED, "store_wait", priority=1410,
                 line=lazy_re.compile(r"\[c10d\] waitForInput: socket .* timed out after \d+ms"),
                 said=said(r"\[c10d\] waitForInput: socket .*?remote=(?P<store>\S+?)\) timed out after (?P<ms>\d+)ms"),
                 doc="[c10d] waitForInput: socket SocketImpl(fd=100, remote=[node-0]:20000) timed out after 1800000ms"),
)
