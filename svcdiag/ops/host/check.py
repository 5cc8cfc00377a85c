"""The flag check: the arguments a config renders, against the SGLang release that will run
them. `svcdiag check` reports it; `install`, `up` and `baseline-check` run it before writing
or starting anything and refuse an argument the release does not take (exit 2).

Two judges: the bundled flag table of the release (svcdiag.sglang.flag_tables), and, where
the unit's interpreter has sglang installed, SGLang's own `ServerArgs` parser run in that
interpreter (argparse only, CPU only: nothing is loaded, no GPU is touched).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from svcdiag.config.service import ServiceConfig
from svcdiag.errors import SvcdiagError
from svcdiag.ops.host.ports import ephemeral_clash
from svcdiag.ops.host.sglang_version import SglangVersion, probe_env, resolve
from svcdiag.sglang.flag_tables import FlagProblem, table_for
from svcdiag.sglang.flags import sglang_args

PARSE_TIMEOUT = 120.0
IMPORT_FAILED = "svcdiag-import-failed:"
PARSED = "svcdiag-parsed"
#: run as `python -c PARSER ARG...`: SGLang's own argparse over the rendered arguments
PARSER = f"""\
import argparse, sys
try:
    from sglang.srt.server_args import ServerArgs
except BaseException as e:
    print({IMPORT_FAILED!r}, type(e).__name__ + ":", str(e).splitlines()[0] if str(e) else "")
    sys.exit(3)
parser = argparse.ArgumentParser(prog="launch_server")
ServerArgs.add_cli_args(parser)
parser.parse_args(sys.argv[1:])
print({PARSED!r})
"""


class FlagCheckError(SvcdiagError):
    """An argument the SGLang release will not take: exit 2, nothing written or started."""


@dataclass(frozen=True, slots=True)
class ParserVerdict:
    """What SGLang's own parser said: "accepted", "rejected", "no_sglang" (the interpreter is not
    there, or cannot import sglang: the unit could not start either), "unavailable" (it did not
    answer) or "skipped" (the stand-in runs, or not asked for)."""

    status: str
    detail: str


@dataclass(frozen=True, slots=True)
class CheckResult:
    """A config's flags judged against the SGLang release it will run, and the table that judged them."""

    name: str
    sglang: SglangVersion
    table: str                 # the bundled table that judged
    exact: bool                # whether that table is of the release itself
    argv: tuple[str, ...]
    problems: tuple[FlagProblem, ...]
    parser: ParserVerdict
    #: a unit run here (not a remote host's): an interpreter with no sglang matters
    require_sglang: bool = False
    #: the command that asked: "check", or one that installs or starts
    checked_by: str = "install"
    #: what this host says of the config's own values (a port the kernel may lend to outgoing connections)
    host_warnings: tuple[str, ...] = ()

    @property
    def pinned(self) -> bool:
        """The release is known without the interpreter (the config's sglang_version, --sglang-version)."""
        return self.sglang.source in ("option", "config")

    def _no_sglang(self) -> str | None:
        """The unit's interpreter cannot run SGLang here, said once for check, install, up, tune and
        baseline-check alike (an error where the release is unknown, a warning where it is pinned)."""
        if self.parser.status != "no_sglang" or not self.require_sglang:
            return None
        if self.pinned:
            return (f"{self.parser.detail}: the unit cannot start SGLang on this machine; the flags were checked "
                    f"against sglang {self.sglang.version}'s table ({self.sglang.detail})")
        return (f"{self.parser.detail}: the unit cannot start SGLang; set python = to the interpreter of SGLang's "
                "venv (or pin sglang_version to check the flags without it)")

    @property
    def errors(self) -> list[str]:
        out = [p.message for p in self.problems if p.severity == "error"]
        if self.parser.status == "rejected":
            out.append(self.parser.detail)
        said = self._no_sglang()
        if said is not None and not self.pinned:
            out.append(said)
        return out

    @property
    def warnings(self) -> list[str]:
        said = self._no_sglang()
        return ([p.message for p in self.problems if p.severity == "warning"] + ([said] if said and self.pinned else [])
                + list(self.host_warnings))

    @property
    def notes(self) -> list[str]:
        """How the release was found, and why SGLang's parser was not asked (when it was not)."""
        out = [f"{self.name}: flags rendered for {self.sglang.describe()}"]
        if self.parser.status in ("unavailable", "skipped") or (self.parser.status == "no_sglang"
                                                                and not self.require_sglang):  # else said as such
            out.append(f"{self.name}: SGLang's own parser not run ({self.parser.detail}); the flag table alone judged")
        return out

    @property
    def ok(self) -> bool:
        return not self.errors

    def error_line(self) -> str:
        """The first error, in one line: the flag, the release, the replacement when known."""
        errors = self.errors
        more = f" (and {len(errors) - 1} more: {self.more_hint()})" if len(errors) > 1 else ""
        assumed = (f" [sglang {self.sglang.version} assumed: {self.sglang.detail}; set sglang_version or pass "
                   "--sglang-version]") if self.sglang.assumed else ""
        return f"{self.name}: {errors[0]}{more}{assumed}"

    def more_hint(self) -> str:
        """Where the other errors are: `svcdiag check NAME` from install or up; from check itself
        (it printed the first only), its --json, never the command just run."""
        if self.checked_by == "check":
            again = f" --sglang-version {self.sglang.version}" if self.sglang.source == "option" else ""
            return f"each is in svcdiag check {self.name}{again} --json"
        again = f" --sglang-version {self.sglang.version}" if self.sglang.source == "option" else ""
        return f"svcdiag check {self.name}{again}"

    def summary(self) -> str:
        verdict = "OK" if self.ok else "REFUSED"
        table = "" if self.exact else f", flags of {self.table}"
        parser = {"accepted": "; SGLang's own parser accepts them",
                  "rejected": "; SGLang's own parser rejects them"}.get(self.parser.status, "")
        return (f"{self.name}: {verdict} for sglang {self.sglang.version} ({self.sglang.source}{table}): "
                f"{len(self.argv)} arguments, {len(self.errors)} error(s), {len(self.warnings)} warning(s){parser}")

    def to_json(self) -> dict[str, Any]:
        return {"event": "check", "name": self.name, "ok": self.ok, "sglang_version": self.sglang.version,
                "sglang_version_source": self.sglang.source, "sglang_version_detail": self.sglang.detail,
                "table": self.table, "table_exact": self.exact, "argv": list(self.argv),
                "problems": [{"flag": p.flag, "severity": p.severity, "kind": p.kind, "message": p.message,
                              "replacement": list(p.replacement)} for p in self.problems],
                "server_args_parser": {"status": self.parser.status, "detail": self.parser.detail},
                "errors": self.errors, "warnings": self.warnings}


def check(cfg: ServiceConfig, *, override: str | None = None, state: str | None = None,
          sglang: SglangVersion | None = None, own_parser: bool = True, require_sglang: bool = True,
          checked_by: str = "install") -> CheckResult:
    """Render `cfg`'s SGLang arguments for the release it will run and judge them. A local unit's
    interpreter that cannot import sglang is an error, or a warning where the release is pinned
    (CheckResult.errors): `check`, `install`, `up`, `tune` and `baseline-check` agree."""
    sglang = sglang or resolve(cfg, override=override, state=state)
    argv = sglang_args(cfg, sglang.version)
    table = table_for(sglang.version)
    problems = tuple(table.check(argv))
    if cfg.simulate:
        parser = ParserVerdict("skipped", f"simulate = {cfg.simulate!r}: the stand-in runs, not SGLang")
    elif not own_parser:
        parser = ParserVerdict("skipped", "not asked for")
    else:
        parser = parse_with_sglang(cfg.python, argv, env=dict(cfg.env))
    clash = None if cfg.remote_host else ephemeral_clash(cfg.port)
    return CheckResult(cfg.name, sglang, table.version, table.exact, tuple(argv), problems, parser,
                       require_sglang=require_sglang and not cfg.remote_host, checked_by=checked_by,
                       host_warnings=(clash,) if clash else ())


def require_ok(result: CheckResult) -> CheckResult:
    if not result.ok:
        raise FlagCheckError(result.error_line())
    return result


def parse_with_sglang(python: str, argv: list[str], *, env: dict[str, str] | None = None,
                      timeout: float = PARSE_TIMEOUT) -> ParserVerdict:
    """`ServerArgs.add_cli_args` then `parse_args(argv)` in the interpreter at `python`."""
    if not Path(python).exists():
        return ParserVerdict("no_sglang", f"{python} does not exist here")
    import subprocess  # here: ~5 ms of a command that rarely runs a probe

    try:
        proc = subprocess.run([python, "-c", PARSER, *argv], capture_output=True, text=True, timeout=timeout,
                              stdin=subprocess.DEVNULL, env=probe_env(env), check=False)
    except subprocess.TimeoutExpired:
        return ParserVerdict("unavailable", f"{python} did not parse the arguments within {timeout:.0f} s")
    except OSError as e:
        return ParserVerdict("unavailable", f"{python}: {e.strerror or e}")
    out_lines = [ln.strip() for ln in proc.stdout.splitlines() if ln.strip()]
    failed = next((ln for ln in out_lines if ln.startswith(IMPORT_FAILED)), None)
    if failed is not None:
        why = failed[len(IMPORT_FAILED):].strip()
        status = "no_sglang" if why.endswith("No module named 'sglang'") else "unavailable"
        return ParserVerdict(status, f"{python} cannot import sglang.srt.server_args: {why}")
    if proc.returncode == 0 and PARSED in out_lines:
        return ParserVerdict("accepted", f"{python}: ServerArgs accepts the arguments")
    err_lines = [ln.strip() for ln in proc.stderr.splitlines() if ln.strip()]
    said = next((ln.split("error: ", 1)[1] for ln in reversed(err_lines) if "error: " in ln), None)
    if proc.returncode == 2 and said:
        return ParserVerdict("rejected", f"SGLang's own parser ({python}) rejects the arguments: {said}")
    last = err_lines[-1] if err_lines else f"exit status {proc.returncode}"
    return ParserVerdict("unavailable", f"{python} could not run SGLang's parser: {last}")


def checked_install(configs: list[ServiceConfig], unit_dir: Path, *, force: bool = False,
                    state: str | None = None) -> dict[str, Any]:
    """`install`: check every config first (all or nothing: one refusal writes nothing), then
    write each unit with its flags spelled for its release. The result is install_units'
    with the checks, their `notes` and their `warnings`."""
    from svcdiag.systemd.install import install_units  # here, not at the top: `check` renders no unit (jinja2, ~20 ms)

    results = [require_ok(check(cfg, state=state)) for cfg in configs]
    result = install_units(configs, unit_dir, force=force, versions={r.name: r.sglang.version for r in results})
    result["checks"] = [r.to_json() for r in results]
    result["notes"] = [n for r in results for n in r.notes]
    result["warnings"] = [f"{r.name}: {w}" for r in results for w in r.warnings]
    return result
