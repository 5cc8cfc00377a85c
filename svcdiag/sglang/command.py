"""An SGLang launch command line read back into config keys: the reverse of
svcdiag.sglang.flags.sglang_args, and the one reader of it (`svcdiag import` turns a unit or a
script into a config; `svcdiag supervise -- …` in a pod takes its config from its own command
line). Flags with a config key of their own become that key, spelled as any release spells them
(`--tp`, `--tensor-parallel-size`, `--cuda-graph-max-bs[-decode]`, `--flag value` or
`--flag=value`); every other flag is kept, in order, in `extra_args`, with as many values as the
release's flag table says it takes (argparse's rules: a word that looks like a flag is none's
value, a negative number is). Pure: the caller gives the words (a unit's ExecStart=, a pasted
shell line, a container's argv)."""

from __future__ import annotations

import os
import re
import shlex
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from svcdiag.config.service import SPEC_ALGORITHMS
from svcdiag.errors import ConfigError, SvcdiagError
from svcdiag.sglang.flag_tables import FlagTable, table_for
from svcdiag.sglang.flags import SGLANG_MODULE, SIM_MODULE, newest_version

#: flag (any spelling) → (config key, type): what sglang_args renders, read back; the newest spelling first
FIELDS: dict[str, tuple[str, type]] = {
    "--model-path": ("model_path", str), "--model": ("model_path", str),
    "--served-model-name": ("served_model_name", str),
    "--tp-size": ("tp_size", int), "--tp": ("tp_size", int), "--tensor-parallel-size": ("tp_size", int),
    "--dp-size": ("dp_size", int), "--dp": ("dp_size", int), "--data-parallel-size": ("dp_size", int),
    "--host": ("host", str), "--port": ("port", int),
    "--mem-fraction-static": ("mem_fraction_static", float),
    "--max-running-requests": ("max_running_requests", int),
    "--context-length": ("context_length", int),
    "--chunked-prefill-size": ("chunked_prefill_size", int),
    "--cuda-graph-max-bs-decode": ("cuda_graph_max_bs", int), "--cuda-graph-max-bs": ("cuda_graph_max_bs", int),
    "--max-mamba-cache-size": ("max_mamba_cache_size", int),
    "--trust-remote-code": ("trust_remote_code", bool),
    "--nnodes": ("nnodes", int), "--node-rank": ("node_rank", int),
    "--dist-init-addr": ("dist_init_addr", str), "--nccl-init-addr": ("dist_init_addr", str),
    "--speculative-algorithm": ("speculative.algorithm", str),
    "--speculative-draft-model-path": ("speculative.draft_model_path", str),
    "--speculative-draft-model": ("speculative.draft_model_path", str),
    "--speculative-num-steps": ("speculative.num_steps", int),
    "--speculative-eagle-topk": ("speculative.eagle_topk", int),
    "--speculative-num-draft-tokens": ("speculative.num_draft_tokens", int),
}
#: the stand-in's own flags (python -m svcdiag.sim SCENARIO …): the release it plays, the GPU it pretends to have
SIM_FIELDS: dict[str, tuple[str, type]] = {"--sglang-version": ("sglang_version", str),
                                           "--gpu-free-gb": ("gpu_memory_gb", float)}
#: a config key → the flag that sets it, in SGLang's words (the newest spelling)
FLAG_OF: dict[str, str] = {key: flag for flag, (key, _) in reversed({**FIELDS, **SIM_FIELDS}.items())}
#: the keys of one node of a multi-node start: a pod's own (nodes=True), else refused (a config of [[nodes]])
NODE_KEYS = ("nnodes", "node_rank", "dist_init_addr")
LAUNCHERS = (SGLANG_MODULE, SIM_MODULE)
#: shells whose `-c SCRIPT` is looked into (`-c`, `-lc`, `-ec`: the script is the next word)
SHELLS = ("sh", "bash", "dash", "ash", "zsh", "ksh")
SHELL_C = re.compile(r"-[a-z]*c")


@dataclass
class Command:
    """What a launch command says, as config keys (dotted for [speculative]), and what else."""

    python: str | None
    keys: dict[str, Any] = field(default_factory=dict)
    extra_args: list[str] = field(default_factory=list)
    env: dict[str, str] = field(default_factory=dict)  # `env VAR=x python …` in front
    warnings: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class Launch:
    """Where SGLang's flags start in a command line, and what stands in front of them."""

    python: str | None  # the interpreter of `python -m …`; for `DIR/sglang serve`, DIR/python (a venv's)
    module: str         # SGLANG_MODULE or SIM_MODULE
    args: tuple[str, ...]
    env: tuple[tuple[str, str], ...] = ()
    shell: bool = False  # found in a shell's script (`bash -c '…'`): its words are what the shell will expand


def split_shell(line: str) -> list[str]:
    """A pasted shell line (continuation backslashes and all) as words."""
    try:
        return shlex.split(line.replace("\\\n", " "), comments=True)
    except ValueError as e:
        raise SvcdiagError(f"cannot read the command line: {e}") from None


def find_launch(words: Sequence[str]) -> Launch | None:
    """`[env K=V…] python -m sglang.launch_server FLAGS` (or `sglang serve FLAGS`, or the
    stand-in's `python -m svcdiag.sim SCENARIO FLAGS`), also behind `svcdiag supervise … --`,
    `exec` and `bash -c '…'` (then `shell`); None when `words` start no SGLang server (a wrapper script)."""
    env: dict[str, str] = {}
    w = list(words)
    shell = False
    while w:
        head = os.path.basename(w[0])
        if "--" in w and (head == "svcdiag" or w[1:3] == ["-m", "svcdiag"]):
            w = w[w.index("--") + 1:]  # a unit svcdiag rendered: its supervisor in front
        elif head == "env":
            w = w[1:]
            while w and "=" in w[0] and not w[0].startswith("-"):
                k, v = w.pop(0).split("=", 1)
                env[k] = v
        elif head in SHELLS and len(w) >= 3 and SHELL_C.fullmatch(w[1]):
            w, shell = split_shell(w[2]), True
        elif head == "exec":
            w = w[1:]
        else:
            break
    if w and os.path.basename(w[0]) == "sglang" and w[1:2] == ["serve"]:  # the console script beside its python
        python = os.path.join(os.path.dirname(w[0]), "python") if os.path.dirname(w[0]) else None
        return Launch(python, SGLANG_MODULE, tuple(w[2:]), tuple(env.items()), shell)
    for i in range(len(w) - 1):
        if w[i] == "-m" and w[i + 1] in LAUNCHERS:
            skip = 3 if w[i + 1] == SIM_MODULE else 2  # the stand-in's scenario
            return Launch(w[i - 1] if i >= 1 else None, w[i + 1], tuple(w[i + skip:]), tuple(env.items()), shell)
    return None


def read_command(words: Sequence[str], version: str | None = None, *, source: str = "the command line",
                 nodes: bool = False) -> Command:
    """The config keys of SGLang's launch command (`words`: its argv; not the stand-in's), its
    flags read as `version` reads them; errors name `source` and the flag. One node's flags (`--nnodes`, `--node-rank`,
    `--dist-init-addr`) are read only with `nodes` (a pod of a multi-node start)."""
    launch = find_launch(words)
    if launch is None or launch.module == SIM_MODULE:  # the stand-in's: its config is the one that rendered it
        raise SvcdiagError(f"not an SGLang launch command (python -m {SGLANG_MODULE} …): {shlex.join(words)[:200]}")
    out = read_flags(launch.args, version, source=source, nodes=nodes)
    out.python, out.env = launch.python, dict(launch.env)
    if launch.python is not None and not launch.python.startswith("/"):
        out.warnings.append(f"the interpreter {launch.python!r} is not an absolute path: set python = to SGLang's "
                            "interpreter (its venv's bin/python)")
        out.python = None
    return out


def read_flags(args: Sequence[str], version: str | None = None, *, source: str = "the command line",
               nodes: bool = False, sim: bool = False) -> Command:
    """SGLang's flags `args` (the words after the launcher) as config keys and extra_args;
    with `sim`, the stand-in's own flags too. See `read_command`."""
    table = table_for(version or newest_version())
    fields = {**FIELDS, **SIM_FIELDS} if sim else FIELDS
    out = Command(python=None)
    i = 0
    while i < len(args):
        word = args[i]
        flag, eq, inline = word.partition("=")
        if not flag.startswith("-"):
            out.warnings.append(f"{word!r}: a word that is no flag's value, kept in extra_args")
            out.extra_args.append(word)
            i += 1
            continue
        spec = table.lookup(flag)
        # an alias the release's table knows (its argparse's other spelling) reads as its flag's key
        known = fields.get(flag) or (fields.get(spec.name) if spec is not None else None)
        if known is not None and known[0] in NODE_KEYS and not nodes:
            raise ConfigError(source, flag, "a multi-node start is one config with [[nodes]]; write it by hand "
                                            "(docs/remote.md#multi-node)")
        values, i = _values(table, known, args, i, inline if eq else None)
        if known is None:
            out.extra_args += [word] if eq else [flag, *values]
        else:
            out.keys[known[0]] = _convert(source, flag, known[1], values, inline if eq else None)  # as written
    _speculative(out)
    return out


def _values(table: FlagTable, known: tuple[str, type] | None, args: Sequence[str], i: int,
            inline: str | None) -> tuple[list[str], int]:
    """The values the flag at args[i] takes (as the release's argparse would), and the next index."""
    if inline is not None:
        return [inline], i + 1
    if known is not None and known[1] is bool:
        return [], i + 1
    return table.take_values(table.lookup(args[i]), args, i + 1)


def _convert(source: str, flag: str, kind: type, values: list[str], inline: str | None) -> Any:
    if kind is bool:
        return inline is None or inline.lower() not in ("false", "0", "no")
    if not values:
        raise ConfigError(source, flag, "needs a value")
    if len(values) != 1:
        raise ConfigError(source, flag, f"expects one value, got {len(values)}")
    try:
        return kind(values[0])
    except ValueError:
        raise ConfigError(source, flag, f"must be {'an integer' if kind is int else 'a number'}, "
                                        f"got {values[0]!r}") from None


def _speculative(out: Command) -> None:
    """An algorithm svcdiag does not know keeps its flags in extra_args, as SGLang spells them."""
    algo = out.keys.get("speculative.algorithm")
    spec = {k: v for k, v in out.keys.items() if k.startswith("speculative.")}
    if spec and (algo is None or str(algo).upper() not in SPEC_ALGORITHMS):
        for k, v in spec.items():
            del out.keys[k]
            out.extra_args += [FLAG_OF[k], str(v)]
        out.warnings.append(f"speculative algorithm {algo!r}: not one svcdiag knows ({', '.join(SPEC_ALGORITHMS)}); "
                            "its flags are kept in extra_args")
    elif algo is not None:
        out.keys["speculative.algorithm"] = str(algo).upper()
