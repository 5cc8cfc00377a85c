"""An SGLang launch command line read back into config keys (`svcdiag import`): the reverse of
svcdiag.sglang.flags.sglang_args. Flags with a config key of their own become that key, spelled as
any release spells them (`--tp`, `--tensor-parallel-size`, `--cuda-graph-max-bs[-decode]`); every
other flag is kept, in order, in `extra_args`, with its value as the release's flag table says it
takes one. Pure: the caller gives the words (a unit's ExecStart=, a pasted shell line)."""

from __future__ import annotations

import os
import shlex
from dataclasses import dataclass, field
from typing import Any

from svcdiag.config.service import SPEC_ALGORITHMS
from svcdiag.errors import SvcdiagError
from svcdiag.sglang.flag_tables import FlagTable, table_for
from svcdiag.sglang.flags import SGLANG_MODULE, newest_version

#: flag (any spelling) → (config key, type): what sglang_args renders, read back
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
    "--speculative-algorithm": ("speculative.algorithm", str),
    "--speculative-draft-model-path": ("speculative.draft_model_path", str),
    "--speculative-draft-model": ("speculative.draft_model_path", str),
    "--speculative-num-steps": ("speculative.num_steps", int),
    "--speculative-eagle-topk": ("speculative.eagle_topk", int),
    "--speculative-num-draft-tokens": ("speculative.num_draft_tokens", int),
}
#: a multi-node start is one config of [[nodes]]: written by hand (docs/remote.md#multi-node)
MULTINODE = ("--nnodes", "--node-rank", "--dist-init-addr", "--nccl-init-addr")
LAUNCHERS = (SGLANG_MODULE, "sglang.launch_server")


@dataclass
class Command:
    """What a launch command says, as config keys (dotted for [speculative]), and what else."""

    python: str | None
    keys: dict[str, Any] = field(default_factory=dict)
    extra_args: list[str] = field(default_factory=list)
    env: dict[str, str] = field(default_factory=dict)  # `env VAR=x python …` in front
    warnings: list[str] = field(default_factory=list)


def split_shell(line: str) -> list[str]:
    """A pasted shell line (continuation backslashes and all) as words."""
    try:
        return shlex.split(line.replace("\\\n", " "), comments=True)
    except ValueError as e:
        raise SvcdiagError(f"cannot read the command line: {e}") from None


def _launcher(words: list[str]) -> tuple[str | None, list[str], dict[str, str]]:
    """(interpreter, the flags, env set in front) of `[env K=V…] python -m sglang.launch_server FLAGS`,
    also behind `svcdiag supervise … --` and `bash -c '…'`."""
    env: dict[str, str] = {}
    w = list(words)
    while w:
        head = os.path.basename(w[0])
        if "--" in w and (head == "svcdiag" or w[1:3] == ["-m", "svcdiag"]):
            w = w[w.index("--") + 1:]  # a unit svcdiag rendered: its supervisor in front
        elif head == "env":
            w = w[1:]
            while w and "=" in w[0] and not w[0].startswith("-"):
                k, v = w.pop(0).split("=", 1)
                env[k] = v
        elif head in ("bash", "sh") and len(w) >= 3 and w[1] == "-c":
            w = split_shell(w[2])
        elif head == "exec":
            w = w[1:]
        else:
            break
    for i in range(len(w) - 1):
        if w[i] == "-m" and w[i + 1] in LAUNCHERS:
            return (w[i - 1] if i >= 1 else None), w[i + 2:], env
    raise SvcdiagError(f"not an SGLang launch command (python -m {SGLANG_MODULE} …): {shlex.join(words)[:200]}")


def _convert(flag: str, kind: type, value: str) -> Any:
    try:
        return kind(value)
    except ValueError:
        raise SvcdiagError(f"{flag} {value!r}: not a{'n integer' if kind is int else ' number'}") from None


def read_command(words: list[str], version: str | None = None) -> Command:
    """The config keys of a launch command (`words`: its argv), its flags read as `version` reads them."""
    python, args, env = _launcher(words)
    table = table_for(version or newest_version())
    out = Command(python=python, env=env)
    if python is not None and not python.startswith("/"):
        out.warnings.append(f"the interpreter {python!r} is not an absolute path: set python = to SGLang's "
                            "interpreter (its venv's bin/python)")
        out.python = None
    i = 0
    while i < len(args):
        word = args[i]
        flag, eq, inline = word.partition("=")
        if not flag.startswith("-"):
            out.warnings.append(f"{word!r}: a word that is no flag's value, kept in extra_args")
            out.extra_args.append(word)
            i += 1
            continue
        if flag in MULTINODE:
            raise SvcdiagError(f"{flag}: a multi-node start is one config with [[nodes]]; write it by hand "
                               "(docs/remote.md#multi-node)")
        values, i = _values(table, flag, args, i, inline if eq else None)
        spec = table.lookup(flag)
        if flag not in FIELDS and spec is not None and spec.name in FIELDS:
            flag = spec.name  # an alias the release's table knows (its argparse's other spelling)
        if flag in FIELDS:
            key, kind = FIELDS[flag]
            if kind is bool:
                out.keys[key] = True
            elif len(values) != 1:
                raise SvcdiagError(f"{flag}: expects one value, got {len(values)}")
            else:
                out.keys[key] = _convert(flag, kind, values[0])
        else:
            out.extra_args += [word] if eq else [flag, *values]
    _speculative(out)
    return out


def _values(table: FlagTable, flag: str, args: list[str], i: int, inline: str | None) -> tuple[list[str], int]:
    """The values `flag` at args[i] takes (as the release's argparse would), and the next index."""
    if inline is not None:
        return [inline], i + 1
    spec = table.lookup(flag)
    rest = args[i + 1:]
    if spec is None:  # a flag this release does not know: a value is whatever follows, up to the next flag
        if flag in FIELDS:
            return ([] if FIELDS[flag][1] is bool else rest[:1]), i + 1 + (0 if FIELDS[flag][1] is bool else 1)
        n = 1 if rest and not rest[0].startswith("-") else 0
        return rest[:n], i + 1 + n
    if not spec.takes_value:
        return [], i + 1
    if spec.nargs in (None, 1):
        return rest[:1], i + 2
    if isinstance(spec.nargs, int):
        return rest[:spec.nargs], i + 1 + spec.nargs
    n = 0
    while n < len(rest) and not rest[n].startswith("--"):
        n += 1
    return rest[:n], i + 1 + n


def _speculative(out: Command) -> None:
    """An algorithm svcdiag does not know keeps its flags in extra_args, as SGLang spells them."""
    algo = out.keys.get("speculative.algorithm")
    spec = {k: v for k, v in out.keys.items() if k.startswith("speculative.")}
    if spec and (algo is None or str(algo).upper() not in SPEC_ALGORITHMS):
        flag_of = {key: f for f, (key, _) in reversed(FIELDS.items())}
        for k, v in spec.items():
            del out.keys[k]
            out.extra_args += [flag_of[k], str(v)]
        out.warnings.append(f"speculative algorithm {algo!r}: not one svcdiag knows ({', '.join(SPEC_ALGORITHMS)}); "
                            "its flags are kept in extra_args")
    elif algo is not None:
        out.keys["speculative.algorithm"] = str(algo).upper()
