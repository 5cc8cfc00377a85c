"""The failure classes: one row per (cause, sub-case), the one place a failure's words live.

A row holds the patterns that recognise it, each named by where it matches (`line`: an
exception's final line or a lone fatal line, which names the cause; `said`: the failure's record,
its message first and then its evidence, one per line, which picks the sub-case: `\\A.*` anchors
on the message, `^File ` on a traceback's frame; `read`: what else a picked row captures; `alone`: a
line of its own that names the cause only where the grammar finds it, as argparse's last word), its
role, the releases it applies to, its explanation (templates over the captures, or a function
in the same slot where a sentence depends on them, as pystemd keeps a lambda in a data slot)
and its fixes. The grammar asks `classify` for a line's cause (rows in priority order: the first
whose `line` matches) and a Failure `refine`s itself into its sub-case once; diagnosis looks the
row up and matches no text. docs/replay.md's cause table is `cause_table()` (scripts/cause-table;
tests/test_failures.py fails when they differ).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from svcdiag.sglang import lazy_re


class Cause(StrEnum):
    """The stable cause ids (docs/replay.md#failure-causes-stable-ids): a StrEnum, so `cause == "cuda_oom"` holds."""

    MAX_RUNNING_ZERO = "max_running_zero"
    WATCHDOG_TIMEOUT = "watchdog_timeout"
    MAMBA_CACHE_TOO_SMALL = "mamba_cache_too_small"
    NOT_ENOUGH_MEMORY = "not_enough_memory"
    CUDA_OOM = "cuda_oom"
    HOST_OOM = "host_oom"
    PORT_IN_USE = "port_in_use"
    UNSUPPORTED_MODEL = "unsupported_model"
    MODEL_NOT_FOUND = "model_not_found"
    HUB_UNREACHABLE = "hub_unreachable"
    UNSUPPORTED_HARDWARE = "unsupported_hardware"
    GPU_UNAVAILABLE = "gpu_unavailable"
    CUDA_ERROR = "cuda_error"
    KV_TRANSFER_FAILED = "kv_transfer_failed"
    EP_DISPATCH_TIMEOUT = "ep_dispatch_timeout"
    NVSHMEM_FAILED = "nvshmem_failed"
    RENDEZVOUS_FAILED = "rendezvous_failed"
    NCCL_ERROR = "nccl_error"
    DISK_FULL = "disk_full"
    ACCESS_DENIED = "access_denied"
    BAD_CHECKPOINT = "bad_checkpoint"
    BROKEN_INSTALL = "broken_install"
    TORCH_COMPILE_FAILED = "torch_compile_failed"
    BAD_ARGUMENTS = "bad_arguments"
    WARMUP_FAILED = "warmup_failed"
    ROUTER_FAILED = "router_failed"
    PD_BOOTSTRAP_FAILED = "pd_bootstrap_failed"
    KILLED_BY_SIGNAL = "killed_by_signal"
    EXITED = "exited"
    STOPPED = "stopped"
    DIED_SILENTLY = "died_silently"
    EXCEPTION = "exception"
    TIMED_OUT = "timed_out"
    INCOMPLETE = "incomplete"
    HTTP_UNREACHABLE = "http_unreachable"
    HTTP_MISMATCH = "http_mismatch"
    DIED_AFTER_READY = "died_after_ready"


class Role(StrEnum):
    ROOT = "root"  # the failure itself
    CONSEQUENCE = "consequence"  # a process ended because of something said elsewhere


#: what a row's explanation may be: lines to format, or a function of the context (the verdict's, in diagnosis)
Explain = tuple[str, ...] | Callable[..., Any] | None


@dataclass(frozen=True, slots=True)
class FailureClass:
    """One cause, or one of its sub-cases (`detail`), with everything known about it."""

    cause: Cause
    detail: str = ""
    line: re.Pattern[str] | None = None  # an exception's final line or a lone fatal line: names the cause
    said: re.Pattern[str] | None = None  # the failure's message and evidence: picks the sub-case
    read: tuple[re.Pattern[str], ...] = ()  # more of what a picked sub-case captures (each first match's groups)
    #: a line of its own that names this cause where the grammar reads it (matched at the line's start): not
    #: classify's, since its words name the cause only there (an argparse line, a launcher's, a PD server's)
    alone: re.Pattern[str] | None = None
    role: Role = Role.ROOT
    #: the SGLang releases whose words these are, by hand, where the catalogues cannot say ("<= 0.4.3"); a row whose
    #: words are all SGLang's has its range in message_catalogue/releases.json (message_catalogue.row_releases)
    releases: str = ""
    explain: Explain = None
    fixes: tuple[tuple[Mapping[str, Any], str], ...] = ()  # (settings, why), formatted as the explanation is
    doc: str = ""  # the cause's row: docs/replay.md's evidence column; a sub-case's: an example it is picked by


def _watchdog(w: Mapping[str, str]) -> tuple[str, ...]:
    secs = f"{float(w['secs']):g} s" if w["secs"] else "watchdog_timeout seconds"
    return (f"SGLang's own watchdog saw no progress on a batch for {secs} in phase {w['phase']}, dumped the stacks and "
            "killed the server: the `Received sigquit` after it is the consequence, the hang the cause.",
            "A first batch that compiles kernels (FlashInfer or DeepGEMM JIT, torch.compile) can take that long once: "
            "warm their caches, or give SGLang `--watchdog-timeout` (extra_args) above it. A batch that never ends is a "
            "hang: ranks waiting on each other in a collective (NCCL, DP attention, expert parallel) or a kernel that "
            "does not return; the py-spy dump printed above the line shows where each rank waits.")


def _said(pattern: str) -> re.Pattern[str]:
    """A sub-case's words, looked for in the failure's message and evidence (one line each)."""
    return lazy_re.compile(pattern, re.M)


#: where a model_not_found names the path or id it could not open (the hub's URL, the id, the folder)
_NAMED_PATH = _said(r"huggingface\.co/(?:api/models/)?(?!docs/)(?P<hub_id>[\w.-]+/[\w-]+(?:\.[\w-]+)*)"
                    r"|path_or_model_id: '(?P<path_id>[^']+)'|Repo id must [^:]*: '(?P<repo_id>[^']+)'"
                    r"|No such file or directory: '(?P<file>[^']+)'")

#: each cause's own row: its line patterns (priority order), its docs line, the generic explanation if any
_CAUSES: tuple[FailureClass, ...] = (
    FailureClass(Cause.MAX_RUNNING_ZERO, line=lazy_re.compile(r"max_running_requests? is zero"),
        doc="`AssertionError: max_running_request is zero`"),
    # SGLang's own watchdog: a forward pass (or the tokenizer) made no progress for --watchdog-timeout s
    FailureClass(Cause.WATCHDOG_TIMEOUT, line=lazy_re.compile(r"[Ww]atchdog timeout \(self\.watchdog_timeout="),
        alone=lazy_re.compile(r"Scheduler debug info:"),  # the watchdog's dump of the scheduler, before its timeout line
        doc="SGLang's own watchdog found a batch stuck and SIGQUIT the server: `Watchdog timeout "
            "(self.watchdog_timeout=300)` (≤ 0.4), `Scheduler watchdog timeout "
            "(self.watchdog_timeout=300, self.soft=False)` (0.5); the `Received sigquit …` after it is "
            "the consequence",
        explain=_watchdog),
    FailureClass(Cause.MAMBA_CACHE_TOO_SMALL, line=lazy_re.compile(
        r"state cache is too small to serve any requests|Not enough GPU memory for hybrid \(mamba"),
        doc="`RuntimeError: Hybrid (mamba/linear-attention) state cache is too small to serve any "
            "requests …`"),
    FailureClass(Cause.NOT_ENOUGH_MEMORY, read=(_said(r"above (?P<floor>\d\.\d+)"),), line=lazy_re.compile(
        r"Not enought? memory\. Please try to increase --mem-fraction-static"  # ≤ 0.1.17 spells it "enought"
        r"|leave no GPU memory for the KV cache|Memory pool size is too small"
        r"|SWA pool \(\d+ tokens\) cannot hold even one request"
        # 0.5.23: the SWA pool's cap (or a UnifiedKVPool sub-pool) takes what the full KV pool needed
        r"|leaves no room for (?:the full KV pool|real data)"),  # 0.5.23: a sliding-window pool under its window
        doc="`RuntimeError: Not enough memory. Please try to increase --mem-fraction-static.`, `Loaded "
            "weights leave no GPU memory for the KV cache …`; 0.5.23's `ValueError: SWA pool (659 tokens)"
            " cannot hold even one request: … sliding_window_size (1024) + page_size (1). Increase "
            "--swa-full-tokens-ratio …` (the diagnosis names that ratio), its `SWA pool cap (…) leaves no room for "
            "the full KV pool …` and `UnifiedKVPool: … leaves no room for real data`"),
    FailureClass(Cause.CUDA_OOM, read=(_said(r"\A.*Process (?P<other_pid>\d+) has (?P<other_gib>[\d.]+ GiB) memory in use"),),
                 line=lazy_re.compile(
        r"CUDA out of memory|HIP out of memory|OutOfMemoryError|(?:CUDA|HIP) error: out of memory"
                            r"|hipErrorOutOfMemory|(?:NPU|XPU) out of memory"  # Ascend's torch_npu, Intel's XPU
                            r"|UR_RESULT_ERROR_OUT_OF_DEVICE_MEMORY"),  # Intel's Level Zero runtime, under torch
        doc="`torch.OutOfMemoryError: CUDA out of memory. Tried to allocate …`; ROCm's `HIP out of "
            "memory`, `HIP error: out of memory`; Ascend's `RuntimeError: NPU out of memory. Tried to "
            "allocate … (NPU 2; …)` and Intel's `XPU out of memory` / `UR error: "
            "UR_RESULT_ERROR_OUT_OF_DEVICE_MEMORY` (the diagnosis names the device, and `Capture npu "
            "graph begin` is a capture); `Exception: Capture cuda graph failed: CUDA out of memory …` "
            "(with its `Possible solutions:` list); after the target's capture, while a speculative draft"
            " loads or captures (`Capture draft cuda graph begin`), the diagnosis says it is the draft's"),
    FailureClass(Cause.HOST_OOM, alone=lazy_re.compile(r"^slurmstepd: error: Detected \d+ oom[-_]kill events? in "),
                 line=lazy_re.compile(r"\[Errno 12\] Cannot allocate memory|Out of memory: Killed process|oom-kill"
                            r"|DefaultCPUAllocator: can't allocate memory"  # torch's CPU allocator (--device cpu, offload)
                            # --enable-hierarchical-cache: its host pool (--hicache-ratio × the KV pool, or --hicache-size)
                            # larger than the host RAM free; not `… for request X`, a PD decode server's runtime note
                            r"|Not enough host memory (?:available\. Requesting|for [\w\s.-]*hierarchical cache)"
                            # 0.5.23's own host pools (V4 paged and state pools, MiniMax's index cache, the unified
                            # page envelope), not a PD decode server's `… for request X`
                            r"|Not enough host memory for (?!request\b)[^\n]*?\. Requesting [\d.]+ GB but only have"
                            r"|Cannot automatically size HiCache host memory"),
        doc="`OSError: [Errno 12] Cannot allocate memory`; torch's `DefaultCPUAllocator: can't allocate "
            "memory: you tried to allocate N bytes` (`--device cpu`); `--enable-hierarchical-cache`'s "
            "host pool above the RAM free (`ValueError: Not enough host memory available. Requesting "
            "69.63 GB but only have 41.87 GB free. Please reduce the size of the hierarchical cache.`, "
            "0.5.23's `Cannot automatically size HiCache host memory`: the fix is --hicache-size / "
            "--hicache-ratio; 0.5.23's own host pools, `Not enough host memory for V4 paged pool …`; a PD decode "
            "server's runtime `Not enough host memory for request …` is no failure); systemd's `… killed by the "
            "OOM killer`; a bare `Killed` with no other cause before it (also a script's `./serve.sh: line 7: "
            "48211 Killed    python3 …`, zh_CN `已杀死`; a launcher's "
            "`sglang-1 exited with code 137`, `command terminated with exit code 137`, `srun: error: node-06: tasks "
            "0-3: Killed`; Slurm's `slurmstepd: error: Detected 1 oom_kill event in StepId=…`)",
        explain=("The host ran out of memory (RAM, not GPU memory) in phase {phase}: {message}",
                 "safetensors are read through host memory once per rank; `journalctl -k | grep -i -e oom -e 'out of "
                 "memory'` shows the kernel's account, and `systemctl show -p MemoryMax {unit}` the unit's limit.")),
    FailureClass(Cause.PORT_IN_USE, line=lazy_re.compile(
        r"\[Errno 98\]|[Aa]ddress already in use|is not available in [\d.]+ seconds"),
        doc="`ERROR:    [Errno 98] error while attempting to bind on address ('0.0.0.0', 30000): address "
            "already in use` (uvicorn's HTTP port); torch's rendezvous store `DistNetworkError: The "
            "server socket has failed to listen on any local network address. port: 29500, …, name: "
            "EADDRINUSE` (the diagnosis names --nccl-port, or dist_init_addr's port on several nodes, not"
            " the HTTP port); `zmq.error.ZMQError: Address already in use (addr='tcp://…:5002')` "
            "(SGLang's own sockets between its processes: a leftover of an earlier start); `ValueError: "
            "dist_init_port at 5000 is not available in 30 seconds. … process.cmdline()=[…] … pid=N` (the"
            " diagnosis names the port and the process holding it"),
    FailureClass(Cause.UNSUPPORTED_MODEL, line=lazy_re.compile(
        r"Transformers does not recognize this architecture|Model architectures? \[.*\] (?:are|is) not supported"
        r"|Unrecognized configuration class|Unrecognized model in|Unrecognized (?:image )?processor in"
        r"|model type `?[\w.-]+`? but Transformers does not"
        r"|is not supported for now|failed to be inspected|did not match any variant of untagged enum (?:ModelWrapper|Py\w*Wrapper)"
        r"|Tokenizer class \w+ does not exist or is not currently imported"
        r"|Unknown quantization method"  # the checkpoint's quant_method, which this release does not know
        r"|GGUF model with architecture \w+ is not supported"  # transformers' GGUF reader, older than the model
        # speculative decoding's target hooks, missing from this release's class for the target model
        r"|object has no attribute '(?:capture_aux_hidden_states|set_eagle3_layers_to_capture|get_embed_and_head)'"
        # SGLang's own words: the architecture not in its registry, transformers too old for it, a GGUF model_type
        r"|Unsupported architectures: |Transformers version \S+ is not supported for model"
        r"|is not a registered model in the Transformers library|Unknown gguf model_type"
        r"|has no SGl?ang implementation and the Transformers implementation is not compatible"
        # a feature the flags ask for that this model's class does not have
        r"|\b[Mm]odel '?\S+?'? does not support |(?:Pipeline Parallel|PP) is not compatible with (?:this model|MTP models)"),
        doc="`ValueError: Model architectures ['X'] are not supported for now.`, `… has model type "
            "`qwen3_next` but Transformers does not recognize this architecture …`; tokenizer files newer"
            " than the installed tokenizers (`Exception: data did not match any variant of untagged enum "
            "ModelWrapper …`); `ValueError: Unknown quantization method: X. Must be one of […]` (the "
            "checkpoint's quant_method); `Unrecognized image processor in …` (transformers older than the"
            " VLM); `ValueError: GGUF model with architecture qwen3moe is not supported yet.` "
            "(transformers' GGUF reader, `--load-format gguf`); a target model class this release cannot "
            "speculate from (`… object has no attribute 'capture_aux_hidden_states'`, "
            "`set_eagle3_layers_to_capture`, `get_embed_and_head`); SGLang's own `Unsupported architectures: X. "
            "Supported list: …`, `X has no SGlang implementation and the Transformers implementation is not "
            "compatible …`, `Transformers version … is not supported for model …`, `Unknown gguf model_type`; a "
            "feature the model's class lacks (`Model X does not support BitsAndBytes quantization yet.`, `Pipeline "
            "Parallel is not compatible with this model.`)",
        explain=("This SGLang release has no implementation of the model's architecture: {message}",
                 "Upgrade SGLang to a release that lists the architecture, or check config.json's `architectures`.")),
    FailureClass(Cause.MODEL_NOT_FOUND, read=(_NAMED_PATH,), line=lazy_re.compile(
        r"Incorrect path_or_model_id|HFValidationError|RepositoryNotFoundError|Repository Not Found"
        r"|Repo id must (?:be in the form|use alphanumeric chars)"  # a --model-path neither a folder here nor a hub id
        r"|is not a local folder and is not a valid model identifier|gated repo|Cannot access gated repo"
        r"|401 Client Error|You must have access to it and be authenticated|GatedRepoError"
        r"|does not appear to have a file named |No such file or directory: .*config\.json"
        r"|LocalEntryNotFoundError|couldn't find (?:it|them) in the cached files|outgoing traffic has been disabled"
        r"|OfflineModeIsEnabled"  # HF_HUB_OFFLINE=1 and a call that must reach the hub
        r"|Can't load tokenizer for|Can't load the configuration of"
        r"|Can't load (?:image processor|processor|feature extractor) for"  # a VLM saved without its processor files
        r"|you are not in the authorized list|Invalid user token|Invalid credentials in Authorization header"
        r"|(?:Entry|Revision) Not Found for url|EntryNotFoundError|RevisionNotFoundError"
        # the folder is there, its weights (or the files the checkpoint names) are not
        r"|Cannot find any model weights with|No model weights found in|Could not find checkpoint files"
        r"|shard file\(s\) missing from|Cannot find the config file for"),
        doc="`OSError: Incorrect path_or_model_id: '/models/x'`, "
            "`huggingface_hub.errors.RepositoryNotFoundError: 401 Client Error …`, `OSError: You are "
            "trying to access a gated repo.`; offline with the model not cached "
            "(`LocalEntryNotFoundError`, `… couldn't find them in the cached files`, "
            "`OfflineModeIsEnabled: Cannot reach https://huggingface.co/…: offline mode is enabled`); "
            "`Can't load tokenizer for …`; a VLM's `Can't load image processor for …` (no "
            "preprocessor_config.json); a `--lora-paths` folder that is not there (`HFValidationError: "
            "Repo id must be …: '/data/loras/x'`: the diagnosis names that path, not model_path); the hub's "
            "own words pasted alone (`Cannot access gated repo for url …`, `… you are not in the authorized list`, "
            "`Invalid user token`); a folder without its weights (`Cannot find any model weights with …`, `No "
            "model weights found in …`, `Could not find checkpoint files …`), shards its index names (`… shard "
            "file(s) missing from … (incomplete download?)`) or its quantization config (`Cannot find the config "
            "file for awq`)",
        explain=("SGLang cannot open model_path {what}: it is neither a folder on this host nor a repo id it can reach.",
                 "`ls {path}` on the GPU host; a model in /dev/shm is gone after a reboot.")),
    # the hub itself out of reach: rate-limited (429), no route, a proxy; the repo id may well be right
    FailureClass(Cause.HUB_UNREACHABLE, line=lazy_re.compile(
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
    FailureClass(Cause.UNSUPPORTED_HARDWARE, line=lazy_re.compile(
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
    FailureClass(Cause.GPU_UNAVAILABLE, line=lazy_re.compile(
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
    FailureClass(Cause.CUDA_ERROR, line=lazy_re.compile(
        r"illegal memory access was encountered|device-side assert triggered|CUDA error: misaligned address"
        r"|unspecified launch failure|illegal instruction was encountered|cudaErrorIllegalAddress"
        r"|CUBLAS_STATUS_EXECUTION_FAILED|Memory access fault by GPU"),  # ROCm's illegal address, printed by HSA
        doc="a CUDA kernel fault that is not OOM: `RuntimeError: CUDA error: an illegal memory access was"
            " encountered`, `device-side assert triggered`, `unspecified launch failure`; ROCm's "
            "unprefixed `Memory access fault by GPU node-N (…) on address 0x…. Reason: Page not present "
            "or supervisor privilege.` before the abort",
        explain=("A CUDA kernel faulted in phase {phase} (not out of memory): {message}",
                 "CUDA reports such faults late, so the traceback may point past the kernel that did it. A fault "
                 "while capturing CUDA graphs or in a speculative draft is most often an attention backend or kernel "
                 "bug for this model and GPU: try another attention_backend, or disable CUDA graphs to confirm."),
        fixes=(({"env.CUDA_LAUNCH_BLOCKING": "1"}, "the traceback then names the kernel that faulted"),)),
    # the PD KV transfer engine could not start: its RDMA NIC(s) missing, unusable or hidden by the sandbox
    FailureClass(Cause.KV_TRANSFER_FAILED, line=lazy_re.compile(
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
    FailureClass(Cause.EP_DISPATCH_TIMEOUT, line=lazy_re.compile(
        r"DeepEP error: (?:CPU recv timeout|timeout \(dispatch CPU\)|timeout)"),
        doc="DeepEP's all-to-all waited for an expert-parallel rank that never came: `RuntimeError: "
            "DeepEP error: CPU recv timeout` (`timeout (dispatch CPU)`): another rank's error first, a "
            "first start's DeepGEMM compile, or RDMA between nodes"),
    # DeepEP's NVSHMEM (expert parallel's all-to-all over RDMA) could not connect its ranks: it prints
    # `/…/nvshmem/src/…/ibrc.cpp:420: non-zero status: 22 ibv_modify_qp failed` and exits, SGLang's
    # `Rank 0 scheduler is dead` and `Exit code: 255` are the consequence
    FailureClass(Cause.NVSHMEM_FAILED, line=lazy_re.compile(
        r"nvshmem/src/\S+: non-zero status: \d+|nvshmem initialization failed"
        r"|NVSHMEM API called before NVSHMEM initialization"),
        doc="DeepEP's NVSHMEM (`--moe-a2a-backend deepep`) could not connect the ranks over RDMA: its "
            "unprefixed `/sgl-workspace/nvshmem/src/modules/transport/ibrc/ibrc.cpp:420: non-zero status:"
            " 22 ibv_modify_qp failed`, `nvshmem initialization failed, exiting`; the ranks' exit after "
            "it is the consequence"),
    FailureClass(Cause.RENDEZVOUS_FAILED, line=lazy_re.compile(
        r"DistStoreError|DistNetworkError|[Tt]he client socket has timed out|TCP client failed to connect"
        r"|Timed out initializing process group|clients joined|gloo/transport/tcp"),
        doc="a multi-node start whose ranks never met at `dist_init_addr`: "
            "`torch.distributed.DistNetworkError: The client socket has timed out after 120000ms while "
            "trying to connect to (10.0.0.11, 5000).` (a worker node), `DistStoreError: Timed out after "
            "181 seconds waiting for clients. 8/16 clients joined.` (node 0)"),
    FailureClass(Cause.NCCL_ERROR, line=lazy_re.compile(
        r"NCCL error|DistBackendError|ncclInternalError|ncclUnhandledCudaError|ncclSystemError"
                              r"|Watchdog caught collective operation timeout|NCCL communicator was aborted"),
        doc="`RuntimeError: NCCL error: unhandled system error …`, `DistBackendError`, `Watchdog caught "
            "collective operation timeout`",
        explain=("NCCL failed in phase {phase}: {message}",
                 "Usual causes: a GPU in the list that another job uses, P2P/IB trouble, or a mismatch of tp_size and "
                 "GPUs."),
        fixes=(({"env.NCCL_DEBUG": "INFO"}, "NCCL then says which rank and transport failed"),)),
    FailureClass(Cause.DISK_FULL, line=lazy_re.compile(r"\[Errno 28\]|No space left on device"
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
    FailureClass(Cause.ACCESS_DENIED, line=lazy_re.compile(r"\[Errno 30\] Read-only file system|\[Errno 13\]|PermissionError"),
        doc="the sandbox or a file's owner refused a write: `OSError: [Errno 30] Read-only file system: "
            "'/data/hf/.locks'` (a strict unit writes only its `ReadWritePaths=`; the fix names "
            "`read_write_paths`), `PermissionError: [Errno 13] …`; uvicorn's `ERROR:    [Errno 13] error "
            "while attempting to bind on address ('0.0.0.0', 80): permission denied` (a port below 1024 "
            "without CAP_NET_BIND_SERVICE)"),
    FailureClass(Cause.BAD_CHECKPOINT, line=lazy_re.compile(
        r"SafetensorError|Error while deserializing header|HeaderTooLarge|MetadataIncompleteBuffer"
        r"|incomplete metadata, file not fully covered|PytorchStreamReader failed|invalid load key"
        r"|Attempted to load weight \(|is not a valid JSON file"
        r"|checksum mismatch for presharded checkpoint"),
        doc="a weights file that cannot be read (`safetensors_rust.SafetensorError: Error while "
            "deserializing header: MetadataIncompleteBuffer`, a cut download) or a tensor the model class"
            " does not know (a `KeyError` raised in a model's `load_weights`) or of another shape "
            "(`AssertionError: Attempted to load weight (…) into parameter (…)`: after the target loaded,"
            " a speculative draft made for another target)",
        explain=("A weights file is unreadable: {message}",
                 "Most often a download that stopped half way (the file is shorter than its header says). Compare the "
                 "file sizes with the hub's, delete the broken shard and download it again "
                 "(`huggingface-cli download --force-download`).")),
    FailureClass(Cause.BROKEN_INSTALL, line=lazy_re.compile(
        r"ModuleNotFoundError|No module named '|undefined symbol: |cannot open shared object file"
        r"|cannot import name '\w+' from|(?:GLIBC|GLIBCXX|CXXABI)_[\d.]+' not found|Python\.h: No such file"
        r"|module '[\w.]+' has no attribute|Torch not compiled with CUDA enabled"
        r"|Failed to find C compiler|Command '\['/usr/bin/(?:gcc|cc|g\+\+|c\+\+)'|Could not find nvcc"
        # a kernel compiled at first use (FlashInfer, DeepGEMM, torch extensions): ninja missing or its build failed
        r"|No such file or directory: 'ninja'|Ninja build failed|Ninja is required|Error building extension"
        # an optional backend the flags ask for and the venv lacks: `ImportError: Please install mooncake by …`
        r"|ImportError: .*\b[Pp]lease (?:install|upgrade) "
        # a package the flags need, in SGLang's own words: `Install it with: pip install modelexpress`, `requires the
        # 'cuda-python' package`, `upgrade Mooncake by 'pip install …'`, `(modelopt) library not found. Please install`
        r"|[Ii]nstall it (?:with|using):? ?`?pip install |by '?pip install |requires the '[\w.-]+' package"
        r"|library not found\. Please install"
        r"|Failed to load NCCL library from"),  # pynccl: no libnccl.so.2 it can load (nvidia-nccl-cu* missing or broken)
        doc="the interpreter cannot import what SGLang needs: `ModuleNotFoundError: No module named "
            "'sgl_kernel'`, `ImportError: …/common_ops.abi3.so: undefined symbol: …`, `cannot import name"
            " 'x' from 'sgl_kernel'`; Triton's `Failed to find C compiler. Please specify via CC "
            "environment variable.` (no gcc on the unit's PATH); a kernel built at first use that cannot "
            "be: `FileNotFoundError: [Errno 2] No such file or directory: 'ninja'`, `RuntimeError: Ninja "
            "build failed. Ninja output:` (its message keeps the compiler's error lines, not the nvcc "
            "command lines); an optional backend the flags need: `ImportError: Please install mooncake by"
            " following …`; the diagnosis tells the loader's words apart: `version `GLIBCXX_3.4.32' not "
            "found` (a conda env's old libstdc++), `libnuma.so.1: cannot open shared object file` (a "
            "system package: `apt install libnuma1`; also under sgl-kernel's multi-line `[sgl_kernel] "
            "CRITICAL: Could not load any common_ops library!`), `libcudart.so.12: …` (torch and the "
            "kernels built for different CUDA majors), `undefined symbol: _ZN3c10…` (a package built for "
            "another torch, named from its path), a grammar backend's (xgrammar, outlines, llguidance); SGLang's own "
            "advice for a package a flag needs (`Install it with: pip install modelexpress`, `requires the "
            "'cuda-python' package`, `(modelopt) library not found`); pynccl's `Failed to load NCCL library from …`",
        explain=("The Python environment the unit runs cannot import what SGLang needs: {message}",
                 "A missing package, or compiled kernels (sgl_kernel, flashinfer, vllm) built for another torch or CUDA "
                 "than the installed one. Install the versions the SGLang release pins (`pip install \"sglang[all]==X\"` "
                 "in the unit's interpreter, shown by `svcdiag render {name}`), or use its docker image.")),
    # torch.compile (--enable-torch-compile) could not compile the model: dynamo/inductor's own error; after
    # the patterns above, so an OOM or a missing compiler inside it is still that
    FailureClass(Cause.TORCH_COMPILE_FAILED, line=lazy_re.compile(
        r"BackendCompilerFailed|torch\._inductor\.exc\.\w+|LoweringException|InductorError"),
        doc="`--enable-torch-compile` could not compile the model (while capturing CUDA graphs): "
            "`torch._dynamo.exc.BackendCompilerFailed: backend='inductor' raised: LoweringException: …`, "
            "`torch._inductor.exc.InductorError: …` (an OOM or a missing compiler inside it is still "
            "`cuda_oom` / `broken_install`); dynamo's advice lines (`suppress_errors = True`) are kept "
            "out of the message"),
    FailureClass(Cause.BAD_ARGUMENTS, line=lazy_re.compile(
        r"total_num_(?:kv_)?heads % tp_size|must be divisible by (?:tensor parallel|tp|the tp)"
        # the TP split cuts a quantized weight across its quantization blocks (fp8 block_n/block_k, AWQ/GPTQ marlin)
        r"|is not divisible by (?:the )?weight quantization block_[nk]|The input size is not aligned with the quantized"
        r" weight shape|is not divisible by min_thread_[nk]"
        r"|tp_size must be divisible|is not divisible by tp|num_attention_heads.*divisible|invalid (?:int|float|choice) value"
        r"|: error: (?:unrecognized arguments|argument --|ambiguous option)"
        r"|context_length \(\d+\) is greater than the derived context_length"
        r"|does not match the quantization method specified in the `quantization` argument"
        r"|`?trust_remote_code=True`? to (?:allow custom code|remove this error)|contains custom code which must be executed"
        r"|is not a built-in template name or a valid chat template file path"  # --chat-template
        r"|The host memory should be larger than the device memory"  # --hicache-ratio ≤ 1 (or a --hicache-size below the KV pool)
        # LoRA adapters the flags ask for that this release cannot serve together: ranks or alphas that differ
        # (≤ 0.4.3 asserts it), a rank above --max-lora-rank, modules outside --lora-target-modules
        r"|hf_config\[\"r\"\] == self\.max_lora_dim|x\.scaling == self\.scaling|--max-lora-rank|--lora-target-modules"
        # the draft model is no EAGLE draft (none given: SGLang loads the target itself as the draft)
        r"|object has no attribute '(?:set_embed|set_embed_and_head|hot_token_id)'"
        # a flag's value this release does not know, in its own words (--quantization, --kv-cache-dtype, --device)
        r"|Invalid quantization choice: |Unsupported kv_cache_dtype: |Not supported device type: "),
        doc="`launch_server.py: error: unrecognized arguments: --foo` (≤ 0.5.9), `AssertionError: The "
            "host memory should be larger than the device memory with the current protocol` "
            "(--hicache-ratio ≤ 1), `sglang serve: error: argument --tp-size: invalid int value: 'auto'` "
            "(0.5.10+); a bare `AssertionError` whose source line is `assert self.total_num_heads % "
            "tp_size == 0`; `ValueError: User-specified context_length (131072) is greater than the "
            "derived context_length (32768) …`; any exception raised in `server_args.py` or, from 0.5.2x,"
            " in one of `arg_groups/*_hook.py` (its checks of flag combinations, e.g. speculative "
            "decoding's, a hybrid model's Mamba flags); a speculative draft that is no EAGLE draft "
            "(`AttributeError: 'Qwen2ForCausalLM' object has no attribute 'set_embed'`: none given, "
            "SGLang loaded the target as the draft, or a plain model; also `set_embed_and_head`, "
            "`hot_token_id`); `ValueError: The repository for X contains custom code which must be "
            "executed …` (trust_remote_code not set); `Quantization method specified in the model config "
            "(X) does not match the quantization method specified in the `quantization` argument (Y)`; "
            "`RuntimeError: Chat template X is not a built-in template name or a valid chat template file"
            " path.`; uvicorn's `ERROR:    [Errno 99] error while attempting to bind on address "
            "('10.0.0.12', 30000): cannot assign requested address` (--host is no address of this host; "
            "any bind errno but 98 and 13); LoRA adapters this release cannot serve together (≤ 0.4.3's "
            "`assert all(x.hf_config[\"r\"] == self.max_lora_dim …)`, `--max-lora-rank`, "
            "`--lora-target-modules`); a raise in any of SGLang's flag checks (`arg_groups/` at any depth, "
            "`server_args_config_parser.py`, `cli/*.py`, `launch_server.py`), and any exception whose message "
            "names a `--flag` or an `SGLANG_*` variable and no other cause's words (`ValueError: "
            "--enable-unified-memory only supports hybrid Mamba …`: the diagnosis quotes it and says to change "
            "what it names); a flag's value the release does not know, in its own words (`Invalid quantization "
            "choice: …`, `Unsupported kv_cache_dtype: …`, `Not supported device type: …`)",
        # argparse's last word: `launch_server.py: error: …` (≤ 0.5.9) or `sglang serve: error: …` (0.5.10+)
        alone=lazy_re.compile(r"^(?:[\w.-]+\.py|sglang(?: [\w-]+)?|launch_server|python3? -m [\w.]+): error: (.+)$"
                         # `sglang serve` of a diffusion model (0.5.1x+) and other entry points: no program name
                         r"|^error: ((?:unrecognized arguments|the following arguments are required|argument -"
                         r"|ambiguous option|invalid choice|expected one argument).*)$"),
        explain=("SGLang refused its arguments: {message}",)),
    FailureClass(Cause.WARMUP_FAILED,
        doc="`Initialization failed. warmup error: Traceback …` ending in `AssertionError: res=<Response "
            "[502]>` (a proxy without `no_proxy`); a PD server's `Prefill disaggregation mode warm Up "
            "Failed, status code: 500` (it prints ready after it, but is UnHealthy: `/health` 503)",
        explain=("The server loaded and listened, then its own warmup request to itself failed, and SGLang shut down "
                 "(`Initialization failed. warmup error`).", "It said: {message}")),
    FailureClass(Cause.ROUTER_FAILED, alone=lazy_re.compile(r"Failed to start router|Error starting router|Failed to create router"),
        doc="`sglang_router.launch_server` gave up and killed its workers: `[Router (Python)] … - ERROR -"
            " Failed to start router: Timeout 300s waiting for workers [...] to become healthy. Please "
            "set --router-worker-startup-timeout-secs …`",
        explain=("sglang_router could not start, and killed its workers: {message}",
                 "Its words name the router argument to change (the --router-* flags).")),
    FailureClass(Cause.PD_BOOTSTRAP_FAILED, alone=lazy_re.compile(r"Prefill instance failed to register to bootstrap server"),
        doc="a PD prefill server could not register with its bootstrap server (`Prefill instance failed "
            "to register to bootstrap server: …`): it says ready, but no decode server finds it"),
    FailureClass(Cause.KILLED_BY_SIGNAL, role=Role.CONSEQUENCE,
        doc="systemd's `Main process exited, code=killed\\|dumped, status=N/SIG`; `Exit code: -9`; `… "
            "scheduler died during initialization (exit code: -9)`; the shell's `Segmentation fault (core"
            " dumped)`, `Aborted (core dumped)`, `Bus error`, `段错误 (核心已转储)` (a script's `./entrypoint.sh:"
            " line 48: 28 Killed python3 …` too, its padding squeezed by a console), a launcher's `exited with "
            "code 139` (128 + N); SIGBUS's diagnosis "
            "names /dev/shm (`--shm-size`); SGLang's SIGCHLD warning `Child process unexpectedly failed "
            "with an exit code 9. pid=N` / `exitcode=139` (a raw wait status: a signal is a suspect, "
            "cleared if the start goes on; `256`, exit 1, alone is none); torchrun's `ChildFailedError` "
            "summary, by its Root Cause block's `exitcode  : -6` (a consequence: a rank's own error "
            "before it is the cause)"),
    FailureClass(Cause.EXITED, role=Role.CONSEQUENCE,
        doc="systemd's `code=exited, status=N` before ready; a launcher's `sglang-1 exited with code 1` (docker "
            "compose), `command terminated with exit code 1` (kubectl), `srun: error: node-06: task 1: Exited with "
            "exit code 1` (Slurm)"),
    FailureClass(Cause.DIED_SILENTLY, role=Role.CONSEQUENCE,
        doc="the server's processes ended with no traceback and no exit line: only the multiprocessing resource "
            "tracker's `resource_tracker: There appear to be 8 leaked semaphore objects to clean up at shutdown` (it "
            "prints that once every process of the server is gone; a cause said before or after it still wins). "
            "Something killed them from outside, most often the kernel's OOM killer: on unified-memory machines "
            "(GB10, GH200, GB200) GPU memory is host memory; the diagnosis says where to look (`journalctl -k`, "
            "MemoryMax=, a container's limit)",
        explain=("The server's processes ended in phase {phase} without a word of their own: no traceback, no exit "
                 "line, only Python's resource tracker noting, at its own exit, the semaphores they left. A process "
                 "that can still print does; this one was killed from outside, most often by SIGKILL from the "
                 "kernel's OOM killer.",
                 "The OOM killer acts on host RAM. On unified-memory machines (DGX Spark's GB10, GH200, GB200) GPU "
                 "memory is host memory: mem_fraction_static takes that share of the machine's RAM, and what the GPU "
                 "holds is not in the process's RSS, so the killer may pick a small process and the rest die with it.",
                 "Look at `journalctl -k | grep -i -e 'out of memory' -e oom-kill` (or `dmesg -T`), `systemctl show "
                 "-p MemoryMax {unit}`, and a container's memory limit (`docker inspect` State.OOMKilled)."),
        fixes=(({"mem_fraction_static": 0.7}, "on a unified-memory machine, to leave the host RAM the processes need"),)),
    FailureClass(Cause.STOPPED, role=Role.CONSEQUENCE,
        doc="stopped from outside before ready (systemd's `Stopping …`, SGLang's `SIGTERM received`, a terminal's "
            "`^C`, docker compose's `Gracefully stopping…`); stopped after its phase's deadline passed with no "
            "progress, the start is `timed_out` in that phase instead (the operator gave up on a stuck start)"),
    FailureClass(Cause.EXCEPTION,
        doc="any other traceback, to its final exception line (even with no \"error\" in it)"),
    FailureClass(Cause.TIMED_OUT,
        doc="no progress in a phase past its deadline (SGLang printed no error); systemd's own "
            "TimeoutStartSec= before svcdiag's deadline"),
    FailureClass(Cause.INCOMPLETE,
        doc="the log ends before a verdict: no error, no ready line"),
    FailureClass(Cause.HTTP_UNREACHABLE,
        doc="the live path's HTTP cross-check after the log says ready"),
    FailureClass(Cause.HTTP_MISMATCH,
        doc="the live path's HTTP cross-check after the log says ready"),
    FailureClass(Cause.DIED_AFTER_READY, role=Role.CONSEQUENCE,
        doc="the log says ready, then the server dies in it (`Scheduler hit an exception` in its event "
            "loop, `Received sigquit`, a rank dead; `figures.died_of` is that failure's own cause, the "
            "failure record says it), or, live (`wait` on a unit that has ended since), systemd's result "
            "says the unit died while serving (watchdog, signal, OOM killer) ([live.md](live.md)); a "
            "clean stop stays healthy: after `Stopping …`, `SIGTERM received`, uvicorn's `Shutting down`, `^C` or "
            "compose's `Gracefully stopping…`, "
            "the deaths that follow are the stop's, and a child that dies of SIGTERM, SIGINT or SIGHUP (`Subprocess "
            "scheduler_0 (pid=…) crashed with exit code -15`) was stopped (`figures.stopped_after_ready_by`); a "
            "process SIGKILLed while serving (`… exit code 9`, `… crashed with exit code -9`) leaves it healthy with a "
            "post-ready incident (`figures.killed_after_ready`)"),
)



#: gpu_unavailable: the driver's and the device's own words ({message}, {short}: the failure's)
_GPU_UNAVAILABLE = (
    FailureClass(Cause.GPU_UNAVAILABLE, "invalid_ordinal", said=_said(r"invalid device ordinal"),
                 doc="torch.AcceleratorError: CUDA error: invalid device ordinal"),
    FailureClass(Cause.GPU_UNAVAILABLE, "hardware", said=_said(r"uncorrectable ECC error|fallen off the bus"),
                 doc="RuntimeError: CUDA error: uncorrectable ECC error encountered",
                 explain=("A GPU failed in hardware: {message}",
                          "`journalctl -k | grep -i xid` names the GPU and the Xid; it needs a reset (`nvidia-smi -r -i N`) "
                          "or a reboot, and the start then runs without that GPU or after the repair.")),
    FailureClass(Cause.GPU_UNAVAILABLE, "driver_too_old",
                 said=_said(r"driver version is insufficient|driver on your system is too old|InsufficientDriver"),
                 doc="RuntimeError: The NVIDIA driver on your system is too old (found version 11040).",
                 explain=("The NVIDIA driver is older than the CUDA this PyTorch was built for, so CUDA cannot start at all.",
                          "Upgrade the driver (`nvidia-smi` shows its CUDA version), or install the torch/SGLang build for "
                          "the driver's CUDA (a cu121/cu124 wheel or image instead of cu128).")),
    FailureClass(Cause.GPU_UNAVAILABLE, "ptx_toolchain",
                 said=_said(r"PTX was compiled with an unsupported toolchain|UnsupportedPtxVersion"),
                 doc="RuntimeError: CUDA error: the provided PTX was compiled with an unsupported toolchain.",
                 explain=("CUDA started, but a kernel shipped as PTX was compiled by a newer CUDA toolkit than this NVIDIA "
                          "driver can JIT: the driver is older than the CUDA the kernels (sgl_kernel, flashinfer, triton) "
                          "were built with.",
                          "Upgrade the driver to one whose CUDA version (`nvidia-smi`, top right) is at least the wheels' (a "
                          "cu128 build needs a 570+ driver), or install the SGLang/torch build for the driver's CUDA.")),
    FailureClass(Cause.GPU_UNAVAILABLE, "driver_mismatch",
                 said=_said(r"Error 80[34]: |display driver / cuda driver combination|forward compatibility was attempted"
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
    FailureClass(Cause.GPU_UNAVAILABLE, "fabric_manager", said=_said(r"Error 802: |system not yet initialized"),
                 doc="RuntimeError: Unexpected error from cudaGetDeviceCount(). Error 802: system not yet initialized",
                 explain=("CUDA says the system is not yet initialized (Error 802): on an NVSwitch host (HGX/DGX A100, "
                          "H100, H200) the GPUs cannot be used until nvidia-fabricmanager has set up the fabric.",
                          "`systemctl status nvidia-fabricmanager`: start and enable it; its version must equal the "
                          "driver's exactly (`nvidia-smi` vs `nv-fabricmanager --version`), an upgraded driver needs the "
                          "matching fabric manager and a reboot.")),
    FailureClass(Cause.GPU_UNAVAILABLE, "npu_device", said=_said(r"c10_npu::SetDevice|Failed to start the device"),
                 doc="RuntimeError: c10_npu::SetDevice: error code is 507033",
                 explain=("The Ascend NPU would not open: {short}",
                          "`npu-smi info` on the host says whether the NPU and its driver are healthy; the driver/firmware "
                          "and the CANN toolkit must be versions that go together. In a container the NPU comes only with "
                          "its devices (/dev/davinci*, /dev/davinci_manager, /dev/devmm_svm, /dev/hisi_hdc) and the "
                          "driver folder (/usr/local/Ascend/driver) mounted; ASCEND_RT_VISIBLE_DEVICES picks among them.")),
    FailureClass(Cause.GPU_UNAVAILABLE, "gpu_lost", said=_said(r"CUDA unknown error|NVML: Unknown Error"),
                 doc="RuntimeError: CUDA unknown error - this may be due to an incorrectly set up environment",
                 explain=("The process lost (or never got) its GPUs: {message}",
                          "In a container this is most often the host's `systemctl daemon-reload` (or a runtime update) "
                          "revoking the container's device access under a cgroup driver: restart the container. On a "
                          "host, after suspend/resume or without the nvidia_uvm module (`lsmod | grep nvidia_uvm`, "
                          "`nvidia-modprobe -u`); a reboot settles it.")),
    FailureClass(Cause.GPU_UNAVAILABLE, "no_driver",
                 said=_said(r"couldn't communicate with the NVIDIA driver"),
                 doc="NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. Make sure that the "
                     "latest NVIDIA driver is installed and running.",
                 explain=("No NVIDIA driver answers on this host (or in this container): {message}",
                          "On a host: the kernel module is not loaded (`lsmod | grep nvidia`; after a kernel upgrade it "
                          "must be rebuilt for the new kernel: DKMS, or reinstall the driver) or Secure Boot refused it "
                          "(`dmesg | grep -i nvidia`). In a container: it was started without the NVIDIA runtime "
                          "(`docker run --gpus all`, the NVIDIA container toolkit; on Kubernetes a `nvidia.com/gpu` "
                          "limit).")),
    FailureClass(Cause.GPU_UNAVAILABLE, "container_runtime", said=_said(r"nvidia-container-cli: "),
                 doc="nvidia-container-cli: initialization error: load library failed: libnvidia-ml.so.1: cannot open "
                     "shared object file: no such file or directory: unknown",
                 explain=("The container runtime could not give the container its GPUs: {message}",
                          "The NVIDIA container toolkit's hook found no driver on the host (`nvidia-smi` there), or the "
                          "toolkit is not configured for this runtime (`nvidia-ctk runtime configure --runtime=docker`, "
                          "then restart docker); `nvidia-container-cli info` on the host says what it sees.")),
    FailureClass(Cause.GPU_UNAVAILABLE, "no_libcuda", said=_said(r"libcuda\.so|nvidia-smi not found"),
                 doc="AssertionError: libcuda.so cannot found!",
                 explain=("The NVIDIA driver's user-space files (libcuda, nvidia-smi) are not where this process looks: "
                          "{message}",
                          "In a container the driver's libraries come from the host only through the NVIDIA container "
                          "runtime (`docker run --gpus all`, nvidia-container-toolkit; on Kubernetes a `nvidia.com/gpu` "
                          "limit). On a host with libcuda.so.1 but no libcuda.so (Triton needs the latter), `ldconfig` or "
                          "the driver's -dev package adds it; TRITON_LIBCUDA_PATH names its folder.")),
)


def _warn(pattern: str) -> re.Pattern[str]:
    """NCCL's own WARN line, which the grammar keeps as the nccl_error's first evidence line (`NCCL WARN …`)."""
    return _said(r"^NCCL WARN (?P<warn>.*?(?:" + pattern + r").*)$")


_NCCL_SAY = "NCCL failed in phase {phase}: "
_NCCL_OWN = "NCCL's own words: {warn}"
_NCCL_IFACE = (({"env.NCCL_SOCKET_IFNAME": "IFACE"}, "the interface (or GID) that reaches the other nodes: set it"),)

#: nccl_error: NCCL's WARN line says what failed where its error code says "unhandled system error"
_NCCL = (
    FailureClass(Cause.NCCL_ERROR, "no_route",
                 said=_warn(r"socketPollConnect: Connect to (?P<addr>[\d.]+)\S* returned 113|No route to host"),
                 doc="NCCL WARN socketPollConnect: Connect to 10.0.0.12<41035> returned 113(No route to host)",
                 explain=(_NCCL_SAY + "this node has no route to the other node's address {addr}: NCCL chose an "
                          "interface that does not reach it, or a firewall drops its ports.", _NCCL_OWN),
                 fixes=_NCCL_IFACE),
    FailureClass(Cause.NCCL_ERROR, "connection_broken",
                 said=_warn(r"socketStartConnect: Connect to (?P<addr>[\d.]+)\S* failed|Connection (?:reset|abort|refused)"
                            r"|Software caused connection abort"),
                 doc="NCCL WARN socketStartConnect: Connect to 10.0.0.12<5000> failed : Software caused connection abort",
                 explain=(_NCCL_SAY + "the connection to {addr} broke: the other node's process most often died first "
                          "(read that node's log for its own error), or the link between the nodes dropped.", _NCCL_OWN)),
    FailureClass(Cause.NCCL_ERROR, "gid_index", said=_warn(r"ibv_modify_qp failed|local GID"),
                 doc="NCCL WARN NET/IB : mlx5_0:1 ibv_modify_qp failed with 110 Connection timed out",
                 explain=(_NCCL_SAY + "the RDMA queue pair would not connect: on RoCE the GID index NCCL picked is not "
                          "the one the fabric routes (most often 3 for RoCE v2).", _NCCL_OWN),
                 fixes=(({"env.NCCL_IB_GID_INDEX": "3"}, "the interface (or GID) that reaches the other nodes: set it"),)),
    FailureClass(Cause.NCCL_ERROR, "ib_completion",
                 said=_warn(r"NET/IB : Got completion from peer (?P<addr>[\d.]+)\S* with status=\d+"),
                 doc="NCCL WARN NET/IB : Got completion from peer 10.0.0.12<52144> with status=12 opcode=0 len=0",
                 explain=(_NCCL_SAY + "an RDMA transfer to {addr} failed on the fabric (a link, a switch, a NIC's "
                          "firmware): `ibstat`, `ibv_devinfo` and the NICs' error counters on both nodes.", _NCCL_OWN)),
    FailureClass(Cause.NCCL_ERROR, "no_interface", said=_warn(r"no socket interface found|Bootstrap : no socket interface"),
                 doc="NCCL WARN Bootstrap : no socket interface found",
                 explain=(_NCCL_SAY + "NCCL found no network interface to use: NCCL_SOCKET_IFNAME names one this host "
                          "does not have (`ip -br link`).", _NCCL_OWN),
                 fixes=_NCCL_IFACE),
    FailureClass(Cause.NCCL_ERROR, "shm", said=_said(r"shared memory segment|/dev/shm"),
                 doc="NCCL error: unhandled system error, Error while creating shared memory segment /dev/shm/nccl-x",
                 explain=("NCCL could not create its shared-memory segments in /dev/shm: {message}",
                          "In a container /dev/shm is 64 MB unless raised (`docker run --shm-size 16g` or `--ipc=host`); "
                          "on a host, `df -h /dev/shm`. NCCL_SHM_DISABLE=1 works around it at some speed."),
                 fixes=(({"env.NCCL_SHM_DISABLE": "1"}, "NCCL then uses sockets/P2P instead of /dev/shm"),)),
)


def _cache_dir(w: Mapping[str, str]) -> tuple[str, ...]:
    """A kernel or model cache filled its disk: the variable that moves that cache."""
    env = next(e for word, e in (("flashinfer", "FLASHINFER_WORKSPACE_BASE"), ("triton", "TRITON_CACHE_DIR"),
                                 ("deep_gemm", "DG_JIT_CACHE_DIR"), ("torchinductor", "TORCHINDUCTOR_CACHE_DIR"),
                                 ("torch_extensions", "TORCH_EXTENSIONS_DIR"), ("huggingface", "HF_HOME"))
               if word in w["path"])
    return (f"The disk under {w['path']!r} filled up in phase {w['phase']}: {w['message']}",
            f"`df -h {w['path'].rsplit('/', 1)[0]}`; free space there, or move that cache to a larger disk with {env} in "
            "[env] (a container's root filesystem is often a small overlay: mount a volume there).")


def _ascend(w: Mapping[str, str]) -> tuple[str, ...]:
    chip = f" (this one is {w['soc']})" if w["soc"] else ""
    return (f"The Ascend CANN toolkit or its operator kernels were made for another NPU than this one{chip}: {w['short']}",
            "SGLang's Ascend images are per chip (`…-910b` for Atlas A2 / 910B, `…-a3` for A3 / 910C): use the one for "
            "this NPU (`npu-smi info` names it), or install the CANN toolkit and kernels package for its SoC and source "
            "its set_env.sh in the unit's environment.")


_UNSUPPORTED_HARDWARE = (
    FailureClass(Cause.UNSUPPORTED_HARDWARE, "ascend_soc",
                 said=_said(r"SocVersion = (?P<soc>\w+)|does not has any binary|Parse dynamic kernel config fail"),
                 doc="EH9999: Inner Error! init runtime platform info failed, SocVersion = Ascend910B3", explain=_ascend),
    FailureClass(Cause.UNSUPPORTED_HARDWARE, "no_kernel_image", said=_said(r"invalid device function|InvalidDeviceFunction"),
                 doc="RuntimeError: HIP error: invalid device function",
                 explain=("A kernel has no build for this GPU's architecture: {message}",
                          "The installed wheels (or docker image) were compiled for other GPUs: a ROCm image built for "
                          "gfx942 (MI300) run on gfx908 (MI100), or CUDA kernels without this sm_. Use the image or wheels "
                          "built for this GPU (`rocminfo | grep gfx`, `nvidia-smi --query-gpu=compute_cap --format=csv`), "
                          "or rebuild the kernels for it (PYTORCH_ROCM_ARCH / TORCH_CUDA_ARCH_LIST).")),
    FailureClass(Cause.UNSUPPORTED_HARDWARE, "triton_fp8", said=_said(r"fp8e4nv not supported in this architecture"),
                 doc='ValueError("type fp8e4nv not supported in this architecture. The supported fp8 dtypes are …")',
                 explain=("A Triton kernel was asked for fp8 e4m3 (fp8e4nv), which GPUs before sm89 (Ada, Hopper) do not "
                          "have: most often kv_cache_dtype fp8_e4m3 (or an fp8 checkpoint) with the triton attention "
                          "backend on an A100 or older.",
                          "Use kv_cache_dtype auto (or fp8_e5m2, which Triton has there), another attention backend, or a "
                          "sm89+ GPU.")),
    FailureClass(Cause.UNSUPPORTED_HARDWARE, "platform",
                 said=_said(r"\A.*(?:(?:not supported|unsupported) on (?:NPU|XPU|CPU|HIP)\b|requires a CUDA"
                            r"|only supported on the (?:CUDA|AMD)|requires CUDA, got|only supports CUDA and CPU"
                            r"|Intel AMX)"),
                 doc="ValueError: FP4 is not supported on NPU yet.",
                 explain=("This SGLang release does not support that on this platform (the device the server runs on): "
                          "{message}",
                          "Leave out the option it names here, or run it on the hardware the message says it needs.")),
    FailureClass(Cause.UNSUPPORTED_HARDWARE, "rocm", said=_said(r"\A.*not supported (?:in|on) ROCm"),
                 doc="ValueError: gptq_marlin quantization is currently not supported in ROCm.",
                 explain=("This SGLang release builds that for NVIDIA GPUs only, and this is a ROCm (AMD) one: {message}",
                          "Choose a quantization, load format or option its ROCm build has (the message lists them when "
                          "it can; a checkpoint quantized another way), or run on an NVIDIA GPU.")),
)

_UNSUPPORTED_MODEL = (
    FailureClass(Cause.UNSUPPORTED_MODEL, "feature",
                 said=_said(r"\A.*(?:\b[Mm]odel '?\S+?'? does not support |is not compatible with (?:this model|MTP))"),
                 doc="ValueError: Model Qwen3ForCausalLM does not support BitsAndBytes quantization yet.",
                 explain=("This SGLang release serves the model, but not with what the flags ask of it: {message}",
                          "Serve it without that feature (the flag or quantization named), or with a release that "
                          "supports it for this model.")),
    FailureClass(Cause.UNSUPPORTED_MODEL, "tokenizer_too_old",
                 said=_said(r"untagged enum|Tokenizer class \w+ does not exist"),
                 doc="Exception: data did not match any variant of untagged enum ModelWrapper at line 1 column 1",
                 explain=("The installed tokenizers/transformers cannot read this model's tokenizer files: they were "
                          "written by a newer release.",
                          "Upgrade them in the unit's interpreter (`pip install -U tokenizers transformers`), within what "
                          "the SGLang release pins.")),
    FailureClass(Cause.UNSUPPORTED_MODEL, "speculative_target",
                 said=_said(r"object has no attribute '(?P<hook>capture_aux_hidden_states|set_eagle3_layers_to_capture"
                            r"|get_embed_and_head)'"),
                 doc="AttributeError: 'Gemma3ForCausalLM' object has no attribute 'set_eagle3_layers_to_capture'",
                 explain=("This SGLang release's {model_type} cannot be the target of this speculative algorithm: it "
                          "lacks {hook}, which the draft needs from its target.",
                          "Upgrade SGLang to a release whose model class supports it (EAGLE3 needs the target to capture "
                          "auxiliary hidden states), or serve without speculative decoding / with another algorithm.")),
    FailureClass(Cause.UNSUPPORTED_MODEL, "gguf_architecture",
                 said=_said(r"GGUF model with architecture (?P<arch>\w+) is not supported"),
                 doc="ValueError: GGUF model with architecture qwen3moe is not supported yet.",
                 explain=("The installed transformers cannot read a GGUF file of architecture '{arch}': its GGUF reader "
                          "(which SGLang uses for the config and tokenizer) is older than the model.",
                          "Upgrade transformers and gguf in the unit's interpreter, within what the SGLang release pins; or "
                          "serve the model's safetensors release (with a --quantization of its own) instead of the .gguf.")),
    FailureClass(Cause.UNSUPPORTED_MODEL, "quantization_method",
                 said=_said(r"Unknown quantization method: (?P<method>[\w-]+)"),
                 doc="ValueError: Unknown quantization method: mxfp4. Must be one of ['fp8', 'awq']",
                 explain=("The checkpoint's quantization method '{method}' (quantization_config in config.json) is not "
                          "one this SGLang release implements.",
                          "Upgrade SGLang to a release that lists it, or serve a checkpoint quantized with a method this "
                          "one lists (the error names them).")),
    FailureClass(Cause.UNSUPPORTED_MODEL, "transformers_too_old",
                 said=_said(r"Transformers does not recognize|Unrecognized|model type|\AKeyError"),
                 doc="ValueError: The checkpoint you are trying to load has model type `qwen3_next` but Transformers "
                     "does not recognize this architecture.",
                 explain=("The installed transformers does not know this model's `model_type`: the model is newer than "
                          "the library.",
                          "Upgrade transformers in the unit's interpreter (`pip install -U transformers`), or the SGLang "
                          "release that ships the newer one.")),
)

_HUB_UNREACHABLE = (
    FailureClass(Cause.HUB_UNREACHABLE, "rate_limited", said=_said(r"429|Too Many Requests"),
                 doc="huggingface_hub.errors.HfHubHTTPError: 429 Client Error: Too Many Requests for url: …",
                 explain=("The Hugging Face hub refused to serve {model} for now: HTTP 429, too many requests. Anonymous "
                          "requests share a small per-IP quota (every rank and every restart asks again).",
                          "Give the unit a token (`[secrets] HF_TOKEN`: a logged-in quota is larger), or download the "
                          "model once (`huggingface-cli download`) and start with HF_HUB_OFFLINE=1, which asks the hub "
                          "nothing."),
                 fixes=(({"env.HF_HUB_OFFLINE": "1"}, "once the model is in the unit's HF cache: ask the hub nothing"),)),
)

#: a frame of SGLang's custom all-reduce (its IPC buffers refused while capturing, `invalid argument`): cuda_error
#: whatever the words, and its sub-case
CUSTOM_ALL_REDUCE_FRAME_RE = _said(r"^File .*/custom_all_reduce")

_CUDA_ERROR = (
    FailureClass(Cause.CUDA_ERROR, "custom_all_reduce", said=CUSTOM_ALL_REDUCE_FRAME_RE,
                 doc='File "/sgl-workspace/sglang/python/sglang/srt/distributed/device_communicators/custom_all_reduce.py"',
                 explain=("SGLang's custom all-reduce failed in phase {phase}, registering its IPC buffers between the "
                          "GPUs (`invalid argument`): {message}",
                          "Its memory-size advice does not apply. This is the GPUs' peer-to-peer IPC (a virtualised or "
                          "partitioned host, MIG, --enable-memory-saver, a driver without P2P between these GPUs): start "
                          "with --disable-custom-all-reduce (extra_args; NCCL then does the all-reduce), and check "
                          "`nvidia-smi topo -m` for P2P between the ranks.")),
    FailureClass(Cause.CUDA_ERROR, "custom_all_reduce_kernel", said=_said(r"custom_all_reduce\.cuh:\d+"),
                 doc="Failed: Cuda error /sgl-kernel/csrc/allreduce/custom_all_reduce.cuh:384 'an illegal memory access "
                     "was encountered'",
                 explain=("SGLang's custom all-reduce kernel (sgl-kernel) faulted in phase {phase}: {message}",
                          "It checks its own CUDA calls and exits at once, so this is the cause, not the launcher's "
                          "EOFError after it. It is most often GPUs without full peer-to-peer between them (PCIe, a "
                          "virtualised or partitioned host, MIG) or a kernel bug for this GPU: start with "
                          "--disable-custom-all-reduce (extra_args; NCCL then does the all-reduce), and check "
                          "`nvidia-smi topo -m` for P2P between the ranks.")),
)

_DISK_FULL = (
    FailureClass(Cause.DISK_FULL, "dev_shm", said=_said(r"/dev/shm|</torch_|shared memory\(shm\)"),
                 doc="RuntimeError: unable to allocate shared memory(shm) for file </torch_1234_567_0>",
                 explain=("/dev/shm filled up in phase {phase}: {message}",
                          "torch passes tensors between SGLang's processes through /dev/shm (and NCCL its buffers); a "
                          "container's is 64 MB unless raised: `docker run --shm-size 16g` or `--ipc=host` (compose "
                          "`shm_size:`, Kubernetes an `emptyDir: {{medium: Memory}}` at /dev/shm). On a host, `df -h "
                          "/dev/shm` and what else fills it.")),
    FailureClass(Cause.DISK_FULL, "cache_dir",
                 said=_said(r"No space left on device: '(?P<path>[^']*"
                            r"(?:flashinfer|triton|deep_gemm|torchinductor|torch_extensions|huggingface)[^']*)'"),
                 doc="OSError: [Errno 28] No space left on device: '/root/.cache/flashinfer/90/cached_ops/x.so'",
                 explain=_cache_dir),
)

_WATCHDOG = (
    FailureClass(Cause.WATCHDOG_TIMEOUT, "timeout_said", said=_said(r"watchdog_timeout=(?P<secs>\d+(?:\.\d+)?)"),
                 doc="Scheduler watchdog timeout (self.watchdog_timeout=300, self.soft=False)", explain=_watchdog),
)

_ROUTER = (
    FailureClass(Cause.ROUTER_FAILED, "worker_timeout", said=_said(r"Timeout (?P<secs>\d+)s waiting for workers"),
                 doc="Failed to start router: Timeout 300s waiting for workers ['http://127.0.0.1:31000'] to become healthy",
                 explain=("sglang_router waited {secs} s for its workers' /health and gave up, killing them all; the "
                          "workers had not failed, they were still starting (phase {phase}).",
                          "Raise --router-worker-startup-timeout-secs above the workers' start-up time (torch.compile, a "
                          "first kernel JIT and a large checkpoint take minutes), or start them faster. If the workers did "
                          "print ready, the router could not reach them: an http_proxy in its environment without no_proxy "
                          "for their addresses.")),
)


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

_WARMUP = (
    FailureClass(Cause.WARMUP_FAILED, "pd_warmup", alone=lazy_re.compile(r"Prefill disaggregation mode warm Up Failed"),
                 said=_said(r"disaggregation mode warm Up Failed(?:.*?status code: (?P<status>\d+))?"),
                 doc="Prefill disaggregation mode warm Up Failed, status code: 400"),
    FailureClass(Cause.WARMUP_FAILED, "proxy", said=_said(r"Response \[(?P<status>502|503|403|407)\]"),
                 doc="AssertionError: res=<Response [502]>, res.text=''",
                 explain=("The server loaded and listened, then its own warmup request to itself failed, and SGLang shut "
                          "down (`Initialization failed. warmup error`).",
                          "It got HTTP {status} from 127.0.0.1: that is a proxy answering, not SGLang. The unit's "
                          "environment sets http_proxy/https_proxy without no_proxy for the local address."),
                 fixes=(({"env.no_proxy": "127.0.0.1,localhost", "env.NO_PROXY": "127.0.0.1,localhost"},
                         "the warmup then reaches the server directly"),)),
)

_TRANSPORTS = (
    FailureClass(Cause.KV_TRANSFER_FAILED, "nixl", said=_said(r"NIXL_ERR_BACKEND|nixlBackendError"),
                 doc="RuntimeError: NIXL_ERR_BACKEND"),
    FailureClass(Cause.KV_TRANSFER_FAILED, "ascend", said=_said(r"Ascend Transfer Engine initialization failed"),
                 doc="RuntimeError: Ascend Transfer Engine initialization failed.",
                 explain=("The PD server's Ascend transfer engine (MemFabric) could not start: {message}",
                          "Its own lines above say why (`hybm core init failed`, `Failed to init smem_trans`, an "
                          "undefined symbol in libra.so): most often the CANN toolkit and the NPU driver do not match, "
                          "or the device memory it maps is taken; a container needs the NPU devices and --privileged or "
                          "the davinci devices, and ASCEND_MF_STORE_URL the prefill's store.")),
    FailureClass(Cause.KV_TRANSFER_FAILED, "nixl_plugin",
                 said=_said(r"NIXL backend '(?P<backend>[\w-]+)' not found\. Available: (?P<available>\[.*?\])"),
                 doc="ValueError: NIXL backend 'UCX' not found. Available: ['GDS']. Please install the required NIXL "
                     "plugin or choose from: ['GDS']",
                 explain=("The PD server's NIXL transfer engine has no {backend} backend: this NIXL install's plugins "
                          "are {available}: {message}",
                          "Install NIXL with its {backend} plugin into the unit's interpreter (the image's NIXL build), or "
                          "name one it has in SGLANG_DISAGGREGATION_NIXL_BACKEND (env), or run with "
                          "--disaggregation-transfer-backend mooncake.")),
    FailureClass(Cause.KV_TRANSFER_FAILED, "init_timeout",
                 said=_said(r"(?P<engine>Mooncake TransferEngine\.initialize|NIXL create_backend|Mori IOEngine)\(.*\) "
                            r"did not return within (?P<secs>[\d.]+)s"),
                 doc="RuntimeError: NIXL create_backend('UCX', {'num_threads': '8'}) did not return within 120s on node-3",
                 explain=("The PD server's KV transfer engine ({engine}) did not finish its set-up within {secs} s, and "
                          "SGLang gave up on it: {message}",
                          "The set-up hangs on the RDMA NIC or the network to the other side: the NIC it picked (UCX_NET_DEVICES, "
                          "--disaggregation-ib-device), a firewall, or the sandbox hiding /dev/infiniband; "
                          "SGLANG_DISAGGREGATION_ENGINE_INIT_TIMEOUT only waits longer.")),
    FailureClass(Cause.NVSHMEM_FAILED, "ib_connect", said=_said(r"ibv_modify_qp|ep_connect"),
                 doc="/sgl-workspace/nvshmem/src/modules/transport/ibrc/ibrc.cpp:420: non-zero status: 22 "
                     "ibv_modify_qp failed"),
    FailureClass(Cause.RENDEZVOUS_FAILED, "gloo_interface", said=_said(r"Unable to find address for: (?P<iface>\S+)"),
                 doc="RuntimeError: [enforce fail at ../third_party/gloo/gloo/transport/tcp/device.cc:83] ifa != "
                     "nullptr. Unable to find address for: ens5",
                 explain=("gloo (torch's CPU collectives) found no interface named {iface} on this host, so it contacted "
                          "nobody: GLOO_SOCKET_IFNAME (or NCCL_SOCKET_IFNAME, which SGLang copies) names an interface this "
                          "node does not have (`ip -br link`).",
                          "Set GLOO_SOCKET_IFNAME (and NCCL_SOCKET_IFNAME) per node to the interface that reaches the "
                          "others; nodes often name it differently."),
                 fixes=(({"env.GLOO_SOCKET_IFNAME": "IFACE"}, "an interface this node has"),)),
    FailureClass(Cause.RENDEZVOUS_FAILED, "clients_missing", said=_said(r"(?P<joined>\d+)/(?P<total>\d+) clients joined"),
                 doc="torch.distributed.DistStoreError: Timed out after 181 seconds waiting for clients. 8/16 clients "
                     "joined."),
)

_BAD_CHECKPOINT = (
    FailureClass(Cause.BAD_CHECKPOINT, "presharded_checksum", said=_said(r"\A.*checksum mismatch for presharded"),
                 doc="RuntimeError: Rank-3 checksum mismatch for presharded checkpoint at /ckpt/rank3: expected ab12, "
                     "got cd34.",
                 explain=("A rank's presharded checkpoint files are not what was dumped: {message}",
                          "The files are corrupted or from another dump: copy them again or re-dump the presharded "
                          "checkpoint; skipping the check (as the message says) loads them as they are.")),
    FailureClass(Cause.BAD_CHECKPOINT, "shape_mismatch", said=_said(r"\A.*Attempted to load weight"),
                 doc="AssertionError: Attempted to load weight (torch.Size([4096])) into parameter (torch.Size([5120]))"),
    FailureClass(Cause.BAD_CHECKPOINT, "unknown_tensor", said=_said(r"\AKeyError"),
                 doc="KeyError: 'model.layers.0.mlp.experts.w2_weight'",
                 explain=("The checkpoint has a tensor the model class does not know: {message}",
                          "The weights do not match the architecture SGLang builds from config.json: a quantized or "
                          "merged checkpoint with another layout, a config.json from a different model, or a checkpoint "
                          "newer than this SGLang release. Check `architectures` and `quantization_config` in "
                          "config.json.")),
)


def _hicache(w: Mapping[str, str]) -> tuple[str, ...]:
    asked = f" ({w['asked']} GB asked, {w['free']} GB free)" if w["asked"] else ""
    return ("The hierarchical cache's host pool (--enable-hierarchical-cache) is larger than the RAM this rank may take"
            f"{asked}: SGLang sizes it as --hicache-ratio × the GPU's KV pool (default 2), or --hicache-size GB, for "
            "every rank on the host, and keeps some RAM back for everything else.",
            "Set --hicache-size to what the host (or the container's memory limit) holds divided by the ranks on it, or "
            "lower --hicache-ratio (it must stay above 1); a smaller KV pool (mem_fraction_static) shrinks the host pool "
            "with it.")


_HOST_OOM = (
    FailureClass(Cause.HOST_OOM, "hicache_host_pool",
                 said=_said(r"\A.*(?:Requesting (?P<asked>[\d.]+) GB but only have (?P<free>[\d.]+) GB free"
                            r"|HiCache host memory)"),
                 doc="ValueError: Not enough host memory available. Requesting 69.63 GB but only have 41.87 GB free.",
                 explain=_hicache),
)

_PORT_IN_USE = (
    FailureClass(Cause.PORT_IN_USE, "pd_bootstrap", said=_said(r"\A.*PD bootstrap server"),
                 # the bootstrap server's thread, its address and port: the grammar words the message above
                 alone=lazy_re.compile(r"Server error: \[Errno 98\] error while attempting to bind on address \('([^']*)', (\d+)\)"),
                 doc="the PD bootstrap server could not bind 0.0.0.0:8998 (--disaggregation-bootstrap-port): address "
                     "already in use",
                 explain=_pd_bootstrap_port),
    FailureClass(Cause.PORT_IN_USE, "rendezvous_store", said=_said(r"server socket has failed|EADDRINUSE|TCPStore"
                                                                    r"|DistNetworkError"),
                 read=(_said(r"port: (?P<port>\d+)|:(?P<errno_port>\d+) \(errno: 98"),),
                 doc="torch.distributed.DistNetworkError: The server socket has failed to listen on any local network "
                     "address. port: 29500, useIpv6: false, code: -98, name: EADDRINUSE"),
    FailureClass(Cause.PORT_IN_USE, "internal_port",
                 said=_said(r"(?P<what>\w+) at (?P<port>\d+) is not available in (?P<secs>\d+) seconds"),
                 read=(_said(r"process\.cmdline\(\)=\[(?P<argv>[^\]]*)\].*?pid=(?P<pid>\d+)"),),
                 doc="ValueError: dist_init_port at 5000 is not available in 30 seconds.", explain=_internal_port),
    FailureClass(Cause.PORT_IN_USE, "zmq", said=_said(r"ZMQError"), read=(_said(r"addr='(?P<addr>[^']+)'"),),
                 doc="zmq.error.ZMQError: Address already in use (addr='tcp://10.0.0.1:5002')",
                 explain=_zmq),
)

_ACCESS_DENIED = (
    FailureClass(Cause.ACCESS_DENIED, "bind_port", said=_said(r"\A.*bind on address \('[^']*', (?P<port>\d+)\)"),
                 doc="ERROR:    [Errno 13] error while attempting to bind on address ('0.0.0.0', 80): permission denied"),
    FailureClass(Cause.ACCESS_DENIED, "path", said=_said(r"\A.*\[Errno (?:13|30)\][^'\n]*'(?P<path>/[^']+)'"),
                 doc="OSError: [Errno 30] Read-only file system: '/data/hf/.locks'"),
)

#: the frame of SGLang's own check of its flags: server_args.py (and its --config file reader), or (0.5.2x) a
#: resolution hook at any depth of arg_groups/ (model_overrides/*.py, fields/__init__.py), or the launchers
#: themselves: the `sglang` command's entry point (0.5.1x+: sglang/cli/, e.g. `Error: --model-path is required`,
#: serve_backends.py) and launch_server.py
FLAG_CHECK_FRAME_RE = lazy_re.compile(r'/sglang/srt/(?:server_args(?:_config_parser)?|arg_groups(?:/\w+)+'
                                 r'|layers/attention/attention_registry)\.py"'
                                 r'|/server_args\.py"|/sglang/cli/\w+\.py"|/sglang/launch_server\.py"')

#: a flag or an SGLANG_* variable named in a raise's message: SGLang's checks of a combination it refuses, outside
#: the flag-check frames (the memory pools, the model runner, a model's overrides); read when no cause's words are
#: in the exception, as the frame rule is
_FLAG, _VARIABLE = r"(?<![\w-])--[a-z][a-z0-9]*(?:-[a-z0-9]+)*\b", r"\bSGLANG_[A-Z0-9_]{3,}"
FLAG_NAMED_RE = lazy_re.compile(f"{_FLAG}|{_VARIABLE}")

_BAD_ARGUMENTS = (
    FailureClass(Cause.BAD_ARGUMENTS, "bind_address",
                 said=_said(r"\A.*attempting to bind on address \('(?P<host>[^']*)', (?P<port>\d+)"),
                 doc="ERROR:    [Errno 99] error while attempting to bind on address ('10.0.0.12', 30000): cannot "
                     "assign requested address"),
    FailureClass(Cause.BAD_ARGUMENTS, "quantization_blocks",
                 said=_said(r"weight quantization block_[nk]|aligned with the quantized weight shape|min_thread_[nk]"),
                 doc="ValueError: The output_size of gate's and up's weight = 192 is not divisible by weight "
                     "quantization block_n = 128."),
    FailureClass(Cause.BAD_ARGUMENTS, "unrecognized", said=_said(r"\A.*unrecognized arguments: (?P<args>.+)"),
                 doc="launch_server.py: error: unrecognized arguments: --enable-magic"),
    FailureClass(Cause.BAD_ARGUMENTS, "ambiguous",
                 said=_said(r"\A.*ambiguous option: (?P<flag>--[\w-]+)(?:=\S*)? could match (?P<matches>.+?)\s*$"),
                 doc="sglang serve: error: ambiguous option: --cuda-graph-max-bs could match --cuda-graph-max-bs-decode, "
                     "--cuda-graph-max-bs-prefill",
                 explain=("This SGLang has no {flag} any more: argparse reads it as an abbreviation of {matches}, and "
                          "refuses it (exit 2).", "`svcdiag check {name}` renders the flag this release knows.")),
    FailureClass(Cause.BAD_ARGUMENTS, "bad_value",
                 said=_said(r"\A.*argument (?P<flag>--[\w-]+)(?:/--[\w-]+)*: (?P<why>.+?)\s*$"),
                 doc="sglang serve: error: argument --tp-size: invalid int value: 'auto'",
                 explain=("SGLang refused the value of {flag}: {why}.",
                          "`svcdiag render {name}` shows the ExecStart line as systemd runs it.")),
    FailureClass(Cause.BAD_ARGUMENTS, "context_length",
                 said=_said(r"\A.*context_length \((?P<asked>\d+)\) is greater than the derived context_length "
                            r"\((?P<derived>\d+)\)"),
                 doc="ValueError: User-specified context_length (131072) is greater than the derived context_length "
                     "(32768)."),
    FailureClass(Cause.BAD_ARGUMENTS, "trust_remote_code", said=_said(r"trust_remote_code|custom code which must be executed"),
                 doc="ValueError: The repository for X contains custom code which must be executed to correctly load "
                     "the model.",
                 explain=("The model ships its own Python code (config or modelling files in the repo), and transformers "
                          "runs it only when told to trust it.",
                          "Read that code in the repo first; then set trust_remote_code (`--trust-remote-code`)."),
                 fixes=(({"trust_remote_code": True}, "lets transformers run the model repo's own code"),)),
    FailureClass(Cause.BAD_ARGUMENTS, "quantization_mismatch",
                 said=_said(r"model config \((?P<ckpt>[\w-]+)\) does not match the quantization method specified in the "
                            r"`quantization` argument \((?P<asked>[\w-]+)\)"),
                 doc="ValueError: Quantization method specified in the model config (fp8) does not match the "
                     "quantization method specified in the `quantization` argument (awq).",
                 explain=("The checkpoint is quantized with {ckpt} (its config.json's quantization_config), but the "
                          "command line asks for {asked}.",
                          "Leave quantization unset: SGLang reads the method from the checkpoint.")),
    FailureClass(Cause.BAD_ARGUMENTS, "chat_template",
                 said=_said(r"Chat template (?P<template>\S+) is not a built-in template name"),
                 doc="RuntimeError: Chat template chatml-x is not a built-in template name or a valid chat template "
                     "file path.",
                 explain=("--chat-template {template} names neither a template built into this release nor a file the "
                          "server can read.",
                          "Leave chat_template unset to use the model's own (tokenizer_config.json), or give the path of "
                          "a .jinja file inside the unit's readable paths.")),
    FailureClass(Cause.BAD_ARGUMENTS, "hicache_ratio", said=_said(r"host memory should be larger than the device memory"),
                 doc="AssertionError: The host memory should be larger than the device memory with the current "
                     "protocol",
                 explain=("The hierarchical cache's host pool must be larger than the GPU's KV pool, and the flags make "
                          "it smaller: --hicache-ratio at or below 1, or a --hicache-size under the KV pool's size.",
                          "Use --hicache-ratio above 1 (the default is 2), or a --hicache-size (GB) larger than the KV "
                          "pool the log's `KV Cache is allocated` line shows.")),
    FailureClass(Cause.BAD_ARGUMENTS, "lora_adapters", said=_said(r"max_lora_dim|self\.scaling|--max-lora-rank"
                                                                   r"|--lora-target-modules"),
                 releases="<= 0.4.3 (the same rank and scaling asserted)",
                 doc='assert all(x.hf_config["r"] == self.max_lora_dim for x in self.configs.values())',
                 explain=("The LoRA adapters in lora_paths cannot be served together by this release: their ranks (r) "
                          "or alphas differ (SGLang ≤ 0.4.3 takes one rank and scaling for all), or one exceeds "
                          "--max-lora-rank or adapts modules outside --lora-target-modules.",
                          "Read each adapter's adapter_config.json (r, lora_alpha, target_modules); serve adapters that "
                          "agree, or raise --max-lora-rank / list the modules (a newer SGLang pads smaller ranks).")),
    FailureClass(Cause.BAD_ARGUMENTS, "not_an_eagle_draft",
                 said=_said(r"object has no attribute '(?:set_embed|set_embed_and_head|hot_token_id)'"),
                 doc="AttributeError: 'Qwen2ForCausalLM' object has no attribute 'set_embed'"),
    FailureClass(Cause.BAD_ARGUMENTS, "flag_check", said=lazy_re.compile(FLAG_CHECK_FRAME_RE.pattern, re.M),
                 doc='File "/usr/lib/python3/site-packages/sglang/srt/server_args.py", line 812, in __post_init__',
                 explain=("SGLang's own check of its flags refused this combination: {message}",
                          "Change the flags it names; `svcdiag render {name}` shows the ExecStart line as systemd runs "
                          "it.")),
    FailureClass(Cause.BAD_ARGUMENTS, "tp_split", said=_said(r"heads % tp_size|divisible"),
                 doc="AssertionError: assert self.total_num_heads % tp_size == 0"),
    FailureClass(Cause.BAD_ARGUMENTS, "names_a_flag", said=_said(rf"\A.*{_FLAG}"),
                 doc="ValueError: --enable-dp-attention requires --moe-a2a-backend deepep for this model.",
                 explain=("SGLang refused this combination of flags: {message}",
                          "Change the flags named in it; `svcdiag render {name}` shows the ExecStart line as systemd runs "
                          "it.")),
    FailureClass(Cause.BAD_ARGUMENTS, "names_a_variable", said=_said(rf"\A.*{_VARIABLE}"),
                 doc="ValueError: SGLANG_OPT_USE_ONLINE_COMPRESS does not support speculative decode (MTP) yet",
                 explain=("SGLang refused an SGLANG_* environment variable's setting, or its pairing with the flags: "
                          "{message}",
                          "Change or unset the variable named in it ([env] in the unit's config, or what the server "
                          "inherits), or the flags it names; `svcdiag render {name}` shows what the unit sets.")),
)


_MODEL_NOT_FOUND = (
    FailureClass(Cause.MODEL_NOT_FOUND, "no_weights",
                 said=_said(r"\A.*(?:Cannot find any model weights with|No model weights found in"
                            r"|Could not find checkpoint files)"),
                 doc="RuntimeError: Cannot find any model weights with `/models/Qwen3-8B`",
                 explain=("SGLang found {what} but no weights in it that it can load: {message}",
                          "The folder has no *.safetensors (or the *.bin / *.pt files --load-format asks for): a copy "
                          "that left them out, a path one level off, or a repo snapshot with the config only. `ls {path}`;"
                          " download the weights again (`huggingface-cli download`), or give the --load-format they are "
                          "in.")),
    FailureClass(Cause.MODEL_NOT_FOUND, "missing_shards", said=_said(r"\A.*shard file\(s\) missing from"),
                 doc="ValueError: model.safetensors.index.json references 2 shard file(s) missing from /models/x "
                     "(incomplete download?): ['model-00003-of-00004.safetensors', …]",
                 explain=("The checkpoint's index names weight shards its folder does not have: {message}",
                          "A download or copy that stopped part way: download the model again (`huggingface-cli "
                          "download` fetches only what is missing) or copy the shards it names.")),
    FailureClass(Cause.MODEL_NOT_FOUND, "no_quant_config", said=_said(r"\A.*Cannot find the config file for (?P<quant>\S+)"),
                 doc="ValueError: Cannot find the config file for awq",
                 explain=("The checkpoint is read as {quant}-quantized, but {what} has no quantization config file for "
                          "it (quant_config.json, or quantization_config in config.json): {message}",
                          "Copy the quantization config from the quantized model's repo next to the weights, or leave "
                          "quantization unset if the checkpoint is not {quant}.")),
    FailureClass(Cause.MODEL_NOT_FOUND, "repo_not_found", said=_said(r"RepositoryNotFoundError|Repository Not Found"),
                 doc="huggingface_hub.errors.RepositoryNotFoundError: 401 Client Error. Repository Not Found for url",
                 explain=("The model hub has no repo {what} (or hides it: a private repo answers the same, HTTP 401).",
                          "Check the spelling against the hub page, or download it and point model_path at the "
                          "folder.")),
    FailureClass(Cause.MODEL_NOT_FOUND, "offline_not_cached",
                 said=_said(r"LocalEntryNotFoundError|in the cached files|outgoing traffic has been disabled"
                            r"|OfflineModeIsEnabled"),
                 doc="huggingface_hub.errors.LocalEntryNotFoundError: Cannot find an appropriate cached snapshot",
                 explain=("SGLang looked for {what} in the Hugging Face cache only (HF_HUB_OFFLINE=1 or "
                          "TRANSFORMERS_OFFLINE=1, or no network) and it is not there.",
                          "Download it once where the hub is reachable (`huggingface-cli download`) into the HF_HOME the "
                          "unit uses, or point model_path at a local folder; a sandboxed unit sees only the cache its "
                          "paths allow.")),
    FailureClass(Cause.MODEL_NOT_FOUND, "no_processor",
                 said=_said(r"Can't load (?:image processor|processor|feature extractor)"),
                 doc="OSError: Can't load image processor for '/models/my-vlm'.",
                 explain=("SGLang found the model but not its multimodal processor for {what}: {message}",
                          "A fine-tuned VLM saved without preprocessor_config.json (and its chat_template/tokenizer "
                          "files) cannot take images: copy those files from the base model's repo next to the weights.")),
    FailureClass(Cause.MODEL_NOT_FOUND, "missing_file",
                 said=_said(r"(?P<folder>\S+) does not appear to have a file named (?P<missing>[^.\s]+(?:\.\w+)?)"),
                 doc="OSError: /models/Qwen3-8B does not appear to have a file named tokenizer_config.json.",
                 explain=("{folder} is there but has no {missing}: an incomplete copy or download of the model.",
                          "Compare the folder with the model's repo (`ls {folder}`) and copy the missing files next to "
                          "the weights, or download it again.")),
    FailureClass(Cause.MODEL_NOT_FOUND, "no_tokenizer", said=_said(r"Can't load tokenizer"),
                 doc="OSError: Can't load tokenizer for '/models/x'.",
                 explain=("SGLang found the model but no tokenizer files for {what}: {message}",
                          "Copy tokenizer.json/tokenizer_config.json next to the weights, or set tokenizer_path to where "
                          "they are.")),
    FailureClass(Cause.MODEL_NOT_FOUND, "gated", said=_said(r"gated repo|401 Client Error|authenticated|GatedRepoError"),
                 doc="OSError: You are trying to access a gated repo.",
                 explain=("The model hub refused {what}: it is a gated (or private) repo and this server has no token "
                          "that may read it (HTTP 401).",
                          "Accept the model's licence on its hub page with the account whose token the server uses, then "
                          "give the unit that token as a secret (`[secrets] HF_TOKEN`, docs/security.md), or download the "
                          "model and point model_path at the folder.")),
)

#: the compiled packages SGLang imports, named by the path of the .so that failed (the first of these the loader's
#: words name, else the first an importing frame's path does)
_KERNEL_PACKAGES = ("sgl_kernel", "flashinfer", "vllm", "deep_gemm", "flash_attn", "xformers", "torchvision", "torchaudio",
                    "triton", "xgrammar", "torch")
_PACKAGE = (*(_said(rf"\A.*\b(?P<pkg>{p})\b") for p in _KERNEL_PACKAGES),
            *(_said(rf"/(?P<pkg>{p})/") for p in _KERNEL_PACKAGES))
#: the OS package of a system library a wheel links (apt's name)
_APT = {"libnuma": "libnuma1", "libibverbs": "libibverbs1", "libgomp": "libgomp1", "libGL": "libgl1", "libgl": "libgl1",
        "libmlx5": "ibverbs-providers", "librdmacm": "librdmacm1"}


def _cxx_runtime(w: Mapping[str, str]) -> tuple[str, ...]:
    return (f"{w['by'] or 'A compiled module'} needs {w['symbol']}, and the C++ runtime this process loaded "
            f"({w['stdcpp'] or 'libstdc++.so.6'}) is older than the compiler it was built with.",
            "Most often a conda env's own old libstdc++ shadowing the system's: `conda install -c conda-forge "
            "'libstdcxx-ng>=13'` in that env (or put the system's first: LD_PRELOAD=/usr/lib/x86_64-linux-gnu/"
            "libstdc++.so.6 in [env]); on an old distribution (Ubuntu 20.04, RHEL 8), SGLang's docker image or a newer OS.")


def _cuda_library(w: Mapping[str, str]) -> tuple[str, ...]:
    return (f"{w['pkg'] or 'A compiled package'} was built for CUDA {w['major']} and this environment has no {w['lib']}: "
            "the installed torch (and its nvidia-* wheels) is built for another CUDA major than the kernels.",
            "Install the build of each for one CUDA (`python -c 'import torch; print(torch.version.cuda)'`; the SGLang "
            f"release pins torch and sgl-kernel for it), or `pip install nvidia-cuda-runtime-cu{w['major']}`; SGLang's "
            "docker image has them matched.")


def _system_library(w: Mapping[str, str]) -> tuple[str, ...]:
    apt = next((a for k, a in _APT.items() if w["lib"].startswith(k + ".")), None)
    dnf = f", `dnf install {'numactl-libs' if apt == 'libnuma1' else 'PACKAGE'}`" if apt else ""
    return (f"{w['pkg'] or 'A compiled package'} links {w['lib']}, a system library this host (or image) lacks: "
            "reinstalling the Python package does not help.",
            f"Install it with the OS's package manager (`apt install {apt or 'PACKAGE'}`{dnf}; `apt-file search "
            f"{w['lib']}` names it), in the image too if the server runs in a container.")


def _undefined_symbol(what: str) -> Callable[[Mapping[str, str]], tuple[str, ...]]:
    def explain(w: Mapping[str, str]) -> tuple[str, ...]:
        pkg = w["pkg"]
        return (f"{pkg or 'A compiled package'}'s binary was built against {what}: {w['short']}",
                f"Install the {pkg or 'package'} build made for this torch (`pip show torch {pkg or ''}`; each SGLang "
                "release pins torch, sgl-kernel and flashinfer together: `pip install \"sglang[all]==X\"` puts all back), "
                "or SGLang's docker image; upgrading torch alone (`pip install -U torch`) is the usual way to get here.")
    return explain


_BROKEN_INSTALL = (
    FailureClass(Cause.BROKEN_INSTALL, "no_ninja", said=_said(r"\A.*(?:'ninja'|Ninja is required)"),
                 doc="FileNotFoundError: [Errno 2] No such file or directory: 'ninja'",
                 explain=("A kernel is compiled at first use (FlashInfer, DeepGEMM, a torch extension) with ninja, and the "
                          "unit's PATH has no ninja: {message}",
                          "Install it into the unit's interpreter (`pip install ninja`: the build calls the `ninja` next to "
                          "that python only if its bin/ is on PATH), or put the venv's bin/ on PATH in [env]; prebuilt "
                          "kernels (`pip install flashinfer-jit-cache`, SGLang's docker image) need no build at all.")),
    FailureClass(Cause.BROKEN_INSTALL, "kernel_build", said=_said(r"\A.*(?:Ninja build failed|Error building extension)"),
                 doc="RuntimeError: Ninja build failed. Ninja output:",
                 explain=("A kernel compiled at first use (FlashInfer, DeepGEMM, a torch extension) failed to build: "
                          "{message}",
                          "The compiler's own line says why: most often a CUDA toolkit (nvcc) other than the one torch was "
                          "built for, missing CUDA headers, or a half-built cache. Point CUDA_HOME in [env] at the matching "
                          "toolkit, clear the cache it names (~/.cache/flashinfer, ~/.cache/torch_extensions), or install "
                          "the prebuilt kernels (`pip install flashinfer-jit-cache`) / use SGLang's docker image.")),
    FailureClass(Cause.BROKEN_INSTALL, "no_nvcc", said=_said(r"\A.*nvcc"),
                 doc="RuntimeError: Could not find nvcc and default cuda_home='/usr/local/cuda' doesn't exist",
                 explain=("A kernel is compiled at first use (FlashInfer, DeepGEMM JIT) and the CUDA toolkit is missing: "
                          "{message}",
                          "Install the CUDA toolkit the torch build matches and set CUDA_HOME in [env], or use SGLang's "
                          "docker image; a unit's PATH lacks /usr/local/cuda/bin unless [env] puts it there.")),
    FailureClass(Cause.BROKEN_INSTALL, "cpu_torch", said=_said(r"\A.*Torch not compiled with CUDA enabled"),
                 doc="AssertionError: Torch not compiled with CUDA enabled",
                 explain=("The torch in the unit's interpreter is a CPU-only build (pip's default on some platforms, or a "
                          "package that pulled `torch` in again without its CUDA index): it cannot use the GPU at all.",
                          "Install the CUDA build SGLang's release pins (`pip install torch==X --index-url "
                          "https://download.pytorch.org/whl/cu128`, or `pip install \"sglang[all]==X\"` into a fresh "
                          "venv); `python -c 'import torch; print(torch.version.cuda)'` prints None for a CPU build.")),
    FailureClass(Cause.BROKEN_INSTALL, "no_c_compiler", said=_said(r"C compiler|/usr/bin/(?:gcc|cc|g\+\+|c\+\+)'|Python\.h"),
                 doc="RuntimeError: Failed to find C compiler. Please specify via CC environment variable.",
                 explain=("Triton compiles a small C helper the first time a kernel runs, and could not: {message}",
                          "It needs a C compiler and the Python headers on the unit's PATH (`apt install gcc "
                          "python3-dev`, or CC= in [env]); a systemd unit's PATH is narrower than a login shell's.")),
    FailureClass(Cause.BROKEN_INSTALL, "cxx_runtime",
                 said=_said(r"\A.*(?P<symbol>(?:GLIBCXX|CXXABI)_[\d.]+)' not found(?: \(required by (?P<by>\S+?)\))?"),
                 read=(_said(r"\A.*?(?P<stdcpp>\S*libstdc\+\+\.so[.\d]*)"),),
                 doc="ImportError: /opt/conda/lib/libstdc++.so.6: version `GLIBCXX_3.4.32' not found",
                 explain=_cxx_runtime),
    FailureClass(Cause.BROKEN_INSTALL, "cuda_library",
                 said=_said(r"\A.*?(?P<lib>lib(?:cudart|cublas(?:Lt)?|cudnn|nvrtc|cusparse|cufft|curand|nccl|nvJitLink)"
                            r"\.so\.(?P<major>\d+))[^:\n]*: cannot open shared object file"),
                 read=_PACKAGE, doc="ImportError: libcudart.so.12: cannot open shared object file: No such file or directory",
                 explain=_cuda_library),
    FailureClass(Cause.BROKEN_INSTALL, "system_library",
                 said=_said(r"\A.*?(?P<lib>(?!libc10|libtorch|libcuda)lib[\w+-]+\.so[.\d]*): cannot open shared object file"),
                 read=_PACKAGE, doc="ImportError: libnuma.so.1: cannot open shared object file: No such file or directory",
                 explain=_system_library),
    FailureClass(Cause.BROKEN_INSTALL, "torch_abi", said=_said(r"\A.*undefined symbol: _ZNK?(?:3c10|2at|5torch)"),
                 read=_PACKAGE, doc="ImportError: /x/sgl_kernel/common_ops.abi3.so: undefined symbol: _ZN3c104cuda9SetDeviceEi",
                 explain=_undefined_symbol("another torch than the installed one (the symbol is torch's C++ API)")),
    FailureClass(Cause.BROKEN_INSTALL, "undefined_symbol", said=_said(r"\A.*undefined symbol: "),
                 read=_PACKAGE, doc="ImportError: /x/flashinfer/_kernels.so: undefined symbol: cudaGetDriverEntryPoint",
                 explain=_undefined_symbol("other versions of its dependencies than the installed ones")),
    FailureClass(Cause.BROKEN_INSTALL, "grammar_backend", said=_said(r"\A.*\b(?P<backend>xgrammar|outlines|llguidance)\b"),
                 doc="ImportError: cannot import name 'GrammarMatcher' from 'xgrammar'",
                 explain=("The grammar backend {backend} (structured output, --grammar-backend) is missing or not the "
                          "version this SGLang was written for: {message}",
                          "Install the {backend} version the SGLang release pins (`pip install \"sglang[all]==X\"`), or "
                          "start with another --grammar-backend (none, if no request asks for structured output).")),
    FailureClass(Cause.BROKEN_INSTALL, "optional_package",
                 said=_said(r"\A.*(?:pip install |requires the '[\w.-]+' package|library not found\. Please install)"),
                 doc="ImportError: ModelExpress support requires the 'modelexpress' package. Install it with: pip "
                     "install modelexpress",
                 explain=("The flags ask for a feature whose package the unit's Python environment lacks: {message}",
                          "Install it into the interpreter the unit runs, as the message says (`svcdiag render {name}` "
                          "shows which one), in the image too if the server runs in a container; or start without the "
                          "flag that needs it.")),
)

_MEMORY = (
    FailureClass(Cause.NOT_ENOUGH_MEMORY, "swa_pool",
                 said=_said(r"\A.*SWA pool \((?P<tokens>\d+) tokens\).*?sliding_window_size \((?P<window>\d+)\)"),
                 doc="ValueError: SWA pool (659 tokens) cannot hold even one request: needs sliding_window_size (1024) "
                     "+ page_size (1)."),
    FailureClass(Cause.CUDA_OOM, "npu", said=_said(r"NPU out of memory"),
                 doc="RuntimeError: NPU out of memory. Tried to allocate 2.00 GiB (NPU 2; 60.96 GiB total capacity)"),
    FailureClass(Cause.CUDA_OOM, "xpu", said=_said(r"XPU out of memory|UR_RESULT_ERROR_OUT_OF_DEVICE_MEMORY"),
                 doc="RuntimeError: UR error: UR_RESULT_ERROR_OUT_OF_DEVICE_MEMORY"),
    FailureClass(Cause.CUDA_OOM, "hip", said=_said(r"HIP out of memory|HIP error: out of memory|hipErrorOutOfMemory"),
                 doc="torch.OutOfMemoryError: HIP out of memory. Tried to allocate 1.00 GiB."),
)

# -- audit R11 (issue #28 §3, held-out public logs of 2026 releases: GB10/DGX Spark, hybrid Mamba, PD, Ascend):
# the classes these logs defeated, one row per (cause, sub-case); kept together so merges stay easy
_AUDIT_R11 = (
    # a hybrid Mamba model's state pool out of free slots (the ping-pong buffers of MambaRadixCache v2, or a
    # request's own state): SGLang asserts, the scheduler dies; it names a flag, but no flag was refused
    FailureClass(Cause.MAMBA_CACHE_TOO_SMALL, "slots_exhausted",
                 line=lazy_re.compile(r"Not enough space for mamba|Can not alloc mamba cache"),
                 said=_said(r"Not enough space for mamba|Can not alloc mamba cache"),
                 doc="AssertionError: Not enough space for mamba ping pong idx, try to increase "
                     "--mamba-full-memory-ratio.",
                 explain=("The Mamba state pool had no free slot for a request (its state, or the two ping-pong "
                          "buffers MambaRadixCache keeps per request), and the scheduler died on it: {message}",
                          "The pool was sized for fewer requests than were admitted (prefix-cache hits and "
                          "speculative decoding hold extra slots). Give Mamba states a larger share of the pool "
                          "(--mamba-full-memory-ratio, extra_args, as SGLang says), or a larger max_mamba_cache_size, "
                          "or admit fewer at once (max_running_requests).")),
    # gloo's TCP pair saw the other end close (`pair.cc:534] Connection closed by peer`) after the ranks had met:
    # a rank died (OOM, a crash), and this one's failure is the consequence; not a rendezvous that never happened
    FailureClass(Cause.RENDEZVOUS_FAILED, "peer_closed", said=_said(r"gloo/transport/tcp/pair\.cc:\d+\] Connection closed by peer"),
                 doc="Exception: Capture cuda graph failed: [../third_party/gloo/gloo/transport/tcp/pair.cc:534] "
                     "Connection closed by peer [10.0.0.2]:60086",
                 explain=("Another rank closed its gloo (torch's CPU collectives) connection to this one in phase "
                          "{phase}: that rank died, most often of its own error (an OOM, a crash) or was killed, and "
                          "this rank failed because of it: {short}",
                          "Look for the first error of the other ranks (the other node's log, or above in this one); "
                          "the ranks had met, so dist_init_addr and the network are not in question.")),
)

# -- audit R12 (issue #28 §3, held-out public logs: speculative, Blackwell/sm120, DeepEP/EP, Ray and collector
# prefixes, pastes that begin in service): the classes these logs defeated, one row per (cause, sub-case)
_AUDIT_R12 = (
    # a PD decode server that could not reach the prefill's bootstrap server when a request came (0.4.6-0.5.x:
    # `Error fetching prefill parallel info from bootstrap: …`), then its scheduler died on the request; the
    # bootstrap address is the request's (the router's), so port None is a request that named none
    FailureClass(Cause.PD_BOOTSTRAP_FAILED, "decode_fetch",
                 said=_said(r"Error fetching prefill parallel info from bootstrap: "),
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
    # torch's kernel-side assertion, printed by the GPU before the `device-side assert triggered` error (which a paste
    # may not reach): `…/TensorCompare.cu:112: _assert_async_cuda_kernel: block: [0,0,0], thread: [0,0,0] Assertion
    # `probability tensor contains either `inf`, `nan` or element < 0` failed.`; sampling's is NaN logits
    # SGLang registers its own config classes with transformers at import (`AutoImageProcessor.register(…)`); a
    # transformers that already ships one of them refuses: the installed transformers is newer than the release pins
    FailureClass(Cause.BROKEN_INSTALL, "transformers_version",
                 line=lazy_re.compile(r"is already used by a Transformers model"),
                 said=_said(r"'<class '(?P<config>[\w.]+)'>' is already used by a Transformers model"),
                 doc="ValueError: '<class 'sglang.srt.configs.qwen2_5_vl_config.Qwen2_5_VLConfig'>' is already used "
                     "by a Transformers model.",
                 explain=("SGLang could not register its own model config ({config}) with transformers: the installed "
                          "transformers already has one by that name, so it is newer than this SGLang release was "
                          "written for: {message}",
                          "Install the transformers version the SGLang release pins into the unit's interpreter "
                          "(`pip install \"sglang[all]==X\"` brings it), or upgrade SGLang to a release made for this "
                          "transformers.")),
    FailureClass(Cause.CUDA_ERROR, "nan_probabilities",
                 said=_said(r"probability tensor contains either .inf., .nan. or element < 0"),
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
                 line=lazy_re.compile(r"\.cu:\d+: (?:\S.*?: )?block: \[\d+,\d+,\d+\], thread: \[\d+,\d+,\d+\] Assertion "),
                 said=_said(r"\.cu:\d+: (?:\S.*?: )?block: \[\d+,\d+,\d+\], thread: \[\d+,\d+,\d+\] Assertion "
                            r"`(?P<assertion>.*)` failed"),
                 doc="/pytorch/aten/src/ATen/native/cuda/IndexKernel.cu:93: operator(): block: [0,0,0], thread: "
                     "[0,0,0] Assertion `-sizes[i] <= index && index < sizes[i] && \"index out of bounds\"` failed.",
                 explain=("A GPU kernel's own assertion failed in phase {phase} ({assertion}), and CUDA stops the "
                          "process on it (`device-side assert triggered`): {message}",
                          "An index out of bounds is most often a token id or an expert id past its table: a "
                          "tokenizer or chat template that does not match the model, or a kernel bug of one backend; "
                          "CUDA_LAUNCH_BLOCKING=1 names the kernel.")),
)

# -- audit R13 (issue #28 §3, held-out public logs: hangs and stalls, stops after ready, newer healthy shapes, cut
# scheduler tracebacks after a lone exception line, quantized MoE backends): the classes these logs defeated
_AUDIT_R13 = (
    # FlashInfer's TRT-LLM batched GEMM runner (the MoE runner backend flashinfer_trtllm, FP4/FP8 GEMMs) checks its
    # own launch and raises `Error in function 'run' at …/trtllm_batched_gemm_runner.cu:N: Error occurred when
    # running GEMM! (numBatches: …, GemmMNK: …, Kernel: …)`: a kernel that cannot run this shape on this GPU
    FailureClass(Cause.CUDA_ERROR, "flashinfer_gemm",
                 line=lazy_re.compile(r"Error occurred when running GEMM!"),
                 said=_said(r"Error occurred when running GEMM!(?:.*?Kernel:\s+(?P<kernel>\S+))?"),
                 doc="RuntimeError: Error in function 'run' at /workspace/csrc/trtllm_batched_gemm_runner.cu:258: Error "
                     "occurred when running GEMM! (numBatches:  256 , GemmMNK:  2   512   7168 , Kernel:  bmm_E2m1_…_sm100f )",
                 explain=("FlashInfer's TRT-LLM batched GEMM (the MoE runner or the FP4/FP8 GEMM backend) could not run "
                          "a kernel in phase {phase}, and the scheduler died on it: {message}",
                          "That is a kernel bug or a shape this FlashInfer build has no kernel for on this GPU (a batch "
                          "size reached under load, a speculative draft's), not memory: start with another MoE runner "
                          "(--moe-runner-backend triton or cutlass, extra_args) or --fp4-gemm-backend, or the FlashInfer "
                          "version the SGLang release pins; an empty FlashInfer cubin cache that could not be filled "
                          "(offline, a lock) is worth ruling out too.")),
    # a layer the checkpoint's quantization config gives no method (`get_quant_method` returned None: AWQ or GPTQ
    # of a MoE model's fused experts before moe_wna16, 0.4.0's FusedMoE), and SGLang's bare assertion on it
    FailureClass(Cause.UNSUPPORTED_MODEL, "quantized_layer",
                 line=lazy_re.compile(r"^assert self\.quant_method is not None"),
                 said=_said(r"assert self\.quant_method is not None"),
                 doc="AssertionError (at `assert self.quant_method is not None` in fused_moe_triton/layer.py's "
                     "FusedMoE.__init__)",
                 explain=("The checkpoint's quantization has no method for one of this model's layers in this SGLang "
                          "release (its quantization config gave the layer none, and SGLang asserts on it): {message}",
                          "Most often an AWQ or GPTQ checkpoint of a MoE model, whose fused experts the release cannot "
                          "run in that format: use a newer release whose quantization covers MoE layers (its "
                          "`--quantization moe_wna16` for AWQ/GPTQ MoE), or a checkpoint quantized in a format it runs for "
                          "MoE (fp8, or the unquantized model).")),
    # torch's c10d store client: connected to the rendezvous at dist_init_addr, then no answer for the store's
    # timeout (`[rank1]:[W623 15:37:01.82 socket.cpp:485] [c10d] waitForInput: socket SocketImpl(…) timed out after
    # 1800000ms`), printed by every rank just before its scheduler's exception
    FailureClass(Cause.RENDEZVOUS_FAILED, "store_wait",
                 line=lazy_re.compile(r"\[c10d\] waitForInput: socket .* timed out after \d+ms"),
                 said=_said(r"\[c10d\] waitForInput: socket .*?remote=(?P<store>\S+?)\) timed out after (?P<ms>\d+)ms"),
                 doc="[rank1]:[W623 15:37:01.824135523 socket.cpp:485] [c10d] waitForInput: socket SocketImpl(fd=100, "
                     "addr=[node-0]:43590, remote=[node-0]:20000) timed out after 1800000ms",
                 explain=("This rank reached the rendezvous store ({store}, dist_init_addr) but waited {ms} ms for an "
                          "answer that never came, and its scheduler died of it: {message}",
                          "The ranks never all met: another node not started or stuck before it joined (its own log "
                          "says why), a different --nnodes or dist_init_addr on some node, or a network that resolves "
                          "or routes the nodes' names differently (IPv6 names, a firewall between the nodes); "
                          "`getent hosts` of the store's name on every node should give one address.")),
)

FAILURES: tuple[FailureClass, ...] = (*_CAUSES, *_GPU_UNAVAILABLE, *_NCCL, *_UNSUPPORTED_HARDWARE, *_UNSUPPORTED_MODEL,
                                     *_HUB_UNREACHABLE, *_CUDA_ERROR, *_DISK_FULL, *_WATCHDOG, *_ROUTER, *_WARMUP,
                                     *_TRANSPORTS, *_BAD_CHECKPOINT, *_HOST_OOM, *_PORT_IN_USE, *_ACCESS_DENIED,
                                     *_BAD_ARGUMENTS, *_MODEL_NOT_FOUND, *_BROKEN_INSTALL, *_MEMORY, *_AUDIT_R11,
                                     *_AUDIT_R12, *_AUDIT_R13)

#: the causes a line names, in priority order
CLASSIFY: tuple[tuple[Cause, re.Pattern[str]], ...] = tuple((r.cause, r.line) for r in FAILURES if r.line is not None)
#: each cause's sub-cases, in the order they are tried
SUBCASES: dict[Cause, tuple[FailureClass, ...]] = {
    c: tuple(r for r in FAILURES if r.cause == c and r.detail) for c in Cause}
BY_KEY: dict[tuple[str, str], FailureClass] = {(r.cause, r.detail): r for r in FAILURES}


def classify(text: str) -> Cause | None:
    """The cause a final exception line or a fatal line names, or None."""
    for cause, pat in CLASSIFY:
        if pat.search(text):
            return cause
    return None


def refine(cause: str, said: str) -> tuple[str, dict[str, str]]:
    """The sub-case a failure's record (its message and evidence) is, and what its pattern captured."""
    for row in SUBCASES.get(cause, ()):  # type: ignore[call-overload]  # a str is its Cause's key
        if row.said is not None and (m := row.said.search(said)) is not None:
            captures = {k: v for k, v in m.groupdict().items() if v is not None}
            captures |= _read(row, said, captures)
            return row.detail, captures | _read(BY_KEY[(row.cause, "")], said, captures)
    own = BY_KEY.get((cause, ""))
    return "", _read(own, said, {}) if own is not None else {}


def _read(row: FailureClass, said: str, have: dict[str, str]) -> dict[str, str]:
    """What a row's read patterns capture (each pattern's first match), beyond what is already had."""
    out: dict[str, str] = {}
    for pat in row.read:
        if (r := pat.search(said)) is not None:
            out.update((k, v) for k, v in r.groupdict().items() if v is not None and k not in have and k not in out)
    return out


def own_line(cause: Cause, detail: str = "") -> re.Pattern[str]:
    """A row's `alone` pattern, for the grammar to match where such a line stands."""
    pattern = BY_KEY[(cause, detail)].alone
    if pattern is None:
        raise KeyError(f"the row {cause}/{detail} has no line of its own")
    return pattern


def row_said(cause: Cause, detail: str) -> re.Pattern[str]:
    """A sub-case's `said` pattern, for the grammar where the words that pick the sub-case also name the cause."""
    pattern = BY_KEY[(cause, detail)].said
    if pattern is None:
        raise KeyError(f"the row {cause}/{detail} has no words of its own")
    return pattern


def row(cause: str, detail: str = "") -> FailureClass | None:
    """The row of a cause's sub-case, or of the cause itself."""
    return BY_KEY.get((cause, detail)) or BY_KEY.get((cause, ""))


def cause_table() -> str:
    """docs/replay.md's table of causes, from the rows."""
    out = ["| cause | evidence line (example) |", "|---|---|"]
    out += [f"| `{r.cause}` | {r.doc} |" for r in FAILURES if not r.detail]
    return "\n".join(out) + "\n"
