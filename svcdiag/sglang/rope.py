"""The RoPE cos/sin caches SGLang grows between its two free-memory readings.

From 0.5.6 on, `ModelRunner.load_model` calls `reserve_rope_cache_for_long_sequences`
(`utils/common.py`) after its 'Load weight end' reading and before the reading the pools are
sized on (`_profile_available_bytes`). It asks every RoPE module of the model for

    reserve = align128(context + 2 · speculative_num_steps · speculative_num_draft_tokens + 256)

positions (SGLANG_SPEC_EXPANSION_SAFETY_FACTOR 2, SGLANG_ROPE_CACHE_SAFETY_MARGIN 256,
SGLANG_ROPE_CACHE_ALIGN 128), and a module whose cache is shorter grows it to `reserve` rows
by `torch.cat` into a new tensor (`rotary_embedding/base.py` `_ensure_cos_sin_cache_length`):
rows × rotary dims in float32 on CUDA, in the model dtype on ROCm. Which modules, and how long
their cache is when the model is built, follows from config.json (`rotary_embedding/factory.py`
`get_rope`): the text model's (max_position_embeddings; YaRN: original × factor; linear and
dynamic NTK: × factor), and a Qwen3-VL-style vision tower's (8,192 rows, half its head dim).

Whether the old block goes back to the driver is the caching allocator's history, which no
input shows: `empty_cache` returns a segment only when all of it is free. So the loss has two
ends: every grown cache's new segment (the old block kept), or that less the old segments (the
old block released). The real logs (docs/preflight.md#back-test) put CUDA starts at the second
end (Qwen3-14B; the Qwen3.8-27B starts, whose vision cache is all new) and ROCm starts at the
first (the RDNA4 rig's Qwen3-Coder starts, whose cache is cast to the model dtype after it is
computed): `nominal_bytes` is that end, preflight states the other as its uncertainty.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

MiB = 1024**2
#: the first release whose model runner grows the caches (the 0.5.6 wheel has it, 0.5.3's has not)
FIRST_RELEASE = "0.5.6"
SAFETY_FACTOR, MARGIN, ALIGN = 2, 256, 128
#: the caching allocator (c10/cuda/CUDACachingAllocator.cpp): a block of 10 MiB or more gets its own
#: segment, rounded up to 2 MiB; a smaller one is carved from a shared segment (counted as its bytes)
OWN_SEGMENT, SEGMENT_ROUND = 10 * MiB, 2 * MiB
#: rope types whose class keeps no growable cos_sin_cache (Phi-3 longrope's long/short caches)
NOT_GROWN = frozenset({"longrope", "su"})
#: architectures whose vision tower builds its RoPE with get_rope(max_position=8192, rotary_dim=head_dim // 2)
#: (models/qwen3_vl.py and the models built on its vision tower, glm4v.py, ernie45_vl.py)
VISION_ROPE_ARCHS = ("Qwen3VL", "Qwen3_5", "Qwen3OmniMoe", "Glm4v", "Ernie4_5_VL")
VISION_ROPE_ROWS = 8192


@dataclass(frozen=True, slots=True)
class RopeCache:
    """One RoPE module's cos/sin cache as the model is built: its rows and rotary dims."""

    where: str  # "text" or "vision"
    rows: int
    rotary_dim: int


@dataclass(frozen=True, slots=True)
class RopeGrowth:
    """What growing the caches takes between the two readings, in bytes on one GPU."""

    kept_bytes: int  # the new segments: the old blocks kept by the allocator
    released_bytes: int  # the old segments the allocator may give back
    grown: tuple[tuple[str, int, int], ...] = ()  # (where, rows before, rows after) per grown cache
    rocm: bool = False

    @property
    def least_bytes(self) -> int:
        return self.kept_bytes - self.released_bytes

    @property
    def nominal_bytes(self) -> int:
        """The end the real logs of its platform show: old blocks kept on ROCm, released on CUDA."""
        return self.kept_bytes if self.rocm else self.least_bytes


NONE = RopeGrowth(0, 0)


def rope_caches(cfg: dict[str, Any]) -> tuple[RopeCache, ...]:
    """The growable RoPE caches a config.json's model builds (its text_config for a VLM)."""
    inner = cfg.get("text_config")
    c = {**cfg, **inner} if isinstance(inner, dict) else cfg
    out: list[RopeCache] = []
    max_pos = c.get("max_position_embeddings")
    scaling = c.get("rope_scaling") or c.get("rope_parameters") or None
    kind = str((scaling or {}).get("rope_type") or (scaling or {}).get("type") or "default")
    if c.get("dual_chunk_attention_config"):
        kind = "dual_chunk"  # DualChunkRotaryEmbedding: no cos_sin_cache to grow
    heads = c.get("num_attention_heads")
    head_dim = c.get("head_dim") or (c["hidden_size"] // heads if c.get("hidden_size") and heads else None)
    partial = c.get("partial_rotary_factor") or (scaling or {}).get("partial_rotary_factor") or 1.0
    rotary = int(c["qk_rope_head_dim"]) if c.get("kv_lora_rank") and c.get("qk_rope_head_dim") \
        else int(head_dim * float(partial)) if head_dim else 0
    if max_pos and rotary and kind not in NOT_GROWN and kind != "dual_chunk":
        rows = int(max_pos)
        factor = float((scaling or {}).get("factor") or 1.0)
        if kind in ("yarn", "deepseek_yarn"):  # get_rope passes original_max_position_embeddings; the class × factor
            rows = int(int((scaling or {}).get("original_max_position_embeddings") or max_pos) * factor)
        elif kind in ("linear", "dynamic") and "alpha" not in (scaling or {}):
            rows = int(max_pos * factor)
        out.append(RopeCache("text", rows, rotary))
    arch = str((cfg.get("architectures") or [""])[0])
    vision = cfg.get("vision_config")
    if isinstance(vision, dict) and arch.startswith(VISION_ROPE_ARCHS):
        hidden, vheads = vision.get("hidden_size"), vision.get("num_heads") or vision.get("num_attention_heads")
        if hidden and vheads:
            out.append(RopeCache("vision", VISION_ROPE_ROWS, int(hidden) // int(vheads) // 2))
    return tuple(out)


def reserve_rows(context_len: int, speculative_num_steps: int = 0, num_draft_tokens: int = 0) -> int:
    """The positions reserve_rope_cache_for_long_sequences asks every RoPE module for."""
    reserve = context_len + (speculative_num_steps or 0) * (num_draft_tokens or 0) * SAFETY_FACTOR + MARGIN
    return (reserve + ALIGN - 1) // ALIGN * ALIGN


def segment(nbytes: int) -> int:
    """The bytes a block of `nbytes` holds the driver to: its own segment, rounded to 2 MiB, or its bytes."""
    return -(-nbytes // SEGMENT_ROUND) * SEGMENT_ROUND if nbytes >= OWN_SEGMENT else nbytes


def grows(version: str | None) -> bool:
    """Whether the release grows the caches after loading (the newest when unknown)."""
    if not version:
        return True
    from svcdiag.sglang.flag_tables import version_key

    try:
        return version_key(version) >= version_key(FIRST_RELEASE)
    except ValueError:
        return True


def rope_growth(caches: tuple[RopeCache, ...], context_len: int, *, version: str | None = None,
                rocm: bool = False, dtype_bytes: int = 2, speculative_num_steps: int = 0,
                num_draft_tokens: int = 0) -> RopeGrowth:
    """What the release's model runner allocates growing `caches` for `context_len`: each cache
    shorter than the reserve becomes `reserve` rows × rotary dims × 4 bytes (CUDA, float32) or
    × `dtype_bytes` (ROCm, the model dtype). The old cache's segment is the part that may come back."""
    if not grows(version) or context_len <= 0:
        return NONE
    reserve = reserve_rows(context_len, speculative_num_steps, num_draft_tokens)
    width = dtype_bytes if rocm else 4
    kept = released = 0
    grown: list[tuple[str, int, int]] = []
    for c in caches:
        if reserve - 1 < c.rows:  # _ensure_cos_sin_cache_length: needed_max_pos < cur_len
            continue
        new_rows = (reserve - 1 + ALIGN) // ALIGN * ALIGN
        kept += segment(new_rows * c.rotary_dim * width)
        old = c.rows * c.rotary_dim * width
        released += segment(old) if old >= OWN_SEGMENT else 0  # a shared segment stays
        grown.append((c.where, c.rows, new_rows))
    return RopeGrowth(kept, released, tuple(grown), rocm)
