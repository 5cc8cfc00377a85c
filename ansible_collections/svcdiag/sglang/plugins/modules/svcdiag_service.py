#!/usr/bin/python
# Copyright (c) svcdiag contributors
# SPDX-License-Identifier: MIT (the collection's license, galaxy.yml; see tests/sanity/ignore-*.txt)
"""svcdiag_service: an SGLang server under svcdiag on a systemd host, judged (docs/ansible.md)."""

from __future__ import annotations

DOCUMENTATION = r"""
module: svcdiag_service
short_description: Start, stop or baseline-check an SGLang server that svcdiag runs, with its verdict
author:
  - svcdiag contributors (!UNKNOWN)
description:
  - Runs C(svcdiag) on the managed host (C(up), C(down), C(status), C(baseline-check), C(preflight),
    all with C(--json)) and returns the verdict of the start it judged.
  - Idempotent. C(state=started) leaves a unit that is already running the config it was installed
    from alone (C(changed=false)); a running unit that differs from its config is restarted.
  - A start that svcdiag judges failed or timed out fails the task, with the diagnosis as C(msg).
  - In check mode it starts and stops nothing; it reads what the real run would read (the unit's
    state and verdict, the installed unit against what the config renders, preflight) and says what
    that run would do, C(changed) included.
  - In diff mode (C(--diff)) it returns the unit file as installed and as the config renders it,
    where C(svcdiag up) installs it again (a new or edited config).
options:
  name:
    description: The svcdiag config (its TOML in the units folder).
    type: str
    required: true
  state:
    description:
      - C(started) installs (if missing or drifted) and starts the unit unless it runs already.
      - C(restarted) starts it afresh.
      - C(stopped) stops it.
      - C(baseline_checked) runs C(svcdiag baseline-check), which starts the config afresh, compares it
        with its last good run and puts it back as it was (C(changed=false)).
    type: str
    choices: [started, stopped, restarted, baseline_checked]
    default: started
  wait_ready:
    description: Wait for the start's verdict (healthy, failed or timed out). Without it, the task
      ends once systemd has the start, and returns no verdict.
    type: bool
    default: true
  force:
    description: Start even when preflight predicts the config cannot serve one request, or another
      process holds memory on its GPUs.
    type: bool
    default: false
  timeout:
    description: An overall deadline in seconds, on top of svcdiag's per-phase ones.
    type: float
  units:
    description: The units folder (svcdiag's C(--units)); default svcdiag's own search (./units, /etc/svcdiag/units).
    type: path
  svcdiag:
    description: The svcdiag command on the managed host.
    type: path
    default: svcdiag
"""

EXAMPLES = r"""
- name: The new config, healthy, one host at a time
  svcdiag.sglang.svcdiag_service:
    name: qwen3-8b
    state: started
  register: start

- ansible.builtin.debug:
    msg: "{{ start.verdict }}: KV {{ start.figures.kv_tokens }} tokens"
"""

RETURN = r"""
verdict:
  description: healthy, failed, timed_out or incomplete; refused when preflight kept the start from happening.
  type: str
  returned: when a start was judged (not with wait_ready=false, not for state=stopped, not in check mode)
cause:
  description: svcdiag's failure cause (docs/replay.md#failure-causes-stable-ids), e.g. max_running_zero.
  type: str
  returned: when a start was judged (null when healthy)
phase:
  description: The phase the start reached (ready when healthy).
  type: str
  returned: when a start was judged
figures:
  description: The start's figures (kv_tokens, max_running_requests, phase seconds, ...).
  type: dict
  returned: when a start was judged
diagnosis:
  description: Why, in sentences.
  type: list
  elements: str
  returned: when a start was judged (empty when healthy)
fixes:
  description: What to set, each {set, reason}.
  type: list
  elements: dict
  returned: when a start was judged (empty when healthy)
message:
  description: The verdict's message.
  type: str
  returned: when a start was judged
notes:
  description: What svcdiag said along the way (installed, started, attaching, ...).
  type: list
  elements: str
  returned: when svcdiag up or baseline-check ran
drift:
  description: How this start's figures differ from the last healthy one's (a baseline check that
    drifted fails its task with them).
  type: list
  elements: str
  returned: when a start was judged
record:
  description: The verdict record as svcdiag printed it (docs/events.md).
  type: dict
  returned: when a start was judged
ansible_facts:
  description: svcdiag_verdict, the same verdict record, for later tasks of the play.
  type: dict
  returned: when a start was judged
preflight:
  description: svcdiag preflight's record (verdict fits or cannot_serve, its reasons), in check mode.
  type: dict
  returned: in check mode, when a start would happen and preflight could run
"""

import json  # noqa: E402

from ansible.module_utils.basic import AnsibleModule  # noqa: E402

#: svcdiag's exit codes (its README): what a command said by its status
EXIT_BAD_INPUT = 2


def records(text):
    """svcdiag's --json output: one object per line (a line that is not one is skipped)."""
    out = []
    for raw in text.splitlines():
        line = raw.strip()
        if line.startswith("{"):
            try:
                out.append(json.loads(line))
            except ValueError:
                pass
    return out


class Svcdiag:
    def __init__(self, module):
        self.module = module
        p = module.params
        self.base = [p["svcdiag"]] + (["--units", p["units"]] if p["units"] else [])
        self.name = p["name"]

    def run(self, *args):
        rc, out, err = self.module.run_command(self.base + list(args), environ_update={"NO_COLOR": "1"})
        return rc, records(out), err.strip()

    def fail(self, text, **result):
        self.module.fail_json(msg=f"{self.name}: {text}", **result)

    def status(self):
        rc, recs, err = self.run("status", self.name, "--json")
        rows = [r for r in recs if r.get("event") == "status"]
        if rc == EXIT_BAD_INPUT or not rows:
            self.fail(f"svcdiag status: {err or 'no answer'}")
        return rows[0]


def verdict_result(rec, notes):
    """The task's result from svcdiag's verdict record."""
    d = rec.get("diagnosis") or {}  # docs/events.md: a verdict record's diagnosis is top-level
    return {"verdict": rec.get("verdict"), "cause": rec.get("cause"), "phase": rec.get("phase"),
            "message": rec.get("message"), "figures": rec.get("figures") or {},
            "diagnosis": d.get("explanation") or [], "fixes": d.get("fixes") or [], "notes": notes,
            "record": rec, "ansible_facts": {"svcdiag_verdict": rec}}


def fix_text(fix):
    words = ", ".join(f"{k} = {json.dumps(v)}" for k, v in (fix.get("set") or {}).items())
    return words + (f" ({fix['reason']})" if fix.get("reason") else "")


def why(result):
    """One line, as svcdiag's termination message: the verdict, the first fix, the first reason."""
    cause = f" [{result['cause']}]" if result.get("cause") else ""
    text = f"{(result.get('verdict') or '').upper()}{cause} in phase {result.get('phase')}: {result.get('message')}"
    if result["fixes"]:
        text += f"; fix: {fix_text(result['fixes'][0])}"
    if result["diagnosis"]:
        text += f"; why: {result['diagnosis'][0]}"
    return text


def judged(sv, rc, recs, err, *, changed, extra=None):
    """Exit the module with what a waiting command judged (`extra`: more of the result, a diff)."""
    extra = extra or {}
    notes = [r.get("message") for r in recs if r.get("event") == "note"]
    verdicts = [r for r in recs if r.get("event") == "verdict"]
    if not verdicts:
        refused = [r for r in recs if r.get("event") == "diagnosis"]
        if refused:  # up's preflight gate: predicted to serve no request, so never started
            rec = refused[-1]
            result = {"verdict": "refused", "cause": rec.get("cause"), "phase": None, "message": rec.get("message"),
                      "figures": {}, "diagnosis": rec.get("explanation") or [], "fixes": rec.get("fixes") or [],
                      "notes": notes, "record": rec}
            sv.fail(f"NOT STARTED [{rec.get('cause')}]: {rec.get('message')}"
                    + (f"; fix: {fix_text(result['fixes'][0])}" if result["fixes"] else "")
                    + " (or force: true to start anyway)", changed=changed, rc=rc, **result)
        sv.fail(f"svcdiag said no verdict: {err or f'exit status {rc}'}", changed=changed, notes=notes, rc=rc, **extra)
    result = {**verdict_result(verdicts[-1], notes), **extra}
    result["drift"] = [r.get("message") for r in recs if r.get("event") == "drift"]
    if result["verdict"] != "healthy":
        sv.fail(why(result), changed=changed, rc=rc, **result)
    if rc != 0:  # healthy, but not as before (baseline-check's drift), or degraded under --strict
        sv.fail(f"healthy, but {'; '.join(result['drift']) or f'svcdiag exited {rc}'}", changed=changed, rc=rc, **result)
    sv.module.exit_json(changed=changed, rc=rc, **result)


def started(notes):
    """Whether `up` started the unit (rather than attaching to the start that runs)."""
    return any(n.startswith("started ") for n in notes)


def drifted(notes):
    return any("differs from its config" in n for n in notes)


def rendered_units(sv):
    """This host's units of the config (`svcdiag render --json`): each as installed
    (`installed_text`, null when not), as the config renders it (`text`), and why `up` would
    install it again (`drift`, null when it would not)."""
    rc, recs, err = sv.run("render", sv.name, "--json")
    rows = [r for r in recs if r.get("event") == "render" and "unit_file" in r]
    if rc != 0 or not rows:
        sv.fail(f"svcdiag render: {err or f'exit status {rc}'}")
    return rows


def unit_diff(units):
    """Ansible's diff of each unit that `up` installs again: the file before, and after."""
    return [{"before_header": r["unit_file"] + ("" if r.get("installed_text") is not None else " (not installed)"),
             "after_header": f"{r['unit_file']} (as {r['name']} renders it)",
             "before": r.get("installed_text") or "", "after": r["text"]} for r in units if r.get("drift")]


def check_mode(sv, state, row):
    """Exit with what the real run would do, read without changing anything: the unit's state
    and verdict (status), its unit file against the config's (render), preflight."""
    unit = row.get("unit")
    running = row.get("active_state") in ("active", "activating", "reloading", "deactivating")
    if state == "stopped":
        sv.module.exit_json(changed=running, msg=f"would stop {unit}" if running else "not running")
    if state == "baseline_checked":
        sv.module.exit_json(changed=False, msg="would run baseline-check (the unit is put back as it was)")
    units = rendered_units(sv)
    drift = [f"{r['unit']}: {r['drift']}" for r in units if r.get("drift")]
    # the real run: `up`, which attaches to a running unit; then `up --restart` when that unit is not its config's
    restart = running and (state == "restarted" or bool(drift))
    diff = {"diff": unit_diff(units)} if sv.module._diff and (restart or not running) and drift else {}
    if running and not restart:
        verdict = (row.get("verdict") or {}).get("verdict")
        if verdict == "healthy":
            sv.module.exit_json(changed=False, msg=f"{unit} runs healthy: left alone (its unit is its config's)")
        if verdict is not None:
            sv.fail(f"{unit} runs its config, but its current start was judged {verdict}: the real run would fail "
                    "with that verdict (state: restarted starts it afresh)", changed=False, record=row.get("verdict"))
        sv.module.exit_json(changed=False, msg=f"{unit} is {row.get('active_state')}, its start in progress: left alone "
                                               "(the real run waits for its verdict)")
    rc, recs, err = sv.run("preflight", sv.name, "--json")
    pre = next((r for r in recs if "verdict" in r), None)
    said = (f"preflight: {pre.get('verdict')}" + (f" ({'; '.join(pre['reasons'])})" if pre.get("reasons") else "")
            if pre else f"preflight could not run: {err.splitlines()[-1] if err else f'exit status {rc}'}")
    if pre and pre.get("verdict") == "cannot_serve" and not sv.module.params["force"]:
        sv.fail(f"would refuse to start: {said}", changed=False, preflight=pre, **diff)
    why = f", its unit not its config's ({'; '.join(drift)})" if restart and state == "started" else ""
    sv.module.exit_json(changed=True, msg=f"would {'restart' if running else 'start'} {unit}{why} ({said})",
                        preflight=pre, **diff)


def main():
    module = AnsibleModule(
        argument_spec={
            "name": {"type": "str", "required": True},
            "state": {"type": "str", "default": "started",
                      "choices": ["started", "stopped", "restarted", "baseline_checked"]},
            "wait_ready": {"type": "bool", "default": True},
            "force": {"type": "bool", "default": False},
            "timeout": {"type": "float"},
            "units": {"type": "path"},
            "svcdiag": {"type": "path", "default": "svcdiag"},
        },
        supports_check_mode=True,
    )
    p = module.params
    sv = Svcdiag(module)
    state = p["state"]
    if module.check_mode:
        check_mode(sv, state, sv.status())
    if state == "stopped":
        row = sv.status()
        if row.get("active_state") in ("inactive", "failed", None) or row.get("sub_state") == "dead":
            module.exit_json(changed=False, msg=f"{row.get('unit')} is {row.get('active_state')}")
        rc, recs, err = sv.run("down", sv.name, "--json")
        rows = [r for r in recs if r.get("event") == "down"]
        if rc != 0:
            sv.fail(f"svcdiag down: {err or rows}", changed=True, rows=rows)
        module.exit_json(changed=True, msg=f"{rows[0].get('state_before')} → {rows[0].get('state_after')}" if rows else
                         "stopped", rows=rows)
    deadline = ["--timeout", str(p["timeout"])] if p["timeout"] else []
    if state == "baseline_checked":
        rc, recs, err = sv.run("baseline-check", sv.name, "--json", *deadline)
        judged(sv, rc, recs, err, changed=False)
    extra = (["--force"] if p["force"] else []) + deadline
    wait = ["--wait-ready"] if p["wait_ready"] else []
    units = rendered_units(sv) if module._diff else []  # before up: the unit as installed now
    rc, recs, err = sv.run("up", sv.name, "--json", *wait, *extra, *(["--restart"] if state == "restarted" else []))
    notes = [r.get("message") for r in recs if r.get("event") == "note"]
    if state == "started" and drifted(notes) and not started(notes):  # the running unit is not this config's
        rc, recs2, err = sv.run("up", sv.name, "--json", "--restart", *wait, *extra)
        recs = [r for r in recs if r.get("event") == "note"] + recs2
        notes = [r.get("message") for r in recs if r.get("event") == "note"]
    changed = started(notes)
    diff = {"diff": unit_diff(units)} if changed and unit_diff(units) else {}  # up installed the unit again, then started it
    if rc == EXIT_BAD_INPUT:
        sv.fail(f"svcdiag up: {err}", changed=changed, notes=notes, rc=rc)
    if not p["wait_ready"]:
        if rc != 0:
            refused = [r.get("message") for r in recs if r.get("event") == "diagnosis"]
            sv.fail(refused[-1] if refused else err or f"svcdiag up: exit status {rc}", changed=changed, notes=notes, **diff)
        module.exit_json(changed=changed, notes=notes, **diff)
    judged(sv, rc, recs, err, changed=changed, extra=diff)


if __name__ == "__main__":
    main()
