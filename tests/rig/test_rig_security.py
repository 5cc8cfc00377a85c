"""#20 on a real systemd: [secrets] never leave root's hands, the strict unit still starts the
stand-in healthy, every shipped unit rates ≤ 4.0 in `systemd-analyze security`, and the polkit
rule lets group `svcdiag` run svcdiag's units and nothing else.

The unprivileged reader is `nobody` (uid 65534); the server runs as its own user. This
machine's interpreter lives under /root (0700), so the rig's /root is made traversable (o+x, on
the rig's throw-away overlay only) for the users the tests create."""

from __future__ import annotations

import re
import shlex
import uuid
from pathlib import Path

import pytest

from ..conftest import ROOT, assert_one_line_error, sglang_here
from .helpers import config, sv, unit_name, verdict_of

pytestmark = pytest.mark.rig

#: quotes, `%` specifiers, `$` variables, backquotes, a backslash and a newline: what must
#: neither reach the unit file nor be mangled on the way to the server's environment
TOKEN = "hf_Zq9\"'%h%%$HOME ${X}`id`\\n\tx\nline-2 end"
NOBODY = "setpriv --reuid=65534 --regid=65534 --clear-groups"
SCORE = re.compile(r"Overall exposure level for (\S+): (\d+\.\d+)")


def _as_nobody(rig, cmd: str):
    return rig.run(f"{NOBODY} sh -c {shlex.quote(cmd)}", check=False)


@pytest.fixture(scope="module")
def server_user(rig) -> str:
    user = f"sv{uuid.uuid4().hex[:6]}"
    rig.run(f"chmod o+x /root && useradd --system --no-create-home --shell /usr/sbin/nologin {user}")
    return user


def _secret_file(rig, value: str) -> str:
    path = f"/etc/svcdiag-test/{uuid.uuid4().hex[:8]}.secret"
    rig.run(f"mkdir -p /etc/svcdiag-test && umask 077 && cat > {path}", input=value.encode() + b"\n")
    return path


def test_secret_reaches_the_server_and_no_one_else(rig, units: Path, server_user: str) -> None:
    secret = _secret_file(rig, TOKEN)
    # journal mode: the server is the main process and reads journal mode's EnvironmentFile (notify's
    # export by the supervisor: test_notify_supervisor_exports_the_credential_to_sglang_only)
    name = config(units, unit_name("secret"), "demo-smoke", user=server_user, group=server_user,
                  readiness="journal", secrets={"HF_TOKEN": secret})
    p = sv(rig, units, "up", name, "--wait-ready", "--json")
    v = verdict_of(p)
    assert p.returncode == 0 and v["verdict"] == "healthy", (v, p.stderr.decode())  # the strict unit starts healthy
    everything = p.stdout.decode() + p.stderr.decode()
    unit = f"/etc/systemd/system/{name}.service"
    main_pid = rig.run(["systemctl", "show", "-p", "MainPID", "--value", f"{name}.service"]).stdout.decode().strip()
    # the server (its own user) sees it, exactly
    environ = rig.run(f"cat /proc/{main_pid}/environ").stdout.split(b"\0")
    assert f"HF_TOKEN={TOKEN}".encode() in environ
    assert rig.run(f"stat -c %U /proc/{main_pid}").stdout.decode().strip() == server_user
    # the unit says where, never what; nobody reads the unit, systemctl show, the server's environ, the env file
    text = _as_nobody(rig, f"cat {unit}").stdout.decode()
    assert f"LoadCredential=HF_TOKEN:{secret}" in text and "hf_Zq9" not in text
    shown = _as_nobody(rig, f"systemctl show {name}.service").stdout.decode()
    assert "EnvironmentFiles=/etc/svcdiag/secrets/" in shown and "hf_Zq9" not in shown
    assert _as_nobody(rig, f"cat /proc/{main_pid}/environ").returncode != 0
    assert _as_nobody(rig, f"cat /etc/svcdiag/secrets/{name}.env").returncode != 0
    assert _as_nobody(rig, f"cat {secret}").returncode != 0
    mode = rig.run(f"stat -c '%a %U' /etc/svcdiag/secrets/{name}.env /etc/svcdiag/secrets").stdout.decode().split("\n")
    assert mode[:2] == ["600 root", "700 root"]
    # nor does svcdiag show it: up's output, status, events, the state dir
    status = sv(rig, units, "status", name, "--json").stdout.decode()
    events = sv(rig, units, "events", "-u", name, "--json").stdout.decode()
    for out in (everything, status, events):
        assert "hf_Zq9" not in out
    assert rig.run("grep -rl 'hf_Z[q]9' /var/lib/svcdiag /run/svcdiag", check=False).stdout == b""
    assert _as_nobody(rig, "ls /var/lib/svcdiag").returncode != 0  # state is root's (0700)
    # no process's command line holds it
    assert rig.run("cat /proc/[0-9]*/cmdline 2>/dev/null | tr '\\0' ' ' | grep -c 'hf_Z[q]9'", check=False).stdout.strip() == b"0"
    assert sv(rig, units, "down", name).returncode == 0


def test_secret_in_env_and_a_readable_secret_file_are_refused(rig, units: Path) -> None:
    bad = config(units, unit_name("envtok"), "demo-smoke", env={"HF_TOKEN": "hf_leak123"})
    p = sv(rig, units, "up", bad)
    assert_one_line_error(p, "env.HF_TOKEN", "[secrets]")
    assert b"hf_leak123" not in p.stderr + p.stdout
    secret = _secret_file(rig, "hf_loose")
    rig.run(f"chmod 644 {secret}")
    loose = config(units, unit_name("loose"), "demo-smoke", secrets={"HF_TOKEN": secret})
    assert_one_line_error(sv(rig, units, "up", loose), "secrets.HF_TOKEN", secret, "chmod 600")
    missing = config(units, unit_name("missing"), "demo-smoke", secrets={"HF_TOKEN": "credstore:nope-" + uuid.uuid4().hex[:6]})
    assert_one_line_error(sv(rig, units, "install", missing), "secrets.HF_TOKEN", "/etc/credstore")
    assert rig.run(f"test -e /etc/systemd/system/{loose}.service", check=False).returncode != 0  # nothing installed


def test_encrypted_credential_reaches_the_server(rig, units: Path, server_user: str) -> None:
    rig.run("mkdir -p /etc/credstore.encrypted && printf 'hf_enc42' | "
            "systemd-creds encrypt --name=HF_TOKEN - /etc/credstore.encrypted/svtok && "
            "chmod 600 /etc/credstore.encrypted/svtok")
    name = config(units, unit_name("enc"), "demo-smoke", user=server_user, group=server_user,
                  secrets={"HF_TOKEN": "credstore:svtok"})
    assert "LoadCredentialEncrypted=HF_TOKEN:svtok" in sv(rig, units, "render", name).stdout.decode()
    p = sv(rig, units, "up", name, "--wait-ready", "--json")
    assert p.returncode == 0, p.stderr.decode()
    main_pid = rig.run(["systemctl", "show", "-p", "MainPID", "--value", f"{name}.service"]).stdout.decode().strip()
    server = rig.run(f"pgrep -P {main_pid}").stdout.decode().split()[0]  # notify: SGLang is the supervisor's child
    assert b"HF_TOKEN=hf_enc42" in rig.run(f"cat /proc/{server}/environ").stdout.split(b"\0")
    sv(rig, units, "down", name)


def test_notify_supervisor_exports_the_credential_to_sglang_only(rig, units: Path, server_user: str) -> None:
    secret = _secret_file(rig, "hf_notify7")
    name = config(units, unit_name("ntf"), "demo-smoke", user=server_user, group=server_user,
                  readiness="notify", secrets={"HF_TOKEN": secret})
    p = sv(rig, units, "up", name, "--wait-ready", "--json")
    assert p.returncode == 0 and verdict_of(p)["verdict"] == "healthy", p.stderr.decode()
    text = rig.run(f"cat /etc/systemd/system/{name}.service").stdout.decode()
    assert f"LoadCredential=HF_TOKEN:{secret}" in text and "EnvironmentFile=" not in text
    main_pid = rig.run(["systemctl", "show", "-p", "MainPID", "--value", f"{name}.service"]).stdout.decode().strip()
    child = rig.run(f"pgrep -P {main_pid}").stdout.decode().split()[0]
    assert b"HF_TOKEN=hf_notify7" in rig.run(f"cat /proc/{child}/environ").stdout.split(b"\0")  # SGLang has it
    assert b"hf_notify7" not in rig.run(f"cat /proc/{main_pid}/environ").stdout  # the supervisor does not keep it
    assert _as_nobody(rig, f"cat /proc/{child}/environ").returncode != 0
    sv(rig, units, "down", name)


def test_every_shipped_unit_rates_at_most_4(rig, units: Path, capsys) -> None:
    names = sorted(p.stem for p in (ROOT / "units").glob("*.toml"))
    sglang_here(units, units / ".sglang")  # install refuses a unit whose interpreter is missing here (issue 39)
    p = sv(rig, units, "install", *names, timeout=300)
    assert p.returncode == 0, p.stderr.decode()
    scores = {}
    from svcdiag.config.service import UnitsDir

    shipped = UnitsDir(ROOT / "units", "shipped")
    unit_names = [node.unit.removesuffix(".service") for n in names for node in shipped.load(n).node_configs()]
    for n in unit_names:  # a multi-node config installs one unit per node
        out = rig.run(["systemd-analyze", "security", "--no-pager", f"{n}.service"]).stdout.decode()
        m = SCORE.search(out)
        assert m, out[-500:]
        scores[n] = float(m.group(2))
    with capsys.disabled():
        print("\nsystemd-analyze security (exposure, lower is better): "
              + ", ".join(f"{n} {s:.1f}" for n, s in scores.items()))
    assert all(s <= 4.0 for s in scores.values()), scores
    # and off is off: the opt-out renders no sandbox
    off = config(units, unit_name("off"), "demo-smoke", hardening="off")
    assert "ProtectSystem" not in sv(rig, units, "render", off).stdout.decode()
    rig.run(["sh", "-c", "cd /etc/systemd/system && rm -f " + " ".join(f"{n}.service" for n in unit_names)])
    rig.run(["systemctl", "daemon-reload"])


def test_polkit_group_runs_svcdiag_units_only(rig, units: Path) -> None:
    op = f"op{uuid.uuid4().hex[:6]}"
    rig.run(f"chmod o+x /root && groupadd -f svcdiag && useradd --no-create-home -G svcdiag {op}")
    name = config(units, unit_name("pk"), "demo-smoke")
    assert sv(rig, units, "install", name).returncode == 0
    foreign = f"foreign-{uuid.uuid4().hex[:6]}.service"
    rig.run(f"printf '[Service]\\nExecStart=/bin/sleep 600\\n' > /etc/systemd/system/{foreign} && "
            f"systemctl daemon-reload && systemctl start {foreign}")
    as_op = f"setpriv --reuid={op} --regid={op} --init-groups "
    up = f"{as_op} svcdiag --units {units} up {name}"
    # without the rule (another test's `svcdiag setup` may have installed it in this rig): one line, exit 1
    rig.run("rm -f /etc/polkit-1/rules.d/50-svcdiag.rules")
    denied = rig.run(up, check=False)
    assert_one_line_error(denied, "Access denied by systemd: run as root or install the polkit rule in docs/polkit.md",
                          code=1)
    rig.run(f"install -m 644 {ROOT}/contrib/polkit/50-svcdiag.rules /etc/polkit-1/rules.d/50-svcdiag.rules "
            "&& systemctl try-restart polkit.service")
    ok = rig.run(up, check=False)
    assert ok.returncode == 0, ok.stderr.decode()
    assert rig.run(["systemctl", "is-active", f"{name}.service"], check=False).stdout.strip() in (b"active", b"activating")
    assert rig.run(f"{as_op} svcdiag --units {units} down {name}", check=False).returncode == 0
    assert rig.run(["systemctl", "is-active", f"{name}.service"], check=False).stdout.strip() == b"inactive"
    other = rig.run(f"{as_op} systemctl stop {foreign}", check=False)
    assert other.returncode != 0 and b"nteractive authentication required" in other.stderr + other.stdout, other
    assert rig.run(["systemctl", "is-active", foreign]).stdout.strip() == b"active"
    rig.run(f"systemctl stop {foreign}; rm -f /etc/polkit-1/rules.d/50-svcdiag.rules")
