"""Per release family: which of the wheel's functions the sizing oracle runs, in SGLang's order,
and the stub `self` / context each runs with (scripts/sglang-sizing-oracle's docstring lists them).
"""

from __future__ import annotations

import ast
import textwrap
import types
from pathlib import Path
from typing import Any

from sizing_oracle_loader import Loader
from sizing_oracle_stubs import (
    Bag,
    envs_from_wheel,
    PretrainedConfig,
    fake_msgspec,
    fake_numpy,
    fake_torch,
    fake_transformers,
)

GIB = 1 << 30
MLA_ARCHS = ("DeepseekV2ForCausalLM", "DeepseekV3ForCausalLM")


class LeftOut(Exception):
    """A case whose SGLang code the oracle does not run in full: no row (counted apart from failures)."""

    oracle_left_out = True


class Refusal(Exception):
    """SGLang's own code raised for this case: a result (a row with "error")."""

    oracle_refusal = True

    def __init__(self, msg: str, code: list[str]):
        super().__init__(msg)
        self.code = code


def stdlib_stubs() -> dict[str, Any]:
    s: dict[str, Any] = {"torch": fake_torch(), "numpy": fake_numpy(), "msgspec": fake_msgspec(),
                         "transformers": fake_transformers()}
    s["gc"] = types.SimpleNamespace(collect=lambda *a: 0)  # frees nothing the stubbed GPU reading sees
    for m in ("logging", "math", "dataclasses", "enum", "functools", "typing", "copy", "os", "abc", "re",
              "collections", "itertools", "warnings", "json", "contextlib", "threading", "inspect", "time"):
        s[m] = __import__(m)
    return s


def L_segment(loader: Loader, module: str, node: ast.AST) -> str:
    return loader._segment(module, node).strip()


def statements(loader: Loader, module: str, func: str, keep, cls: str | None = None) -> Any:
    """`func` of `module` (a method of `cls`) with only the statements that set
    max_running_requests for speculative decoding: those `keep(source)` accepts, the `if`s on
    `speculative_algorithm` that lead to them (pruned the same way), the assignments of
    `speculative_algorithm` (an alias resolved) and the `cfg = resolving_view(...)` line. SGLang's
    statements, as written, without the rest of a handler that reads the draft checkpoint."""
    node = loader.function_node(module, func, cls)

    def prune(stmts: list[ast.stmt]) -> list[ast.stmt]:
        out: list[ast.stmt] = []
        for st in stmts:
            text = L_segment(loader, module, st)
            if isinstance(st, ast.Assign) and ("resolving_view" in ast.unparse(st.value)
                                               or any("speculative_algorithm" in ast.unparse(t) for t in st.targets)):
                out.append(st)
            elif keep(text):
                out.append(st)
            elif isinstance(st, ast.If) and "speculative_algorithm" in ast.unparse(st.test):
                body, orelse = prune(st.body), prune(st.orelse)
                if body or orelse:
                    out.append(ast.If(test=st.test, body=body or [ast.Pass()], orelse=orelse))
        return out

    new = ast.FunctionDef(name=func, args=node.args, body=prune(node.body) or [ast.Pass()], decorator_list=[],
                          returns=None, type_params=[])
    ast.fix_missing_locations(new)
    ns = loader.namespace(module)
    exec(compile(ast.Module(body=[new], type_ignores=[]), f"<wheel {module}.{func} (statements)>", "exec"), ns)
    loader.used.append(f"{loader.path(module).relative_to(loader.root)}:{func} (its max_running_requests statements)")
    return ns[func]


# ------------------------------------------------------------------ 0.5.19+ (0.5.23's code)

def model_facts(c: dict[str, Any], cfg: dict[str, Any]) -> dict[str, Any]:
    """What SGLang's ModelConfig.__init__ derives from config.json, for the fields sizing reads."""
    text = cfg.get("text_config") or cfg
    heads = text["num_attention_heads"]
    head_dim = text.get("head_dim") or text["hidden_size"] // heads
    return {"head_dim": head_dim, "v_head_dim": text.get("v_head_dim", head_dim),
            "context_len": c.get("context_length") or text.get("max_position_embeddings") or 4096,
            "num_hidden_layers": text["num_hidden_layers"], "mla": cfg["architectures"][0] in MLA_ARCHS,
            "multimodal": "vision_config" in cfg}


class ServerArgsSelf(Bag):
    """Up to 0.5.18 the server-args handlers are ServerArgs methods: the case's bag as `self`,
    any method it calls loaded from the wheel's ServerArgs on first use."""

    def __getattr__(self, k: str) -> Any:
        d = object.__getattribute__(self, "_d")
        if k in d:
            return d[k]
        loader = d.get("_loader")
        if loader is not None and not k.startswith("__"):
            try:
                fn = loader.method("sglang.srt.server_args", "ServerArgs", k)
            except NameError:
                pass
            else:
                return fn(self) if getattr(fn, "_oracle_property", False) else fn.__get__(self)
        raise AttributeError(f"oracle: server_args.{k} not set by the case")


def drive_0523(root: Path, c: dict[str, Any], model_cfg: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    return drive_configurator(root, c, model_cfg, args_0523)


def drive_0520(root: Path, c: dict[str, Any], model_cfg: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    return drive_configurator(root, c, model_cfg, args_0520)


def drive_0518(root: Path, c: dict[str, Any], model_cfg: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    return drive_configurator(root, c, model_cfg, args_0518)


def args_0523(L: Loader, cfg: Bag, mc: Bag, c: dict[str, Any], code: list[str]) -> None:
    """0.5.19+: the resolution hooks, in pipeline order."""
    L.get("sglang.srt.arg_groups.parallel_hook", "handle_deprecated_dp_attention")(cfg)
    # pipeline.py runs handle_cuda_graph_config before the memory hook; its compatibility pass
    # turns the breakable prefill graph off (a VLM not on the allowlist...) before memory is
    # reserved for it. The parse step is not run: the case sets no graph flag (the default config)
    L.get("sglang.srt.arg_groups.cuda_graph_hook", "apply_cuda_graph_compatibility")(cfg)
    L.get("sglang.srt.arg_groups.memory_hook", "handle_gpu_memory_settings")(cfg)
    # handle_model_specific_adjustments (the override, then _mamba_radix_cache_resolution), handle_attention_backend_compatibility
    attention_backend(L, cfg, mc, c, code, mamba=(lambda: cfg.set(**L.get(
        "sglang.srt.arg_groups.overrides", "_mamba_radix_cache_resolution")(cfg))) if mc.is_hybrid else None)
    if cfg.attn_dp_size > 1:
        cfg.set(chunked_prefill_size=cfg.chunked_prefill_size // cfg.attn_dp_size)
        code.append("arg_groups/parallel_hook.py:handle_data_parallelism (chunked_prefill_size // attn_dp_size)")
    if c["spec"]:
        handler = {"EAGLE3": "_handle_eagle_family", "NEXTN": "_handle_eagle_family", "DFLASH": "_handle_dflash",
                   "NGRAM": "_handle_ngram"}[c["spec"]]
        statements(L, "sglang.srt.arg_groups.speculative_hook", handler,
                   lambda s: s.startswith("if cfg.max_running_requests is None"))(cfg)


def args_0520(L: Loader, cfg: Bag, mc: Bag, c: dict[str, Any], code: list[str]) -> None:
    """0.5.19-0.5.20: the resolution hooks (arg_groups/pipeline.py's order) before --attn-dp-size:
    dp-attention is --enable-dp-attention with dp_size, the graph reserve counts dp_size and
    handle_data_parallelism divides chunked prefill by dp_size."""
    L.get("sglang.srt.arg_groups.cuda_graph_hook", "apply_cuda_graph_compatibility")(cfg)
    memory = L.get("sglang.srt.arg_groups.memory_hook", "handle_gpu_memory_settings")
    # 0.5.19's pipeline passes the card's capacity (get_device_memory_capacity), 0.5.20 reads it inside
    takes_gpu_mem = "def handle_gpu_memory_settings(server_args: Any, gpu_mem)" in L.path(
        "sglang.srt.arg_groups.memory_hook").read_text()
    memory(cfg, c["gpu_capacity_mib"]) if takes_gpu_mem else memory(cfg)
    attention_backend(L, cfg, mc, c, code, mamba=(lambda: cfg.set(**L.get(
        "sglang.srt.arg_groups.overrides", "_mamba_radix_cache_resolution")(cfg))) if mc.is_hybrid else None)
    if cfg.enable_dp_attention:
        cfg.set(chunked_prefill_size=cfg.chunked_prefill_size // cfg.dp_size)
        code.append("arg_groups/parallel_hook.py:handle_data_parallelism (chunked_prefill_size // dp_size)")
    if c["spec"]:
        handler = {"EAGLE3": "_handle_eagle_family", "NEXTN": "_handle_eagle_family", "DFLASH": "_handle_dflash",
                   "NGRAM": "_handle_ngram"}[c["spec"]]
        statements(L, "sglang.srt.arg_groups.speculative_hook", handler,
                   lambda s: s.startswith("if cfg.max_running_requests is None"))(cfg)


def args_0518(L: Loader, cfg: Bag, mc: Bag, c: dict[str, Any], code: list[str]) -> None:
    """0.5.14-0.5.18: ServerArgs.__post_init__'s handlers, in its order. _handle_cuda_graph_config
    runs first, as in __post_init__: it turns the prefill graph off (MLA, DP attention, a VLM...)
    before _handle_gpu_memory_settings reserves memory for it."""
    cfg._handle_cuda_graph_config()
    cfg._handle_gpu_memory_settings(c["gpu_capacity_mib"])
    attention_backend(L, cfg, mc, c, code, mamba=(lambda: cfg._handle_mamba_radix_cache(
        model_arch=mc.hf_config.architectures[0])) if mc.is_hybrid else None)
    _dp_and_speculative_hook(L, cfg, c)


# ------------------------------------------------------------------ the attention backend on an SM100 card

#: the post-process passes of the attention-backend handler (0.5.15+ arg_groups/overrides.py) the oracle
#: applies where the handler runs them (run_post_process_pass): the default backend and the page-size snaps
ATTENTION_PASSES = frozenset({"_attention_backend_default", "_mla_backend_page_constraints", "_fa4_page_constraint",
                              "_intel_xpu_page_constraint"})


def sm_platform(sm: int) -> dict[str, bool]:
    """The platform probes of sglang/srt/utils (up to 0.5.18) for a card of compute capability `sm`
    (an integer, 90 for (9, 0)), with a CUDA of 12.8 or later: what the stubbed device answers."""
    return {"is_sm100_supported": 100 <= sm < 110, "is_sm90_supported": sm == 90,
            "is_hopper_with_cuda_12_3": sm == 90, "is_blackwell_supported": sm >= 100, "is_blackwell": sm >= 100,
            "is_sm120_supported": 120 <= sm < 130, "is_flashinfer_available": True, "cpu_has_amx_support": False,
            "xpu_has_xmx_support": False}


def answer(value: Any) -> Any:
    """A platform probe that answers `value` whatever it is asked."""
    return lambda *a, **k: value


def platform_bag(sm: int) -> dict[str, Any]:
    """0.5.19+ runtime_context.get_platform()'s answers for that card."""
    p = sm_platform(sm)
    return {"is_sm100": p["is_sm100_supported"], "is_sm90": p["is_sm90_supported"],
            "is_hopper_with_cuda_12_3": p["is_hopper_with_cuda_12_3"], "is_sm120": p["is_sm120_supported"],
            "is_blackwell": p["is_blackwell"], "is_hip": False, "is_xpu": False, "is_musa": False, "is_cuda": True,
            "is_npu": False, "is_cpu": False, "has_amx": False, "has_flashinfer": True}


def override_statements(L: Loader, module: str, func: str, cls: str | None = None, arch: str | None = None) -> Any:
    """A model's override (`func` of `module`, a method of `cls`; with `arch` the `model_arch in
    [arch]` branch of it) with only its statements that choose the attention backend or turn the
    hybrid sliding-window pool off, as written: SGLang's own choice, without the MoE-kernel and dtype
    statements around it that read the checkpoint and the driver."""
    node = L.function_node(module, func, cls)
    body = node.body
    lead: list[ast.stmt] = []
    if arch is not None:
        branch = next(n for n in ast.walk(node) if isinstance(n, ast.If) and isinstance(n.test, ast.Compare)
                      and f'"{arch}"' in ast.unparse(n.test).replace("'", '"') and "model_arch" in ast.unparse(n.test))
        body = branch.body
        # the method's own names the branch reads (hf_config = self.get_hf_config(), model_arch = ...)
        lead = [st for st in node.body if isinstance(st, (ast.Import, ast.ImportFrom)) or (
            isinstance(st, ast.Assign) and len(st.targets) == 1 and isinstance(st.targets[0], ast.Name)
            and st.targets[0].id in ("hf_config", "model_arch", "model_config"))]
    keep = ("attention_backend", "attn_backend", "supported_backends", "disable_hybrid_swa_memory", "resolving_view",
            "overrides: Dict", "overrides = {}", "return overrides", "model_arch = ")
    kept = lead + [st for st in body if isinstance(st, (ast.Import, ast.ImportFrom))
                   or any(k in L._segment(module, st) for k in keep)]
    if arch is None and not any(isinstance(st, ast.Return) for st in kept):
        kept += ast.parse("return overrides").body
    new = ast.FunctionDef(name=func, args=node.args, body=kept or [ast.Pass()], decorator_list=[], returns=None,
                          type_params=[])
    ast.fix_missing_locations(new)
    ns = L.namespace(module)
    exec(compile(ast.Module(body=[new], type_ignores=[]), f"<wheel {module}.{func} (attention statements)>", "exec"), ns)
    where = f"{cls}.{func}" if cls else func
    L.used.append(f"{L.path(module).relative_to(L.root)}:{where} (its {arch or 'model'} attention-backend statements)")
    fn = ns[func]
    fn._oracle_calls_mamba = any("_handle_mamba_radix_cache(" in L._segment(module, st) for st in kept)
    return fn


#: the model overrides that pick an attention backend on SM100, per architecture and layout:
#: (module, function, class, branch), the first the wheel has
MODEL_OVERRIDES = {
    "GptOssForCausalLM": (
        ("sglang.srt.arg_groups.model_overrides.gpt_oss", "_gpt_oss_overrides", None, None),  # 0.5.19+
        ("sglang.srt.arg_groups.overrides", "_gpt_oss_overrides", None, None),  # 0.5.15-0.5.18
        ("sglang.srt.server_args", "_handle_model_specific_adjustments", "ServerArgs", "GptOssForCausalLM")),  # ≤ 0.5.14
    # the hybrid GDN models: triton or trtllm_mha by the Mamba radix cache and speculative decoding (0.5.14+
    # also the page size: 64 under trtllm_mha, else 1); ≤ 0.5.13 the branch hands its choice to
    # _handle_mamba_radix_cache (sm100_default_attention_backend), which it calls itself
    **{arch: (
        ("sglang.srt.arg_groups.model_overrides.qwen3_5", "_qwen3_5_hybrid_overrides", None, None),  # 0.5.19+
        ("sglang.srt.arg_groups.overrides", "_qwen3_5_hybrid_overrides", None, None),  # 0.5.15-0.5.18
        ("sglang.srt.server_args", "_handle_model_specific_adjustments", "ServerArgs", arch))  # 0.5.7-0.5.14
       for arch in ("Qwen3NextForCausalLM", "Qwen3_5ForConditionalGeneration")},
    "DeepseekV3ForCausalLM": (  # "DeepSeek V3/R1/V3.1": trtllm_mla
        ("sglang.srt.arg_groups.model_overrides.deepseek_v2", "_deepseek_family_overrides", None, None),
        ("sglang.srt.arg_groups.overrides", "_deepseek_family_overrides", None, None),
        ("sglang.srt.server_args", "_handle_model_specific_adjustments", "ServerArgs", "DeepseekV3ForCausalLM")),
}


def attention_backend(L: Loader, cfg: Bag, mc: Bag, c: dict[str, Any], code: list[str],
                      mamba: Any = None) -> None:
    """On an SM100 card (B200): the release's own choice of attention backend and the page size it
    forces, after the memory settings as __post_init__ / the resolution pipeline order them: the
    model's override first (gpt-oss: trtllm_mha on SM100; 0.5.8-0.5.9 also disable_hybrid_swa_memory),
    then the attention-backend handler whole (the default backend for the others: 0.5.7+ trtllm_mha
    for an MHA model; its page-size snaps: trtllm_mha 16/32/64 (128 from 0.5.18), FlashMLA 64,
    cutlass_mla 128, trtllm_mla 32/64, fa4 128). Not run on the other cards of the grid: there the same
    code picks fa3 (SM90) or flashinfer (SM89), which force no page size (read from each wheel).
    `mamba`: a hybrid's Mamba radix-cache handler, run where SGLang runs it, after the model's
    override (0.5.14+: _handle_model_specific_adjustments collects the override before its
    _handle_mamba_radix_cache / _mamba_radix_cache_resolution call for these architectures) and
    before the attention-backend handler; up to 0.5.13 the override's branch calls it itself."""
    if c["sm"] < 100:
        if mamba is not None:
            mamba()
        return
    arch = mc.hf_config.architectures[0]
    if arch in MODEL_OVERRIDES:  # (0.5.6 ran the whole of _handle_model_specific_adjustments for gpt-oss: a no-op)
        for module, func, cls, branch in MODEL_OVERRIDES[arch]:
            if L.path(module) is None or f"def {func}(" not in L.path(module).read_text():
                continue
            if cls is not None and branch is not None and f'"{branch}"' not in L.path(module).read_text():
                continue
            fn = override_statements(L, module, func, cls, branch)
            if cls is None:
                cfg.set(**(fn(cfg, mc.hf_config) or {}))
            else:
                fn(cfg)
            if getattr(fn, "_oracle_calls_mamba", False):
                mamba = None  # the branch ran _handle_mamba_radix_cache with its SM100 default
            break
        else:
            raise NameError(f"oracle: no attention override of {arch} found")
    if mamba is not None:
        mamba()
    hook = "sglang.srt.arg_groups.attention_hook"
    if L.has(hook, "handle_attention_backend_compatibility"):  # 0.5.19+
        L.get(hook, "handle_attention_backend_compatibility")(cfg)
    else:
        cfg._handle_attention_backend_compatibility()
    if cfg.page_size is None:  # _handle_page_size / _page_size_default: the grid always sets one
        raise NameError("oracle: page_size unset after the attention handler")


def _dp_and_speculative_hook(L: Loader, cfg: Bag, c: dict[str, Any]) -> None:
    """0.5.13-0.5.18: ServerArgs._handle_data_parallelism, then the "max_running_requests unset → 48"
    statement of the algorithm's handler in arg_groups/speculative_hook.py."""
    cfg._handle_data_parallelism()
    if cfg.enable_dp_attention:
        cfg.set(attn_dp_size=cfg.dp_size)
    if c["spec"]:
        handler = {"EAGLE3": "_handle_eagle_family", "NEXTN": "_handle_eagle_family", "DFLASH": "_handle_dflash",
                   "NGRAM": "_handle_ngram"}[c["spec"]]
        mod = "sglang.srt.arg_groups.speculative_hook"
        if L.has(mod, handler):
            statements(L, mod, handler, lambda s: "max_running_requests is None" in s)(cfg)
        else:
            raise SystemExit(f"no {handler} in {mod}")


def spec_algorithm(cls: Any, name: str | None, L: Loader | None = None) -> Any:
    """SpeculativeAlgorithm.from_string; NEXTN is EAGLE once handle_speculative_decoding resolved
    its alias (_resolve_speculative_algorithm_alias), in releases whose from_string lacks it.
    0.5.6's names are a registry its module fills at import: those calls run first."""
    try:
        return cls.from_string(name)
    except (ValueError, AttributeError, KeyError):
        if L is not None and not getattr(cls, "_oracle_registered", False):
            L.run_top_level_calls("sglang.srt.speculative.spec_info")
            cls._oracle_registered = True
            return spec_algorithm(cls, name, L)
        if name == "NEXTN":
            return cls.from_string("EAGLE")
        raise


def server_args_defaults(L: Loader) -> dict[str, Any]:
    """The defaults the wheel's ServerArgs dataclass declares (`field: T = literal`), by AST: the
    flags a case leaves unset."""
    mod = "sglang.srt.server_args"
    L._index(mod)
    out: dict[str, Any] = {}
    for node in L._defs[mod].get("ServerArgs", []):
        if isinstance(node, ast.ClassDef):
            for item in node.body:
                if isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name) and item.value is not None:
                    try:
                        out[item.target.id] = ast.literal_eval(item.value)
                    except ValueError:
                        pass
    return out


def field_defaults(root: Path, names: tuple[str, ...]) -> dict[str, Any]:
    """0.5.19+: `names`' defaults as the wheel's arg_groups/fields/*.py declare them (`name: A[T,
    Arg(..., fallback=X)] = default`): the fallback where one is declared (what the resolved field
    answers when unset), else the default."""
    out: dict[str, Any] = {}
    for path in sorted((root / "sglang/srt/arg_groups/fields").glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.target.id in names:
                value = ast.literal_eval(node.value) if node.value is not None else None
                for kw in (k for n in ast.walk(node.annotation) if isinstance(n, ast.Call) for k in n.keywords):
                    if kw.arg == "fallback":
                        value = ast.literal_eval(kw.value)
                out[node.target.id] = value
    return out


def drive_configurator(root: Path, c: dict[str, Any], model_cfg: dict[str, Any], args_phase) -> tuple[dict[str, Any], list[str]]:
    torch = fake_torch()
    cfg = ServerArgsSelf("server_args")
    facts = model_facts(c, model_cfg)
    arch = model_cfg["architectures"][0]

    def declare_resolution(server_args: Any, source: str, **fields: Any) -> None:
        server_args.set(**fields)

    def identity(x: Any) -> Any:
        return x

    stubs = stdlib_stubs()
    by_name = {"resolving_view": identity, "resolved_view": identity, "declare_resolution": declare_resolution,
               "record_of": identity}
    L = Loader(root, {**stubs, **{f"{m}.{n}": v for m in (
        "sglang.srt.arg_groups.overrides", "sglang.srt.arg_groups.model_override_base") for n, v in by_name.items()}})
    L.stubs["sglang.srt.environ.envs"] = envs_from_wheel(root)
    # a legacy handler's post-process pass (run_post_process_pass(self, pass)): the Mamba radix-cache
    # resolution is applied as SGLang applies it (its declared fields set); the others (LM-head
    # layout, sampling backend) size nothing and are skipped
    def run_post_process_pass(server_args: Any, fn: Any) -> None:
        if "mamba" in fn.__name__ or fn.__name__ in ATTENTION_PASSES:
            server_args.set(**(fn(server_args) or {}))

    L.stubs["sglang.srt.arg_groups.overrides.run_post_process_pass"] = run_post_process_pass
    for mod in ("sglang.srt.utils", "sglang.srt.utils.common"):  # the platform: an NVIDIA GPU
        for n in ("is_cpu", "is_hip", "is_npu", "is_xpu", "is_musa", "is_mps", "is_hpu"):
            L.stubs[f"{mod}.{n}"] = lambda: False
        L.stubs[f"{mod}.is_cuda"] = lambda: True
        L.stubs[f"{mod}.get_device_sm"] = lambda: c["sm"]
        L.stubs[f"{mod}.get_device_name"] = lambda *a: c["card"]
        L.stubs[f"{mod}.is_cuda_alike"] = lambda: True
        for n, v in sm_platform(c["sm"]).items():  # what the card is (its compute capability, CUDA 12.8+)
            L.stubs[f"{mod}.{n}"] = answer(v)
    L.stubs["sglang.srt.runtime_context.get_platform"] = lambda: Bag("platform", **platform_bag(c["sm"]))
    L.stubs["sglang.srt.platforms.current_platform"] = Bag(  # CUDA itself, not an out-of-tree platform
        "current_platform", is_out_of_tree=lambda: False, support_piecewise_cuda_graph=lambda: True)

    # the model: SGLang's own config class for a hybrid (its mamba2_cache_params run), else config.json's fields
    kw = {k: v for k, v in model_cfg.items() if not k.startswith("_")}
    own = {"Qwen3NextForCausalLM": ("sglang.srt.configs.qwen3_next", "Qwen3NextConfig"),
           "Qwen3_5ForConditionalGeneration": ("sglang.srt.configs.qwen3_5", "Qwen3_5Config"),
           "Qwen3_5ForCausalLM": ("sglang.srt.configs.qwen3_5", "Qwen3_5TextConfig")}
    if arch in own and L.has(*own[arch]):
        hf = L.get(*own[arch])(**kw)
    else:
        hf = PretrainedConfig(**kw)
    wheel_mm = wheel_is_multimodal(L, hf)
    if wheel_mm is not None:  # the wheel's own decision, not config.json's vision_config
        facts["multimodal"] = bool(wheel_mm.is_multimodal)
    AttentionArch = L.get("sglang.srt.configs.model_config", "AttentionArch")
    mc = Bag("model_config", hf_config=hf, hf_text_config=hf.get_text_config(), context_len=facts["context_len"],
             head_dim=facts["head_dim"], v_head_dim=facts["v_head_dim"],
             attention_arch=AttentionArch.MLA if facts["mla"] else AttentionArch.MHA,
             is_multimodal=facts["multimodal"], is_hybrid_swa=False, is_draft_model=False,
             num_hidden_layers=facts["num_hidden_layers"], kv_lora_rank=model_cfg.get("kv_lora_rank"),
             qk_rope_head_dim=model_cfg.get("qk_rope_head_dim"), quantization=None, dtype=torch.bfloat16,
             is_hybrid=arch in own, model_path=c["model"])
    if wheel_mm is not None and wheel_mm.has("is_multimodal_chunked_prefill_supported"):  # 0.4.7+
        mc.set(is_multimodal_chunked_prefill_supported=bool(wheel_mm.is_multimodal_chunked_prefill_supported))
    # ModelConfig.__init__'s prefill-graph facts (0.5.11+), from the wheel's own arch lists
    archs, mcm = hf.architectures or [], "sglang.srt.configs.model_config"
    for flag in ("is_multimodal_piecewise_cuda_graph_supported", "is_multimodal_breakable_cuda_graph_supported"):
        if L.has(mcm, flag):
            mc.set(**{flag: bool(facts["multimodal"]) and L.get(mcm, flag)(archs)})
    if L.has(mcm, "is_piecewise_cuda_graph_disabled_model"):
        mm_off = (facts["multimodal"] and L.has(mcm, "is_multimodal_piecewise_cuda_graph_supported")
                  and "is_multimodal_piecewise_cuda_graph_supported(" in L.path(mcm).read_text().split(
                      "self.is_piecewise_cuda_graph_disabled_model = (", 1)[-1].split("self.dtype", 1)[0]
                  and not mc.is_multimodal_piecewise_cuda_graph_supported)
        mc.set(is_piecewise_cuda_graph_disabled_model=L.get(mcm, "is_piecewise_cuda_graph_disabled_model")(archs)
               or bool(mm_off))
    # ModelConfig's attention facts the default-backend choice reads (0.5.19+; the SM100 step only): the wheel's own
    mc.set(swa_head_dim=mc.head_dim, swa_v_head_dim=mc.v_head_dim, is_encoder_decoder=L.get(
        mcm, "is_encoder_decoder_model")(archs) if c["sm"] >= 100 and L.has(mcm, "is_encoder_decoder_model") else False)
    for prop in ("has_asymmetric_kv", "_detect_attention_sinks") if c["sm"] >= 100 else ():
        try:
            fn = L.method(mcm, "ModelConfig", prop)
        except NameError:
            continue
        mc.set(**{prop.lstrip("_").replace("detect_", "has_"): fn(mc)})  # a property or a method: the wheel's
    for m in ("get_num_kv_heads", "get_total_num_kv_heads"):
        fn = L.method("sglang.srt.configs.model_config", "ModelConfig", m)
        mc.set(**{m: (lambda f: lambda *a, **k: f(mc, *a, **k))(fn)})
    registry = "sglang.srt.configs.linear_attn_model_registry"  # 0.5.10+
    mc.set(linear_attn_registry_result=L.get(registry, "get_linear_attn_config")(hf)
           if L.has(registry, "get_linear_attn_config") else None)
    L.stubs["sglang.srt.arg_groups.model_override_base.model_config_of"] = lambda sa: mc
    L.stubs["sglang.srt.arg_groups.overrides.model_config_of"] = lambda sa: mc

    graphs_module = "sglang.srt.model_executor.cuda_graph_config"  # 0.5.13+: per-phase graph configs
    CudaGraphConfig = (L.get(graphs_module, "CudaGraphConfig") if L.has(graphs_module, "CudaGraphConfig")
                       else lambda: None)
    cfg.set(**server_args_defaults(L))
    cfg.set(**{k: v for k, v in field_defaults(root, (
        "swa_full_tokens_ratio", "disable_hybrid_swa_memory", "attention_backend", "prefill_attention_backend",
        "decode_attention_backend", "speculative_draft_attention_backend", "enable_prefill_cp")).items()
               if not cfg.has(k)})
    cfg.set(device="cuda", tp_size=c["tp"], pp_size=1, dp_size=c["dp_size"] if c["dp_mode"] == "dp_attention" else 1,
            attn_dp_size=c["dp_size"] if c["dp_mode"] == "attn_dp_size" else 1,
            enable_dp_attention=c["dp_mode"] == "dp_attention", attn_cp_size=1, dcp_size=1, ep_size=1,
            moe_dp_size=1, chunked_prefill_size=None, max_prefill_tokens=16384,
            mem_fraction_static=c["mem_fraction_static"], max_running_requests=c["max_running_requests"],
            max_total_tokens=None, page_size=c["page_size"], model_path=c["model"], language_only=False,
            language_model_only=False, disaggregation_mode="null", speculative_algorithm=c["spec"],
            speculative_num_draft_tokens=c.get("num_draft_tokens"), speculative_num_steps=c.get("num_steps"),
            speculative_eagle_topk=c.get("topk"), disable_radix_cache=bool(c.get("disable_radix_cache")), disable_overlap_schedule=False,
            mamba_radix_cache_strategy="auto", linear_attn_backend="triton", mamba_full_memory_ratio=0.9,
            max_mamba_cache_size=None, enable_symm_mem=False, torch_compile_max_bs=None,
            cuda_graph_config=CudaGraphConfig(), disable_cuda_graph_padding=False, enable_kv_cache_sharding=False,
            enable_hisparse=False, enable_unified_memory=False, schedule_conservativeness=1.0,
            kv_cache_dtype="auto", prefill_max_requests=None, mm_feature_transport=None, ep_join_rank_offset=0,
            enable_mixed_chunk=False, _cuda_graph_config_locked=set(), moe_a2a_backend="none", ep_join_mode=None,
            prefill_only_disable_kv_cache=False, enable_memory_saver=False, max_ep_size=None)
    cfg.set(enable_linear_replayssm_spec=False, elastic_ep_backend=None, ep_scale_joiner=False,
            enable_two_batch_overlap=False)
    if c.get("attention_backend"):  # --attention-backend as asked (the grid's other cases ask none)
        cfg.set(attention_backend=c["attention_backend"])

    code: list[str] = []
    L.stubs["sglang.srt.utils.common.get_device_memory_capacity"] = lambda device=None: c["gpu_capacity_mib"]
    L.stubs["sglang.srt.server_args.get_device_memory_capacity"] = lambda device=None: c["gpu_capacity_mib"]
    cfg.set(_loader=L, get_model_config=lambda: mc, get_hf_config=lambda: mc.hf_config, model_config=mc, mm_enable_dp_encoder=False, _resolved=lambda: cfg,
            context_length=c.get("context_length"), uses_mamba_radix_cache=False)
    st: dict[str, Any] = {}

    def publish() -> None:
        """The runtime context SGLang publishes from the resolved arguments (re-published after them)."""
        attn_dp = cfg.attn_dp_size if cfg.attn_dp_size > 1 else (cfg.dp_size if cfg.enable_dp_attention else 1)
        if L.has("sglang.srt.runtime_context", "derive_parallel_widths"):
            widths = L.get("sglang.srt.runtime_context", "derive_parallel_widths")(
                tp_size=cfg.tp_size, attn_cp_size=1, attn_dp_size=attn_dp, moe_ep_size=1, moe_dp_size=1,
                dcp_size=1, dcp_enabled=False)
        else:  # up to 0.5.18 the attention TP group is tp // dp_size under dp-attention (parallel_state)
            widths = {"attn_tp_size": cfg.tp_size // attn_dp}
        st["par"] = Bag("parallel", attn_tp_size=widths["attn_tp_size"], attn_dcp_size=1, pp_size=1,
                        attn_dp_size=attn_dp, launch_world_size=cfg.tp_size,
                        world_group=Bag("world_group", cpu_group=None), tp_size=cfg.tp_size,
                        enable_dsa_cache_layer_split=False, enable_cp_tp_group_sharing=False, attn_cp_size=1,
                        dcp_size=1, enable_kv_cache_sharding=False)
        strategy = cfg.mamba_radix_cache_strategy  # 0.5.19+ reads it as get_exec().mamba's two flags
        extra_buffer = not cfg.disable_radix_cache and strategy in ("extra_buffer", "extra_buffer_lazy")
        st["exec"] = Bag("exec", mamba=Bag("exec.mamba", mamba_radix_cache_strategy=strategy,
                                           enable_mamba_extra_buffer=extra_buffer,
                                           enable_mamba_extra_buffer_lazy=extra_buffer and strategy == "extra_buffer_lazy",
                                           enable_linear_replayssm_spec=False),
                         graph=Bag("exec.graph", cuda_graph_config=cfg.cuda_graph_config))

    ctx = Bag("context", override=lambda name, **kw: cfg.set(**kw))
    L.stubs["sglang.srt.runtime_context._configured_parallel"] = lambda name: getattr(cfg, name)  # 0.5.18
    for n, v in {"get_parallel": lambda: st["par"], "get_schedule": lambda: cfg, "get_memory": lambda: cfg,
                 "get_spec": lambda: cfg, "get_disagg": lambda: cfg, "get_mm": lambda: cfg,
                 "get_exec": lambda: st["exec"], "get_context": lambda: ctx}.items():
        L.stubs[f"sglang.srt.runtime_context.{n}"] = v
    publish()
    try:
        args_phase(L, cfg, mc, c, code)
    except ValueError as e:  # the server arguments SGLang refuses (e.g. 0.5.12: spec + no_buffer Mamba cache)
        if "not published" in str(e) or "not initialized" in str(e):
            raise  # a runtime context the oracle failed to stub: its failure, never a refusal row
        raise Refusal(f"{type(e).__name__}: {e}", code + L.used) from None
    publish()
    par = st["par"]
    # The draft's weights are in the memory the target's pool is sized from only where the scheduler
    # allocates every pool after both workers load (0.5.14+ Scheduler.init_memory_pools); up to 0.5.13
    # the target's ModelRunner sizes its pool in TpModelWorker, before maybe_init_draft_worker loads the draft
    scheduler = root / "sglang/srt/managers/scheduler.py"
    draft_loaded_first = scheduler.is_file() and "def init_memory_pools(" in scheduler.read_text()
    free_after = c["free_gb"] - c["weights_gb"] - (c.get("draft_weights_gb", 0.0) / c["tp"] if draft_loaded_first else 0.0)
    world = Bag("world_group", world_size=cfg.tp_size, cpu_group=None, rank=0)
    L.stubs["sglang.srt.distributed.parallel_state.get_world_group"] = lambda: world
    L.stubs["sglang.srt.distributed.get_world_group"] = lambda: world
    for n, v in {"get_attention_tp_size": lambda: par.attn_tp_size, "get_attention_tp_rank": lambda: 0,
                 "get_attention_dp_size": lambda: cfg.attn_dp_size, "get_attention_dp_rank": lambda: 0}.items():
        L.stubs[f"sglang.srt.layers.dp_attention.{n}"] = v
    L.stubs["sglang.srt.utils.common.get_available_gpu_memory"] = lambda *a, **k: free_after
    L.stubs["sglang.srt.utils.get_available_gpu_memory"] = lambda *a, **k: free_after
    L.stubs["sglang.srt.mem_cache.page_interleave.compute_page_shard_scratch_bytes"] = lambda kvc, **k: 0

    owners = POOL_OWNERS[args_phase]

    def find(name: str) -> Any:
        for mod, cls in owners:
            try:
                return L.method(mod, cls, name)
            except NameError:
                continue
        raise AttributeError(f"oracle: {owners[0][1]}.{name}")

    def _method(self: Any, name: str) -> Any:  # a method or property of the owner: the wheel's, on first use
        if name.startswith("__"):
            raise AttributeError(name)
        fn = find(name)
        return fn(self) if getattr(fn, "_oracle_property", False) else fn.__get__(self)

    attrs: dict[str, Any] = {"__getattr__": _method,
                             "fused_entry_bytes": lambda self, name: None}  # a fused draft entry: not in this grid
    Kvc = type("KVCacheConfigurator", (), attrs)
    kvc = Kvc()
    SpeculativeAlgorithm = (L.get("sglang.srt.speculative.spec_info", "SpeculativeAlgorithm")
                            if L.has("sglang.srt.speculative.spec_info", "SpeculativeAlgorithm") else None)  # 0.4.0: none
    layers = facts["num_hidden_layers"]
    spec_aux = Bag("spec_aux_config", eagle_draft_num_layers=c.get("draft_layers") if c["spec"] in ("EAGLE3", "NEXTN") else None,
                   dflash_draft_num_layers=c.get("draft_layers") if c["spec"] == "DFLASH" else None,
                   draft_model_config=None, dflash_draft_cell_size_per_token=None,
                   eagle_draft_swa_num_layers=None)  # an EAGLE draft of full-attention layers (a Llama layer)
    kvc.__dict__.update(
        device="cuda", gpu_id=0, attn_dp_size=cfg.attn_dp_size, pp_size=1, pp_group=None, model=None,
        model_config=mc, server_args=cfg, kv_cache_dtype=torch.bfloat16, model_dtype=torch.bfloat16,
        page_size=cfg.page_size, sliding_window_size=None,
        spec_algorithm=spec_algorithm(SpeculativeAlgorithm, c["spec"], L) if SpeculativeAlgorithm else None,
        is_draft_worker=False,
        post_capture_kv_active=False, spec_aux_config=spec_aux, is_hybrid_swa=False, is_hybrid_swa_compress=False,
        use_mla_backend=facts["mla"],
        layer_info=Bag("layer_info", start_layer=0, end_layer=layers, num_effective_layers=layers,
                       swa_attention_layer_ids=None, full_attention_layer_ids=None, is_hybrid_swa_mtp_draft=False),
        draft_model_idx=None, kv_cache_dtype_str="auto", extra_mamba_cache_bytes_per_req=0,
        dflash_draft_cell_size_per_token=None, memory_pool_config=None, draft_parallel_layout=None,
        hybrid_kda_config=None)
    kvc.__dict__.update(dp_size=cfg.attn_dp_size, tp_size=cfg.tp_size, start_layer=0, end_layer=layers,
                        num_effective_layers=layers, tp_rank=0, pp_rank=0, mem_fraction_static=cfg.mem_fraction_static,
                        _linear_attn_registry_cache=mc.linear_attn_registry_result, ps=par, dtype=torch.bfloat16,
                        eagle_draft_num_layers=spec_aux.eagle_draft_num_layers,  # ModelRunner.__init__ sets them
                        dflash_draft_num_layers=spec_aux.dflash_draft_num_layers)  # from the draft's config
    hybrid_swa(L, kvc, mc, cfg, hf)
    if owners[0][1] == "KVCacheConfigurator":
        find("__post_init__")(kvc)  # mambaish / hybrid_gdn / kda configs, the DFlash draft cell
    mem_fraction = cfg.mem_fraction_static
    try:
        if args_phase in (args_0400, args_0405):
            pool = pool_0400(L, kvc, cfg, c["free_gb"])
            mem_fraction = kvc.mem_fraction_static  # ModelRunner.__init__'s, which the pool was sized with
        elif args_phase in (args_0509, args_0506, args_0501):
            if args_phase is args_0501:
                runner_fraction(L, kvc, cfg)
                mem_fraction = kvc.mem_fraction_static  # ModelRunner's, which the pool is sized with
            pool = pool_0509(L, kvc, cfg, c["free_gb"])
        else:
            pool = kvc._resolve_memory_pool_config(c["free_gb"])
    except (ValueError, RuntimeError) as e:
        if "not published" in str(e) or "not initialized" in str(e):
            raise
        raise Refusal(f"{type(e).__name__}: {e}", code + L.used) from None
    out = {"mem_fraction_static": mem_fraction, "chunked_prefill_size": cfg.chunked_prefill_size,
           "cuda_graph_max_bs": cfg.cuda_graph_config.decode.max_bs if cfg.cuda_graph_config is not None
           else cfg.cuda_graph_max_bs,
           "max_running_requests_flag": cfg.max_running_requests, "attn_dp_size": cfg.attn_dp_size,
           "kv_tokens": pool.max_total_num_tokens, "max_running_requests": pool.max_running_requests,
           "mamba_slots": cfg.max_mamba_cache_size if kvc.mambaish_config is not None else None,
           "mamba_slot_bytes": kvc.mambaish_config.mamba2_cache_params.mamba_cache_per_req
           if kvc.mambaish_config is not None else None,
           "mamba_ratio": kvc._calculate_mamba_ratio() if kvc.mambaish_config is not None
           and args_phase not in (args_0509, args_0506, args_0501) else None,
           "cell_bytes": getattr(pool, "cell_size", None)}
    return out, code + sorted(set(L.used))


#: the model file that defines a sliding-window architecture's get_attention_sliding_window_size
#: (Gemma 3's multimodal class hands it to its language model's, gemma3_causal.py's)
SWA_MODEL_FILES = {"GptOssForCausalLM": "sglang.srt.models.gpt_oss",
                   "Gemma3ForConditionalGeneration": "sglang.srt.models.gemma3_causal",
                   "Gemma3ForCausalLM": "sglang.srt.models.gemma3_causal", "Gemma2ForCausalLM": "sglang.srt.models.gemma2"}


def hybrid_swa(L: Loader, kvc: Any, mc: Bag, cfg: Bag, hf: Any) -> None:
    """Whether the model gets a hybrid sliding-window pool, its layer split and window, as the
    wheel decides them after the server args: the model file's get_attention_sliding_window_size
    (ModelRunner.sliding_window_size), then 0.5.7+ configs/model_config.py is_hybrid_swa_model /
    get_hybrid_layer_ids (ModelConfig._derive_hybrid_model, off under disable_hybrid_swa_memory);
    up to 0.5.6 ModelRunner.initialize's own check ("Check if the model is using hybrid SWA": any
    model with a sliding window but Llama4, unless the server args disabled it)."""
    text = hf.get_text_config()
    archs = list(hf.architectures or [])
    mod = SWA_MODEL_FILES.get(archs[0] if archs else "")
    window = (L.get(mod, "get_attention_sliding_window_size")(text)
              if mod and getattr(text, "sliding_window", None) and L.has(mod, "get_attention_sliding_window_size")
              else None)
    mcm = "sglang.srt.configs.model_config"
    swa_ids = full_ids = None
    if L.has(mcm, "is_hybrid_swa_model"):
        fn = L.get(mcm, "is_hybrid_swa_model")
        on = bool(fn(*(archs, text)[: fn.__code__.co_argcount])) and not cfg.disable_hybrid_swa_memory
        if on:
            swa_ids, full_ids = L.get(mcm, "get_hybrid_layer_ids")(archs, text)
    else:
        runner = "sglang.srt.model_executor.model_runner"
        needle = "self.is_hybrid_swa = self.model_config.is_hybrid_swa = True"  # 0.5.1: is_hybrid
        if needle not in L.path(runner).read_text():
            needle = "self.is_hybrid = self.model_config.is_hybrid = True"
        probe = Bag("model_runner", server_args=cfg, sliding_window_size=window, model_config=mc, is_hybrid_swa=False,
                    is_hybrid=False)
        mc.set(is_hybrid_swa=False)
        if needle in L.path(runner).read_text():  # 0.4.6 has no hybrid pool: off
            top_level_if(L, runner, "ModelRunner", "initialize", needle)(probe)
        on = bool(probe.is_hybrid_swa or probe.is_hybrid)
        if needle.startswith("self.is_hybrid ="):
            kvc.__dict__["is_hybrid"] = on  # 0.5.1's name for it, which its init_memory_pool reads
            kvc.__dict__["mambaish_config"] = None  # 0.5.1 sizes no Mamba state (no hybrid GDN model yet)
        if on:  # set_num_token_hybrid reads the split off the model's layers: not modelled
            raise NameError("oracle: 0.5.6-style hybrid SWA pool (set_num_token_hybrid) not stubbed")
    head = mc.head_dim
    mc.set(is_hybrid_swa=on, swa_attention_layer_ids=swa_ids, full_attention_layer_ids=full_ids,
           sliding_window_size=getattr(text, "sliding_window", None), swa_head_dim=head, swa_v_head_dim=mc.v_head_dim,
           is_hybrid_swa_compress=False)  # ModelConfig: swa head dims default to the full layers' (no swa_head_dim)
    if on:
        fn = L.method(mcm, "ModelConfig", "get_swa_num_kv_heads")
        mc.set(get_swa_num_kv_heads=lambda *a, **k: fn(mc, *a, **k))
    kvc.__dict__.update(is_hybrid_swa=on, sliding_window_size=window)
    if on:
        kvc.layer_info.set(swa_attention_layer_ids=swa_ids, full_attention_layer_ids=full_ids)


def top_level_if(L: Loader, module: str, cls: str, func: str, needle: str) -> Any:
    """The one top-level statement of `cls.func` whose source holds `needle`, as a function of
    `self` (SGLang's statement as written, without the rest of the method)."""
    node = L.function_node(module, func, cls)
    body = [st for st in node.body if needle in L._segment(module, st)]
    if not body:
        raise NameError(f"oracle: no statement with {needle!r} in {cls}.{func}")
    new = ast.FunctionDef(name=func, args=ast.arguments(posonlyargs=[], args=[ast.arg("self")], kwonlyargs=[],
                                                        kw_defaults=[], defaults=[]),
                          body=body, decorator_list=[], returns=None, type_params=[])
    ast.fix_missing_locations(new)
    ns = L.namespace(module)
    exec(compile(ast.Module(body=[new], type_ignores=[]), f"<wheel {module}.{cls}.{func} (statement)>", "exec"), ns)
    L.used.append(f"{L.path(module).relative_to(L.root)}:{cls}.{func} (its hybrid-SWA check)")
    return ns[func]


def args_0515(L: Loader, cfg: Bag, mc: Bag, c: dict[str, Any], code: list[str]) -> None:
    """0.5.14-0.5.15: the same ServerArgs handlers as 0.5.18."""
    args_0518(L, cfg, mc, c, code)


def _dp_and_speculative_48(L: Loader, cfg: Bag, c: dict[str, Any]) -> None:
    """Up to 0.5.12: ServerArgs._handle_data_parallelism, then only the "max_running_requests unset →
    48" statements of _handle_speculative_decoding."""
    cfg._handle_data_parallelism()
    if cfg.enable_dp_attention:
        cfg.set(attn_dp_size=cfg.dp_size)
    if c["spec"]:
        statements(L, "sglang.srt.server_args", "_handle_speculative_decoding",
                   lambda s: s.startswith("if self.max_running_requests is None"), cls="ServerArgs")(cfg)


def args_0512(L: Loader, cfg: Bag, mc: Bag, c: dict[str, Any], code: list[str]) -> None:
    """0.5.10-0.5.12: ServerArgs.__post_init__'s handlers; speculative defaults in
    ServerArgs._handle_speculative_decoding."""
    _server_args_0512(cfg, mc, c)
    _dp_and_speculative_48(L, cfg, c)


def args_0513(L: Loader, cfg: Bag, mc: Bag, c: dict[str, Any], code: list[str]) -> None:
    """0.5.13: 0.5.12's ServerArgs handlers (the "auto" Mamba strategy → no_buffer, the piecewise
    prefill graph, _handle_mamba_radix_cache and its ValueError); the speculative defaults already
    in arg_groups/speculative_hook.py, as 0.5.14+."""
    _server_args_0512(cfg, mc, c)
    _dp_and_speculative_hook(L, cfg, c)


def _server_args_0512(cfg: Bag, mc: Bag, c: dict[str, Any]) -> None:
    """0.5.10-0.5.13 ServerArgs.__post_init__'s handlers before data parallelism, in its order."""
    if cfg._d.get("_loader") and cfg._d["_loader"].has("sglang.srt.server_args", "ServerArgs"):
        try:
            missing = cfg._handle_missing_default_values  # "auto" Mamba strategy → no_buffer (≤ 0.5.12)
        except AttributeError:
            missing = None
        if missing is not None:
            missing()
    try:  # 0.5.11+: __post_init__ runs it first: it turns the piecewise prefill graph off (DP
        # attention, a VLM, the listed architectures...) before _handle_gpu_memory_settings reserves for it
        piecewise = cfg._handle_piecewise_cuda_graph
    except AttributeError:
        piecewise = None
    if piecewise is not None:
        piecewise()
    cfg._handle_gpu_memory_settings(c["gpu_capacity_mib"])
    attention_backend(cfg._d["_loader"], cfg, mc, c, [], mamba=(lambda: cfg._handle_mamba_radix_cache(
        model_arch=mc.hf_config.architectures[0])) if mc.is_hybrid else None)


def drive_0513(root: Path, c: dict[str, Any], model_cfg: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    return drive_configurator(root, c, model_cfg, args_0513)


def drive_0512(root: Path, c: dict[str, Any], model_cfg: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    return drive_configurator(root, c, model_cfg, args_0512)


def drive_0515(root: Path, c: dict[str, Any], model_cfg: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    return drive_configurator(root, c, model_cfg, args_0515)


def args_0509(L: Loader, cfg: Bag, mc: Bag, c: dict[str, Any], code: list[str]) -> None:
    """0.4.7-0.5.9: the same ServerArgs handlers as 0.5.12."""
    args_0512(L, cfg, mc, c, code)


def drive_0509(root: Path, c: dict[str, Any], model_cfg: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    return drive_configurator(root, c, model_cfg, args_0509)


def method_statements(L: Loader, module: str, cls: str, func: str, stop, tail: str) -> Any:
    """`cls.func`'s top-level statements up to the first one `stop(source)` accepts, then `tail`
    (a statement handing back what they computed): the sizing half of a method whose other half
    allocates the pools."""
    node = L.function_node(module, func, cls)
    body: list[ast.stmt] = []
    for st in node.body:
        if stop(L._segment(module, st).strip()):
            break
        body.append(st)
    body += ast.parse(tail).body
    new = ast.FunctionDef(name=func, args=node.args, body=body, decorator_list=[], returns=None, type_params=[])
    ast.fix_missing_locations(new)
    ns = L.namespace(module)
    exec(compile(ast.Module(body=[new], type_ignores=[]), f"<wheel {module}.{cls}.{func} (statements)>", "exec"), ns)
    L.used.append(f"{L.path(module).relative_to(L.root)}:{cls}.{func} (its statements before the pools are built)")
    return ns[func]


def pool_0509(L: Loader, kvc: Any, cfg: Bag, free_gb: float,
              stop: tuple[str, ...] = ("if self.req_to_token_pool is None",)) -> Any:
    """Up to 0.5.9: init_memory_pool (ModelRunnerKVCacheMixin's, before 0.5.7 ModelRunner's) up to
    the pool allocations (profile_max_num_token, handle_max_mamba_cache, max_num_reqs), then the
    `self.max_running_requests = min(..., req_to_token_pool.size)` statement (ModelRunner.initialize;
    before 0.5.7 TpModelWorker.__init__)."""
    mixin = "sglang.srt.model_executor.model_runner_kv_cache_mixin"
    runner = "sglang.srt.model_executor.model_runner"
    owner = (mixin, "ModelRunnerKVCacheMixin") if L.has(mixin, "ModelRunnerKVCacheMixin") else (runner, "ModelRunner")
    init = method_statements(L, *owner, "init_memory_pool",
                             lambda s: s.startswith(stop), "return max_num_reqs")
    nargs = init.__code__.co_argcount
    extra = (cfg.max_running_requests, cfg.max_total_tokens)[: nargs - 2]
    max_num_reqs = init(kvc, free_gb, *extra)
    # the request pool's size as the wheel's init_memory_pool builds it (`ReqToTokenPool(size=...)`:
    # 0.4.6 max_num_reqs + 1, later max_num_reqs), its expression evaluated as written
    import re
    sizes = re.findall(r"(?<!Decode)ReqToTokenPool\(\s*size=([^,\n]+),", L.path(owner[0]).read_text())
    size = eval(sizes[0], {"max_num_reqs": max_num_reqs}) if sizes else max_num_reqs  # noqa: S307
    kvc.req_to_token_pool = Bag("req_to_token_pool", size=size)
    for mod, cls in ((runner, "ModelRunner"), ("sglang.srt.managers.tp_worker", "TpModelWorker")):
        L._index(mod)
        klass = next((n for n in L._defs[mod].get(cls, []) if isinstance(n, ast.ClassDef)), None)
        where = klass and next((n for n in klass.body if isinstance(n, ast.FunctionDef)
                                and "self.max_running_requests = min(" in L._segment(mod, n)), None)
        if where is None:
            continue
        keep = ("self.max_running_requests = min(", "server_args = ", "self.max_total_num_tokens = self.model_runner")
        fn = statements(L, mod, where.name, lambda s: s.startswith(keep), cls=cls)
        names = [a.arg for a in where.args.args][1:]
        target = kvc if cls == "ModelRunner" else Bag("tp_worker", model_runner=kvc)
        fn(target, *[cfg if n == "server_args" else free_gb if "memory" in n else None for n in names])
        return Bag("pool", max_total_num_tokens=kvc.max_total_num_tokens,
                   max_running_requests=target.max_running_requests)
    raise NameError("oracle: no max_running_requests statement found")


def args_0506(L: Loader, cfg: Bag, mc: Bag, c: dict[str, Any], code: list[str]) -> None:
    """0.5.6: ServerArgs handlers; a hybrid's radix-cache and overlap defaults are in
    _handle_model_specific_adjustments."""
    cfg._handle_missing_default_values()
    cfg._handle_gpu_memory_settings(c["gpu_capacity_mib"])
    if mc.is_hybrid:
        cfg._handle_model_specific_adjustments()
        cfg._handle_environment_variables()  # SGLANG_MAMBA_SSM_DTYPE, which mamba_utils reads back
    elif getattr(mc.hf_text_config, "sliding_window", None):
        cfg._handle_model_specific_adjustments()  # gpt-oss, Gemma 2/3: disable_hybrid_swa_memory
    attention_backend(L, cfg, mc, c, code)
    _dp_and_speculative_48(L, cfg, c)


def args_0501(L: Loader, cfg: Bag, mc: Bag, c: dict[str, Any], code: list[str]) -> None:
    """0.5.1: no handler to call alone; ServerArgs.__post_init__'s own statements that size, in its
    order: the card reading, the automatic mem_fraction_static (with adjust_mem_fraction_for_vlm),
    chunked prefill and cuda_graph_max_bs by card, dp-attention's chunked prefill // dp_size and the
    speculative `max_running_requests is None → 48` (NEXTN → EAGLE first)."""
    heads = ("gpu_mem = get_device_memory_capacity", "if is_hip():\n            gpu_mem = ",  # 0.4.0's reading
             "if self.mem_fraction_static is None",
             "if self.chunked_prefill_size is None", "if self.cuda_graph_max_bs is None",
             "if self.enable_dp_attention:\n            self.schedule_conservativeness",
             "if self.max_running_requests is None")
    L.stubs["sglang.srt.configs.model_config.ModelConfig"] = Bag("ModelConfig", from_server_args=lambda sa: mc)
    for n in ("get_nvgpu_memory_capacity", "get_amdgpu_memory_capacity"):  # up to 0.4.0: the card's MiB
        L.stubs[f"sglang.srt.server_args.{n}"] = lambda: c["gpu_capacity_mib"]
    L.stubs["sglang.srt.server_args.is_hip"] = lambda: False
    fn = statements(L, "sglang.srt.server_args", "__post_init__", lambda s: s.startswith(heads), cls="ServerArgs")
    fn(cfg)


def drive_0501(root: Path, c: dict[str, Any], model_cfg: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    return drive_configurator(root, c, model_cfg, args_0501)


def drive_0506(root: Path, c: dict[str, Any], model_cfg: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    return drive_configurator(root, c, model_cfg, args_0506)


def args_0400(L: Loader, cfg: Bag, mc: Bag, c: dict[str, Any], code: list[str]) -> None:
    """0.3.6-0.4.0 (up to 0.4.5.post2 by their flag tables; 0.4.0 and 0.3.6 run): as 0.5.1, no
    handler to call alone: ServerArgs.__post_init__'s own statements that size, in its order and as
    written: the card reading (get_nvgpu_memory_capacity), the `if self.mem_fraction_static is None`
    block (by tp alone), 0.4.0's `if self.chunked_prefill_size is None` / `if self.cuda_graph_max_bs
    is None` (0.3.6: `if gpu_mem < 25000`, chunked prefill //= 4), and the `if self.enable_dp_attention`
    block (dp_size = tp_size, chunked prefill // 2). No speculative package, no page size yet."""
    heads = ("if is_hip():\n            gpu_mem = ", "if is_cuda():\n            gpu_mem = ",  # 0.4.4's reading
             "if self.mem_fraction_static is None",
             "if self.chunked_prefill_size is None", "if self.cuda_graph_max_bs is None", "if gpu_mem < 25",
             "if self.enable_dp_attention:")
    defaults = server_args_defaults(L)
    cfg.set(chunked_prefill_size=defaults.get("chunked_prefill_size"),  # 0.3.6: 8192, 0.4.0: None
            cuda_graph_max_bs=defaults.get("cuda_graph_max_bs"))
    for n in ("get_nvgpu_memory_capacity", "get_amdgpu_memory_capacity"):
        L.stubs[f"sglang.srt.server_args.{n}"] = lambda: c["gpu_capacity_mib"]
    L.stubs["sglang.srt.server_args.is_hip"] = lambda: False
    L.stubs["sglang.srt.server_args.is_cuda"] = lambda: True
    fn = statements(L, "sglang.srt.server_args", "__post_init__", lambda s: s.startswith(heads), cls="ServerArgs")
    L.used[-1] = "sglang/srt/server_args.py:__post_init__ (its sizing statements)"  # no max_running one here
    fn(cfg)


def args_0405(L: Loader, cfg: Bag, mc: Bag, c: dict[str, Any], code: list[str]) -> None:
    """0.4.3.post3-0.4.5.post2: 0.4.0's statements (the card reading, the fraction by tp alone,
    chunked prefill and graph defaults, dp-attention), with the speculative ones: NEXTN → EAGLE and the
    `max_running_requests is None` default inside `if self.speculative_algorithm ...` (32 up to
    0.4.4.post3, 48 after), as written."""
    heads = ("if is_hip():\n            gpu_mem = ", "if is_cuda():\n            gpu_mem = ",
             "if self.mem_fraction_static is None", "if self.chunked_prefill_size is None",
             "if self.cuda_graph_max_bs is None", "if gpu_mem < 25", "if self.enable_dp_attention:",
             "if self.max_running_requests is None")
    defaults = server_args_defaults(L)
    cfg.set(chunked_prefill_size=defaults.get("chunked_prefill_size"), cuda_graph_max_bs=defaults.get("cuda_graph_max_bs"))
    for n in ("get_nvgpu_memory_capacity", "get_amdgpu_memory_capacity"):
        L.stubs[f"sglang.srt.server_args.{n}"] = lambda: c["gpu_capacity_mib"]
    L.stubs["sglang.srt.server_args.is_hip"] = lambda: False
    L.stubs["sglang.srt.server_args.is_cuda"] = lambda: True
    fn = statements(L, "sglang.srt.server_args", "__post_init__", lambda s: s.startswith(heads), cls="ServerArgs")
    L.used[-1] = "sglang/srt/server_args.py:__post_init__ (its sizing and speculative statements)"
    fn(cfg)


def drive_0405(root: Path, c: dict[str, Any], model_cfg: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    return drive_configurator(root, c, model_cfg, args_0405)


def init_statement(L: Loader, module: str, cls: str, func: str, needle: str,
                   argnames: tuple[str, ...] = ("self", "server_args"), keep=None) -> Any:
    """The top-level statements of `cls.func` whose source holds `needle` (or that `keep` accepts),
    in their order, as a function of `argnames` (default (self, server_args): a constructor's
    statement that reads its `server_args` argument)."""
    node = L.function_node(module, func, cls)
    body = [st for st in node.body if (keep(L._segment(module, st)) if keep else needle in L._segment(module, st))]
    if not body:
        raise NameError(f"oracle: no statement with {needle!r} in {cls}.{func}")
    args = ast.arguments(posonlyargs=[], args=[ast.arg(a) for a in argnames], kwonlyargs=[],
                         kw_defaults=[], defaults=[])
    new = ast.FunctionDef(name=func, args=args, body=body, decorator_list=[], returns=None, type_params=[])
    ast.fix_missing_locations(new)
    ns = L.namespace(module)
    exec(compile(ast.Module(body=[new], type_ignores=[]), f"<wheel {module}.{cls}.{func} (statement)>", "exec"), ns)
    L.used.append(f"{L.path(module).relative_to(L.root)}:{cls}.{func} (its statement {needle!r})")
    return ns[func]


#: ModelConfig.__init__'s statements that decide is_multimodal (0.4.6.post1+: `enable_multimodal`
#: None → False for the architectures in its mm_disabled_models, Gemma 3 and Llama 4 among them;
#: 0.5.18+ also language_model_only and the sub-config heuristics)
MULTIMODAL_HEADS = ("self.is_lm_only =", "if enable_multimodal is None", "has_multimodal_subconfig =",
                    "has_dsv41_vision =", "self.is_multimodal =", "self.is_multimodal_chunked_prefill_supported =")


def wheel_is_multimodal(L: Loader, hf: Any) -> Bag | None:
    """Whether the wheel's ModelConfig calls the model multimodal when --enable-multimodal is not
    given (is_multimodal, and is_multimodal_chunked_prefill_supported where it has one), its own
    statements run as written; None where its __init__ has no `enable_multimodal` (up to 0.4.0:
    is_multimodal_model alone, which pool_0400 runs)."""
    mcm = "sglang.srt.configs.model_config"
    if "enable_multimodal is None" not in L.path(mcm).read_text():
        return None
    fn = init_statement(L, mcm, "ModelConfig", "__init__", "if enable_multimodal is None; self.is_multimodal =",
                        ("self", "enable_multimodal", "language_model_only"),
                        keep=lambda s: s.strip().startswith(MULTIMODAL_HEADS))
    me = Bag("model_config", hf_config=hf, hf_text_config=hf.get_text_config(), model_impl="auto")
    fn(me, None, False)
    return me


def pool_0400(L: Loader, kvc: Any, cfg: Bag, free_gb: float) -> Any:
    """0.3.6-0.4.4.post4: ModelRunner.__init__'s multimodal statement (`self.mem_fraction_static *= 0.95`
    for a model configs/model_config.py is_multimodal_model names; 0.4.4.post4's × 0.90 is in
    model_specific_adjustment, which __init__ calls), then init_memory_pool's
    statements up to the request pool's constructor, which 0.3.6-0.4.0 call unconditionally (the
    size it receives as written, `max_num_reqs + 1`), then TpModelWorker.__init__'s
    max_running_requests statement (pool_0509's tail)."""
    runner, mcm = "sglang.srt.model_executor.model_runner", "sglang.srt.configs.model_config"
    kvc.is_multimodal = L.get(mcm, "is_multimodal_model")(list(kvc.model_config.hf_config.architectures or []))
    try:
        scale = init_statement(L, runner, "ModelRunner", "__init__", "self.mem_fraction_static *= ")
    except NameError:  # 0.4.4.post4-0.4.5.post2: in model_specific_adjustment, which __init__ calls
        scale = init_statement(L, runner, "ModelRunner", "model_specific_adjustment", "self.mem_fraction_static *= ")
    scale(kvc, cfg)
    return pool_0509(L, kvc, cfg, free_gb, stop=("if self.req_to_token_pool is None",
                                                 "self.req_to_token_pool = ReqToTokenPool("))


def runner_fraction(L: Loader, kvc: Any, cfg: Bag) -> None:
    """0.4.6.post1-0.5.1: ModelRunner.model_specific_adjustment's statements that scale the fraction,
    as written (ModelRunner.__init__ runs it before the pool is sized): 0.4.4.post4-0.4.8.post1's
    `if self.is_multimodal: self.mem_fraction_static *= 0.90` (ModelConfig's is_multimodal, given or
    automatic fraction), 0.4.7-0.5.2's `if server_args.attention_backend == "aiter"` × 0.85 (ROCm's
    backend: inert on this CUDA grid)."""
    runner = "sglang.srt.model_executor.model_runner"
    # ModelRunner.__init__'s own `self.is_multimodal… = model_config.…` statements
    init_statement(L, runner, "ModelRunner", "__init__", "self.is_multimodal", ("self", "model_config"),
                   keep=lambda s: s.strip().startswith("self.is_multimodal"))(kvc, kvc.model_config)
    if "self.mem_fraction_static *= " not in L.path(runner).read_text():
        return
    init_statement(L, runner, "ModelRunner", "model_specific_adjustment", "self.mem_fraction_static *= ")(kvc, cfg)


def drive_0400(root: Path, c: dict[str, Any], model_cfg: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    return drive_configurator(root, c, model_cfg, args_0400)


POOL_OWNERS = {
    args_0400: [("sglang.srt.model_executor.model_runner", "ModelRunner")],
    args_0405: [("sglang.srt.model_executor.model_runner", "ModelRunner")],
    args_0506: [("sglang.srt.model_executor.model_runner", "ModelRunner")],
    args_0501: [("sglang.srt.model_executor.model_runner", "ModelRunner")],
    args_0509: [("sglang.srt.model_executor.model_runner_kv_cache_mixin", "ModelRunnerKVCacheMixin"),
                ("sglang.srt.model_executor.model_runner", "ModelRunner")],
    args_0512: [("sglang.srt.model_executor.model_runner_kv_cache_mixin", "ModelRunnerKVCacheMixin"),
                ("sglang.srt.model_executor.model_runner", "ModelRunner")],
    args_0513: [("sglang.srt.model_executor.model_runner_kv_cache_mixin", "ModelRunnerKVCacheMixin"),
                ("sglang.srt.model_executor.model_runner", "ModelRunner")],
    args_0515: [("sglang.srt.model_executor.model_runner_kv_cache_mixin", "ModelRunnerKVCacheMixin"),
                ("sglang.srt.model_executor.model_runner", "ModelRunner")],
    args_0523: [("sglang.srt.mem_cache.kv_cache_configurator", "KVCacheConfigurator")],
    args_0520: [("sglang.srt.mem_cache.kv_cache_configurator", "KVCacheConfigurator")],
    args_0518: [("sglang.srt.mem_cache.kv_cache_configurator", "KVCacheConfigurator")],
}


def driver_for(release: str):
    key = tuple(int(x) for x in release.split(".")[:3] if x.isdigit())
    if key >= (0, 5, 22):
        return drive_0523
    if key >= (0, 5, 19):
        return drive_0520
    if key >= (0, 5, 18):
        return drive_0518
    if key >= (0, 5, 14):
        return drive_0515
    if key >= (0, 5, 13):
        return drive_0513
    if key >= (0, 5, 10):
        return drive_0512
    if key >= (0, 5, 7):
        return drive_0509
    if key >= (0, 5, 3):
        return drive_0506
    post = int(release.split(".post")[1]) if ".post" in release else 0
    # 0.4.5.post3+, 0.4.6.post1, 0.4.7, 0.4.8.post1, 0.4.9(.post1), 0.4.10, 0.5.1: 0.4.5.post3 first reads the
    # card as 0.4.6 does (`gpu_mem = get_device_memory_capacity()`, the automatic fraction by card over 80 GB)
    if key >= (0, 4, 6) or (key == (0, 4, 5) and post >= 3):
        return drive_0501
    # 0.4.3.post3-0.4.5.post2: 0.4.0's statements with the speculative ones (the EAGLE draft shares the pool)
    if (0, 4, 3) <= key <= (0, 4, 5) and (key > (0, 4, 3) or post >= 3):
        return drive_0405
    # 0.3.6, 0.4.0 (the flag tables' oldest), 0.4.3.post2 (`if is_cuda(): gpu_mem = get_nvgpu_memory_capacity()`,
    # the automatic fraction by tp alone)
    if (0, 3, 6) <= key <= (0, 4, 5):
        return drive_0400
    raise SystemExit(f"sglang-sizing-oracle: no driver for {release} yet")


def supports(release: str, case: dict[str, Any], root: Path | None = None) -> bool:
    """Whether the release has the case's flags (--attn-dp-size is 0.5.22+, --page-size 0.4.5+) and
    its speculative algorithm (a name its speculative/spec_info.py knows)."""
    key = tuple(int(x) for x in release.split(".")[:3] if x.isdigit())
    if case["dp_mode"] == "attn_dp_size" and key < (0, 5, 22):
        return False
    if root is not None and "Qwen3-Next" in case["model"] and not (root / "sglang/srt/configs/qwen3_next.py").is_file():
        return False  # a hybrid its release has no config class for (0.5.1)
    if key < (0, 5, 2) and ("gpt-oss" in case["model"] or "gemma-3" in case["model"]):
        return False  # 0.5.1 turns the hybrid sliding-window pool on for them: its pool split is not run
    if root is not None and "3.8-27B" in case["model"] and not (root / "sglang/srt/configs/qwen3_5.py").is_file():
        return False  # a Qwen3.5-style hybrid: only releases that have its config class
    if key < (0, 4, 5) and root is not None and case["page_size"] != 1 \
            and "page_size" not in (root / "sglang/srt/server_args.py").read_text():
        return False  # 0.3.6-0.4.0: no --page-size
    if case["spec"] and root is not None:
        spec_info = root / "sglang/srt/speculative/spec_info.py"
        known = spec_info.read_text() if spec_info.is_file() else ""
        if case["spec"] not in known and (case["spec"] != "NEXTN" or not known):
            return False
    return True


def has_model_file(root: Path, arch: str) -> bool:
    """Whether the wheel has a model file for `arch` (its sglang/srt/models/*.py name it: the
    EntryClass registry); 0.3.6-0.4.0 predate Qwen3, Gemma 3, gpt-oss, Qwen2.5-VL."""
    if not hasattr(has_model_file, "_text"):
        has_model_file._text = {}  # type: ignore[attr-defined]
    cache = has_model_file._text  # type: ignore[attr-defined]
    if root not in cache:
        cache[root] = "\n".join(p.read_text() for p in sorted((root / "sglang/srt/models").glob("*.py")))
    return f"class {arch}(" in cache[root]
