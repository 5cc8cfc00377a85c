#!/usr/bin/env python3
"""What the caching allocator holds after SGLang grows the RoPE caches, replayed op by op, beside
what svcdiag's model takes (svcdiag.sglang.rope), for every real back-test log whose caches grow
(tests/fixtures/memory-backtest/index.toml). docs/preflight.md#back-test ("The ROCm VLM residual")
quotes its figures.

`_ensure_cos_sin_cache_length` (rotary_embedding/base.py, the same ops 0.5.9 to 0.5.19) allocates,
in order: inv_freq (.to(device)), arange (n × 4 B), the einsum outer product, cos, sin (n × d/2 × 4 B
each), their cat (n × d × 4 B), `.to(dtype)` (a copy on ROCm, the model dtype; the same tensor on
CUDA, float32), then the new cache, `cat((old, new_rows))` (new_len × d × w). The replay follows
c10/cuda/CUDACachingAllocator.cpp's default configuration, the same code under HIP: requests rounded
to 512 B; ≤ 1 MiB from the small pool (2 MiB segments), else the large pool; the best-fitting free
block, else a new segment (kLargeBuffer 20 MiB for 1–10 MiB, else rounded up to kRoundLarge 2 MiB);
a large block split only when more than 1 MiB is left; `empty_cache` frees only whole-free segments.
It starts from a clean cache: which free tails the loading left is the allocator's history, which
no input shows, so the figure is one end of what the code allows, not a prediction.

    .venv/bin/python bench/rope_segments.py
"""

from __future__ import annotations

import tomllib

from svcdiag.sglang import rope
from svcdiag.sglang.modelinfo import PUBLIC_CONFIGS

MiB = 1 << 20
MIN_BLOCK, SMALL, SMALL_SEG, LARGE_SEG, MIN_LARGE_ALLOC, ROUND_LARGE = 512, MiB, 2 * MiB, 20 * MiB, 10 * MiB, 2 * MiB


class Block:
    __slots__ = ("size", "used")

    def __init__(self, size: int, used: bool = False) -> None:
        self.size, self.used = size, used


class Allocator:
    """The large and small pools: each segment a list of blocks in address order."""

    def __init__(self) -> None:
        self.segments: list[tuple[bool, list[Block]]] = []  # (small pool, blocks)

    def malloc(self, nbytes: int) -> Block:
        size = max(MIN_BLOCK, -(-nbytes // MIN_BLOCK) * MIN_BLOCK)
        small = size <= SMALL
        fits = [(b.size, n, b, blocks) for n, (s, blocks) in enumerate(self.segments) if s == small
                for b in blocks if not b.used and b.size >= size]
        if fits:
            _, _, block, blocks = min(fits, key=lambda f: (f[0], f[1]))
        else:
            seg = SMALL_SEG if small else LARGE_SEG if size < MIN_LARGE_ALLOC else -(-size // ROUND_LARGE) * ROUND_LARGE
            block, blocks = Block(seg), []
            blocks.append(block)
            self.segments.append((small, blocks))
        rest = block.size - size
        if rest >= MIN_BLOCK if small else rest > SMALL:  # should_split
            block.size = size
            blocks.insert(blocks.index(block) + 1, Block(rest))
        block.used = True
        return block

    def free(self, block: Block) -> None:
        block.used = False
        for _, blocks in self.segments:
            if any(b is block for b in blocks):
                merged: list[Block] = []
                for b in blocks:
                    if merged and not merged[-1].used and not b.used:
                        merged[-1].size += b.size
                    else:
                        merged.append(b)
                blocks[:] = merged

    def segment_of(self, block: Block) -> tuple[bool, int]:
        """(small pool, segment bytes) of the segment holding `block`."""
        return next((s, sum(b.size for b in blocks)) for s, blocks in self.segments if any(b is block for b in blocks))


def replay(rows: int, new_len: int, rotary: int, width: int) -> int:
    """The segment the new cache ends in, growing a `rows`-row cache to `new_len` on a clean cache
    (its bytes where it lands in the small pool, a segment other tensors share). Every other segment
    the growth made is whole-free when it returns, so empty_cache gives it back."""
    a = Allocator()
    n = new_len - rows
    temps = [a.malloc(rotary // 2 * 4), a.malloc(n * 4)] + [a.malloc(n * rotary // 2 * 4) for _ in range(3)]
    cat = a.malloc(n * rotary * 4)
    if width != 4:  # .to(dtype): a copy, and the float32 cat is freed before the new cache is allocated
        temps.append(a.malloc(n * rotary * width))
        a.free(cat)
    else:  # .to(float32) returns the same tensor: the cat lives until the function returns
        temps.append(cat)
    final = new_len * rotary * width
    small, segment = a.segment_of(a.malloc(final))
    return final if small else segment


def main() -> None:
    import memory_backtest as mb  # its sibling, on sys.path when run as a script; replay() needs none of it

    print("log  platform  context  grown (rows before → after)  model MiB  replay MiB "
          "(old blocks as the model takes them: kept on ROCm, released on CUDA)")
    for entry in tomllib.loads((mb.REAL / "index.toml").read_text())["log"]:
        every = [ln for ln in (mb.REAL / entry["file"]).read_text().splitlines() if not ln.startswith("#")]
        lines = mb.first_rank(every)
        cfg = entry.get("config") or PUBLIC_CONFIGS.get(entry["model"].lower(), {})
        caches = rope.rope_caches(cfg)
        ctx = mb.figures(lines).context_len or max((c.rows for c in caches if c.where == "text"), default=0)
        rocm = entry.get("platform") == "rocm"
        g = mb.rope_growth(cfg, int(ctx), mb.release_of(entry), rocm, mb.sizing_args(lines, entry.get("flags", {})))
        if not g.grown:
            continue
        dims = {c.where: c.rotary_dim for c in caches}
        held = sum(replay(before, after, dims[where], 2 if rocm else 4) for where, before, after in g.grown)
        held -= 0 if rocm else g.released_bytes  # the old blocks as the model takes them: released on CUDA
        grown = ", ".join(f"{where} {before:,} → {after:,}" for where, before, after in g.grown)
        print(f"{entry['file'].removesuffix('.log')}  {'ROCm' if rocm else 'CUDA'}  {int(ctx):,}  {grown}  "
              f"{g.nominal_bytes / MiB:.2f}  {held / MiB:.2f}")


if __name__ == "__main__":
    main()
