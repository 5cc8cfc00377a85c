"""A model directory's memory shape: what preflight needs from config.json and the weights.

Only the fields SGLang's own sizing uses are read (docs/sglang.md#cell-and-slot-sizes): the layers that
keep a KV cache, KV heads and head dims (or MLA's latent width), the linear-attention
layers' conv and SSM state, and the weight bytes. A field that is missing is named, never
guessed: the caller falls back to --kv-bytes-per-token / --weights-gb.

The files are read through a `ModelFiles` reader: this host's (`LOCAL`), or one the caller
builds for a remote host (svcdiag.ops.host.preflight reads them over SSH); nothing here knows SSH.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any, Protocol

from svcdiag.errors import SvcdiagError
from svcdiag.sglang.rope import RopeCache, rope_caches

DTYPE_BYTES = {"bfloat16": 2, "float16": 2, "half": 2, "float32": 4, "float": 4, "float8_e4m3fn": 1, "fp8": 1,
               "auto": 2}
#: SGLang's default --mamba-ssm-dtype keeps the SSM state in float32
SSM_STATE_BYTES = 4


class ModelFiles(Protocol):
    """Where a model directory is read: `text` is a file's text (None: no such file), `sizes`
    the byte sizes of a folder's files named *SUFFIX (None: no such folder)."""

    def text(self, path: str) -> str | None: ...

    def sizes(self, folder: str, suffix: str) -> list[int] | None: ...

    def names(self, folder: str) -> list[str] | None: ...


class LocalFiles:
    """This host's files (symlinks followed, as a Hugging Face cache needs)."""

    def text(self, path: str) -> str | None:
        try:
            return Path(path).read_text()
        except (FileNotFoundError, NotADirectoryError):
            return None

    def sizes(self, folder: str, suffix: str) -> list[int] | None:
        d = Path(folder)
        return [f.stat().st_size for f in d.glob(f"*{suffix}")] if d.is_dir() else None

    def names(self, folder: str) -> list[str] | None:
        d = Path(folder)
        return sorted(f.name for f in d.iterdir()) if d.is_dir() else None


LOCAL = LocalFiles()

#: ORG/NAME as the Hugging Face hub spells a model id (what SGLang downloads when it is no directory)
HUB_ID_RE = re.compile(r"^[A-Za-z0-9][\w.-]*/[\w.-]+$")


def is_hub_id(model: str) -> bool:
    """`Qwen/Qwen3-8B`, not a path: no leading `/`, `.` or `~`, exactly one `/`."""
    return bool(HUB_ID_RE.match(model)) and not model.startswith((".", "~"))


def hub_caches(env: Mapping[str, str], homes: Sequence[str] = ()) -> list[str]:
    """The hub cache folders huggingface_hub would use, in its own order: HF_HUB_CACHE,
    HF_HOME/hub, XDG_CACHE_HOME/huggingface/hub, then ~/.cache/huggingface/hub of `homes`."""
    out: list[str] = []
    if env.get("HF_HUB_CACHE"):
        out.append(env["HF_HUB_CACHE"])
    if env.get("HF_HOME"):
        out.append(f"{env['HF_HOME'].rstrip('/')}/hub")
    if env.get("XDG_CACHE_HOME"):
        out.append(f"{env['XDG_CACHE_HOME'].rstrip('/')}/huggingface/hub")
    out += [f"{h.rstrip('/')}/.cache/huggingface/hub" for h in homes if h]
    return list(dict.fromkeys(out))


def hub_snapshot(model: str, caches: Sequence[str], files: ModelFiles = LOCAL) -> str | None:
    """The snapshot folder of hub id `model` in the first cache that has one with a
    config.json: the one refs/main names, else the last listed (huggingface_hub's layout
    `models--ORG--NAME/snapshots/REVISION/`). None: not cached."""
    repo = "models--" + model.replace("/", "--")
    for cache in caches:
        root = f"{cache.rstrip('/')}/{repo}"
        ref = files.text(f"{root}/refs/main")
        candidates = [ref.strip()] if ref and ref.strip() else []
        candidates += list(reversed(files.names(f"{root}/snapshots") or []))
        for rev in candidates:
            snap = f"{root}/snapshots/{rev}"
            if files.text(f"{snap}/config.json") is not None:
                return snap
    return None


class ModelInfoError(SvcdiagError):
    """config.json lacks what the budget needs; `missing` names the fields."""

    def __init__(self, path: Path | PurePosixPath, missing: list[str], why: str = ""):
        self.path, self.missing = path, missing
        what = why or f"missing {', '.join(missing)}"
        super().__init__(f"{path}: {what}; pass --kv-bytes-per-token (and --weights-gb) to preflight without it")


@dataclass(frozen=True, slots=True)
class ModelShape:
    """What the sizing needs of a model's config.json: its layers, heads and dtypes."""

    architecture: str
    kind: str  # "dense" (MHA/GQA), "hybrid" (full + linear attention), "mla"
    layers: int
    attention_layers: int  # the layers with a KV cache
    kv_heads: int = 0
    head_dim: int = 0
    v_head_dim: int = 0
    kv_lora_rank: int = 0
    qk_rope_head_dim: int = 0
    kv_dtype_bytes: int = 2
    linear_layers: int = 0
    conv_elems_per_layer: int = 0  # (kernel - 1) × conv channels, whole model (split by tp)
    ssm_elems_per_layer: int = 0  # value heads × key dim × value dim, whole model (split by tp)
    max_position_embeddings: int | None = None
    nextn_layers: int = 0  # num_nextn_predict_layers: an MTP start's draft layers when no draft path is given
    #: SGLang's ModelConfig.is_multimodal without --enable-multimodal (a vision_config, or an architecture
    #: on its multimodal_model_archs, and not on its mm_disabled_models): no prefill graph, the VLM fractions
    multimodal: bool = False
    multimodal_opt_in: bool = False  # a VLM SGLang serves text-only unless --enable-multimodal (Gemma 3, Llama 4)
    vit: tuple[int, int] | None = None  # vision_config's num_hidden_layers, hidden_size (24, 1024 unset), as SGLang reads them
    #: the weights DP attention splits over the attention group, not the whole tp (q/k/v/o of the
    #: attention layers and the input embedding, SGLang's attn_tp-sized layers), in bytes; 0: unknown
    attn_tp_weight_bytes: int = 0
    sliding_window: int | None = None  # the window SGLang's model file gives (INCLUSIVE_WINDOW_ARCHS: the config's − 1)
    swa_layers: int = 0  # sliding-window layers in their own pool (a hybrid-SWA architecture); not in attention_layers
    rope: tuple[RopeCache, ...] = ()  # the RoPE caches SGLang grows after loading when the context needs it

    def swa_kv_bytes_per_token(self, tp: int) -> int:
        """The sliding-window layers' KV bytes per token on one GPU (HybridSWAPoolConfigurator's
        swa_per_token × SWA layers; the same heads and dims as the full layers)."""
        heads = max(1, self.kv_heads // tp)
        return heads * (self.head_dim + self.v_head_dim) * self.swa_layers * self.kv_dtype_bytes

    def kv_bytes_per_token(self, tp: int) -> int:
        """SGLang's cell_size on one GPU."""
        if self.kind == "mla":  # one latent per token, replicated on every rank
            return (self.kv_lora_rank + self.qk_rope_head_dim) * self.attention_layers * self.kv_dtype_bytes
        heads = max(1, self.kv_heads // tp)  # fewer KV heads than ranks: replicated
        return heads * (self.head_dim + self.v_head_dim) * self.attention_layers * self.kv_dtype_bytes

    def mamba_bytes_per_slot(self, tp: int) -> tuple[int, int]:
        """(conv, ssm) state of one request slot on one GPU."""
        conv = self.conv_elems_per_layer * self.linear_layers * 2 // tp  # conv state in the model dtype
        ssm = self.ssm_elems_per_layer * self.linear_layers * SSM_STATE_BYTES // tp
        return conv, ssm


#: the architectures SGLang gives a hybrid sliding-window pool (0.5.23 configs/model_config.py
#: is_hybrid_swa_model, those whose config.json lists layer_types; Llama4's chunked attention aside)
SWA_ARCHS = frozenset({"GptOssForCausalLM", "GraniteSWAForCausalLM", "GraniteMoeSWAForCausalLM",
                       "MiMoV2FlashForCausalLM", "Step3p5ForCausalLM", "Gemma4ForCausalLM",
                       "Gemma4ForConditionalGeneration", "LagunaForCausalLM", "MellumForCausalLM"})

#: the SWA architectures whose model file hands SGLang config.json's window less one (HF's window counts
#: the last token, SGLang's does not: 0.5.23 models/gpt_oss.py and gemma4_causal.py
#: get_attention_sliding_window_size, `config.sliding_window - 1`); the others' is the config's own
INCLUSIVE_WINDOW_ARCHS = frozenset({"GptOssForCausalLM", "Gemma4ForCausalLM", "Gemma4ForConditionalGeneration"})


#: 0.5.23 configs/model_config.py multimodal_model_archs: the architectures ModelConfig calls multimodal
#: whether or not config.json has a vision_config (the older releases' lists are subsets)
MULTIMODAL_ARCHS = frozenset({
    "CLIPModel", "Cohere2VisionForConditionalGeneration", "Cosmos3EdgeForConditionalGeneration",
    "DeepseekVL2ForCausalLM", "Ernie4_5_VLMoeForConditionalGeneration", "MiniMaxM3SparseForConditionalGeneration",
    "Gemma3ForConditionalGeneration", "Gemma3nForConditionalGeneration", "Gemma4ForConditionalGeneration",
    "EmbeddingGemma2Model", "Gemma4UnifiedForConditionalGeneration", "DiffusionGemmaForBlockDiffusion",
    "Glm4vForConditionalGeneration", "Glm4vMoeForConditionalGeneration", "Glm5NextForConditionalGeneration",
    "GlmOcrForConditionalGeneration", "GlmAsrForConditionalGeneration", "GlmImageForConditionalGeneration",
    "Grok1VForCausalLM", "Grok1AForCausalLM", "LlavaLlamaForCausalLM", "Llama4ForConditionalGeneration",
    "LlavaMistralForCausalLM", "LlavaQwenForCausalLM", "LlavaForConditionalGeneration", "LlavaVidForCausalLM",
    "Lfm2VlForConditionalGeneration", "LightOnOCRForConditionalGeneration", "MiMoV2ForCausalLM",
    "MiMoV2ASRForCausalLM", "MiniCPMO", "MiniCPMV", "Mistral3ForConditionalGeneration", "MultiModalityCausalLM",
    "MllamaForConditionalGeneration", "MossVLForConditionalGeneration", "NemotronH_Nano_VL_V2",
    "NemotronH_Nano_Omni_Reasoning_V3", "NemotronH_Omni_Reasoning_V3", "MuseGlimmerForConditionalGeneration",
    "MuseSparkForConditionalGeneration", "PixtralForConditionalGeneration", "Qwen2AudioForConditionalGeneration",
    "Qwen2VLForConditionalGeneration", "Qwen2_5_VLForConditionalGeneration", "Qwen3VLForConditionalGeneration",
    "Qwen3VLMoeForConditionalGeneration", "Qwen3_5ForConditionalGeneration", "Qwen3_5MoeForConditionalGeneration",
    "Qwen4ExpForConditionalGeneration", "InternS2PreviewForConditionalGeneration",
    "InternS2MobiusForConditionalGeneration", "Qwen3ASRForConditionalGeneration",
    "Qwen3OmniMoeForConditionalGeneration", "KimiVLForConditionalGeneration",
    "LocateAnythingForConditionalGeneration", "InternVLChatModel", "InternS1ForConditionalGeneration",
    "InternS1ProForConditionalGeneration", "Phi4MMForCausalLM", "VoxtralForConditionalGeneration",
    "WhisperForConditionalGeneration", "Step3VLForConditionalGeneration", "POINTSV15ChatModel",
    "DotsVLMForCausalLM", "Dots3NoteForCausalLM", "DotsOCRForCausalLM", "Sarashina2VisionForCausalLM",
    "NVILAForConditionalGeneration", "NVILALiteForConditionalGeneration", "DeepseekOCRForCausalLM",
    "UnlimitedOCRForCausalLM", "JetVLMForConditionalGeneration", "PaddleOCRVLForConditionalGeneration",
    "MiDashengLMModel", "StepVLForConditionalGeneration", "Step3p7ForConditionalGeneration",
    "KimiK25ForConditionalGeneration", "BailingMMNativeForConditionalGeneration",
    "BailingMM2NativeForConditionalGeneration", "BailingMoeV3VLForConditionalGeneration"})
#: ModelConfig.__init__'s mm_disabled_models (0.4.6+: Gemma 3 and Llama 4; 0.5.1 Step3-VL; 0.5.18
#: Inkling): `enable_multimodal` None → False, so SGLang serves them text-only, sized as no VLM
MULTIMODAL_OFF_ARCHS = frozenset({"Gemma3ForConditionalGeneration", "Llama4ForConditionalGeneration",
                                  "Step3VLForConditionalGeneration", "InklingForConditionalGeneration"})


def _text_config(cfg: dict[str, Any]) -> dict[str, Any]:
    """Multimodal checkpoints (Qwen3.5-VL style) keep the language model's fields in text_config."""
    inner = cfg.get("text_config")
    return {**cfg, **inner} if isinstance(inner, dict) else cfg


def shape_from_config(cfg: dict[str, Any], path: Path | PurePosixPath) -> ModelShape:
    c = _text_config(cfg)
    arch = (c.get("architectures") or [c.get("model_type") or "unknown"])[0]
    need: list[str] = []

    def get(key: str) -> Any:
        value = c.get(key)
        if value is None:
            need.append(key)
        return value

    layers = get("num_hidden_layers")
    vision = cfg.get("vision_config")
    top = (cfg.get("architectures") or [None])[0]
    vlm = isinstance(vision, dict) or top in MULTIMODAL_ARCHS
    extra: dict[str, Any] = {"nextn_layers": int(c.get("num_nextn_predict_layers") or 0),
                             "multimodal": vlm and top not in MULTIMODAL_OFF_ARCHS,
                             "multimodal_opt_in": vlm and top in MULTIMODAL_OFF_ARCHS, "rope": rope_caches(cfg)}
    if isinstance(vision, dict):
        extra["vit"] = (int(vision.get("num_hidden_layers") or 24), int(vision.get("hidden_size") or 1024))
    dtype = DTYPE_BYTES.get(str(c.get("torch_dtype") or c.get("dtype") or "bfloat16").replace("torch.", ""), 2)
    if c.get("kv_lora_rank"):
        rope = get("qk_rope_head_dim")
        if need:
            raise ModelInfoError(path, need)
        return ModelShape(arch, "mla", layers, layers, kv_lora_rank=int(c["kv_lora_rank"]), qk_rope_head_dim=rope,
                          kv_dtype_bytes=dtype, max_position_embeddings=c.get("max_position_embeddings"), **extra)
    heads = get("num_attention_heads")
    kv_heads = c.get("num_key_value_heads") or heads
    head_dim = c.get("head_dim") or (c["hidden_size"] // heads if c.get("hidden_size") and heads else None)
    if head_dim is None:
        need.append("head_dim (or hidden_size)")
    types = c.get("layer_types")
    interval = c.get("full_attention_interval")
    linear = 0
    if arch in SWA_ARCHS and isinstance(types, list) and "sliding_attention" in types and c.get("sliding_window"):
        extra["swa_layers"] = sum(1 for t in types if t == "sliding_attention")
        extra["sliding_window"] = int(c["sliding_window"]) - (1 if arch in INCLUSIVE_WINDOW_ARCHS else 0)
        attention = len(types) - extra["swa_layers"]
    elif isinstance(types, list) and any("linear" in str(t) for t in types):
        linear = sum(1 for t in types if "linear" in str(t))
        attention = len(types) - linear
    elif interval and layers:
        attention = layers // int(interval)
        linear = layers - attention
    else:
        attention = layers
    if need or kv_heads is None or head_dim is None:
        raise ModelInfoError(path, need, f"unknown architecture {arch!r}: missing {', '.join(need)}")
    hidden, vocab = c.get("hidden_size"), c.get("vocab_size")
    if hidden and vocab and heads and not c.get("quantization_config"):
        # qwen2_moe.py / qwen3_moe.py: QKVParallelLinear and o_proj over attn_tp_size, embed_tokens
        # with use_attn_tp_group; lm_head stays on the whole tp
        qkvo = (attention + extra.get("swa_layers", 0)) * hidden * head_dim * (2 * heads + 2 * kv_heads)
        extra["attn_tp_weight_bytes"] = (qkvo + vocab * hidden) * dtype
    if not linear:
        return ModelShape(arch, "dense", layers, attention, kv_heads, head_dim, head_dim, kv_dtype_bytes=dtype,
                          max_position_embeddings=c.get("max_position_embeddings"), **extra)
    hk, dk = get("linear_num_key_heads"), get("linear_key_head_dim")
    hv, dv = get("linear_num_value_heads"), get("linear_value_head_dim")
    kernel = get("linear_conv_kernel_dim")
    if need:
        raise ModelInfoError(path, need, f"hybrid {arch!r} with {linear} linear-attention layers: "
                             f"missing {', '.join(need)}")
    return ModelShape(arch, "hybrid", layers, attention, kv_heads, head_dim, head_dim, kv_dtype_bytes=dtype,
                      linear_layers=linear, conv_elems_per_layer=(kernel - 1) * (2 * hk * dk + hv * dv),
                      ssm_elems_per_layer=hv * dk * dv, max_position_embeddings=c.get("max_position_embeddings"),
                      **extra)


def read_shape(model_dir: str | Path, files: ModelFiles = LOCAL) -> ModelShape:
    return read_config_json(PurePosixPath(model_dir) / "config.json", files)


def read_config_json(path: PurePosixPath, files: ModelFiles = LOCAL) -> ModelShape:
    """The shape a config.json gives (the model folder's own, or preflight --model-config's file
    by another name); errors name the file."""
    try:
        text = files.text(str(path))
        if text is None:
            raise ModelInfoError(path, ["config.json"], "no such file")
        cfg = json.loads(text)
    except (OSError, ValueError) as e:
        raise ModelInfoError(path, ["config.json"], f"cannot read: {e}") from None
    if not isinstance(cfg, dict):
        raise ModelInfoError(path, ["config.json"], "not a JSON object")
    return shape_from_config(cfg, path)


def weight_bytes(model_dir: str | Path, files: ModelFiles = LOCAL) -> int:
    """The checkpoint's size: the safetensors index's total_size, else the *.safetensors files' sizes."""
    d = PurePosixPath(model_dir)
    index = d / "model.safetensors.index.json"
    try:
        text = files.text(str(index))
    except OSError as e:  # a folder by that name, or unreadable
        raise SvcdiagError(f"{index}: cannot read ({e})") from None
    if text is not None:
        try:
            return int(json.loads(text)["metadata"]["total_size"])
        except (ValueError, KeyError, TypeError) as e:
            raise SvcdiagError(f"{index}: no metadata.total_size ({e})") from None
    sizes = files.sizes(str(d), ".safetensors") or []
    if not sizes:
        raise SvcdiagError(f"{d}: no model.safetensors.index.json and no *.safetensors files")
    return sum(sizes)


# ---------------------------------------------------------------- public config.json facts
#
# The fields SGLang's sizing reads, as the models' public config.json files on the Hugging Face
# hub give them, for the models of the logs in tests/fixtures/sglang (the memory back-test,
# bench/memory_backtest.py). Keyed by the model's folder name, lower case.

_LLAMA_8B = {"architectures": ["LlamaForCausalLM"], "num_hidden_layers": 32, "num_attention_heads": 32,
             "num_key_value_heads": 8, "hidden_size": 4096, "max_position_embeddings": 131072}
_LLAMA_70B = {"architectures": ["LlamaForCausalLM"], "num_hidden_layers": 80, "num_attention_heads": 64,
              "num_key_value_heads": 8, "hidden_size": 8192, "max_position_embeddings": 131072}
_DEEPSEEK_V3 = {"architectures": ["DeepseekV3ForCausalLM"], "num_hidden_layers": 61, "num_attention_heads": 128,
                "num_key_value_heads": 128, "kv_lora_rank": 512, "qk_rope_head_dim": 64,
                "max_position_embeddings": 163840}
_QWEN3_8B = {"architectures": ["Qwen3ForCausalLM"], "num_hidden_layers": 36, "num_attention_heads": 32,
             "num_key_value_heads": 8, "head_dim": 128, "max_position_embeddings": 40960}
_QWEN3_30B_A3B = {"architectures": ["Qwen3MoeForCausalLM"], "num_hidden_layers": 48, "num_attention_heads": 32,
                  "num_key_value_heads": 4, "head_dim": 128, "max_position_embeddings": 40960}
_QWEN25_7B = {"architectures": ["Qwen2ForCausalLM"], "num_hidden_layers": 28, "num_attention_heads": 28,
              "num_key_value_heads": 4, "hidden_size": 3584, "max_position_embeddings": 32768}
_QWEN3_NEXT = {"architectures": ["Qwen3NextForCausalLM"], "num_hidden_layers": 48, "num_attention_heads": 16,
               "num_key_value_heads": 2, "head_dim": 256, "full_attention_interval": 4,
               "linear_num_key_heads": 16, "linear_key_head_dim": 128, "linear_num_value_heads": 32,
               "linear_value_head_dim": 128, "linear_conv_kernel_dim": 4, "max_position_embeddings": 262144}

#: huggingface.co/deepseek-ai/DeepSeek-R1-Distill-Qwen-7B config.json, as its fine-tunes carry it
#: (e.g. huggingface.co/unsloth/DeepSeek-R1-Distill-Qwen-7B-bnb-4bit/blame/main/config.json)
_R1_DISTILL_QWEN_7B = {**_QWEN25_7B, "max_position_embeddings": 131072}
#: huggingface.co/Qwen/Qwen3.8-27B config.json text_config (model_type qwen3_5_text), as public code
#: that loads it pins it (the Qwen3.8-27B contract and metadata tests of MLX ports); the FP8 checkpoint
#: has the same text_config. Its state per slot, 146.81 MiB, is the figure SGLang itself printed for it
#: (github.com/farbodtavakkoli/OTel inference/sglang/llm/README.md: mamba_cache_per_req=146.81 MB).
#: Its RoPE (svcdiag.sglang.rope): partial_rotary_factor 0.25 of the 256 head dims, and the vision
#: tower's (hidden 1152 over 16 heads), as Qwen3.5-27B's config.json has them.
_QWEN38_27B = {"architectures": ["Qwen3_5ForConditionalGeneration"], "text_config": {
    "num_hidden_layers": 64, "num_attention_heads": 24, "num_key_value_heads": 4, "head_dim": 256,
    "full_attention_interval": 4, "linear_num_key_heads": 16, "linear_key_head_dim": 128,
    "linear_num_value_heads": 48, "linear_value_head_dim": 128, "linear_conv_kernel_dim": 4,
    "max_position_embeddings": 262144, "partial_rotary_factor": 0.25},
    "vision_config": {"hidden_size": 1152, "num_heads": 16}}

PUBLIC_CONFIGS: dict[str, dict[str, Any]] = {
    "llama-3.1-8b-instruct": _LLAMA_8B, "meta-llama-3.1-8b-instruct": _LLAMA_8B, "meta-llama-3.1-8b": _LLAMA_8B,
    "llama-3.1-70b-instruct": _LLAMA_70B, "llama-3.3-70b-instruct": _LLAMA_70B,
    "deepseek-r1-distill-llama-70b": _LLAMA_70B,
    "deepseek-v3": _DEEPSEEK_V3, "deepseek-v3-0324": _DEEPSEEK_V3, "deepseek-r1": _DEEPSEEK_V3,
    "deepseek-r1-0528": _DEEPSEEK_V3, "deepseek-v3.1": _DEEPSEEK_V3,
    "qwen3-8b": _QWEN3_8B, "qwen3-embedding-8b": _QWEN3_8B,
    "qwen3-14b": {**_QWEN3_8B, "num_hidden_layers": 40, "num_attention_heads": 40},
    "qwen3-32b": {**_QWEN3_8B, "num_hidden_layers": 64, "num_attention_heads": 64},
    "qwen3-4b-instruct-2507": {**_QWEN3_8B, "max_position_embeddings": 262144},
    "qwen3-30b-a3b": _QWEN3_30B_A3B, "qwen3-30b-a3b-fp8": _QWEN3_30B_A3B,
    "qwen2.5-7b-instruct": _QWEN25_7B, "gte-qwen2-7b-instruct": _QWEN25_7B,
    "qwen2.5-vl-7b-instruct": {**_QWEN25_7B, "architectures": ["Qwen2_5_VLForConditionalGeneration"],
                               "max_position_embeddings": 128000},
    "qwen2.5-14b-instruct": {"architectures": ["Qwen2ForCausalLM"], "num_hidden_layers": 48, "num_attention_heads": 40,
                             "num_key_value_heads": 8, "hidden_size": 5120, "max_position_embeddings": 32768},
    "qwen2.5-72b-instruct-awq": {"architectures": ["Qwen2ForCausalLM"], "num_hidden_layers": 80,
                                 "num_attention_heads": 64, "num_key_value_heads": 8, "hidden_size": 8192,
                                 "max_position_embeddings": 32768},
    "qwen2.5-0.5b-instruct": {"architectures": ["Qwen2ForCausalLM"], "num_hidden_layers": 24, "num_attention_heads": 14,
                              "num_key_value_heads": 2, "hidden_size": 896, "max_position_embeddings": 32768},
    "qwen3-vl-32b-instruct": {"architectures": ["Qwen3VLForConditionalGeneration"], "text_config": {
        **_QWEN3_8B, "num_hidden_layers": 64, "num_attention_heads": 64, "max_position_embeddings": 262144}},
    "qwen3-next-80b-a3b-instruct": _QWEN3_NEXT, "qwen3-next-80b-a3b-instruct-fp8": _QWEN3_NEXT,
    "deepseek-r1-distill-qwen-7b": _R1_DISTILL_QWEN_7B,
    "qwen3.8-27b": _QWEN38_27B, "qwen3.8-27b-fp8": _QWEN38_27B,
}


def public_shape(model_path: str) -> ModelShape | None:
    """The shape of a model known by name (its folder or hub id's last part), else None."""
    name = PurePosixPath(model_path.rstrip("/")).name.lower()
    cfg = PUBLIC_CONFIGS.get(name)
    return None if cfg is None else shape_from_config(cfg, PurePosixPath(f"public:{name}/config.json"))
