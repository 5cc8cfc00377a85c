"""`svcdiag setup`: prepare a GPU host for svcdiag's units, idempotently, saying each step.

Changes (each only when missing; `dry_run` says what it would do): group `svcdiag` (the polkit
rule's), each config's service user (a system user, no login) and its home as state directory,
svcdiag's own state directory (group `svcdiag`, 2770: one shared history), `/etc/svcdiag/units`
and `/etc/svcdiag/secrets`, and the polkit rule (docs/polkit.md). Checks (never changes): the
interpreter the units will run svcdiag with is an installed one the service users can reach (not
a source checkout, not under a private home), each config's `python` imports sglang, nvidia-smi
sees the GPUs the configs name, and the model paths are there. `root` is where `/` is (tests point it at a folder).
"""

from __future__ import annotations

import grp
import os
import pwd
import shutil
import stat
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from svcdiag.config.service import ServiceConfig
from svcdiag.files import DEFAULT_STATE_DIR, SHARED_DIR, SHARED_FILE, SHARED_GROUP, UnsafePath, write_atomic
from svcdiag.ops.host.gpumem import local_smi
from svcdiag.ops.host.history import DB_NAME
from svcdiag.ops.host.sglang_version import probe

GROUP = SHARED_GROUP
UNITS_DIR = "etc/svcdiag/units"
SECRETS_DIR = "etc/svcdiag/secrets"
POLKIT_RULE = "etc/polkit-1/rules.d/50-svcdiag.rules"
BASH_COMPLETION = "etc/bash_completion.d/svcdiag"
#: the rule as shipped (contrib/polkit/50-svcdiag.rules; a test keeps the two equal)
RULE_SOURCE = Path(__file__).resolve().parent.parent.parent / "systemd" / "polkit" / "50-svcdiag.rules"
NOLOGIN = "/usr/sbin/nologin"


@dataclass(frozen=True, slots=True)
class Step:
    """One thing setup did or checked: `status` is done, present (already so), would (--dry-run),
    ok, failed (a check), or skipped."""

    what: str
    status: str
    detail: str = ""

    @property
    def bad(self) -> bool:
        return self.status == "failed"

    def to_json(self) -> dict[str, str]:
        return {"what": self.what, "status": self.status, "detail": self.detail}


Runner = Callable[[list[str]], None]


def _run(argv: list[str]) -> None:
    proc = subprocess.run(argv, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise OSError(f"{' '.join(argv)}: {(proc.stderr or proc.stdout).strip() or f'exit {proc.returncode}'}")


def _mode(path: Path) -> int | None:
    try:
        st = path.stat()
    except OSError:
        return None
    return stat.S_IMODE(st.st_mode) if stat.S_ISDIR(st.st_mode) else None


def _share_file(path: Path, gid: int) -> None:
    """The history file at `path` made the group's (SHARED_FILE) through its own descriptor: a
    symlink or hard link a member planted in the shared store is refused (files.UnsafePath), never
    chowned or chmodded through."""
    from svcdiag.files import check_existing

    check_existing(path)  # a symlink, hard link, or another user's file: refused, naming it
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_nlink != 1:
            raise OSError(f"{path}: not a regular file with one name: refused")
        if gid >= 0:
            os.fchown(fd, -1, gid)
        os.fchmod(fd, SHARED_FILE)  # after chown
        if stat.S_IMODE(os.fstat(fd).st_mode) != SHARED_FILE:
            raise OSError(f"{path} is {oct(stat.S_IMODE(os.fstat(fd).st_mode))[2:]} after chmod 660")
    finally:
        os.close(fd)


def _verify(path: Path, mode: int) -> None:
    """Read the mode back: a step says done only when it is so (an OSError is the step's failure)."""
    real = stat.S_IMODE(path.stat().st_mode)
    if real != mode:
        raise OSError(f"{path} is {oct(real)[2:]} after chmod {oct(mode)[2:]}")


def _user_exists(name: str) -> bool:
    try:
        pwd.getpwnam(name)
        return True
    except KeyError:
        return False


def _group_of(gid: int) -> str | None:
    try:
        return grp.getgrgid(gid).gr_name
    except KeyError:
        return None


def _group_exists(name: str) -> bool:
    try:
        grp.getgrnam(name)
        return True
    except KeyError:
        return False


class Setup:
    def __init__(self, configs: list[ServiceConfig], *, dry_run: bool, root: Path = Path("/"),
                 run: Runner = _run, user_exists: Callable[[str], bool] = _user_exists,
                 group_exists: Callable[[str], bool] = _group_exists, python: str = sys.executable,
                 smi: Callable[[list[str]], str | None] = local_smi, checkout: Path | str | None = "auto",
                 completion: str | None = None):
        self.checkout = source_checkout() if checkout == "auto" else checkout
        self.configs = [n for cfg in configs for n in cfg.node_configs() if not n.remote_host]
        self.dry_run, self.root, self.run = dry_run, root, run
        self.user_exists, self.group_exists, self.python, self.smi = user_exists, group_exists, python, smi
        self.completion = completion  # bash's completion script (the CLI makes it: click's)
        self.steps: list[Step] = []

    def _path(self, rel: str) -> Path:
        return self.root / rel.lstrip("/")

    def _change(self, what: str, present: bool, do: Callable[[], None], detail: str = "") -> None:
        if present:
            self.steps.append(Step(what, "present", detail))
        elif self.dry_run:
            self.steps.append(Step(what, "would", detail))
        else:
            try:
                do()
            except (OSError, UnsafePath) as e:  # a planted symlink in the shared store: refused, the step failed
                self.steps.append(Step(what, "failed", str(e)))
                return
            self.steps.append(Step(what, "done", detail))

    def _parents(self, path: Path) -> None:
        """The missing folders above `path`, made 0755 whatever the umask (under umask 077 mkdir -p
        leaves /etc/svcdiag 0700, and members cannot reach the units in it)."""
        missing = []
        for p in path.parents:
            if p.is_dir():
                break
            missing.append(p)
        for p in reversed(missing):
            p.mkdir(mode=0o755, exist_ok=True)
            os.chmod(p, 0o755)

    def _dir(self, rel: str, mode: int, owner: str | None = None) -> None:
        """A folder of `mode` (set with chmod, then read back: the umask does not narrow it), and an
        existing one of another mode put right."""
        path = self._path(rel)
        real = self.root == Path("/")

        def make() -> None:
            self._parents(path)
            path.mkdir(mode=mode, exist_ok=True)
            if owner and real:
                shutil.chown(path, owner, owner)
            os.chmod(path, mode)  # after chown, which clears setgid
            _verify(path, mode)

        was = _mode(path)
        self._change(f"directory {path} ({oct(mode)[2:]}{', ' + owner if owner else ''})", was == mode, make,
                     f"was {oct(was)[2:]}" if was is not None and was != mode else "")

    def _reachable(self, rel: str, why: str) -> None:
        """A folder members must read is reachable: each folder above it open to others (o+x)."""
        path = self._path(rel)
        blocked = unreachable(Path("/" + rel.lstrip("/")) / "x", self.root) if path.is_dir() else None
        if blocked is not None:
            self.steps.append(Step(f"directory {path}", "failed", f"{blocked} is {oct(_mode(blocked) or 0)[2:]}: {why}; "
                                   f"chmod 755 {blocked}"))

    def _state_dir(self) -> None:
        """svcdiag's state, shared with group svcdiag (files.SHARED_DIR: setgid, 2770) and its history
        group-writable, so that root's starts and an operator's are one history; a folder an earlier
        root `up` made 0700 is converted, the database, -wal and -shm with it."""
        path = self._path(DEFAULT_STATE_DIR)
        files = [f for f in (path / DB_NAME, path / f"{DB_NAME}-wal", path / f"{DB_NAME}-shm") if os.path.lexists(f)]
        real = self.root == Path("/")

        def ours(p: Path, mode: int) -> bool:
            st = p.lstat()  # a member's symlink is not "present": make() refuses it
            return stat.S_IMODE(st.st_mode) == mode and (not real or _group_of(st.st_gid) == GROUP)

        present = path.is_dir() and ours(path, SHARED_DIR) and all(ours(f, SHARED_FILE) for f in files)

        def make() -> None:
            self._parents(path)
            path.mkdir(mode=0o700, exist_ok=True)
            if real:
                shutil.chown(path, group=GROUP)
            os.chmod(path, SHARED_DIR)  # after chown, which clears setgid
            _verify(path, SHARED_DIR)
            for f in files:  # on a descriptor opened O_NOFOLLOW: a member's symlink to /etc/shadow is refused
                _share_file(f, grp.getgrnam(GROUP).gr_gid if real else -1)

        self._change(f"directory {path} (2770, group {GROUP}: one history for root and the group's operators)",
                     present, make, "made shared: " + ", ".join(f.name for f in files) if files and path.is_dir()
                     else "")

    def users(self) -> list[str]:
        return sorted({cfg.user for cfg in self.configs if cfg.user and cfg.user != "root" and not cfg.simulate})

    def changes(self) -> None:
        self._change(f"group {GROUP} (may start and stop svcdiag's units: docs/polkit.md)", self.group_exists(GROUP),
                     lambda: self.run(["groupadd", "--system", GROUP]))
        for user in self.users():
            home = f"/var/lib/{user}"
            self._change(f"service user {user} (system user, no login, home {home})", self.user_exists(user),
                         lambda u=user, h=home: self.run(["useradd", "--system", "--home-dir", h, "--no-create-home",
                                                          "--shell", NOLOGIN, "--user-group", u]))
            self._dir(home, 0o750, user)  # its state: the Hugging Face cache, torch's and Triton's caches
        self._state_dir()
        self._dir(UNITS_DIR, 0o755)
        self._reachable(UNITS_DIR, "the group's operators and the units' users cannot read the configs in it")
        self._dir(SECRETS_DIR, 0o700)
        self._polkit()
        self._completion()

    def _completion(self) -> None:
        target = self._path(BASH_COMPLETION)
        if self.completion is None or not target.parent.is_dir():
            return  # no bash-completion here: docs/install.md#6-shell-completion says how by hand
        current = target.read_text(encoding="utf-8") if target.exists() else None

        def write() -> None:
            write_atomic(target, self.completion or "", mode=0o644)

        self._change(f"bash completion {target} (commands, options, config names, hosts)",
                     current == self.completion, write)

    def _polkit(self) -> None:
        target = self._path(POLKIT_RULE)
        if not target.parent.parent.is_dir():
            self.steps.append(Step("polkit rule", "skipped", f"{target.parent.parent} is missing: apt-get install -y "
                                   "polkitd, then run setup again (without it only root runs svcdiag's units)"))
            return
        rule = RULE_SOURCE.read_text(encoding="utf-8")
        current = target.read_text(encoding="utf-8") if target.exists() else None

        def write() -> None:
            write_atomic(target, rule, mode=0o644)

        self._change(f"polkit rule {target}", current == rule, write,
                     "" if current in (None, rule) else "replacing an older copy")

    # ------------------------------------------------------------ checks

    def checks(self) -> None:
        self._check_own_interpreter()
        real = [cfg for cfg in self.configs if not cfg.simulate]
        with tempfile.TemporaryDirectory() as cache:  # the probe's cache: setup --dry-run writes nothing
            for python, names in _by(real, lambda cfg: [cfg.python]).items():
                cfg = next(x for x in real if x.python == python)
                version, why = probe(python, env=dict(cfg.env), state=cache)
                self.steps.append(Step(f"SGLang interpreter {python} ({names})", "ok" if version else "failed",
                                       why if version else f"{why}: set python = to the interpreter of SGLang's venv"))
        self._check_gpus()
        models = _by(real, lambda cfg: [p for p in (cfg.model_path, cfg.speculative.draft_model_path
                                                    if cfg.speculative else None) if p])
        for path, names in models.items():
            self._check_model(names, path)

    def _check_own_interpreter(self) -> None:
        """The units run `python -m svcdiag supervise` with this interpreter, as their User=."""
        what = f"svcdiag's interpreter for the units {self.python}"
        checkout = self.checkout
        if checkout is not None:
            self.steps.append(Step(what, "failed", f"svcdiag runs from the source checkout {checkout}: the units would "
                                   "run that checkout; install the built wheel (docs/install.md)"))
            return
        blocked = unreachable(Path(self.python), self.root)
        if blocked is not None and self.users():
            self.steps.append(Step(what, "failed", f"{blocked} is not open to others: User={', '.join(self.users())} "
                                   "cannot run it; install svcdiag under /opt (docs/install.md)"))
            return
        self.steps.append(Step(what, "ok", "an installed svcdiag"))
        users = sorted({cfg.user for cfg in self.configs if cfg.user and cfg.user != "root" and cfg.readiness == "notify"})
        for folder in sorted({cfg.path.parent for cfg in self.configs if cfg.user in users}):
            blocked = unreachable(folder / "x.toml", self.root)  # supervise reads its config there, as User=
            if blocked is not None:
                self.steps.append(Step(f"config folder {folder}", "failed", f"{blocked} is not open to others: the "
                                       f"units' supervisor (User={', '.join(users)}) cannot read its config; keep "
                                       "configs in /etc/svcdiag/units"))

    def _check_gpus(self) -> None:
        wanted = sorted({g for cfg in self.configs if not cfg.simulate for g in (cfg.gpus or ())})
        if not wanted:
            return
        out = self.smi(["--query-gpu=index,name,memory.total", "--format=csv,noheader"])
        if out is None:
            self.steps.append(Step("GPUs", "failed", "nvidia-smi is missing or fails: install the NVIDIA driver"))
            return
        have = [ln.split(",", 1)[0].strip() for ln in out.splitlines() if ln.strip()]
        missing = [g for g in wanted if str(g) not in have]
        self.steps.append(Step(f"GPUs {', '.join(map(str, wanted))} (the configs' gpus)", "failed" if missing else "ok",
                               f"nvidia-smi sees {len(have)} GPU(s)" + (f"; not GPU {missing}" if missing else "")))

    def _check_model(self, names: str, path: str) -> None:
        if not path.startswith("/"):
            self.steps.append(Step(f"model {path} ({names})", "skipped", "a hub id: SGLang downloads it at start"))
            return
        p = self._path(path)
        ok = (p / "config.json").is_file()
        self.steps.append(Step(f"model {path} ({names})", "ok" if ok else "failed",
                               "config.json found" if ok else f"{p / 'config.json'}: no such file"))

    def run_all(self) -> list[Step]:
        self.changes()
        self.checks()
        return self.steps


def _by(configs: list[ServiceConfig], keys: Callable[[ServiceConfig], list[str]]) -> dict[str, str]:
    """Each key (an interpreter, a model path) once, with the configs that name it."""
    out: dict[str, list[str]] = {}
    for cfg in configs:
        for k in keys(cfg):
            out.setdefault(k, []).append(cfg.name)
    return {k: ", ".join(v) for k, v in out.items()}


def source_checkout() -> Path | None:
    """The source checkout svcdiag is imported from (an editable install), else None."""
    top = Path(__file__).resolve().parent.parent.parent.parent
    if (top / "pyproject.toml").is_file() and (top / "svcdiag" / "cli").is_dir() and "site-packages" not in top.parts:
        return top
    return None


def unreachable(path: Path, root: Path = Path("/")) -> Path | None:
    """The first folder above `path` that others cannot enter (no o+x), else None."""
    for parent in [*reversed(path.parents)][1:]:  # below `/` (or `root`, which stands for it)
        p = root / str(parent).lstrip("/")
        try:
            mode = p.stat().st_mode
        except OSError:
            continue
        if not mode & stat.S_IXOTH:
            return p
    return None


def setup(configs: Iterable[ServiceConfig], *, dry_run: bool, **kw: Any) -> list[Step]:
    return Setup(list(configs), dry_run=dry_run, **kw).run_all()
