import json, sys
from pathlib import Path
GB=1024**3
qwen = {"architectures": ["Qwen3_5ForCausalLM"], "num_hidden_layers": 66, "num_attention_heads": 24,
        "num_key_value_heads": 4, "head_dim": 256, "hidden_size": 5120, "max_position_embeddings": 262144,
        "layer_types": (["linear_attention"]*3 + ["full_attention"])*16 + ["linear_attention"]*2,
        "linear_num_key_heads": 16, "linear_key_head_dim": 128, "linear_num_value_heads": 48,
        "linear_value_head_dim": 128, "linear_conv_kernel_dim": 4, "torch_dtype": "bfloat16"}
Path(".scratch/m/q/config.json").write_text(json.dumps(qwen))
Path(".scratch/m/q/model.safetensors.index.json").write_text(json.dumps({"metadata": {"total_size": int(50.29*GB)}, "weight_map": {}}))
Path(".scratch/m/d/config.json").write_text(json.dumps({"architectures": ["DFlash2DraftModel"], "num_hidden_layers": 5}))
Path(".scratch/m/d/model.safetensors.index.json").write_text(json.dumps({"metadata": {"total_size": int(1.66*GB)}, "weight_map": {}}))
