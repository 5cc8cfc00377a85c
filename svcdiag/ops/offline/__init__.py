"""Reading a start after the fact: a saved log, a journal export or a bundle, with no unit to ask.

`replay` judges a log on its own timestamps, `bundle_read` opens a bundle for it, `conclude` is a
verdict's last step (the diagnosis; `serve` uses it too). `bundle` is the one writer here: it packs
a unit's start (journal slice, unit, config, verdict) for someone else to replay, and judges it
through `replay`, never the reverse. replay, bundle_read and conclude import no D-Bus, journal
reader or SSH (pyproject.toml's contracts); the room imports only `host` of the others.
"""
