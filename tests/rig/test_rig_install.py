"""docs/install.md, run in the private rig: the built wheel installed under /opt/svcdiag, `setup`
(twice: the second run changes nothing), `import` of a hand-written sglang-*.service, `install
--force` over it, and `up --wait-ready` to a healthy verdict, with the unit running the installed
svcdiag, not this checkout.

The rig is a copy of this host with no network: the wheel is installed with --no-deps, and its
dependencies (click, jinja2, pystemd, …) come from the test venv's site-packages by a .pth file.
SGLang is the stand-in behind a `python` that answers `-m sglang.launch_server` (what an SGLang
venv's interpreter does), with a stub `sglang` package that says its release.
"""

from __future__ import annotations

import shutil
import sysconfig
import uuid
from pathlib import Path

import pytest

from ..conftest import ROOT, build_dist
from ..model_fixtures import DENSE_QWEN3_8B, model_dir
from .helpers import json_lines, next_port

pytestmark = pytest.mark.rig

HAND_WRITTEN = """\
[Unit]
Description=Qwen3-8B, as the operator wrote it
After=network-online.target

[Service]
Type=simple
User=sglang
Group=sglang
Environment="HF_TOKEN=hf_from_the_old_unit" NCCL_DEBUG=WARN
ExecStart=/opt/sglang/.venv/bin/python -m sglang.launch_server --model-path {model} \\
    --tp 1 --port {port} --host 127.0.0.1 --mem-fraction-static 0.8 --context-length 8192 \\
    --enable-metrics
Restart=on-failure
TimeoutStartSec=600

[Install]
WantedBy=multi-user.target
"""
#: SGLang's interpreter, played by the stand-in (20× faster), with a stub sglang to ask for its version
FAKE_SGLANG_PYTHON = """\
#!/bin/sh
export PYTHONPATH=/opt/sglang/stub
if [ "$1" = -m ] && [ "$2" = sglang.launch_server ]; then
  shift 2
  exec /opt/svcdiag/bin/python -m svcdiag.sim healthy-dense --time-scale 0.05 "$@"
fi
exec /opt/svcdiag/bin/python "$@"
"""


@pytest.fixture(scope="module")
def wheel():
    """The wheel `python -m build` makes, in a folder the rig sees (the checkout's .rig-tmp)."""
    pytest.importorskip("build")
    out = ROOT / ".rig-tmp" / f"dist-{uuid.uuid4().hex[:6]}"
    out.mkdir(parents=True)
    r = build_dist(out, "--wheel")
    assert r.returncode == 0, r.stderr[-2000:]
    yield next(out.glob("svcdiag-*.whl"))
    shutil.rmtree(out, ignore_errors=True)


def test_from_the_wheel_to_a_healthy_start_of_an_imported_unit(rig, wheel: Path) -> None:
    work = wheel.parent
    model = model_dir(work, "Qwen3-8B", DENSE_QWEN3_8B, 16.0)
    port = next_port()
    (work / "sglang-qwen8b.service").write_text(HAND_WRITTEN.format(model=model, port=port))
    site = sysconfig.get_paths()["purelib"]  # the test venv's: the wheel's dependencies, built already
    prepare = f"""set -e
/usr/bin/python3 -m venv /opt/svcdiag
/opt/svcdiag/bin/pip install -q --no-index --no-deps {wheel}
echo {site} > "$(/opt/svcdiag/bin/python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')/deps.pth"
mkdir -p /opt/sglang/.venv/bin /opt/sglang/stub/sglang
echo '__version__ = "0.5.23"' > /opt/sglang/stub/sglang/__init__.py
cat > /opt/sglang/.venv/bin/python <<'EOF'
{FAKE_SGLANG_PYTHON}EOF
chmod 755 /opt/sglang/.venv/bin/python
cp {work}/sglang-qwen8b.service /etc/systemd/system/ && systemctl daemon-reload
"""
    rig.run(prepare, timeout=300)
    sv = "cd / && /opt/svcdiag/bin/svcdiag"  # not in the checkout: ./units and ./svcdiag are not found there
    here = rig.run(f"{sv} --version && /opt/svcdiag/bin/python -c 'import svcdiag; print(svcdiag.__file__)'").stdout.decode()
    assert str(ROOT) not in here
    assert here.startswith("svcdiag ") and "/opt/svcdiag/" in here, here

    first = rig.run(f"{sv} setup --json", check=False, timeout=120)
    steps = {s["what"].split(" (")[0]: s["status"] for s in json_lines(first)}
    assert steps["group svcdiag"] == "done" and steps["directory /etc/svcdiag/units"] == "done", first.stdout.decode() + first.stderr.decode()
    own = next(s for s in json_lines(first) if s["what"].startswith("svcdiag's interpreter for the units /opt/svcdiag/bin/"))
    assert own["status"] == "ok", first.stdout.decode() + first.stderr.decode()
    again = rig.run(f"{sv} setup --json", check=False, timeout=120)
    assert not [s for s in json_lines(again) if s["status"] in ("done", "would")], again.stdout.decode()

    imported = rig.run(f"{sv} import sglang-qwen8b.service", check=False, timeout=120)  # the unit's name
    err = imported.stderr.decode()
    assert imported.returncode == 0, err
    assert "HF_TOKEN was in Environment=" in err and "+Type=notify" in imported.stdout.decode()
    toml = rig.run("cat /etc/svcdiag/units/sglang-qwen8b.toml").stdout.decode()
    assert "hf_from_the_old_unit" not in toml and 'user = "sglang"' in toml

    checked = rig.run(f"{sv} setup --json", check=False, timeout=120)  # now with the config: its interpreter, model
    bad = [s for s in json_lines(checked) if s["status"] == "failed"]
    assert not bad and checked.returncode == 0, bad
    assert rig.run(f"{sv} install sglang-qwen8b", check=False).returncode == 2  # the operator's own file: --force
    rig.run(f"{sv} install sglang-qwen8b --force")
    unit = rig.run("cat /etc/systemd/system/sglang-qwen8b.service").stdout.decode()
    exec_start = next(ln for ln in unit.splitlines() if ln.startswith("ExecStart="))
    assert exec_start.startswith("ExecStart=/opt/svcdiag/bin/python3 -m svcdiag --units /etc/svcdiag/units supervise")
    assert str(ROOT) not in exec_start.split(" -- ")[0]  # (the model lies in the checkout: the rig sees only it)

    up = rig.run(f"{sv} up sglang-qwen8b --wait-ready --json", check=False, timeout=240)
    verdict = json_lines(up)[-1]
    assert up.returncode == 0 and verdict["verdict"] == "healthy", up.stdout.decode()[-3000:] + up.stderr.decode()
    assert rig.run("systemctl show -P User sglang-qwen8b.service").stdout.decode().strip() == "sglang"
    rig.run(f"{sv} down sglang-qwen8b")
