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


ROWS: tuple[FailureClass, ...] = (
    FailureClass(Cause.BROKEN_INSTALL, priority=220, line=lazy_re.compile(
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
        raised=(Raised(FLAG_CHECK_FRAME_RE, raising=True), Raised(None, final=FLAG_NAMED_RE)),
        explain=("SGLang refused its arguments: {message}",)),
    FailureClass(Cause.BAD_ARGUMENTS, "bind_address", priority=920,
                 said=said(r"\A.*attempting to bind on address \('(?P<host>[^']*)', (?P<port>\d+)"),
                 doc="ERROR:    [Errno 99] error while attempting to bind on address ('10.0.0.12', 30000): cannot "
                     "assign requested address"),
    FailureClass(Cause.BAD_ARGUMENTS, "quantization_blocks", priority=930,
                 said=said(r"weight quantization block_[nk]|aligned with the quantized weight shape|min_thread_[nk]"),
                 doc="ValueError: The output_size of gate's and up's weight = 192 is not divisible by weight "
                     "quantization block_n = 128."),
    FailureClass(Cause.BAD_ARGUMENTS, "unrecognized", priority=940, said=said(r"\A.*unrecognized arguments: (?P<args>.+)"),
                 doc="launch_server.py: error: unrecognized arguments: --enable-magic"),
    FailureClass(Cause.BAD_ARGUMENTS, "ambiguous", priority=950,
                 said=said(r"\A.*ambiguous option: (?P<flag>--[\w-]+)(?:=\S*)? could match (?P<matches>.+?)\s*$"),
                 doc="sglang serve: error: ambiguous option: --cuda-graph-max-bs could match --cuda-graph-max-bs-decode, "
                     "--cuda-graph-max-bs-prefill",
                 explain=("This SGLang has no {flag} any more: argparse reads it as an abbreviation of {matches}, and "
                          "refuses it (exit 2).", "`svcdiag check {name}` renders the flag this release knows.")),
    FailureClass(Cause.BAD_ARGUMENTS, "bad_value", priority=960,
                 said=said(r"\A.*argument (?P<flag>--[\w-]+)(?:/--[\w-]+)*: (?P<why>.+?)\s*$"),
                 doc="sglang serve: error: argument --tp-size: invalid int value: 'auto'",
                 explain=("SGLang refused the value of {flag}: {why}.",
                          "`svcdiag render {name}` shows the ExecStart line as systemd runs it.")),
    FailureClass(Cause.BAD_ARGUMENTS, "context_length", priority=970,
                 said=said(r"\A.*context_length \((?P<asked>\d+)\) is greater than the derived context_length "
                            r"\((?P<derived>\d+)\)"),
                 doc="ValueError: User-specified context_length (131072) is greater than the derived context_length "
                     "(32768)."),
    FailureClass(Cause.BAD_ARGUMENTS, "trust_remote_code", priority=980,
                 said=said(r"trust_remote_code|custom code which must be executed"),
                 doc="ValueError: The repository for X contains custom code which must be executed to correctly load "
                     "the model.",
                 explain=("The model ships its own Python code (config or modelling files in the repo), and transformers "
                          "runs it only when told to trust it.",
                          "Read that code in the repo first; then set trust_remote_code (`--trust-remote-code`)."),
                 fixes=(({"trust_remote_code": True}, "lets transformers run the model repo's own code"),)),
    FailureClass(Cause.BAD_ARGUMENTS, "quantization_mismatch", priority=990,
                 said=said(r"model config \((?P<ckpt>[\w-]+)\) does not match the quantization method specified in the "
                            r"`quantization` argument \((?P<asked>[\w-]+)\)"),
                 doc="ValueError: Quantization method specified in the model config (fp8) does not match the "
                     "quantization method specified in the `quantization` argument (awq).",
                 explain=("The checkpoint is quantized with {ckpt} (its config.json's quantization_config), but the "
                          "command line asks for {asked}.",
                          "Leave quantization unset: SGLang reads the method from the checkpoint.")),
    FailureClass(Cause.BAD_ARGUMENTS, "chat_template", priority=1000,
                 said=said(r"Chat template (?P<template>\S+) is not a built-in template name"),
                 doc="RuntimeError: Chat template chatml-x is not a built-in template name or a valid chat template "
                     "file path.",
                 explain=("--chat-template {template} names neither a template built into this release nor a file the "
                          "server can read.",
                          "Leave chat_template unset to use the model's own (tokenizer_config.json), or give the path of "
                          "a .jinja file inside the unit's readable paths.")),
    FailureClass(Cause.BAD_ARGUMENTS, "hicache_ratio", priority=1010,
                 said=said(r"host memory should be larger than the device memory"),
                 doc="AssertionError: The host memory should be larger than the device memory with the current "
                     "protocol",
                 explain=("The hierarchical cache's host pool must be larger than the GPU's KV pool, and the flags make "
                          "it smaller: --hicache-ratio at or below 1, or a --hicache-size under the KV pool's size.",
                          "Use --hicache-ratio above 1 (the default is 2), or a --hicache-size (GB) larger than the KV "
                          "pool the log's `KV Cache is allocated` line shows.")),
    FailureClass(Cause.BAD_ARGUMENTS, "lora_adapters", priority=1020, said=said(r"max_lora_dim|self\.scaling|--max-lora-rank"
                                                                   r"|--lora-target-modules"),
                 releases="<= 0.4.3 (the same rank and scaling asserted)",
                 doc='assert all(x.hf_config["r"] == self.max_lora_dim for x in self.configs.values())',
                 explain=("The LoRA adapters in lora_paths cannot be served together by this release: their ranks (r) "
                          "or alphas differ (SGLang ≤ 0.4.3 takes one rank and scaling for all), or one exceeds "
                          "--max-lora-rank or adapts modules outside --lora-target-modules.",
                          "Read each adapter's adapter_config.json (r, lora_alpha, target_modules); serve adapters that "
                          "agree, or raise --max-lora-rank / list the modules (a newer SGLang pads smaller ranks).")),
    FailureClass(Cause.BAD_ARGUMENTS, "not_an_eagle_draft", priority=1030,
                 said=said(r"object has no attribute '(?:set_embed|set_embed_and_head|hot_token_id)'"),
                 doc="AttributeError: 'Qwen2ForCausalLM' object has no attribute 'set_embed'"),
    FailureClass(Cause.BAD_ARGUMENTS, "flag_check", priority=1040, said=lazy_re.compile(FLAG_CHECK_FRAME_RE.pattern, re.M),
                 doc='File "/usr/lib/python3/site-packages/sglang/srt/server_args.py", line 812, in __post_init__',
                 explain=("SGLang's own check of its flags refused this combination: {message}",
                          "Change the flags it names; `svcdiag render {name}` shows the ExecStart line as systemd runs "
                          "it.")),
    FailureClass(Cause.BAD_ARGUMENTS, "tp_split", priority=1050, said=said(r"heads % tp_size|divisible"),
                 doc="AssertionError: assert self.total_num_heads % tp_size == 0"),
    FailureClass(Cause.BAD_ARGUMENTS, "names_a_flag", priority=1060, said=said(rf"\A.*{_FLAG}"),
                 doc="ValueError: --enable-dp-attention requires --moe-a2a-backend deepep for this model.",
                 explain=("SGLang refused this combination of flags: {message}",
                          "Change the flags named in it; `svcdiag render {name}` shows the ExecStart line as systemd runs "
                          "it.")),
    FailureClass(Cause.BAD_ARGUMENTS, "names_a_variable", priority=1070, said=said(rf"\A.*{_VARIABLE}"),
                 doc="ValueError: SGLANG_OPT_USE_ONLINE_COMPRESS does not support speculative decode (MTP) yet",
                 explain=("SGLang refused an SGLANG_* environment variable's setting, or its pairing with the flags: "
                          "{message}",
                          "Change or unset the variable named in it ([env] in the unit's config, or what the server "
                          "inherits), or the flags it names; `svcdiag render {name}` shows what the unit sets.")),
    FailureClass(Cause.BROKEN_INSTALL, "no_ninja", priority=1170, said=said(r"\A.*(?:'ninja'|Ninja is required)"),
                 doc="FileNotFoundError: [Errno 2] No such file or directory: 'ninja'",
                 explain=("A kernel is compiled at first use (FlashInfer, DeepGEMM, a torch extension) with ninja, and the "
                          "unit's PATH has no ninja: {message}",
                          "Install it into the unit's interpreter (`pip install ninja`: the build calls the `ninja` next to "
                          "that python only if its bin/ is on PATH), or put the venv's bin/ on PATH in [env]; prebuilt "
                          "kernels (`pip install flashinfer-jit-cache`, SGLang's docker image) need no build at all.")),
    FailureClass(Cause.BROKEN_INSTALL, "kernel_build", priority=1180,
                 said=said(r"\A.*(?:Ninja build failed|Error building extension)"),
                 doc="RuntimeError: Ninja build failed. Ninja output:",
                 explain=("A kernel compiled at first use (FlashInfer, DeepGEMM, a torch extension) failed to build: "
                          "{message}",
                          "The compiler's own line says why: most often a CUDA toolkit (nvcc) other than the one torch was "
                          "built for, missing CUDA headers, or a half-built cache. Point CUDA_HOME in [env] at the matching "
                          "toolkit, clear the cache it names (~/.cache/flashinfer, ~/.cache/torch_extensions), or install "
                          "the prebuilt kernels (`pip install flashinfer-jit-cache`) / use SGLang's docker image.")),
    FailureClass(Cause.BROKEN_INSTALL, "no_nvcc", priority=1190, said=said(r"\A.*nvcc"),
                 doc="RuntimeError: Could not find nvcc and default cuda_home='/usr/local/cuda' doesn't exist",
                 explain=("A kernel is compiled at first use (FlashInfer, DeepGEMM JIT) and the CUDA toolkit is missing: "
                          "{message}",
                          "Install the CUDA toolkit the torch build matches and set CUDA_HOME in [env], or use SGLang's "
                          "docker image; a unit's PATH lacks /usr/local/cuda/bin unless [env] puts it there.")),
    FailureClass(Cause.BROKEN_INSTALL, "cpu_torch", priority=1200, said=said(r"\A.*Torch not compiled with CUDA enabled"),
                 doc="AssertionError: Torch not compiled with CUDA enabled",
                 explain=("The torch in the unit's interpreter is a CPU-only build (pip's default on some platforms, or a "
                          "package that pulled `torch` in again without its CUDA index): it cannot use the GPU at all.",
                          "Install the CUDA build SGLang's release pins (`pip install torch==X --index-url "
                          "https://download.pytorch.org/whl/cu128`, or `pip install \"sglang[all]==X\"` into a fresh "
                          "venv); `python -c 'import torch; print(torch.version.cuda)'` prints None for a CPU build.")),
    FailureClass(Cause.BROKEN_INSTALL, "no_c_compiler", priority=1210,
                 said=said(r"C compiler|/usr/bin/(?:gcc|cc|g\+\+|c\+\+)'|Python\.h"),
                 doc="RuntimeError: Failed to find C compiler. Please specify via CC environment variable.",
                 explain=("Triton compiles a small C helper the first time a kernel runs, and could not: {message}",
                          "It needs a C compiler and the Python headers on the unit's PATH (`apt install gcc "
                          "python3-dev`, or CC= in [env]); a systemd unit's PATH is narrower than a login shell's.")),
    FailureClass(Cause.BROKEN_INSTALL, "cxx_runtime", priority=1220,
                 said=said(r"\A.*(?P<symbol>(?:GLIBCXX|CXXABI)_[\d.]+)' not found(?: \(required by (?P<by>\S+?)\))?"),
                 read=(said(r"\A.*?(?P<stdcpp>\S*libstdc\+\+\.so[.\d]*)"),),
                 doc="ImportError: /opt/conda/lib/libstdc++.so.6: version `GLIBCXX_3.4.32' not found",
                 explain=_cxx_runtime),
    FailureClass(Cause.BROKEN_INSTALL, "cuda_library", priority=1230,
                 said=said(r"\A.*?(?P<lib>lib(?:cudart|cublas(?:Lt)?|cudnn|nvrtc|cusparse|cufft|curand|nccl|nvJitLink)"
                            r"\.so\.(?P<major>\d+))[^:\n]*: cannot open shared object file"),
                 read=_PACKAGE, doc="ImportError: libcudart.so.12: cannot open shared object file: No such file or directory",
                 explain=_cuda_library),
    FailureClass(Cause.BROKEN_INSTALL, "system_library",
                 priority=1240,
                 said=said(r"\A.*?(?P<lib>(?!libc10|libtorch|libcuda)lib[\w+-]+\.so[.\d]*): cannot open shared object file"),
                 read=_PACKAGE, doc="ImportError: libnuma.so.1: cannot open shared object file: No such file or directory",
                 explain=_system_library),
    FailureClass(Cause.BROKEN_INSTALL, "torch_abi", priority=1250, said=said(r"\A.*undefined symbol: _ZNK?(?:3c10|2at|5torch)"),
                 read=_PACKAGE, doc="ImportError: /x/sgl_kernel/common_ops.abi3.so: undefined symbol: _ZN3c104cuda9SetDeviceEi",
                 explain=_undefined_symbol("another torch than the installed one (the symbol is torch's C++ API)")),
    FailureClass(Cause.BROKEN_INSTALL, "undefined_symbol", priority=1260, said=said(r"\A.*undefined symbol: "),
                 read=_PACKAGE, doc="ImportError: /x/flashinfer/_kernels.so: undefined symbol: cudaGetDriverEntryPoint",
                 explain=_undefined_symbol("other versions of its dependencies than the installed ones")),
    FailureClass(Cause.BROKEN_INSTALL, "grammar_backend", priority=1270,
                 said=said(r"\A.*\b(?P<backend>xgrammar|outlines|llguidance)\b"),
                 doc="ImportError: cannot import name 'GrammarMatcher' from 'xgrammar'",
                 explain=("The grammar backend {backend} (structured output, --grammar-backend) is missing or not the "
                          "version this SGLang was written for: {message}",
                          "Install the {backend} version the SGLang release pins (`pip install \"sglang[all]==X\"`), or "
                          "start with another --grammar-backend (none, if no request asks for structured output).")),
    FailureClass(Cause.BROKEN_INSTALL, "optional_package", priority=1280,
                 said=said(r"\A.*(?:pip install |requires the '[\w.-]+' package|library not found\. Please install)"),
                 doc="ImportError: ModelExpress support requires the 'modelexpress' package. Install it with: pip "
                     "install modelexpress",
                 explain=("The flags ask for a feature whose package the unit's Python environment lacks: {message}",
                          "Install it into the interpreter the unit runs, as the message says (`svcdiag render {name}` "
                          "shows which one), in the image too if the server runs in a container; or start without the "
                          "flag that needs it.")),
    # torch's kernel-side assertion, printed by the GPU before the `device-side assert triggered` error (which a paste
    # may not reach): `…/TensorCompare.cu:112: _assert_async_cuda_kernel: block: [0,0,0], thread: [0,0,0] Assertion
    # `probability tensor contains either `inf`, `nan` or element < 0` failed.`; sampling's is NaN logits
    # SGLang registers its own config classes with transformers at import (`AutoImageProcessor.register(…)`); a
    # transformers that already ships one of them refuses: the installed transformers is newer than the release pins
    FailureClass(Cause.BROKEN_INSTALL, "transformers_version", priority=1360,
                 line=lazy_re.compile(r"is already used by a Transformers model"),
                 said=said(r"'<class '(?P<config>[\w.]+)'>' is already used by a Transformers model"),
                 doc="ValueError: '<class 'sglang.srt.configs.qwen2_5_vl_config.Qwen2_5_VLConfig'>' is already used "
                     "by a Transformers model.",
                 explain=("SGLang could not register its own model config ({config}) with transformers: the installed "
                          "transformers already has one by that name, so it is newer than this SGLang release was "
                          "written for: {message}",
                          "Install the transformers version the SGLang release pins into the unit's interpreter "
                          "(`pip install \"sglang[all]==X\"` brings it), or upgrade SGLang to a release made for this "
                          "transformers.")),
)
