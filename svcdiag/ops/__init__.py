"""Use cases: start and wait, wait, stop, status, logs, baseline-check, replay, preflight.

Each takes configs and a publisher, drives `systemd`, `judge` and `output`, and returns a
typed result. None prints on its own or exits the process: `cli` maps results to exit codes.
"""
