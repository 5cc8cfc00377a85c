"""The GPU, its driver and its kernels: a device not there or not usable, a CUDA error, hardware a kernel does not
support, torch.compile.
"""

from __future__ import annotations

from collections.abc import Mapping

from svcdiag.sglang import lazy_re
from svcdiag.sglang.failures._model import Cause, FailureClass, Family, Raised, said

#: the families whose rows this module files
FAMILIES = (Family.GPU,)


def _ascend(w: Mapping[str, str]) -> Mapping[str, str]:
    soc = w["soc"] or w.get("soc2", "")
    return {"this_chip": f" (this one is {soc})" if soc else ""}


#: a frame of SGLang's custom all-reduce (its IPC buffers refused while capturing, `invalid argument`): cuda_error
#: whatever the words, and its sub-case
CUSTOM_ALL_REDUCE_FRAME_RE = said(r"^File .*/custom_all_reduce")


ROWS: tuple[FailureClass, ...] = (
    FailureClass(Cause.UNSUPPORTED_HARDWARE, priority=110, line=lazy_re.compile(
        r"not supported for the current GPU|Minimum capability: \d+|[Cc]ompute capability(?!: \d+\s*$)"
        # ptxas on a kernel written for another architecture; FA4's own check (`Only SM 10.x and 11.x are supported`)
        r"|not supported on \.target '?sm_\d+|Only SM [\d.x]+(?:(?:,| and| or) [\d.x]+)* (?:are|is) supported"
        # a ptxas (Triton's bundled one) older than this GPU: it has no target for it
        r"|ptxas fatal\s*: Value '[^']*' is not defined for option 'gpu-name'"
        r"|requires (?:an? )?(?:sm_?|SM)\d+|requires (?:an? )?(?:Blackwell|Hopper|Ada)\b"
        r"|no kernel image is available for execution on the device|not supported on (?:this|your) (?:GPU|device)"
        r"|Unsupported (?:GPU|gpu) architecture|is only supported on (?:sm|Hopper|Blackwell|Ampere)"
        r"|out of resource: shared memory|invalid device function|(?:hip|cuda)ErrorInvalidDeviceFunction"
        # Ascend: the CANN toolkit or kernels (or the image: -910b vs -a3) made for another NPU than this one
        r"|init runtime platform info failed, SocVersion|does not has any binary|Parse dynamic kernel config fail"
        # an aclnn op whose kernel package has no build for this SoC (DeepEP's DispatchLayout on a 910B)
        r"|bin of socVersion \[\w+\] does not support opType"
        # Triton's fp8 before sm89: `ValueError("type fp8e4nv not supported in this architecture. …")`
        r"|not supported in this architecture"
        # what this release builds for CUDA only: a quantization, a load format, breakable CUDA graphs
        r"|not supported (?:in|on) ROCm"
        # SGLang's own floor, and what a release builds for one platform only (NPU, XPU, CPU, HIP; CUDA)
        r"|SGLang only supports sm\d+ and above|(?:not supported|unsupported) on (?:NPU|XPU|CPU|HIP)\b"
        r"|requires a CUDA(?:-compatible)? device|only supported on the (?:CUDA path|AMD HIP)|requires CUDA, got"
        r"|only supports CUDA and CPU, got|requires Intel AMX support"),
        doc="this GPU (or platform) cannot run a kernel, quantization or option the config asks for"),
    FailureClass(Cause.GPU_UNAVAILABLE, priority=120, line=lazy_re.compile(
        r"No CUDA GPUs are available|CUDA driver version is insufficient|NVIDIA driver on your system is too old"
        r"|Found no NVIDIA driver|no CUDA-capable device is detected|CUDA-capable device\(s\) is/are busy or unavailable"
        r"|all CUDA-capable devices are busy or unavailable|CUDA driver initialization failed|cudaErrorNoDevice"
        r"|cudaErrorInsufficientDriver|libcuda\.so[.\d]*: cannot open shared object file|invalid device ordinal"
        r"|c10_npu::SetDevice|Failed to start the device"  # Ascend: the NPU would not open (driver, firmware, /dev/davinci*)
        r"|uncorrectable ECC error|fallen off the bus"
        # the driver and CUDA disagree: a container's CUDA (or its compat libs) newer than the host's driver (803, 804),
        # kernels built by a newer toolkit than the driver (PTX), a driver upgraded under a running kernel module (NVML)
        r"|Error 80[34]: |unsupported display driver / cuda driver combination|forward compatibility was attempted"
        r"|provided PTX was compiled with an unsupported toolchain|cudaErrorUnsupportedPtxVersion"
        r"|Driver/library version mismatch|NVML/RM version mismatch|LibRmVersionMismatch"
        r"|Error 802: |system not yet initialized"  # NVSwitch (HGX) hosts: nvidia-fabricmanager not running
        r"|CUDA unknown error"  # the GPU lost by the process: a container after `systemctl daemon-reload`, suspend, nvidia_uvm
        # ≤ 0.4.x asks nvidia-smi for the GPUs' memory while checking its flags: its own words then
        r"|nvidia-smi not found|Failed to initialize NVML"
        r"|libcuda\.so cannot found"  # Triton: no libcuda.so (the NVIDIA container runtime not used, or no ldconfig)
        # the host's or the container runtime's own words, pasted alone: nvidia-smi without a driver, the NVIDIA
        # container hook failing (docker's own `could not select device driver` is before any SGLang: no start)
        r"|couldn't communicate with the NVIDIA driver|nvidia-container-cli: (?:initialization|mount) error"),
        doc="the process sees no usable GPU: the sandbox, the driver, the container runtime or the hardware"),
    FailureClass(Cause.CUDA_ERROR, priority=130, line=lazy_re.compile(
        r"illegal memory access was encountered|device-side assert triggered|CUDA error: misaligned address"
        r"|unspecified launch failure|illegal instruction was encountered|cudaErrorIllegalAddress"
        r"|CUBLAS_STATUS_EXECUTION_FAILED|Memory access fault by GPU"),  # ROCm's illegal address, printed by HSA
        raised=(Raised(CUSTOM_ALL_REDUCE_FRAME_RE),),  # SGLang's custom all-reduce, wherever its frame stands
        doc="a CUDA kernel fault that is not out of memory",
        fixes=(({"env.CUDA_LAUNCH_BLOCKING": "1"}, "the traceback then names the kernel that faulted"),)),
    # torch.compile (--enable-torch-compile) could not compile the model: dynamo/inductor's own error; after
    # the patterns above, so an OOM or a missing compiler inside it is still that
    FailureClass(Cause.TORCH_COMPILE_FAILED, priority=230, line=lazy_re.compile(
        r"BackendCompilerFailed|torch\._inductor\.exc\.\w+|LoweringException|InductorError"
        # dynamo's own refusal to trace the model (0.5.x's piecewise CUDA graph compiles it too)
        r"|torch\._dynamo\.exc\.(?:Unsupported|InternalTorchDynamoError|TorchRuntimeError)\b"),
        doc="--enable-torch-compile could not compile the model"),
    FailureClass(Cause.GPU_UNAVAILABLE, "invalid_ordinal", priority=380, said=said(r"invalid device ordinal"),
                 doc="torch.AcceleratorError: CUDA error: invalid device ordinal"),
    FailureClass(Cause.GPU_UNAVAILABLE, "hardware", priority=390, said=said(r"uncorrectable ECC error|fallen off the bus"),
                 doc="RuntimeError: CUDA error: uncorrectable ECC error encountered"),
    FailureClass(Cause.GPU_UNAVAILABLE, "driver_too_old", priority=400,
                 said=said(r"driver version is insufficient|driver on your system is too old|InsufficientDriver"),
                 doc="RuntimeError: The NVIDIA driver on your system is too old (found version 11040)."),
    FailureClass(Cause.GPU_UNAVAILABLE, "ptx_toolchain", priority=410,
                 said=said(r"PTX was compiled with an unsupported toolchain|UnsupportedPtxVersion"),
                 doc="RuntimeError: CUDA error: the provided PTX was compiled with an unsupported toolchain."),
    FailureClass(Cause.GPU_UNAVAILABLE, "driver_mismatch", priority=420,
                 said=said(r"Error 80[34]: |display driver / cuda driver combination|forward compatibility was attempted"
                            r"|Driver/library version mismatch|NVML/RM version mismatch|LibRmVersionMismatch"),
                 doc="Error 803: system has unsupported display driver / cuda driver combination"),
    FailureClass(Cause.GPU_UNAVAILABLE, "fabric_manager", priority=430, said=said(r"Error 802: |system not yet initialized"),
                 doc="RuntimeError: Unexpected error from cudaGetDeviceCount(). Error 802: system not yet initialized"),
    FailureClass(Cause.GPU_UNAVAILABLE, "npu_device", priority=440, said=said(r"c10_npu::SetDevice|Failed to start the device"),
                 doc="RuntimeError: c10_npu::SetDevice: error code is 507033"),
    FailureClass(Cause.GPU_UNAVAILABLE, "gpu_lost", priority=450, said=said(r"CUDA unknown error|NVML: Unknown Error"),
                 doc="RuntimeError: CUDA unknown error - this may be due to an incorrectly set up environment"),
    FailureClass(Cause.GPU_UNAVAILABLE, "no_driver", priority=460,
                 said=said(r"couldn't communicate with the NVIDIA driver"),
                 doc="NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. Make sure that the latest …"),
    FailureClass(Cause.GPU_UNAVAILABLE, "container_runtime", priority=470, said=said(r"nvidia-container-cli: "),
                 doc="nvidia-container-cli: initialization error: load library failed: libnvidia-ml.so.1: cannot open shared …"),
    FailureClass(Cause.GPU_UNAVAILABLE, "no_libcuda", priority=480, said=said(r"libcuda\.so|nvidia-smi not found"),
                 doc="AssertionError: libcuda.so cannot found!"),
    FailureClass(Cause.UNSUPPORTED_HARDWARE, "ascend_soc", priority=550,
                 said=said(r"SocVersion = (?P<soc>\w+)|does not has any binary|Parse dynamic kernel config fail"
                            r"|bin of socVersion \[(?P<soc2>\w+)\] does not support opType"),
                 doc="EH9999: Inner Error! init runtime platform info failed, SocVersion = Ascend910B3", words=_ascend),
    FailureClass(Cause.UNSUPPORTED_HARDWARE, "no_kernel_image", priority=560,
                 said=said(r"invalid device function|InvalidDeviceFunction"),
                 doc="RuntimeError: HIP error: invalid device function"),
    FailureClass(Cause.UNSUPPORTED_HARDWARE, "triton_fp8", priority=570, said=said(r"fp8e4nv not supported in this architecture"),
                 doc='ValueError("type fp8e4nv not supported in this architecture. The supported fp8 dtypes are …")'),
    FailureClass(Cause.UNSUPPORTED_HARDWARE, "ptxas_too_old", priority=575,
                 said=said(r"ptxas fatal\s*: Value '(?P<target>[^']*)' is not defined for option 'gpu-name'"),
                 doc="ptxas fatal : Value 'sm_120' is not defined for option 'gpu-name'"),
    FailureClass(Cause.UNSUPPORTED_HARDWARE, "platform", priority=580,
                 said=said(r"\A.*(?:(?:not supported|unsupported) on (?:NPU|XPU|CPU|HIP)\b|requires a CUDA"
                            r"|only supported on the (?:CUDA|AMD)|requires CUDA, got|only supports CUDA and CPU"
                            r"|Intel AMX)"),
                 doc="ValueError: FP4 is not supported on NPU yet."),
    FailureClass(Cause.UNSUPPORTED_HARDWARE, "rocm", priority=590, said=said(r"\A.*not supported (?:in|on) ROCm"),
                 doc="ValueError: gptq_marlin quantization is currently not supported in ROCm."),
    FailureClass(Cause.CUDA_ERROR, "custom_all_reduce", priority=670, said=CUSTOM_ALL_REDUCE_FRAME_RE,
                 doc='File "/sgl-workspace/sglang/python/sglang/srt/distributed/device_communicators/custom_all_reduce.py"'),
    FailureClass(Cause.CUDA_ERROR, "custom_all_reduce_kernel", priority=680, said=said(r"custom_all_reduce\.cuh:\d+"),
                 doc="Failed: Cuda error /sgl-kernel/csrc/allreduce/custom_all_reduce.cuh:384 'an illegal memory access was …"),
    FailureClass(Cause.CUDA_ERROR, "nan_probabilities", priority=1370,
                 said=said(r"probability tensor contains either .inf., .nan. or element < 0"),
                 doc="… thread: [0,0,0] Assertion `probability tensor contains either `inf`, `nan` or element < 0` failed."),
    FailureClass(Cause.CUDA_ERROR, "device_assert",
                 priority=1380,
                 line=lazy_re.compile(r"\.cu:\d+: (?:\S.*?: )?block: \[\d+,\d+,\d+\], thread: \[\d+,\d+,\d+\] Assertion "),
                 said=said(r"\.cu:\d+: (?:\S.*?: )?block: \[\d+,\d+,\d+\], thread: \[\d+,\d+,\d+\] Assertion "
                            r"`(?P<assertion>.*)` failed"),
                 doc="IndexKernel.cu:93: operator(): block: [0,0,0], thread: [0,0,0] Assertion `index < sizes[i]` failed."),
    # FlashInfer's TRT-LLM batched GEMM runner (the MoE runner backend flashinfer_trtllm, FP4/FP8 GEMMs) checks its
    # own launch and raises `Error in function 'run' at …/trtllm_batched_gemm_runner.cu:N: Error occurred when
    # running GEMM! (numBatches: …, GemmMNK: …, Kernel: …)`: a kernel that cannot run this shape on this GPU
    FailureClass(Cause.CUDA_ERROR, "flashinfer_gemm", priority=1390,
                 line=lazy_re.compile(r"Error occurred when running GEMM!"),
                 said=said(r"Error occurred when running GEMM!(?:.*?Kernel:\s+(?P<kernel>\S+))?"),
                 doc="Error in function 'run' at …/trtllm_batched_gemm_runner.cu:258: Error occurred when running GEMM! (…)"),
)
