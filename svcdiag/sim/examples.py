"""Regenerate the example logs bundled in svcdiag/examples/ from the stand-in.

`python -m svcdiag.sim.examples [UNITS_DIR] [OUT_DIR]`: each example is a shipped config's
flags run through a scenario on a virtual clock, so the logs are byte-for-byte repeatable.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from svcdiag.config.service import UnitsDir
from svcdiag.sglang.flags import SIM_MODULE, sglang_args

START = "2026-05-23T09:42:00"
#: The bundled logs are the seed campaign's: a pre-0.5.20 release (the seed's flags, with
#: `--cuda-graph-max-bs`, run on it) on an idle H200 (139.72 GB free), not the stand-in's
#: defaults (0.5.23 on a 96 GB RTX PRO 6000). tests/test_replay.py checks their figures.
RELEASE = "0.5.12"
GPU_FREE_GB = "139.72"
EXAMPLES = {
    # name: (config, scenario, extra stand-in flags)
    "dflash-smoke": ("dflash-smoke", "healthy-hybrid-dflash", []),
    "max-running-zero": ("dflash-tp1-mr8", "max-running-zero", []),
    "dflash-tp4-old-format": ("dflash-tp4", "healthy-hybrid-dflash", ["--old-format"]),
    "cuda-oom-tp8": ("dflash-tp8", "cuda-oom", []),
}
PACKAGE_DIR = Path(__file__).resolve().parent.parent / "examples"


def generate(name: str, units: UnitsDir) -> str:
    config, scenario, extra = EXAMPLES[name]
    cfg = units.load(config)
    cmd = [sys.executable, "-m", SIM_MODULE, scenario, "--virtual-clock", START, "--no-http",
           "--sglang-version", RELEASE, "--gpu-free-gb", GPU_FREE_GB, *extra, *sglang_args(cfg, RELEASE)]
    proc = subprocess.run(cmd, capture_output=True, text=True, env={"PATH": "/usr/bin:/bin"}, check=False)
    return proc.stdout


def main() -> None:
    units = UnitsDir(Path(sys.argv[1] if len(sys.argv) > 1 else "units").resolve(), "argument")
    out = Path(sys.argv[2]) if len(sys.argv) > 2 else PACKAGE_DIR
    out.mkdir(parents=True, exist_ok=True)
    for name in EXAMPLES:
        (out / f"{name}.log").write_text(generate(name, units))
        print(out / f"{name}.log")


if __name__ == "__main__":
    main()
