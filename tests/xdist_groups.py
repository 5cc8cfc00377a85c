"""Which tests `make test` (pytest -n 2 --dist loadgroup) keeps together on one worker.

pytest 9 made an item's node id read-only, so pytest-xdist 3.8 no longer appends an
`xdist_group` mark's `@name` to it: the mark was ignored and every test was its own unit, so both
workers booted the SSH test hosts (two more private systemds each) and ran their tests side by
side. The groups are named here instead, by module, and read from the node ids the controller's
scheduler is sent (tests/conftest.py, pytest_xdist_make_scheduler).
"""

from __future__ import annotations

#: module → group. "hosts": the tests of gpu-a and gpu-b (tests/rig/conftest.py `test_hosts`), booted
#: once, by the one worker that runs them all. The biggest unit is handed out first (xdist's
#: --loadscope-reorder), so that worker starts on it while the other takes the single tests.
GROUPS = {
    "tests/rig/test_rig_remote.py": "hosts",
    "tests/rig/test_rig_remote_ops.py": "hosts",
    "tests/rig/test_rig_ansible.py": "hosts",
}


def group_of(nodeid: str) -> str:
    """The scope of one test: its group's name, else the test itself."""
    return GROUPS.get(nodeid.split("::", 1)[0], nodeid)


def make_scheduler(config, log):
    """xdist's loadgroup, its groups taken from GROUPS (an `@name` suffix, where xdist still adds one, wins)."""
    from xdist.scheduler import LoadGroupScheduling

    class ByModuleGroups(LoadGroupScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return super()._split_scope(nodeid) if "@" in nodeid.rsplit("]", 1)[-1] else group_of(nodeid)

    return ByModuleGroups(config, log)
