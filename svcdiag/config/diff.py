"""Effective-config differences between two services, memory-relevant keys marked."""

from __future__ import annotations

from typing import Any

from svcdiag.config.service import MEMORY_KEYS, ServiceConfig

_SKIP = ("simulate", "sim_time_scale", "description")


def config_diff(a: ServiceConfig, b: ServiceConfig) -> list[dict[str, Any]]:
    fa, fb = a.flat(), b.flat()
    rows = []
    for key in sorted(set(fa) | set(fb)):
        va, vb = fa.get(key), fb.get(key)
        if va != vb:
            rows.append({"key": key, "a": va, "b": vb, "memory": key in MEMORY_KEYS})
    return rows


def memory_diff(a: ServiceConfig, b: ServiceConfig) -> list[dict[str, Any]]:
    return [r for r in config_diff(a, b) if r["memory"] and r["key"] not in _SKIP]
