"""Memory: SGLang's own sizing left too little (the KV pool, the running requests, Mamba states), or an allocation
failed (the device's, the host's).
"""

from __future__ import annotations

from collections.abc import Mapping

from svcdiag.sglang import lazy_re
from svcdiag.sglang.failures._model import Cause, FailureClass, Family, Own, Place, said

#: the families whose rows this module files
FAMILIES = (Family.NOT_ENOUGH_MEMORY, Family.OUT_OF_MEMORY)


def _hicache(w: Mapping[str, str]) -> Mapping[str, str]:
    return {"asked_free": f" ({w['asked']} GB asked, {w['free']} GB free)" if w["asked"] else ""}


def _pinned(w: Mapping[str, str]) -> Mapping[str, str]:
    return {"gb": f"{int(w['size']) / 1e9:.0f}"}


ROWS: tuple[FailureClass, ...] = (
    FailureClass(Cause.MAX_RUNNING_ZERO, priority=10, line=lazy_re.compile(r"max_running_requests? is zero"),
        doc="SGLang's KV cache holds not even one request of the context length: max_running_requests came out zero"),
    FailureClass(Cause.MAMBA_CACHE_TOO_SMALL, priority=30, line=lazy_re.compile(
        r"state cache is too small to serve any requests|Not enough GPU memory for hybrid \(mamba"),
        doc="a hybrid model's Mamba state cache too small to serve any request"),
    FailureClass(Cause.NOT_ENOUGH_MEMORY, priority=40, read=(said(r"above (?P<floor>\d\.\d+)"),), line=lazy_re.compile(
        r"Not enought? memory\. Please try to increase --mem-fraction-static"  # ≤ 0.1.17 spells it "enought"
        r"|leave no GPU memory for the KV cache|Memory pool size is too small"
        r"|SWA pool \(\d+ tokens\) cannot hold even one request"
        # 0.5.23: the SWA pool's cap (or a UnifiedKVPool sub-pool) takes what the full KV pool needed
        r"|leaves no room for (?:the full KV pool|real data)"  # 0.5.23: a sliding-window pool under its window
        r"|is larger than the profiled value (?:-\d|0\.)"),  # a --max-total-tokens over a pool profiled at ≤ 0 tokens
        doc="SGLang's sizing left no memory for the KV cache (a sliding-window pool too small for its window)"),
    FailureClass(Cause.CUDA_OOM, priority=50,
                 read=(said(r"\A.*Process (?P<other_pid>\d+) has (?P<other_gib>[\d.]+ GiB) memory in use"),),
                 line=lazy_re.compile(
        r"CUDA out of memory|HIP out of memory|OutOfMemoryError|(?:CUDA|HIP) error: out of memory"
                            r"|hipErrorOutOfMemory|(?:NPU|XPU) out of memory"  # Ascend's torch_npu, Intel's XPU
                            r"|UR_RESULT_ERROR_OUT_OF_DEVICE_MEMORY"),  # Intel's Level Zero runtime, under torch
        doc="the device's memory ran out (CUDA, ROCm's HIP, Ascend's NPU, Intel's XPU)"),
    FailureClass(Cause.HOST_OOM, priority=60,
                 # Slurm's own account of the kernel's OOM killer in a job step
                 alone=(Own(Place.OUTSIDE, lazy_re.compile(r"^slurmstepd: error: Detected \d+ oom[-_]kill events? in "),
                            says="Slurm says the kernel's OOM killer ended a task of this step: {line}",
                            event="death", signal="KILL"),),
                 line=lazy_re.compile(r"\[Errno 12\] Cannot allocate memory|Out of memory: Killed process|oom-kill"
                            r"|DefaultCPUAllocator: can't allocate memory"  # torch's CPU allocator (--device cpu, offload)
                            # --enable-hierarchical-cache: its host pool (--hicache-ratio × the KV pool, or --hicache-size)
                            # larger than the host RAM free; not `… for request X`, a PD decode server's runtime note
                            r"|Not enough host memory (?:available\. Requesting|for [\w\s.-]*hierarchical cache)"
                            # 0.5.23's own host pools (V4 paged and state pools, MiniMax's index cache, the unified
                            # page envelope), not a PD decode server's `… for request X`
                            r"|Not enough host memory for (?!request\b)[^\n]*?\. Requesting [\d.]+ GB but only have"
                            r"|Cannot automatically size HiCache host memory"
                            # the host pool allocated, then refused pinning (ROCm's per-process pinnable ceiling)
                            r"|cudaHostRegister failed \(rc=\d+"),
        doc="the host's memory ran out (RAM, not GPU memory): an allocation refused, or the OOM killer"),
    FailureClass(Cause.HOST_OOM, "hicache_host_pool", priority=850,
                 said=said(r"\A.*(?:Requesting (?P<asked>[\d.]+) GB but only have (?P<free>[\d.]+) GB free"
                            r"|HiCache host memory)"),
                 doc="ValueError: Not enough host memory available. Requesting 69.63 GB but only have 41.87 GB free.",
                 words=_hicache),
    FailureClass(Cause.HOST_OOM, "hicache_pin", priority=855,
                 said=said(r"cudaHostRegister failed \((?P<why>[^)]*)\) for ptr=\S+ size=(?P<size>\d+)"),
                 doc="RuntimeError: cudaHostRegister failed (rc=1, invalid argument) for ptr=0x6f63… size=531470745600",
                 words=_pinned),
    FailureClass(Cause.NOT_ENOUGH_MEMORY, "swa_pool", priority=1290,
                 said=said(r"\A.*SWA pool \((?P<tokens>\d+) tokens\).*?sliding_window_size \((?P<window>\d+)\)"),
                 doc="ValueError: SWA pool (659 tokens) cannot hold even one request: needs sliding_window_size (1024) + …"),
    FailureClass(Cause.CUDA_OOM, "npu", priority=1300, said=said(r"NPU out of memory"),
                 doc="RuntimeError: NPU out of memory. Tried to allocate 2.00 GiB (NPU 2; 60.96 GiB total capacity)"),
    FailureClass(Cause.CUDA_OOM, "xpu", priority=1310, said=said(r"XPU out of memory|UR_RESULT_ERROR_OUT_OF_DEVICE_MEMORY"),
                 doc="RuntimeError: UR error: UR_RESULT_ERROR_OUT_OF_DEVICE_MEMORY"),
    FailureClass(Cause.CUDA_OOM, "hip", priority=1320, said=said(r"HIP out of memory|HIP error: out of memory|hipErrorOutOfMemory"),
                 doc="torch.OutOfMemoryError: HIP out of memory. Tried to allocate 1.00 GiB."),
    # a hybrid Mamba model's state pool out of free slots (the ping-pong buffers of MambaRadixCache v2, or a
    # request's own state): SGLang asserts, the scheduler dies; it names a flag, but no flag was refused
    FailureClass(Cause.MAMBA_CACHE_TOO_SMALL, "slots_exhausted", priority=1330,
                 line=lazy_re.compile(r"Not enough space for mamba|Can not alloc mamba cache"),
                 said=said(r"Not enough space for mamba|Can not alloc mamba cache"),
                 doc="AssertionError: Not enough space for mamba ping pong idx, try to increase --mamba-full-memory-ratio."),
)
