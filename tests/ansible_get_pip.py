"""A stand-in for pip's get-pip.py, which ansible-test downloads from its own server to put pip
into each sanity test's virtual environment (a host that reaches only the package registries
cannot fetch it). tests/test_ansible_module.py puts it where ansible-test caches that script:
pip from the standard library's ensurepip, then `pip install` of what get-pip.py was asked for,
with this machine's pip configuration (its index and certificates), which ansible-test turns off
(PIP_CONFIG_FILE=/dev/null)."""

import ensurepip
import os
import subprocess
import sys

ensurepip.bootstrap(upgrade=True, verbosity=0)
args = [a for a in sys.argv[1:] if a not in ("--no-setuptools", "--no-wheel")]  # get-pip.py's own options
env = {k: v for k, v in os.environ.items() if k != "PIP_CONFIG_FILE"}
sys.exit(subprocess.call([sys.executable, "-m", "pip", "install", *args], env=env))
