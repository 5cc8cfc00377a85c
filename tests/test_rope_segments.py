"""bench/rope_segments.py's replay of the caching allocator on SGLang's RoPE growth: the segment
sizes docs/preflight.md#back-test ("The ROCm VLM residual") quotes for the MI355X, GB10 and CUDA
starts, and the bounds the allocator's rules put on any growth."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

BENCH = Path(__file__).resolve().parent.parent / "bench" / "rope_segments.py"
MiB = 1 << 20


def _load():
    spec = importlib.util.spec_from_file_location("rope_segments", BENCH)
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


REPLAY = _load()


@pytest.fixture(scope="module")
def seg():
    return REPLAY


def test_rocm_vision_cache_lands_in_the_freed_float32_cat_segment(seg) -> None:
    # Qwen3.5-397B-A17B's vision cache (36 rotary dims, bf16 on ROCm): 9.02 MiB at 131,072, held by an
    # 18 MiB segment; 18.02 MiB at 262,144, held by a 36 MiB one (the model takes 9.02 and 20)
    assert seg.replay(8192, 131328, 36, 2) == 18 * MiB
    assert seg.replay(8192, 262400, 36, 2) == 36 * MiB


def test_a_cache_of_10_mib_or_more_gets_its_own_rounded_segment_when_the_temporaries_are_small(seg) -> None:
    assert seg.replay(262144, 262400, 64, 2) == 34 * MiB  # the text cache, 32.03 MiB: 256 new rows
    assert seg.replay(262144, 262400, 128, 4) == 130 * MiB  # CUDA float32, 128.13 MiB


def test_on_cuda_the_float32_cat_is_alive_so_a_large_cache_gets_a_new_segment(seg) -> None:
    # Qwen3.8-27B's vision cache on CUDA: 36.04 MiB, its own 38 MiB segment (as the model takes it)
    assert seg.replay(8192, 262400, 36, 4) == 38 * MiB


def test_a_small_cache_shares_the_20_mib_segment_its_temporaries_opened(seg) -> None:
    # the GB10 Qwen3.5-4B start: 33,024 rows × 32 × 4 bytes = 4.03 MiB, in a kLargeBuffer segment
    assert seg.replay(8192, 33024, 32, 4) == 20 * MiB
    # under 1 MiB the new cache is carved from the small pool: its own bytes
    assert seg.replay(1024, 2048, 64, 2) == 2048 * 64 * 2


@given(rows=st.integers(1, 300_000), extra=st.integers(1, 300_000), dims=st.sampled_from([32, 36, 64, 128]),
       width=st.sampled_from([2, 4]))
def test_the_held_segment_is_one_the_growth_could_open(rows: int, extra: int, dims: int, width: int) -> None:
    new_len = rows + extra
    final = new_len * dims * width

    def own(n: int) -> int:
        return -(-n // (2 * MiB)) * 2 * MiB

    held = REPLAY.replay(rows, new_len, dims, width)
    assert held >= final
    assert held <= max(20 * MiB, own(final), own(extra * dims * 4))
