"""Judging one start: the readiness state machine, the lines-to-verdict pipeline, and
the diagnosis of a verdict that is not healthy.

Pure: no I/O, time is the caller's. May import `sglang` and `config`; never `systemd`,
`output`, `ops` or `cli`, so replay and the live path reach the same verdict on the same lines.
"""
