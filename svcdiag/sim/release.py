"""Which SGLang release the stand-in plays (`--sglang-version`), and its command line.

The release decides three things (docs/simulator.md#releases):

- the line shapes: 0.5.20 and later print what the 0.5.23 wheel prints; older releases the
  shapes the stand-in printed before it knew of releases; before 0.4.10 (and with
  `--old-format`) a `TP0` tag even at tp=1 and the `Capture cuda graph …` lines;
- the flags: launch_server's argparse parser is rebuilt from the release's bundled flag table
  (svcdiag.sglang.flag_tables), so a flag the release does not know ends the start the way
  argparse ends it (usage, `PROG: error: unrecognized arguments: …`, exit status 2);
- the HTTP endpoints (see Server in __main__).
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from typing import Any

from svcdiag.sglang.flag_tables import FlagTable, table_for, version_key

DEFAULT_VERSION = "0.5.23"
#: what `--old-format` stands for when no `--sglang-version` is given
OLD_FORMAT_VERSION = "0.4.6"


def _at_least(version: str, other: str) -> bool:
    return version_key(version) >= version_key(other)


@dataclass(frozen=True)
class Release:
    """A simulated SGLang release, and which of its log shapes it prints."""

    version: str
    old_format: bool = False

    @property
    def new(self) -> bool:
        """0.5.23's shapes and endpoints (dict server_args, no distributed-init lines, /ready,
        /server_info, the KV-below-context warning instead of the zero assertion)."""
        return _at_least(self.version, "0.5.20")

    @property
    def tags_always(self) -> bool:
        """`[ts TP0]` even at tp=1 (<= 0.4.6; 0.4.10 on tag only what is above 1)."""
        return self.old_format or not _at_least(self.version, "0.4.10")

    @property
    def old_capture(self) -> bool:
        """`Capture cuda graph begin. This can take …` / `Capture cuda graph end. Time elapsed: …`."""
        return self.tags_always and not self.new

    @property
    def prog(self) -> str:
        """argparse's prog: `sglang serve` from 0.5.10 on, also under `python -m sglang.launch_server`."""
        return "sglang serve" if _at_least(self.version, "0.5.10") else "launch_server.py"

    @property
    def table(self) -> FlagTable:
        return table_for(self.version)


def _human_int(value: str) -> int | str:
    """SGLang's `32k`/`1Mi` integers (the table's "human_int")."""
    v = value.strip()
    for suffix, mult in (("Ki", 1024), ("Mi", 1024**2), ("Gi", 1024**3), ("Ti", 1024**4),
                         ("k", 1000), ("M", 1000**2), ("G", 1000**3), ("T", 1000**4)):
        if v.endswith(suffix):
            return int(float(v[: -len(suffix)]) * mult)
    return int(v)


_TYPES: dict[str, Any] = {"int": int, "float": float, "str": str, "human_int": _human_int}


def launch_parser(release: Release) -> argparse.ArgumentParser:
    """launch_server's parser as the release registers it (from its flag table): argparse's own
    errors, abbreviations and exit status 2 then come for free."""
    table = release.table
    p = argparse.ArgumentParser(prog=release.prog)
    names = sorted(table.flags, key=lambda n: n != "--model-path")  # usage starts `--model-path MODEL_PATH`
    for name in names:
        spec = table.flags[name]
        kw: dict[str, Any] = {"dest": spec.dest}
        if not spec.takes_value:
            kw["action"] = "store_true"
        else:
            kw["default"] = None
            if spec.nargs is not None:
                kw["nargs"] = spec.nargs
            if spec.type in _TYPES:
                kw["type"] = _TYPES[spec.type]
            if spec.choices is not None:
                kw["choices"] = list(spec.choices)
            if name == "--model-path":
                kw["required"] = True
        try:
            p.add_argument(name, *spec.aliases, **kw)
        except (argparse.ArgumentError, ValueError):
            continue  # a clash with -h or an earlier alias: argparse would have refused to register it
    return p


#: the stand-in's figures, by the flags (each release's spelling; the first the table knows wins)
_FLAGS: dict[str, tuple[tuple[str, ...], Any]] = {
    "model_path": (("--model-path",), None),
    "served_model_name": (("--served-model-name",), None),
    "tp_size": (("--tp-size",), 1),
    "dp_size": (("--dp-size",), 1),
    "host": (("--host",), "127.0.0.1"),
    "port": (("--port",), 30000),
    "mem_fraction_static": (("--mem-fraction-static",), None),
    "max_running_requests": (("--max-running-requests",), None),
    "context_length": (("--context-length",), None),
    "chunked_prefill_size": (("--chunked-prefill-size",), 8192),
    "cuda_graph_max_bs": (("--cuda-graph-max-bs-decode", "--cuda-graph-max-bs"), 8),
    "max_mamba_cache_size": (("--max-mamba-cache-size",), None),
    "trust_remote_code": (("--trust-remote-code",), False),
    "speculative_algorithm": (("--speculative-algorithm",), None),
    "speculative_draft_model_path": (("--speculative-draft-model-path",), None),
    "speculative_num_steps": (("--speculative-num-steps",), None),
    "speculative_eagle_topk": (("--speculative-eagle-topk",), None),
    "speculative_num_draft_tokens": (("--speculative-num-draft-tokens",), None),
    "nnodes": (("--nnodes",), 1),
    "node_rank": (("--node-rank",), 0),
    "dist_init_addr": (("--dist-init-addr",), None),
}


def parse_launch_args(release: Release, argv: list[str]) -> dict[str, Any]:
    """argv parsed as the release's launch_server parses it (SystemExit(2) with argparse's
    usage and error on stderr when it would), reduced to the fields the stand-in uses."""
    ns = launch_parser(release).parse_args(argv)
    table = release.table
    out: dict[str, Any] = {}
    for field, (flags, default) in _FLAGS.items():
        value = None
        for flag in flags:
            spec = table.lookup(flag)
            if spec is not None and getattr(ns, spec.dest, None) not in (None, False):
                value = getattr(ns, spec.dest)
                break
        out[field] = default if value is None else value
    return out
