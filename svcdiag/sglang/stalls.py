"""What a stalled start was doing, told by the last line it printed: SGLang's (and its libraries') words
for the slow steps of a start, read when a start timed out or its log ended without a verdict."""

from __future__ import annotations

import re

#: what a start was doing when its log stopped, told by the last line: (pattern, what it means, how to tell a hang)
LAST_WORK = (
    (re.compile(r"\.(?:safetensors|bin|pt|gguf)[\w.]*: +\d+%\||Downloading|Fetching \d+ files"),
     "it was downloading the weights from the hub", "if the byte count no longer grows, the download is stuck "
     "(network, proxy, a full disk); `HF_HUB_OFFLINE=1` with a pre-downloaded model avoids it on every start"),
    (re.compile(r"AUTOTUNE|torch\._inductor|torch\._dynamo|torch_compile|[Dd]ynamo"),
     "it was in torch.compile (--enable-torch-compile): tracing and autotuning", "that takes minutes per batch size "
     "the first time; TORCHINDUCTOR_CACHE_DIR kept across starts makes it seconds"),
    (re.compile(r"DeepGEMM|deep_gemm|JIT|[Nn]inja|flashinfer\.jit|Compiling|nvcc"),
     "it was compiling kernels at first use (JIT)", "a first start compiles for minutes (DeepGEMM 10-20 min for a "
     "large MoE) and later starts read the cache; a hang shows no CPU in the compiler (`top`)"),
    (re.compile(r"Registering \d+ cuda graph addresses"),
     "it was registering the custom all-reduce's CUDA-graph buffers between the GPUs", "a stop right there is the "
     "GPUs' peer-to-peer IPC: start with --disable-custom-all-reduce (extra_args) and see `nvidia-smi topo -m`"),
    (re.compile(r"Capturing (?:batches|num tokens)|Capture (?:cuda|CUDA) graph"),
     "it was capturing CUDA graphs", "capture takes seconds per batch size; several minutes with no new bar on any "
     "rank is a hang (often a collective waiting for a rank that died: see the other ranks' lines)"),
    (re.compile(r"Init torch distributed begin|Init nccl begin|NCCL INFO"),
     "its ranks were setting up NCCL on this host", "a hang there is most often GPU peer-to-peer (an IOMMU, a "
     "virtualised host: try NCCL_P2P_DISABLE=1) or a GPU another process holds (`nvidia-smi`)"),
    (re.compile(r"checkpoint shards: +100% Completed"),
     "this rank had read every shard of its checkpoint and was finishing the load", "on a multi-node or TP start, "
     "every rank then waits for the slowest: look at the other ranks' and nodes' logs for one still reading, or one "
     "that never started"),
    (re.compile(r"Loading (?:\w+ )?checkpoint shards|Multi-thread loading"),
     "it was reading the checkpoint shards", "a slow disk or network filesystem reads large models for minutes; a "
     "bar that does not move for long is a stalled read"),
)

#: the ranks meeting at dist_init_addr (torch's c10d store): on several nodes, waiting for one that has not joined
RENDEZVOUS_RE = re.compile(r"Init torch distributed begin|c10d")


def last_work(line: str) -> tuple[str, str] | None:
    """(what it was doing, how to tell a hang) when the line says, else None."""
    return next(((what, hang) for pat, what, hang in LAST_WORK if pat.search(line)), None)


def at_rendezvous(line: str) -> bool:
    return RENDEZVOUS_RE.search(line) is not None
