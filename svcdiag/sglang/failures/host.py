"""The host's disk and permissions: a full disk, a path the service may not read or write."""

from __future__ import annotations

from collections.abc import Mapping

from svcdiag.sglang import lazy_re
from svcdiag.sglang.failures._model import Cause, FailureClass, Family, Own, Place, said

#: the families whose rows this module files
FAMILIES = (Family.HOST,)


def _cache_dir(w: Mapping[str, str]) -> Mapping[str, str]:
    """A kernel or model cache filled its disk: the variable that moves that cache."""
    env = next(e for word, e in (("flashinfer", "FLASHINFER_WORKSPACE_BASE"), ("triton", "TRITON_CACHE_DIR"),
                                 ("deep_gemm", "DG_JIT_CACHE_DIR"), ("torchinductor", "TORCHINDUCTOR_CACHE_DIR"),
                                 ("torch_extensions", "TORCH_EXTENSIONS_DIR"), ("huggingface", "HF_HOME"))
               if word in w["path"])
    return {"cache_env": env, "folder": w["path"].rsplit("/", 1)[0]}


ROWS: tuple[FailureClass, ...] = (
    FailureClass(Cause.DISK_FULL, priority=190, line=lazy_re.compile(r"\[Errno 28\]|No space left on device"
                             r"|unable to allocate shared memory\(shm\)"),  # torch's tensors between processes: /dev/shm
        doc="a disk (the HF cache, a kernel cache, /dev/shm) filled up"),
    FailureClass(Cause.ACCESS_DENIED, priority=200,
        line=lazy_re.compile(r"\[Errno 30\] Read-only file system|\[Errno 13\]|PermissionError"),
        alone=(Own(Place.UVICORN, lazy_re.compile(r"(?=.*error while attempting to bind).*(?:\[Errno 13\]|PermissionError)")),),
        doc="the sandbox or a file's owner refused a read or a write"),
    FailureClass(Cause.DISK_FULL, "dev_shm", priority=690, said=said(r"/dev/shm|</torch_|shared memory\(shm\)"),
                 doc="RuntimeError: unable to allocate shared memory(shm) for file </torch_1234_567_0>"),
    FailureClass(Cause.DISK_FULL, "cache_dir", priority=700,
                 said=said(r"No space left on device: '(?P<path>[^']*"
                            r"(?:flashinfer|triton|deep_gemm|torchinductor|torch_extensions|huggingface)[^']*)'"),
                 doc="OSError: [Errno 28] No space left on device: '/root/.cache/flashinfer/90/cached_ops/x.so'",
                 words=_cache_dir),
    FailureClass(Cause.ACCESS_DENIED, "bind_port", priority=900, said=said(r"\A.*bind on address \('[^']*', (?P<port>\d+)\)"),
                 doc="ERROR:    [Errno 13] error while attempting to bind on address ('0.0.0.0', 80): permission denied"),
    FailureClass(Cause.ACCESS_DENIED, "path", priority=910, said=said(r"\A.*\[Errno (?:13|30)\][^'\n]*'(?P<path>/[^']+)'"),
                 doc="OSError: [Errno 30] Read-only file system: '/data/hf/.locks'"),
)
