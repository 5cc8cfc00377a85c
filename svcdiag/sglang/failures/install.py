"""The install and the arguments: a package, library or version that is wrong, a flag or variable SGLang refused."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping

from svcdiag.sglang import lazy_re
from svcdiag.sglang.failures._model import Cause, FailureClass, Family, Own, Place, Raised, said

#: the families whose rows this module files
FAMILIES = (Family.INSTALL,)


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


#: the compiled packages SGLang imports, named by the path of the .so that failed (the first of these the loader's
#: words name, else the first an importing frame's path does)
_KERNEL_PACKAGES = ("sgl_kernel", "flashinfer", "vllm", "deep_gemm", "flash_attn", "xformers", "torchvision", "torchaudio",
                    "triton", "xgrammar", "torch")


_PACKAGE = (*(said(rf"\A.*\b(?P<pkg>{p})\b") for p in _KERNEL_PACKAGES),
            *(said(rf"/(?P<pkg>{p})/") for p in _KERNEL_PACKAGES))


#: the OS package of a system library a wheel links (apt's name)
_APT = {"libnuma": "libnuma1", "libibverbs": "libibverbs1", "libgomp": "libgomp1", "libGL": "libgl1", "libgl": "libgl1",
        "libmlx5": "ibverbs-providers", "librdmacm": "librdmacm1"}


def _cxx_runtime(w: Mapping[str, str]) -> Mapping[str, str]:
    return {"by": w["by"] or "A compiled module", "stdcpp": w["stdcpp"] or "libstdc++.so.6"}


def _cuda_library(w: Mapping[str, str]) -> Mapping[str, str]:
    return {"pkg": w["pkg"] or "A compiled package"}


def _system_library(w: Mapping[str, str]) -> Mapping[str, str]:
    apt = next((a for k, a in _APT.items() if w["lib"].startswith(k + ".")), None)
    dnf = f", `dnf install {'numactl-libs' if apt == 'libnuma1' else 'PACKAGE'}`" if apt else ""
    return {"pkg": w["pkg"] or "A compiled package", "apt": apt or "PACKAGE", "dnf": dnf}


def _undefined_symbol(against: str) -> Callable[[Mapping[str, str]], Mapping[str, str]]:
    """broken_install's built_against sentences (install.toml), for a binary built against `against`."""
    def words(w: Mapping[str, str]) -> Mapping[str, str]:
        pkg = w["pkg"]
        return {"against": against, "binary": pkg or "A compiled package", "build": pkg or "package", "show": pkg or ""}
    return words


ROWS: tuple[FailureClass, ...] = (
    FailureClass(Cause.BROKEN_INSTALL, priority=220, line=lazy_re.compile(
        r"ModuleNotFoundError|No module named '|undefined symbol: |cannot open shared object file"
        r"|cannot import name '\w+' from|(?:GLIBC|GLIBCXX|CXXABI)_[\d.]+' not found|Python\.h: No such file"
        r"|module '[\w.]+' has no attribute|Torch not compiled with CUDA enabled"
        # the CPU backend's IPEX checks torch's version at import and exits: `ERROR! Intel® Extension for PyTorch*
        # needs to work with PyTorch 2.6.*, but PyTorch 2.7.0+cu126 is found.` (a CUDA torch on a CPU host)
        r"|Extension for PyTorch\* needs to work with PyTorch"
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
        doc="the interpreter cannot import or load what SGLang needs"),
    FailureClass(Cause.BAD_ARGUMENTS, priority=240, line=lazy_re.compile(
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
        doc="SGLang refused its flags, a combination of them, or a variable",
        # argparse's last word: `launch_server.py: error: …` (≤ 0.5.9) or `sglang serve: error: …` (0.5.10+)
        alone=(Own(Place.LONE, lazy_re.compile(
            r"^(?:[\w.-]+\.py|sglang(?: [\w-]+)?|launch_server|python3? -m [\w.]+): error: (.+)$"
            # `sglang serve` of a diffusion model (0.5.1x+) and other entry points: no program name
            r"|^error: ((?:unrecognized arguments|the following arguments are required|argument -"
            r"|ambiguous option|invalid choice|expected one argument).*)$")),
            # uvicorn's bind to an address not of this host (`[Errno 99] … cannot assign requested address`: --host),
            # or of a family it lacks (`[Errno 97]`: `::` with IPv6 off), the port's and the permission's rows before it
            Own(Place.UVICORN, lazy_re.compile(r".*error while attempting to bind"))),
        # SGLang's check of its flags refused them: raised in server_args.py (or from 0.5.2x in one of arg_groups/);
        # last, a message that names a --flag or an SGLANG_* variable is a check refusing them, whatever raised it
        raised=(Raised(FLAG_CHECK_FRAME_RE, raising=True), Raised(None, final=FLAG_NAMED_RE))),
    FailureClass(Cause.BAD_ARGUMENTS, "bind_address", priority=920,
                 said=said(r"\A.*attempting to bind on address \('(?P<host>[^']*)', (?P<port>\d+)"),
                 doc="ERROR:    [Errno 99] error while attempting to bind on address ('10.0.0.12', 30000): cannot assign …"),
    FailureClass(Cause.BAD_ARGUMENTS, "quantization_blocks", priority=930,
                 said=said(r"weight quantization block_[nk]|aligned with the quantized weight shape|min_thread_[nk]"),
                 doc="… The output_size of gate's and up's weight = 192 is not divisible by weight quantization block_n = 128."),
    FailureClass(Cause.BAD_ARGUMENTS, "unrecognized", priority=940, said=said(r"\A.*unrecognized arguments: (?P<args>.+)"),
                 doc="launch_server.py: error: unrecognized arguments: --enable-magic"),
    FailureClass(Cause.BAD_ARGUMENTS, "ambiguous", priority=950,
                 said=said(r"\A.*ambiguous option: (?P<flag>--[\w-]+)(?:=\S*)? could match (?P<matches>.+?)\s*$"),
                 doc="sglang serve: error: ambiguous option: --cuda-graph-max-bs could match --cuda-graph-max-bs-decode …"),
    FailureClass(Cause.BAD_ARGUMENTS, "bad_value", priority=960,
                 said=said(r"\A.*argument (?P<flag>--[\w-]+)(?:/--[\w-]+)*: (?P<why>.+?)\s*$"),
                 doc="sglang serve: error: argument --tp-size: invalid int value: 'auto'"),
    FailureClass(Cause.BAD_ARGUMENTS, "context_length", priority=970,
                 said=said(r"\A.*context_length \((?P<asked>\d+)\) is greater than the derived context_length "
                            r"\((?P<derived>\d+)\)"),
                 doc="ValueError: User-specified context_length (131072) is greater than the derived context_length (32768)."),
    FailureClass(Cause.BAD_ARGUMENTS, "trust_remote_code", priority=980,
                 said=said(r"trust_remote_code|custom code which must be executed"),
                 doc="ValueError: The repository for X contains custom code which must be executed to correctly load the model.",
                 fixes=(({"trust_remote_code": True}, "lets transformers run the model repo's own code"),)),
    FailureClass(Cause.BAD_ARGUMENTS, "quantization_mismatch", priority=990,
                 said=said(r"model config \((?P<ckpt>[\w-]+)\) does not match the quantization method specified in the "
                            r"`quantization` argument \((?P<asked>[\w-]+)\)"),
                 doc="… model config (fp8) does not match the quantization method specified in the `quantization` argument (awq)."),
    FailureClass(Cause.BAD_ARGUMENTS, "chat_template", priority=1000,
                 said=said(r"Chat template (?P<template>\S+) is not a built-in template name"),
                 doc="RuntimeError: Chat template chatml-x is not a built-in template name or a valid chat template file path."),
    FailureClass(Cause.BAD_ARGUMENTS, "hicache_ratio", priority=1010,
                 said=said(r"host memory should be larger than the device memory"),
                 doc="AssertionError: The host memory should be larger than the device memory with the current protocol"),
    FailureClass(Cause.BAD_ARGUMENTS, "lora_adapters", priority=1020, said=said(r"max_lora_dim|self\.scaling|--max-lora-rank"
                                                                   r"|--lora-target-modules"),
                 releases="<= 0.4.3 (the same rank and scaling asserted)",
                 doc='assert all(x.hf_config["r"] == self.max_lora_dim for x in self.configs.values())'),
    FailureClass(Cause.BAD_ARGUMENTS, "not_an_eagle_draft", priority=1030,
                 said=said(r"object has no attribute '(?:set_embed|set_embed_and_head|hot_token_id)'"),
                 doc="AttributeError: 'Qwen2ForCausalLM' object has no attribute 'set_embed'"),
    FailureClass(Cause.BAD_ARGUMENTS, "flag_check", priority=1040, said=lazy_re.compile(FLAG_CHECK_FRAME_RE.pattern, re.M),
                 doc='File "/usr/lib/python3/site-packages/sglang/srt/server_args.py", line 812, in __post_init__'),
    FailureClass(Cause.BAD_ARGUMENTS, "tp_split", priority=1050, said=said(r"heads % tp_size|divisible"),
                 doc="AssertionError: assert self.total_num_heads % tp_size == 0"),
    FailureClass(Cause.BAD_ARGUMENTS, "names_a_flag", priority=1060, said=said(rf"\A.*{_FLAG}"),
                 doc="ValueError: --enable-dp-attention requires --moe-a2a-backend deepep for this model."),
    FailureClass(Cause.BAD_ARGUMENTS, "names_a_variable", priority=1070, said=said(rf"\A.*{_VARIABLE}"),
                 doc="ValueError: SGLANG_OPT_USE_ONLINE_COMPRESS does not support speculative decode (MTP) yet"),
    FailureClass(Cause.BROKEN_INSTALL, "no_ninja", priority=1170, said=said(r"\A.*(?:'ninja'|Ninja is required)"),
                 doc="FileNotFoundError: [Errno 2] No such file or directory: 'ninja'"),
    # tvm-ffi's build of SGLang's own jit_kernel (0.5.x): `RuntimeError: ninja exited with status 1`, then `stdout:`
    # and the compiler's output, which says why (a host compiler too old for C++20: `fatal error: version: No such
    # file`): the final line names the row, which reads on for the compiler's words
    FailureClass(Cause.BROKEN_INSTALL, "kernel_build", priority=1180,
                 line=lazy_re.compile(r"ninja exited with status \d"), reads_on=True,
                 said=said(r"\A.*(?:Ninja build failed|Error building extension|ninja exited with status \d)"),
                 doc="RuntimeError: Ninja build failed. Ninja output:"),
    FailureClass(Cause.BROKEN_INSTALL, "no_nvcc", priority=1190, said=said(r"\A.*nvcc"),
                 doc="RuntimeError: Could not find nvcc and default cuda_home='/usr/local/cuda' doesn't exist"),
    FailureClass(Cause.BROKEN_INSTALL, "cpu_torch", priority=1200, said=said(r"\A.*Torch not compiled with CUDA enabled"),
                 doc="AssertionError: Torch not compiled with CUDA enabled"),
    FailureClass(Cause.BROKEN_INSTALL, "no_c_compiler", priority=1210,
                 said=said(r"C compiler|/usr/bin/(?:gcc|cc|g\+\+|c\+\+)'|Python\.h"),
                 doc="RuntimeError: Failed to find C compiler. Please specify via CC environment variable."),
    FailureClass(Cause.BROKEN_INSTALL, "cxx_runtime", priority=1220,
                 said=said(r"\A.*(?P<symbol>(?:GLIBCXX|CXXABI)_[\d.]+)' not found(?: \(required by (?P<by>\S+?)\))?"),
                 read=(said(r"\A.*?(?P<stdcpp>\S*libstdc\+\+\.so[.\d]*)"),),
                 doc="ImportError: /opt/conda/lib/libstdc++.so.6: version `GLIBCXX_3.4.32' not found",
                 words=_cxx_runtime),
    FailureClass(Cause.BROKEN_INSTALL, "cuda_library", priority=1230,
                 said=said(r"\A.*?(?P<lib>lib(?:cudart|cublas(?:Lt)?|cudnn|nvrtc|cusparse|cufft|curand|nccl|nvJitLink)"
                            r"\.so\.(?P<major>\d+))[^:\n]*: cannot open shared object file"),
                 read=_PACKAGE, doc="ImportError: libcudart.so.12: cannot open shared object file: No such file or directory",
                 words=_cuda_library),
    FailureClass(Cause.BROKEN_INSTALL, "system_library",
                 priority=1240,
                 said=said(r"\A.*?(?P<lib>(?!libc10|libtorch|libcuda)lib[\w+-]+\.so[.\d]*): cannot open shared object file"),
                 read=_PACKAGE, doc="ImportError: libnuma.so.1: cannot open shared object file: No such file or directory",
                 words=_system_library),
    FailureClass(Cause.BROKEN_INSTALL, "torch_abi", priority=1250, said=said(r"\A.*undefined symbol: _ZNK?(?:3c10|2at|5torch)"),
                 read=_PACKAGE, doc="ImportError: /x/sgl_kernel/common_ops.abi3.so: undefined symbol: _ZN3c104cuda9SetDeviceEi",
                 words=_undefined_symbol("another torch than the installed one (the symbol is torch's C++ API)")),
    FailureClass(Cause.BROKEN_INSTALL, "undefined_symbol", priority=1260, said=said(r"\A.*undefined symbol: "),
                 read=_PACKAGE, doc="ImportError: /x/flashinfer/_kernels.so: undefined symbol: cudaGetDriverEntryPoint",
                 words=_undefined_symbol("other versions of its dependencies than the installed ones")),
    FailureClass(Cause.BROKEN_INSTALL, "grammar_backend", priority=1270,
                 said=said(r"\A.*\b(?P<backend>xgrammar|outlines|llguidance)\b"),
                 doc="ImportError: cannot import name 'GrammarMatcher' from 'xgrammar'"),
    FailureClass(Cause.BROKEN_INSTALL, "optional_package", priority=1280,
                 said=said(r"\A.*(?:pip install |requires the '[\w.-]+' package|library not found\. Please install)"),
                 doc="ImportError: ModelExpress support requires the 'modelexpress' package. Install it with: pip install …"),
    # torch's kernel-side assertion, printed by the GPU before the `device-side assert triggered` error (which a paste
    # may not reach): `…/TensorCompare.cu:112: _assert_async_cuda_kernel: block: [0,0,0], thread: [0,0,0] Assertion
    # `probability tensor contains either `inf`, `nan` or element < 0` failed.`; sampling's is NaN logits
    # SGLang registers its own config classes with transformers at import (`AutoImageProcessor.register(…)`); a
    # transformers that already ships one of them refuses: the installed transformers is newer than the release pins
    FailureClass(Cause.BROKEN_INSTALL, "transformers_version", priority=1360,
                 line=lazy_re.compile(r"is already used by a Transformers model"),
                 said=said(r"'<class '(?P<config>[\w.]+)'>' is already used by a Transformers model"),
                 doc="… '<class 'sglang.srt.configs.qwen2_5_vl_config.Qwen2_5_VLConfig'>' is already used by a Transformers model."),
)
