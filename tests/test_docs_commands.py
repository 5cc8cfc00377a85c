"""Every `svcdiag` command shown in README.md and docs/*.md, against the shipped configs, so the
docs cannot drift from the tool (issue #32 §3.13).

Each command line of a fenced block is read as an operator would paste it. A synopsis
(`svcdiag check NAME [--sglang-version V]`) is checked against the CLI: the command exists and
takes every option shown. A command in a sentence (`svcdiag up NAME --wait-ready`) is checked as a synopsis. A concrete line
of a block is parsed by click itself, its config names must be
shipped ones, and the commands that need no systemd (list, render, check, diff, preflight,
replay, history, install into a folder) run for real, here: no usage error, no traceback. Where
a doc shows the output (`$ svcdiag …` followed by lines), the lines shown must be what it prints,
in order (timestamps and this checkout's paths aside; `...` stands for lines left out).
docs/benchmarks.md is left out: its blocks are measurements, not commands.
"""

from __future__ import annotations

import re
import shlex
import shutil
from dataclasses import dataclass
from pathlib import Path

import pytest

from .conftest import ROOT, UNITS
from .model_fixtures import seed_models

DOCS = [ROOT / "README.md", *sorted(p for p in (ROOT / "docs").glob("*.md") if p.name != "benchmarks.md")]
#: run here for real: they need no systemd (install: into a folder of the test's)
RUNNABLE = {"list", "render", "check", "diff", "preflight", "replay", "history", "install"}
#: placeholders of a synopsis: a line holding one is checked against the CLI, not run
PLACEHOLDER = re.compile(r"\[|\]|\||\.\.\.|…|^[A-Z][A-Z_.]*(\.toml|\.tar\.gz|\.prom)?$|^-$")
SHIPPED = sorted(p.stem for p in UNITS.glob("*.toml"))
#: configs a page writes itself, to show what svcdiag says of them
MADE_BY_THE_DOC = {("docs/config.md", "bad"), ("docs/install.md", "sglang-dflash-smoke"), ("docs/install.md", "qwen8b"),
                   ("docs/install.md", "qwen8b-long"), ("README.md", "qwen8b"), ("docs/tune.md", "demo-tune-h200"),
                   ("docs/tune.md", "demo-tune-h200-tuned"), ("docs/tune.md", "demo-tune-h200-plain")}


@dataclass(frozen=True)
class Shown:
    doc: str
    line: int
    argv: tuple[str, ...]
    output: tuple[str, ...]  # the lines a `$ ` block shows after the command
    inline: bool = False  # `svcdiag …` in a sentence: a reference, checked as a synopsis

    @property
    def id(self) -> str:
        return f"{self.doc}:{self.line}"


def _commands(path: Path) -> list[Shown]:
    out: list[Shown] = []
    lines = path.read_text(encoding="utf-8").splitlines()
    in_block, i = False, 0
    while i < len(lines):
        text = lines[i]
        if text.startswith("```"):
            in_block = not in_block
            i += 1
            continue
        if not in_block:
            for span in re.findall(r"`(?:sudo )?svcdiag ([^`]+)`", text):
                words = span.replace("…", "...").split()
                out.append(Shown(str(path.relative_to(ROOT)), i + 1, tuple(words), (), inline=True))
        s = text.strip()
        dollar = s.startswith("$ ")
        s = s.removeprefix("$ ").removeprefix("sudo ")
        s = s.removeprefix("python -m svcdiag.systemd.rig run -- ")  # the rig runs the same command
        if in_block and s.startswith("svcdiag ") and " | " not in s:
            shown: list[str] = []
            if dollar:
                j = i + 1
                while j < len(lines) and not lines[j].startswith("```") and not lines[j].startswith("$ "):
                    shown.append(lines[j])
                    j += 1
            parts: list[list[str]] = [[]]
            for w in shlex.split(s, comments=True):  # README: several synopses on one line, `;` between
                parts[-1].append(w.removesuffix(";"))
                if w.endswith(";"):
                    parts.append([])
            for words in parts:
                argv = words[1:] if words[:1] == ["svcdiag"] else words
                out.append(Shown(str(path.relative_to(ROOT)), i + 1, tuple(argv), tuple(shown)))
        i += 1
    return out


ALL = [c for doc in DOCS for c in _commands(doc)]


def _group():
    from svcdiag.cli.app import main

    return main


def _expand(argv: tuple[str, ...]) -> list[tuple[str, ...]]:
    """`up|wait|status NAME`: one synopsis per command."""
    head, *rest = argv
    return [(h, *rest) for h in head.split("|")]


def test_the_docs_show_commands() -> None:
    assert len(ALL) > 60 and {c.doc for c in ALL} >= {"README.md", "docs/live.md", "docs/remote.md"}


@pytest.mark.parametrize("shown", ALL, ids=lambda c: c.id)
def test_each_command_is_one_the_cli_takes(shown: Shown) -> None:
    import click

    group = _group()
    for synopsis_argv in _expand(shown.argv):
        argv = synopsis_argv
        if argv[0].startswith("-"):  # `svcdiag --help`, `--version`, `--units DIR list`
            argv = argv[2:] if argv[0] == "--units" else ()
            if not argv:
                continue
        cmd = group.commands.get(argv[0])
        assert cmd is not None, f"{shown.id}: no command {argv[0]!r}"
        opts = {o for p in cmd.params for o in (*p.opts, *p.secondary_opts)} | {"-h", "--help"}
        synopsis = shown.inline or any(PLACEHOLDER.search(w) for w in argv[1:])
        options = argv[1:argv.index("--")] if "--" in argv else argv[1:]  # after `--`: the child's own command
        for w in options:
            for word in re.split(r"[\[\]|]", w):
                flag = word.split("=")[0]
                if flag.startswith("-") and flag not in ("-", "--"):
                    for f in flag.split("/"):
                        assert f in opts, f"{shown.id}: {argv[0]} takes no {f}"
        if synopsis:
            continue
        # the group's own context settings (-h): a context without them makes click cache a
        # command's help option as `--help` alone for the rest of the process
        ctx = click.Context(group, info_name="svcdiag", obj={"units_opt": str(UNITS)}, **group.context_settings)
        with ctx:
            sub = cmd.make_context(argv[0], list(argv[1:]), parent=ctx)
        for p in cmd.params:
            value = sub.params.get(p.name)
            if p.name in ("name", "names", "a", "b", "candidate", "config_name") and value:
                for v in (value if isinstance(value, tuple) else (value,)):
                    assert v in SHIPPED or (shown.doc, v) in MADE_BY_THE_DOC, f"{shown.id}: {v!r} is not a shipped config (units/: {', '.join(SHIPPED)})"


@pytest.fixture(scope="module")
def gpu_host(tmp_path_factory) -> Path:
    """The shipped units as on the seed's GPU host: the model directories they name exist."""
    root = tmp_path_factory.mktemp("host")
    target, draft = seed_models(root / "shm")
    units = root / "units"
    shutil.copytree(UNITS, units)
    for f in units.glob("*.toml"):
        f.write_text(f.read_text().replace("/dev/shm/Qwen3.6-27B-DFlash", str(draft))
                     .replace("/dev/shm/Qwen3.6-27B", str(target)))
    return root


def _normal(text: str, host: Path) -> str:
    text = text.replace(str(host / "shm"), "/dev/shm").replace(str(host / "units"), "/etc/svcdiag/units")
    text = text.replace(str(ROOT) + "/", "")
    return re.sub(r"\b\d\d:\d\d:\d\d\b", "HH:MM:SS", text).rstrip()


RUN = [c for c in ALL if not c.inline and c.argv and c.argv[0] in RUNNABLE and not any(PLACEHOLDER.search(w) for w in c.argv[1:])
       and "--host" not in c.argv and not any((c.doc, w) in MADE_BY_THE_DOC for w in c.argv if w != "bad")]


@pytest.mark.parametrize("shown", RUN, ids=lambda c: c.id)
def test_each_command_without_systemd_runs(shown: Shown, gpu_host: Path, tmp_path: Path, monkeypatch) -> None:
    from click.testing import CliRunner

    monkeypatch.setenv("SVCDIAG_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.chdir(ROOT)
    argv = list(shown.argv)
    if argv[0] == "install" and "--unit-dir" not in argv:
        argv += ["--unit-dir", str(tmp_path / "system")]
    if shown.doc == "docs/config.md" and argv == ["render", "bad"]:  # the page's own broken config
        (gpu_host / "units" / "bad.toml").write_text('extends = "dflash-smoke"\nmem_fraction_statc = 0.8\n')
    r = CliRunner().invoke(_group(), ["--units", str(gpu_host / "units"), *argv])
    out = r.output
    assert "No such option" not in out and "Usage:" not in out, f"{shown.id}:\n{out}"
    assert "error: no config " not in out, f"{shown.id}:\n{out}"
    assert r.exception is None or isinstance(r.exception, SystemExit), f"{shown.id}: {r.exception!r}"
    if shown.output:
        got = [_normal(x, gpu_host) for x in out.splitlines()]
        at = 0
        for want in (_normal(x, gpu_host) for x in shown.output):
            if not want.strip() or "..." in want or "…" in want:
                continue
            while at < len(got) and got[at] != want:
                at += 1
            assert at < len(got), f"{shown.id}: the doc shows a line the command does not print:\n{want}\n\nit prints:\n{out}"
            at += 1
