"""Write journal entries the way journalctl prints them (-o short, json, export), for tests.
Real captures from the rig's journald live in tests/data/ beside these."""

from __future__ import annotations

import json
import time


def entry(message: str, ts: float, *, unit: str = "demo.service", invocation: str = "a" * 32,
          pid1: bool = False, ident: str = "demo", pid: int = 4242) -> dict[str, str]:
    e = {"__REALTIME_TIMESTAMP": str(int(ts * 1e6)), "MESSAGE": message, "_HOSTNAME": "gpu-host"}
    if pid1:
        e.update({"_SYSTEMD_UNIT": "init.scope", "UNIT": unit, "INVOCATION_ID": invocation, "_PID": "1",
                  "SYSLOG_IDENTIFIER": "systemd"})
    else:
        e.update({"_SYSTEMD_UNIT": unit, "_SYSTEMD_INVOCATION_ID": invocation, "_PID": str(pid),
                  "SYSLOG_IDENTIFIER": ident})
    return e


def as_json(entries: list[dict[str, str]]) -> bytes:
    return "".join(json.dumps(e) + "\n" for e in entries).encode()


def as_export(entries: list[dict[str, str]]) -> bytes:
    out = bytearray()
    for e in entries:
        for k, v in e.items():
            data = v.encode()
            if b"\n" in data:
                out += k.encode() + b"\n" + len(data).to_bytes(8, "little") + data + b"\n"
            else:
                out += k.encode() + b"=" + data + b"\n"
        out += b"\n"
    return bytes(out)


def as_short(entries: list[dict[str, str]]) -> bytes:
    lines = []
    for e in entries:
        ts = int(e["__REALTIME_TIMESTAMP"]) / 1e6
        stamp = time.strftime("%b %d %H:%M:%S", time.localtime(ts))
        who = "systemd[1]" if e.get("_PID") == "1" else f"{e['SYSLOG_IDENTIFIER']}[{e['_PID']}]"
        msg = e["MESSAGE"]
        if e.get("_PID") == "1" and not msg.startswith(("Started ", "Starting ", "Stopped ", "Stopping ")):
            msg = f"{e['UNIT']}: {msg}"
        lines.append(f"{stamp} {e['_HOSTNAME']} {who}: {msg}")
    return ("\n".join(lines) + "\n").encode()
