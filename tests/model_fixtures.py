"""Small model directories shaped like real checkpoints: a config.json and a safetensors
index whose total_size stands in for the weights (no weights needed)."""

from __future__ import annotations

import json
from pathlib import Path

GB = 1024**3

DENSE_QWEN3_8B = {"architectures": ["Qwen3ForCausalLM"], "num_hidden_layers": 36, "num_attention_heads": 32,
                  "num_key_value_heads": 8, "head_dim": 128, "hidden_size": 4096, "torch_dtype": "bfloat16",
                  "max_position_embeddings": 40960}
#: Qwen3.5-style hybrid: 3 linear-attention (Gated DeltaNet) layers to each full-attention one,
#: sized like the stand-in's 27B (16 full-attention layers, 4 KV heads of 256)
HYBRID_QWEN35_27B = {"architectures": ["Qwen3_5ForCausalLM"], "num_hidden_layers": 66, "num_attention_heads": 24,
                     "num_key_value_heads": 4, "head_dim": 256, "hidden_size": 5120, "torch_dtype": "bfloat16",
                     "layer_types": (["linear_attention"] * 3 + ["full_attention"]) * 16 + ["linear_attention"] * 2,
                     "linear_num_key_heads": 16, "linear_key_head_dim": 128, "linear_num_value_heads": 48,
                     "linear_value_head_dim": 128, "linear_conv_kernel_dim": 4, "max_position_embeddings": 262144}
#: Qwen3-Next: the same idea spelled with full_attention_interval, inside text_config
HYBRID_QWEN3_NEXT = {"architectures": ["Qwen3NextForCausalLM"], "text_config": {
    "num_hidden_layers": 48, "num_attention_heads": 16, "num_key_value_heads": 2, "head_dim": 256,
    "full_attention_interval": 4, "linear_num_key_heads": 16, "linear_key_head_dim": 128,
    "linear_num_value_heads": 32, "linear_value_head_dim": 128, "linear_conv_kernel_dim": 4,
    "torch_dtype": "bfloat16", "max_position_embeddings": 262144}}
MLA_DEEPSEEK_V3 = {"architectures": ["DeepseekV3ForCausalLM"], "num_hidden_layers": 61, "num_attention_heads": 128,
                   "num_key_value_heads": 128, "kv_lora_rank": 512, "qk_rope_head_dim": 64, "qk_nope_head_dim": 128,
                   "v_head_dim": 128, "hidden_size": 7168, "torch_dtype": "bfloat16",
                   "max_position_embeddings": 163840}
DFLASH_DRAFT = {"architectures": ["DFlash2DraftModel"], "num_hidden_layers": 5, "num_attention_heads": 32,
                "num_key_value_heads": 8, "head_dim": 128, "torch_dtype": "bfloat16"}


def model_dir(root: Path, name: str, config: dict | None, weights_gb: float | None) -> Path:
    d = root / name
    d.mkdir(parents=True, exist_ok=True)
    if config is not None:
        (d / "config.json").write_text(json.dumps(config))
    if weights_gb is not None:
        (d / "model.safetensors.index.json").write_text(json.dumps(
            {"metadata": {"total_size": int(weights_gb * GB)}, "weight_map": {"lm_head.weight": "model-1.safetensors"}}))
    return d


def seed_models(root: Path) -> tuple[Path, Path]:
    """The seed campaign's target (~50.29 GB) and DFlash draft (~1.66 GB)."""
    return (model_dir(root, "Qwen3.6-27B", HYBRID_QWEN35_27B, 50.29),
            model_dir(root, "Qwen3.6-27B-DFlash", DFLASH_DRAFT, 1.66))
