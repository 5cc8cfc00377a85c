"""The GPU, its driver and its kernels: a device not there or not usable, a CUDA error, hardware a kernel does not
support, torch.compile.
"""

from __future__ import annotations

from collections.abc import Mapping

from svcdiag.sglang import lazy_re
from svcdiag.sglang.failures._model import Cause, FailureClass, Family, Raised, said

#: the families whose rows this module files
FAMILIES = (Family.GPU,)


def _ascend(w: Mapping[str, str]) -> tuple[str, ...]:
    chip = f" (this one is {w['soc']})" if w["soc"] else ""
    return (f"The Ascend CANN toolkit or its operator kernels were made for another NPU than this one{chip}: {w['short']}",
            "SGLang's Ascend images are per chip (`…-910b` for Atlas A2 / 910B, `…-a3` for A3 / 910C): use the one for "
            "this NPU (`npu-smi info` names it), or install the CANN toolkit and kernels package for its SoC and source "
            "its set_env.sh in the unit's environment.")


#: a frame of SGLang's custom all-reduce (its IPC buffers refused while capturing, `invalid argument`): cuda_error
#: whatever the words, and its sub-case
CUSTOM_ALL_REDUCE_FRAME_RE = said(r"^File .*/custom_all_reduce")


ROWS: tuple[FailureClass, ...] = (
    FailureClass(Cause.UNSUPPORTED_HARDWARE, priority=110, line=lazy_re.compile(
        r"not supported for the current GPU|Minimum capability: \d+|[Cc]ompute capability(?!: \d+\s*$)"
        # ptxas on a kernel written for another architecture; FA4's own check (`Only SM 10.x and 11.x are supported`)
        r"|not supported on \.target '?sm_\d+|Only SM [\d.x]+(?:(?:,| and| or) [\d.x]+)* (?:are|is) supported"
        r"|requires (?:an? )?(?:sm_?|SM)\d+|requires (?:an? )?(?:Blackwell|Hopper|Ada)\b"
        r"|no kernel image is available for execution on the device|not supported on (?:this|your) (?:GPU|device)"
        r"|Unsupported (?:GPU|gpu) architecture|is only supported on (?:sm|Hopper|Blackwell|Ampere)"
        r"|out of resource: shared memory|invalid device function|(?:hip|cuda)ErrorInvalidDeviceFunction"
        # Ascend: the CANN toolkit or kernels (or the image: -910b vs -a3) made for another NPU than this one
        r"|init runtime platform info failed, SocVersion|does not has any binary|Parse dynamic kernel config fail"
        # Triton's fp8 before sm89: `ValueError("type fp8e4nv not supported in this architecture. …")`
        r"|not supported in this architecture"
        # what this release builds for CUDA only: a quantization, a load format, breakable CUDA graphs
        r"|not supported (?:in|on) ROCm"
        # SGLang's own floor, and what a release builds for one platform only (NPU, XPU, CPU, HIP; CUDA)
        r"|SGLang only supports sm\d+ and above|(?:not supported|unsupported) on (?:NPU|XPU|CPU|HIP)\b"
        r"|requires a CUDA(?:-compatible)? device|only supported on the (?:CUDA path|AMD HIP)|requires CUDA, got"
        r"|only supports CUDA and CPU, got|requires Intel AMX support"),
        doc="`ValueError: The quantization method fp8 is not supported for the current GPU. Minimum "
            "capability: 80. Current capability: 75.`; `triton.runtime.errors.OutOfResources: out of "
            "resource: shared memory …` (a kernel too big for this GPU); `RuntimeError: HIP error: "
            "invalid device function` (kernels built for another GPU architecture: a ROCm image for MI300"
            " on an MI100); Triton's `CompilationError` ending in `ValueError(\"type fp8e4nv not supported"
            " in this architecture …\")` (fp8 e4m3, e.g. kv_cache_dtype fp8_e4m3 with the triton backend, "
            "before sm89); a kernel that `requires Blackwell GPUs` / `requires an SM100/SM103 GPU` "
            "(0.5.23's MXFP8 backends); Ascend's CANN made for another chip (`EH9999 … init runtime "
            "platform info failed, SocVersion = Ascend910B3`, `Op Cast does not has any binary`: the "
            "image for this NPU, -910b or -a3; a runtime's line after the four the message keeps is still"
            " read for the cause); `SGLang only supports sm75 and above.`; what a release builds for CUDA only "
            "(`… quantization is currently not supported in ROCm.`, `Breakable CUDA graph is not supported on "
            "ROCm/HIP`) or not for this platform (`FP4 is not supported on NPU yet.`, `… requires a CUDA device`, "
            "`CPU FP8 KV cache requires Intel AMX support.`)",
        explain=("This GPU cannot run what the config asks for: {message}",
                 "Choose a quantization, attention backend or kernel this GPU's compute capability supports "
                 "(`nvidia-smi --query-gpu=compute_cap --format=csv`), or run on a newer GPU.")),
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
        doc="the process sees no usable GPU: `RuntimeError: No CUDA GPUs are available` (under systemd: "
            "`PrivateDevices=`, `DeviceAllow=`, `CUDA_VISIBLE_DEVICES`; in a container: `--gpus all`), "
            "`Found no NVIDIA driver on your system`, `The NVIDIA driver on your system is too old …`, "
            "`CUDA driver version is insufficient for CUDA runtime version`; the driver and CUDA at odds:"
            " `CUDA error: the provided PTX was compiled with an unsupported toolchain.` (a driver older "
            "than the wheels' CUDA), `Error 803: system has unsupported display driver / cuda driver "
            "combination` / `Driver/library version mismatch` (a driver upgraded without a reboot, or an "
            "image's cuda-compat), `Error 802: system not yet initialized` (nvidia-fabricmanager not "
            "running on an NVSwitch host), `CUDA unknown error - …` (a container that lost its devices, "
            "e.g. after the host's `systemctl daemon-reload`); Triton's `AssertionError: libcuda.so "
            "cannot found!` (the driver's library not mounted or not linked); Ascend's "
            "`c10_npu::SetDevice … error code is 507033` / `Failed to start the device`; ≤ 0.4.x's flag "
            "check asking nvidia-smi: `RuntimeError: nvidia-smi not found. …` (a container without the "
            "NVIDIA runtime), `nvidia-smi error: Failed to initialize NVML: Driver/library version "
            "mismatch` / `… Unknown Error`; the host's or the runtime's own words alone (`NVIDIA-SMI has failed "
            "because it couldn't communicate with the NVIDIA driver`, `nvidia-container-cli: initialization error`)",
        explain=("The process saw no usable GPU in phase {phase}: {message}",
                 "Under systemd that is the sandbox or the environment, not the hardware: PrivateDevices=yes or a "
                 "DevicePolicy=/DeviceAllow= without /dev/nvidia*, a CUDA_VISIBLE_DEVICES naming GPUs that do not exist, "
                 "or GPUs held in exclusive mode by another process. svcdiag's strict units allow the NVIDIA nodes (and "
                 "`devices = [\"rocm\"]` the AMD ones); `hardening = \"off\"` tells a sandbox problem from a host one. "
                 "`systemctl show {unit} -p DeviceAllow -p PrivateDevices` shows what the unit gets.",
                 "In a container: it was started without its GPUs (`docker run --gpus all`, or compose's `deploy."
                 "resources.reservations.devices`; the NVIDIA container toolkit installed; on Kubernetes a "
                 "`nvidia.com/gpu` limit), so torch.cuda.is_available() is False there however the host looks.")),
    FailureClass(Cause.CUDA_ERROR, priority=130, line=lazy_re.compile(
        r"illegal memory access was encountered|device-side assert triggered|CUDA error: misaligned address"
        r"|unspecified launch failure|illegal instruction was encountered|cudaErrorIllegalAddress"
        r"|CUBLAS_STATUS_EXECUTION_FAILED|Memory access fault by GPU"),  # ROCm's illegal address, printed by HSA
        raised=(Raised(CUSTOM_ALL_REDUCE_FRAME_RE),),  # SGLang's custom all-reduce, wherever its frame stands
        doc="a CUDA kernel fault that is not OOM: `RuntimeError: CUDA error: an illegal memory access was"
            " encountered`, `device-side assert triggered`, `unspecified launch failure`; ROCm's "
            "unprefixed `Memory access fault by GPU node-N (…) on address 0x…. Reason: Page not present "
            "or supervisor privilege.` before the abort",
        explain=("A CUDA kernel faulted in phase {phase} (not out of memory): {message}",
                 "CUDA reports such faults late, so the traceback may point past the kernel that did it. A fault "
                 "while capturing CUDA graphs or in a speculative draft is most often an attention backend or kernel "
                 "bug for this model and GPU: try another attention_backend, or disable CUDA graphs to confirm."),
        fixes=(({"env.CUDA_LAUNCH_BLOCKING": "1"}, "the traceback then names the kernel that faulted"),)),
    # torch.compile (--enable-torch-compile) could not compile the model: dynamo/inductor's own error; after
    # the patterns above, so an OOM or a missing compiler inside it is still that
    FailureClass(Cause.TORCH_COMPILE_FAILED, priority=230, line=lazy_re.compile(
        r"BackendCompilerFailed|torch\._inductor\.exc\.\w+|LoweringException|InductorError"),
        doc="`--enable-torch-compile` could not compile the model (while capturing CUDA graphs): "
            "`torch._dynamo.exc.BackendCompilerFailed: backend='inductor' raised: LoweringException: …`, "
            "`torch._inductor.exc.InductorError: …` (an OOM or a missing compiler inside it is still "
            "`cuda_oom` / `broken_install`); dynamo's advice lines (`suppress_errors = True`) are kept "
            "out of the message"),
    FailureClass(Cause.GPU_UNAVAILABLE, "invalid_ordinal", priority=380, said=said(r"invalid device ordinal"),
                 doc="torch.AcceleratorError: CUDA error: invalid device ordinal"),
    FailureClass(Cause.GPU_UNAVAILABLE, "hardware", priority=390, said=said(r"uncorrectable ECC error|fallen off the bus"),
                 doc="RuntimeError: CUDA error: uncorrectable ECC error encountered",
                 explain=("A GPU failed in hardware: {message}",
                          "`journalctl -k | grep -i xid` names the GPU and the Xid; it needs a reset (`nvidia-smi -r -i N`) "
                          "or a reboot, and the start then runs without that GPU or after the repair.")),
    FailureClass(Cause.GPU_UNAVAILABLE, "driver_too_old", priority=400,
                 said=said(r"driver version is insufficient|driver on your system is too old|InsufficientDriver"),
                 doc="RuntimeError: The NVIDIA driver on your system is too old (found version 11040).",
                 explain=("The NVIDIA driver is older than the CUDA this PyTorch was built for, so CUDA cannot start at all.",
                          "Upgrade the driver (`nvidia-smi` shows its CUDA version), or install the torch/SGLang build for "
                          "the driver's CUDA (a cu121/cu124 wheel or image instead of cu128).")),
    FailureClass(Cause.GPU_UNAVAILABLE, "ptx_toolchain", priority=410,
                 said=said(r"PTX was compiled with an unsupported toolchain|UnsupportedPtxVersion"),
                 doc="RuntimeError: CUDA error: the provided PTX was compiled with an unsupported toolchain.",
                 explain=("CUDA started, but a kernel shipped as PTX was compiled by a newer CUDA toolkit than this NVIDIA "
                          "driver can JIT: the driver is older than the CUDA the kernels (sgl_kernel, flashinfer, triton) "
                          "were built with.",
                          "Upgrade the driver to one whose CUDA version (`nvidia-smi`, top right) is at least the wheels' (a "
                          "cu128 build needs a 570+ driver), or install the SGLang/torch build for the driver's CUDA.")),
    FailureClass(Cause.GPU_UNAVAILABLE, "driver_mismatch", priority=420,
                 said=said(r"Error 80[34]: |display driver / cuda driver combination|forward compatibility was attempted"
                            r"|Driver/library version mismatch|NVML/RM version mismatch|LibRmVersionMismatch"),
                 doc="Error 803: system has unsupported display driver / cuda driver combination",
                 explain=("CUDA refused to start: the driver library this process loaded (libcuda) and the NVIDIA kernel "
                          "module are of different versions (Error 803/804; `nvidia-smi` says `Driver/library version "
                          "mismatch`).",
                          "Most often the driver was upgraded (unattended-upgrades) while the old module stayed loaded: "
                          "reboot, or unload and reload the nvidia modules with every GPU process stopped "
                          "(`cat /proc/driver/nvidia/version` shows the loaded one). In a container: its CUDA "
                          "forward-compatibility libraries (/usr/local/cuda/compat on LD_LIBRARY_PATH) on a GPU or driver "
                          "they do not support, or a libcuda copied into the image: use an image the host driver supports "
                          "natively, run with the NVIDIA container runtime (it mounts the host's libcuda).")),
    FailureClass(Cause.GPU_UNAVAILABLE, "fabric_manager", priority=430, said=said(r"Error 802: |system not yet initialized"),
                 doc="RuntimeError: Unexpected error from cudaGetDeviceCount(). Error 802: system not yet initialized",
                 explain=("CUDA says the system is not yet initialized (Error 802): on an NVSwitch host (HGX/DGX A100, "
                          "H100, H200) the GPUs cannot be used until nvidia-fabricmanager has set up the fabric.",
                          "`systemctl status nvidia-fabricmanager`: start and enable it; its version must equal the "
                          "driver's exactly (`nvidia-smi` vs `nv-fabricmanager --version`), an upgraded driver needs the "
                          "matching fabric manager and a reboot.")),
    FailureClass(Cause.GPU_UNAVAILABLE, "npu_device", priority=440, said=said(r"c10_npu::SetDevice|Failed to start the device"),
                 doc="RuntimeError: c10_npu::SetDevice: error code is 507033",
                 explain=("The Ascend NPU would not open: {short}",
                          "`npu-smi info` on the host says whether the NPU and its driver are healthy; the driver/firmware "
                          "and the CANN toolkit must be versions that go together. In a container the NPU comes only with "
                          "its devices (/dev/davinci*, /dev/davinci_manager, /dev/devmm_svm, /dev/hisi_hdc) and the "
                          "driver folder (/usr/local/Ascend/driver) mounted; ASCEND_RT_VISIBLE_DEVICES picks among them.")),
    FailureClass(Cause.GPU_UNAVAILABLE, "gpu_lost", priority=450, said=said(r"CUDA unknown error|NVML: Unknown Error"),
                 doc="RuntimeError: CUDA unknown error - this may be due to an incorrectly set up environment",
                 explain=("The process lost (or never got) its GPUs: {message}",
                          "In a container this is most often the host's `systemctl daemon-reload` (or a runtime update) "
                          "revoking the container's device access under a cgroup driver: restart the container. On a "
                          "host, after suspend/resume or without the nvidia_uvm module (`lsmod | grep nvidia_uvm`, "
                          "`nvidia-modprobe -u`); a reboot settles it.")),
    FailureClass(Cause.GPU_UNAVAILABLE, "no_driver", priority=460,
                 said=said(r"couldn't communicate with the NVIDIA driver"),
                 doc="NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. Make sure that the "
                     "latest NVIDIA driver is installed and running.",
                 explain=("No NVIDIA driver answers on this host (or in this container): {message}",
                          "On a host: the kernel module is not loaded (`lsmod | grep nvidia`; after a kernel upgrade it "
                          "must be rebuilt for the new kernel: DKMS, or reinstall the driver) or Secure Boot refused it "
                          "(`dmesg | grep -i nvidia`). In a container: it was started without the NVIDIA runtime "
                          "(`docker run --gpus all`, the NVIDIA container toolkit; on Kubernetes a `nvidia.com/gpu` "
                          "limit).")),
    FailureClass(Cause.GPU_UNAVAILABLE, "container_runtime", priority=470, said=said(r"nvidia-container-cli: "),
                 doc="nvidia-container-cli: initialization error: load library failed: libnvidia-ml.so.1: cannot open "
                     "shared object file: no such file or directory: unknown",
                 explain=("The container runtime could not give the container its GPUs: {message}",
                          "The NVIDIA container toolkit's hook found no driver on the host (`nvidia-smi` there), or the "
                          "toolkit is not configured for this runtime (`nvidia-ctk runtime configure --runtime=docker`, "
                          "then restart docker); `nvidia-container-cli info` on the host says what it sees.")),
    FailureClass(Cause.GPU_UNAVAILABLE, "no_libcuda", priority=480, said=said(r"libcuda\.so|nvidia-smi not found"),
                 doc="AssertionError: libcuda.so cannot found!",
                 explain=("The NVIDIA driver's user-space files (libcuda, nvidia-smi) are not where this process looks: "
                          "{message}",
                          "In a container the driver's libraries come from the host only through the NVIDIA container "
                          "runtime (`docker run --gpus all`, nvidia-container-toolkit; on Kubernetes a `nvidia.com/gpu` "
                          "limit). On a host with libcuda.so.1 but no libcuda.so (Triton needs the latter), `ldconfig` or "
                          "the driver's -dev package adds it; TRITON_LIBCUDA_PATH names its folder.")),
    FailureClass(Cause.UNSUPPORTED_HARDWARE, "ascend_soc", priority=550,
                 said=said(r"SocVersion = (?P<soc>\w+)|does not has any binary|Parse dynamic kernel config fail"),
                 doc="EH9999: Inner Error! init runtime platform info failed, SocVersion = Ascend910B3", explain=_ascend),
    FailureClass(Cause.UNSUPPORTED_HARDWARE, "no_kernel_image", priority=560,
                 said=said(r"invalid device function|InvalidDeviceFunction"),
                 doc="RuntimeError: HIP error: invalid device function",
                 explain=("A kernel has no build for this GPU's architecture: {message}",
                          "The installed wheels (or docker image) were compiled for other GPUs: a ROCm image built for "
                          "gfx942 (MI300) run on gfx908 (MI100), or CUDA kernels without this sm_. Use the image or wheels "
                          "built for this GPU (`rocminfo | grep gfx`, `nvidia-smi --query-gpu=compute_cap --format=csv`), "
                          "or rebuild the kernels for it (PYTORCH_ROCM_ARCH / TORCH_CUDA_ARCH_LIST).")),
    FailureClass(Cause.UNSUPPORTED_HARDWARE, "triton_fp8", priority=570, said=said(r"fp8e4nv not supported in this architecture"),
                 doc='ValueError("type fp8e4nv not supported in this architecture. The supported fp8 dtypes are …")',
                 explain=("A Triton kernel was asked for fp8 e4m3 (fp8e4nv), which GPUs before sm89 (Ada, Hopper) do not "
                          "have: most often kv_cache_dtype fp8_e4m3 (or an fp8 checkpoint) with the triton attention "
                          "backend on an A100 or older.",
                          "Use kv_cache_dtype auto (or fp8_e5m2, which Triton has there), another attention backend, or a "
                          "sm89+ GPU.")),
    FailureClass(Cause.UNSUPPORTED_HARDWARE, "platform", priority=580,
                 said=said(r"\A.*(?:(?:not supported|unsupported) on (?:NPU|XPU|CPU|HIP)\b|requires a CUDA"
                            r"|only supported on the (?:CUDA|AMD)|requires CUDA, got|only supports CUDA and CPU"
                            r"|Intel AMX)"),
                 doc="ValueError: FP4 is not supported on NPU yet.",
                 explain=("This SGLang release does not support that on this platform (the device the server runs on): "
                          "{message}",
                          "Leave out the option it names here, or run it on the hardware the message says it needs.")),
    FailureClass(Cause.UNSUPPORTED_HARDWARE, "rocm", priority=590, said=said(r"\A.*not supported (?:in|on) ROCm"),
                 doc="ValueError: gptq_marlin quantization is currently not supported in ROCm.",
                 explain=("This SGLang release builds that for NVIDIA GPUs only, and this is a ROCm (AMD) one: {message}",
                          "Choose a quantization, load format or option its ROCm build has (the message lists them when "
                          "it can; a checkpoint quantized another way), or run on an NVIDIA GPU.")),
    FailureClass(Cause.CUDA_ERROR, "custom_all_reduce", priority=670, said=CUSTOM_ALL_REDUCE_FRAME_RE,
                 doc='File "/sgl-workspace/sglang/python/sglang/srt/distributed/device_communicators/custom_all_reduce.py"',
                 explain=("SGLang's custom all-reduce failed in phase {phase}, registering its IPC buffers between the "
                          "GPUs (`invalid argument`): {message}",
                          "Its memory-size advice does not apply. This is the GPUs' peer-to-peer IPC (a virtualised or "
                          "partitioned host, MIG, --enable-memory-saver, a driver without P2P between these GPUs): start "
                          "with --disable-custom-all-reduce (extra_args; NCCL then does the all-reduce), and check "
                          "`nvidia-smi topo -m` for P2P between the ranks.")),
    FailureClass(Cause.CUDA_ERROR, "custom_all_reduce_kernel", priority=680, said=said(r"custom_all_reduce\.cuh:\d+"),
                 doc="Failed: Cuda error /sgl-kernel/csrc/allreduce/custom_all_reduce.cuh:384 'an illegal memory access "
                     "was encountered'",
                 explain=("SGLang's custom all-reduce kernel (sgl-kernel) faulted in phase {phase}: {message}",
                          "It checks its own CUDA calls and exits at once, so this is the cause, not the launcher's "
                          "EOFError after it. It is most often GPUs without full peer-to-peer between them (PCIe, a "
                          "virtualised or partitioned host, MIG) or a kernel bug for this GPU: start with "
                          "--disable-custom-all-reduce (extra_args; NCCL then does the all-reduce), and check "
                          "`nvidia-smi topo -m` for P2P between the ranks.")),
    FailureClass(Cause.CUDA_ERROR, "nan_probabilities", priority=1370,
                 said=said(r"probability tensor contains either .inf., .nan. or element < 0"),
                 doc="/pytorch/aten/src/ATen/native/cuda/TensorCompare.cu:112: _assert_async_cuda_kernel: block: "
                     "[0,0,0], thread: [0,0,0] Assertion `probability tensor contains either `inf`, `nan` or element "
                     "< 0` failed.",
                 explain=("The sampler found NaN or infinite probabilities in phase {phase}: the model's logits went "
                          "bad on the GPU, and torch's kernel assertion stopped the process: {message}",
                          "That is numerics, not memory: an fp16 overflow (run the model in bfloat16, `dtype`), a "
                          "quantized checkpoint or KV cache dtype (fp8) this model does not tolerate, or a kernel bug "
                          "of one attention or MoE backend, DP attention or context parallel: start without the "
                          "newest of those, or try another attention_backend, and see whether it goes away.")),
    FailureClass(Cause.CUDA_ERROR, "device_assert",
                 priority=1380,
                 line=lazy_re.compile(r"\.cu:\d+: (?:\S.*?: )?block: \[\d+,\d+,\d+\], thread: \[\d+,\d+,\d+\] Assertion "),
                 said=said(r"\.cu:\d+: (?:\S.*?: )?block: \[\d+,\d+,\d+\], thread: \[\d+,\d+,\d+\] Assertion "
                            r"`(?P<assertion>.*)` failed"),
                 doc="/pytorch/aten/src/ATen/native/cuda/IndexKernel.cu:93: operator(): block: [0,0,0], thread: "
                     "[0,0,0] Assertion `-sizes[i] <= index && index < sizes[i] && \"index out of bounds\"` failed.",
                 explain=("A GPU kernel's own assertion failed in phase {phase} ({assertion}), and CUDA stops the "
                          "process on it (`device-side assert triggered`): {message}",
                          "An index out of bounds is most often a token id or an expert id past its table: a "
                          "tokenizer or chat template that does not match the model, or a kernel bug of one backend; "
                          "CUDA_LAUNCH_BLOCKING=1 names the kernel.")),
    # FlashInfer's TRT-LLM batched GEMM runner (the MoE runner backend flashinfer_trtllm, FP4/FP8 GEMMs) checks its
    # own launch and raises `Error in function 'run' at …/trtllm_batched_gemm_runner.cu:N: Error occurred when
    # running GEMM! (numBatches: …, GemmMNK: …, Kernel: …)`: a kernel that cannot run this shape on this GPU
    FailureClass(Cause.CUDA_ERROR, "flashinfer_gemm", priority=1390,
                 line=lazy_re.compile(r"Error occurred when running GEMM!"),
                 said=said(r"Error occurred when running GEMM!(?:.*?Kernel:\s+(?P<kernel>\S+))?"),
                 doc="RuntimeError: Error in function 'run' at /workspace/csrc/trtllm_batched_gemm_runner.cu:258: Error "
                     "occurred when running GEMM! (numBatches:  256 , GemmMNK:  2   512   7168 , Kernel:  bmm_E2m1_…_sm100f )",
                 explain=("FlashInfer's TRT-LLM batched GEMM (the MoE runner or the FP4/FP8 GEMM backend) could not run "
                          "a kernel in phase {phase}, and the scheduler died on it: {message}",
                          "That is a kernel bug or a shape this FlashInfer build has no kernel for on this GPU (a batch "
                          "size reached under load, a speculative draft's), not memory: start with another MoE runner "
                          "(--moe-runner-backend triton or cutlass, extra_args) or --fp4-gemm-backend, or the FlashInfer "
                          "version the SGLang release pins; an empty FlashInfer cubin cache that could not be filled "
                          "(offline, a lock) is worth ruling out too.")),
)
