"""Fleets and tuning: many starts, each judged as `up` judges one, compared and recorded.

`campaign` runs a plan's phases (docs/campaign.md), `tune` searches for the settings that serve a
target (`tune_search`, pure: the next candidate; `tune_model`, its one window onto the memory
model), `baseline` keeps what a known-good start looked like and compares (`baseline-check`).
Builds on `serve`; nothing else imports this room.
"""
