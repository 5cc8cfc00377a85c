"""Containers: `svcdiag supervise` as a pod's main process, where there is no systemd.

`container` runs serve's Supervisor as PID 1 (deadlines enforced itself, orphans reaped, the
termination message; docs/kubernetes.md), `probes` its `/startupz` `/readyz` `/livez` listener and
`svcdiag probe`. Builds on `serve`; nothing else imports this room.
"""
