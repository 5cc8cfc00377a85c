"""Run inside the rig: for each argv list on stdin (JSON), install a unit rendered from a
config with those extra_args, let systemd itself run it, and print the argv the process
actually received. The probe stands in for sglang.launch_server and prints its sys.argv."""

import json
import sys
import tempfile
from pathlib import Path

from svcdiag.config import _build, check_raw
from svcdiag.journal import Follower
from svcdiag.live import start_unit
from svcdiag.render import render_unit
from svcdiag.systemd import Systemd

probe = Path(tempfile.mkdtemp(prefix="argv-probe.", dir="/run"))
(probe / "sglang").mkdir()
(probe / "sglang" / "__init__.py").write_text("")
(probe / "sglang" / "launch_server.py").write_text("import json, sys\nprint('ARGV ' + json.dumps(sys.argv[1:]))\n")
cases = json.load(sys.stdin)
units = []
for i, args in enumerate(cases):
    raw = {"model_path": "/dev/shm/m", "extra_args": args, "python": "/usr/bin/python3", "env": {"PYTHONPATH": str(probe)}}
    check_raw(Path("/virtual/q.toml"), raw)
    cfg = _build(f"svcdiag-quoting-{i}", Path("/virtual/q.toml"), raw)
    Path(f"/etc/systemd/system/{cfg.unit}").write_text(render_unit(cfg))
    units.append(cfg.unit)
out = []
with Systemd.connect() as sd:
    sd.daemon_reload()
    for unit in units:
        props = start_unit(sd, unit, restart=False)
        argv = None
        for _ in range(400):
            for rec in Follower(unit, props.invocation).read():
                if rec.text.startswith("ARGV "):
                    argv = json.loads(rec.text[5:])
            if argv is not None:
                break
            import time

            time.sleep(0.01)
        out.append({"load_state": sd.props(unit).load_state, "argv": argv})
for unit in units:
    Path(f"/etc/systemd/system/{unit}").unlink()
json.dump(out, sys.stdout)
