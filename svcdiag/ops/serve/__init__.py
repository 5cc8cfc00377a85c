"""Serving a unit under systemd: bring it up and say when it is healthy, watch it, stop it.

`start` is the story from a config to a verdict (`up`, `wait`), `follow` its live loop on the
journal and D-Bus, `nodes` the same over several hosts (a multi-node start), `service` `down`,
`status` and `logs`, `board` `top`. `supervise` is a notify unit's main process (SGLang its
child, sd_notify from the verdict); `status_line` is the STATUS= line it writes and the followers
read, `deadline_owner` who of them ends a phase, `http_check` the HTTP cross-check after ready,
`secrets` notify mode's credentials. May import `offline` and `host`, never `fleet` or `containers`.
"""
