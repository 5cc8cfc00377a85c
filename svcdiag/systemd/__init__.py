"""The one place that knows systemd: D-Bus (pystemd), the journal (cysystemd and journalctl's
formats), unit rendering and install, and the private systemd rig the tests boot.

May import `output.schema` (the journal stores readiness records), `judge`, `sglang`,
`config`; never `ops` or `cli`.
"""
