"""The RoPE caches SGLang grows between its 'Load weight end' reading and the pool sizing
(0.5.6+ reserve_rope_cache_for_long_sequences): which caches grow is the config's, how much
the allocator keeps is not, so preflight takes one end and states the other (docs/preflight.md)."""

from __future__ import annotations

from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from svcdiag.sglang import rope
from svcdiag.sglang.memory import GB

from .test_preflight_uncertainty import dense, read_by_nvidia_smi

MiB = 1024**2
QWEN3_CODER = {"architectures": ["Qwen3MoeForCausalLM"], "num_attention_heads": 32, "num_key_value_heads": 4,
               "head_dim": 128, "max_position_embeddings": 262144}
QWEN3_VL = {"architectures": ["Qwen3VLForConditionalGeneration"], "text_config": {**QWEN3_CODER},
            "vision_config": {"hidden_size": 1152, "num_heads": 16}}


def test_a_context_at_the_models_length_grows_its_cache_to_the_reserve() -> None:
    """262,144 + 256 positions, aligned to 128: 262,400 rows × 128 dims, 2 bytes on ROCm; the new
    block is a 66 MiB segment, the old one's 64 MiB is what the allocator may give back."""
    caches = rope.rope_caches(QWEN3_CODER)
    g = rope.rope_growth(caches, 262144, version="0.5.11", rocm=True)
    assert g.grown == (("text", 262144, 262400),)
    assert (g.kept_bytes, g.released_bytes) == (66 * MiB, 64 * MiB)
    assert g.nominal_bytes == g.kept_bytes  # ROCm: the old block kept, as the RDNA4 Qwen3-Coder starts show
    cuda = rope.rope_growth(caches, 262144, version="0.5.11")
    assert cuda.kept_bytes == 130 * MiB and cuda.nominal_bytes == 2 * MiB  # float32; the old block released


def test_a_shorter_context_or_an_older_release_grows_nothing() -> None:
    caches = rope.rope_caches(QWEN3_CODER)
    assert rope.rope_growth(caches, 131072, version="0.5.11") == rope.NONE
    assert rope.rope_growth(caches, 262144, version="0.5.3") == rope.NONE  # before 0.5.6
    assert rope.rope_growth(caches, 262144 - 256, version="0.5.23").grown == ()  # 262,144 rows suffice


def test_speculative_steps_reserve_more_positions() -> None:
    """2 × steps × draft tokens more (SGLANG_SPEC_EXPANSION_SAFETY_FACTOR): a cache one margin long grows."""
    caches = rope.rope_caches({**QWEN3_CODER, "max_position_embeddings": 131072 + 256})
    assert rope.rope_growth(caches, 131072, version="0.5.23").grown == ()
    grown = rope.rope_growth(caches, 131072, version="0.5.23", speculative_num_steps=3, num_draft_tokens=4).grown
    assert grown == (("text", 131328, 131456),)


def test_yarn_and_partial_rotary_set_the_cache_a_model_is_built_with() -> None:
    """YaRN's cache is original × factor (get_rope passes the original length); a partial rotary
    factor narrows it; longrope keeps no growable cache; a Qwen3-VL vision tower adds 8,192 rows."""
    yarn = {**QWEN3_CODER, "max_position_embeddings": 40960,
            "rope_scaling": {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 32768}}
    assert rope.rope_caches(yarn) == (rope.RopeCache("text", 131072, 128),)
    assert rope.rope_caches({**QWEN3_CODER, "head_dim": 256, "partial_rotary_factor": 0.25})[0].rotary_dim == 64
    assert rope.rope_caches({**QWEN3_CODER, "rope_scaling": {"type": "longrope", "short_factor": [1.0],
                                                             "long_factor": [1.0]}}) == ()
    assert rope.rope_caches(QWEN3_VL) == (rope.RopeCache("text", 262144, 128), rope.RopeCache("vision", 8192, 36))
    g = rope.rope_growth(rope.rope_caches(QWEN3_VL), 262144, version="0.5.18")
    assert [w for w, _, _ in g.grown] == ["text", "vision"]
    assert g.nominal_bytes == 2 * MiB + 38 * MiB  # the vision cache is all new: 262,400 × 36 × 4 bytes


@given(ctx=st.integers(1, 1 << 20), steps=st.integers(0, 8), draft=st.integers(0, 16),
       rows=st.integers(1, 1 << 20))
def test_a_cache_grows_exactly_when_it_is_shorter_than_the_reserve(ctx: int, steps: int, draft: int,
                                                                   rows: int) -> None:
    reserve = rope.reserve_rows(ctx, steps, draft)
    assert reserve % 128 == 0 and ctx + 256 + 2 * steps * draft <= reserve < ctx + 256 + 2 * steps * draft + 128
    g = rope.rope_growth((rope.RopeCache("text", rows, 64),), ctx, version="0.5.23", speculative_num_steps=steps,
                         num_draft_tokens=draft)
    assert bool(g.grown) == (rows < reserve)
    assert 0 <= g.least_bytes <= g.kept_bytes
    if g.grown:
        assert g.grown[0][2] == reserve and g.kept_bytes >= reserve * 64 * 4


def test_preflight_states_the_rope_growth_as_uncertainty(units: Path, tmp_path: Path, monkeypatch) -> None:
    """Qwen3-8B at its whole 40,960 context: SGLang grows its cache to 41,216 rows after loading,
    so preflight's nominal takes the new block off and its interval says how much more the
    allocator may give back; at 32,768 nothing grows and nothing is said."""
    read_by_nvidia_smi(monkeypatch, 23.0)
    from svcdiag.ops.host.preflight import plan

    full = plan(dense(units, tmp_path, "full", 40960))
    short = plan(dense(units, tmp_path, "short", 32768))
    assert full.inputs is not None and short.inputs is not None
    assert full.inputs.rope_growth.grown == (("text", 40960, 41216),)
    assert short.inputs.rope_growth == rope.NONE
    why = full.prediction.interval["why"]
    assert any("RoPE caches SGLang grows after loading (text 40,960 → 41,216 rows)" in w for w in why)
    assert not any("RoPE" in w for w in short.prediction.interval["why"])
    # the allocator releasing the old 20 MiB block is the interval's high end, beyond the reading's own
    lo, hi = full.prediction.interval["kv_tokens"]
    assert hi > full.prediction.kv_tokens > lo
    assert full.inputs.rope_growth.least_bytes / GB < 0.01
