"""The host's disk and permissions: a full disk, a path the service may not read or write."""

from __future__ import annotations

from collections.abc import Mapping

from svcdiag.sglang import lazy_re
from svcdiag.sglang.failures._model import Cause, FailureClass, Family, Own, Place, said

#: the families whose rows this module files
FAMILIES = (Family.HOST,)


def _cache_dir(w: Mapping[str, str]) -> tuple[str, ...]:
    """A kernel or model cache filled its disk: the variable that moves that cache."""
    env = next(e for word, e in (("flashinfer", "FLASHINFER_WORKSPACE_BASE"), ("triton", "TRITON_CACHE_DIR"),
                                 ("deep_gemm", "DG_JIT_CACHE_DIR"), ("torchinductor", "TORCHINDUCTOR_CACHE_DIR"),
                                 ("torch_extensions", "TORCH_EXTENSIONS_DIR"), ("huggingface", "HF_HOME"))
               if word in w["path"])
    return (f"The disk under {w['path']!r} filled up in phase {w['phase']}: {w['message']}",
            f"`df -h {w['path'].rsplit('/', 1)[0]}`; free space there, or move that cache to a larger disk with {env} in "
            "[env] (a container's root filesystem is often a small overlay: mount a volume there).")


ROWS: tuple[FailureClass, ...] = (
    FailureClass(Cause.DISK_FULL, priority=190, line=lazy_re.compile(r"\[Errno 28\]|No space left on device"
                             r"|unable to allocate shared memory\(shm\)"),  # torch's tensors between processes: /dev/shm
        doc="`OSError: [Errno 28] No space left on device` (a download into HF_HOME, a kernel cache: the "
            "diagnosis names the folder and the variable that moves it, FLASHINFER_WORKSPACE_BASE, "
            "TRITON_CACHE_DIR, DG_JIT_CACHE_DIR, TORCHINDUCTOR_CACHE_DIR, HF_HOME); /dev/shm full: "
            "torch's `unable to allocate shared memory(shm) for file </torch_…>`, `unable to write to "
            "file </torch_…>: No space left on device (28)` (the diagnosis says /dev/shm and `--shm-size`"
            " / `--ipc=host`)",
        explain=("A disk filled up in phase {phase}: {message}",
                 "Downloads go to HF_HOME (default ~/.cache/huggingface) or download_dir, kernels compile to ~/.cache "
                 "and /tmp; `df -h` on those, and remember a unit with PrivateTmp= or a container has its own /tmp. "
                 "Free space, or point HF_HOME at a larger disk.")),
    FailureClass(Cause.ACCESS_DENIED, priority=200,
        line=lazy_re.compile(r"\[Errno 30\] Read-only file system|\[Errno 13\]|PermissionError"),
        alone=(Own(Place.UVICORN, lazy_re.compile(r"(?=.*error while attempting to bind).*(?:\[Errno 13\]|PermissionError)")),),
        doc="the sandbox or a file's owner refused a write: `OSError: [Errno 30] Read-only file system: "
            "'/data/hf/.locks'` (a strict unit writes only its `ReadWritePaths=`; the fix names "
            "`read_write_paths`), `PermissionError: [Errno 13] …`; uvicorn's `ERROR:    [Errno 13] error "
            "while attempting to bind on address ('0.0.0.0', 80): permission denied` (a port below 1024 "
            "without CAP_NET_BIND_SERVICE)"),
    FailureClass(Cause.DISK_FULL, "dev_shm", priority=690, said=said(r"/dev/shm|</torch_|shared memory\(shm\)"),
                 doc="RuntimeError: unable to allocate shared memory(shm) for file </torch_1234_567_0>",
                 explain=("/dev/shm filled up in phase {phase}: {message}",
                          "torch passes tensors between SGLang's processes through /dev/shm (and NCCL its buffers); a "
                          "container's is 64 MB unless raised: `docker run --shm-size 16g` or `--ipc=host` (compose "
                          "`shm_size:`, Kubernetes an `emptyDir: {{medium: Memory}}` at /dev/shm). On a host, `df -h "
                          "/dev/shm` and what else fills it.")),
    FailureClass(Cause.DISK_FULL, "cache_dir", priority=700,
                 said=said(r"No space left on device: '(?P<path>[^']*"
                            r"(?:flashinfer|triton|deep_gemm|torchinductor|torch_extensions|huggingface)[^']*)'"),
                 doc="OSError: [Errno 28] No space left on device: '/root/.cache/flashinfer/90/cached_ops/x.so'",
                 explain=_cache_dir),
    FailureClass(Cause.ACCESS_DENIED, "bind_port", priority=900, said=said(r"\A.*bind on address \('[^']*', (?P<port>\d+)\)"),
                 doc="ERROR:    [Errno 13] error while attempting to bind on address ('0.0.0.0', 80): permission denied"),
    FailureClass(Cause.ACCESS_DENIED, "path", priority=910, said=said(r"\A.*\[Errno (?:13|30)\][^'\n]*'(?P<path>/[^']+)'"),
                 doc="OSError: [Errno 30] Read-only file system: '/data/hf/.locks'"),
)
