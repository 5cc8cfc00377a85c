"""Run inside the rig: for each argv list on stdin (JSON), install a unit rendered from a
config with those extra_args, let systemd itself run it, and print the argv the process
actually received. The probe stands in for sglang.launch_server and prints its sys.argv."""

import json
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

from svcdiag.config.service import config_from_keys
from svcdiag.ops.serve.follow import start_unit
from svcdiag.systemd.dbus import Systemd
from svcdiag.systemd.journal import Follower
from svcdiag.systemd.render import render_unit

probe = Path(tempfile.mkdtemp(prefix="argv-probe.", dir="/run"))
(probe / "sglang").mkdir()
(probe / "sglang" / "__init__.py").write_text("")
(probe / "sglang" / "launch_server.py").write_text(
    "import json, sys, time\nprint('ARGV ' + json.dumps(sys.argv[1:]), flush=True)\ntime.sleep(0.5)\n")
cases = json.load(sys.stdin)
units = []
for i, args in enumerate(cases):
    # journal: the probe is not a server (it never says ready) and its config file is virtual,
    # so no supervisor could load it; the quoting under test is the same in both modes
    raw = {"model_path": "/dev/shm/m", "extra_args": args, "python": "/usr/bin/python3",
           "env": {"PYTHONPATH": str(probe)}, "readiness": "journal"}
    cfg = config_from_keys(f"svcdiag-quoting-{uuid.uuid4().hex[:8]}-{i}", Path("/virtual/q.toml"), raw)
    Path(f"/etc/systemd/system/{cfg.unit}").write_text(render_unit(cfg))
    units.append(cfg.unit)
out = []
with Systemd.connect() as sd:
    sd.daemon_reload()
    for unit in units:
        props = start_unit(sd, unit, restart=False)
        journal = Follower(unit, props.invocation)
        argv = None
        deadline = time.monotonic() + 30
        while argv is None and time.monotonic() < deadline:
            for rec in journal.read():
                if rec.text.startswith("ARGV "):
                    argv = json.loads(rec.text[5:])
            time.sleep(0.01)
            journal.on_fd_event()  # a journal file that appeared meanwhile
        out.append({"load_state": sd.props(unit).load_state, "argv": argv})
subprocess.run(["systemctl", "stop", *units], check=True)  # the probes sleep after printing: none left running
for unit in units:
    Path(f"/etc/systemd/system/{unit}").unlink()
json.dump(out, sys.stdout)
