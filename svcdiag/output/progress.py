"""Progress within a phase, in words and as a bar: pure, shared by the live line, `top` and notify mode."""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:  # `top`'s snapshot of serving starts draws no progress: the judge's module (and the events) stay out
    from svcdiag.judge.progress import PhaseProgress

_EIGHTHS = " ▏▎▍▌▋▊▉"
_WHAT = {"shards": "shards", "cuda_graph": "CUDA-graph batches"}


def duration(seconds: float) -> str:
    """`7 s`, `2:05`, `1:02:03`: short enough for a status line."""
    s = round(seconds)
    if s < 60:
        return f"{s} s"
    h, rest = divmod(s, 3600)
    m, s = divmod(rest, 60)
    return f"{h}:{m:02d}:{s:02d}" if h else f"{m}:{s:02d}"


def progress_text(progress: PhaseProgress) -> str:
    """`41% (5/12 shards), ETA 4 s, slowest TP3`: the percentage first, for a notification's title."""
    text = f"{progress.percent}% ({progress.done}/{progress.total} {_WHAT.get(progress.what, progress.what)})"
    if progress.eta_s is not None and progress.done < progress.total:
        text += f", ETA {duration(progress.eta_s)}"
    if progress.slowest_rank is not None:
        text += f", slowest TP{progress.slowest_rank}"
    return text


def bar_text(fraction: float, width: int = 20) -> str:
    """A bar `width` cells wide, in eighths of a cell: `████████▍           `."""
    fraction = min(max(fraction, 0.0), 1.0)
    eighths = int(fraction * width * 8)
    full, part = divmod(eighths, 8)
    return ("█" * full + (_EIGHTHS[part] if part else "")).ljust(width)
