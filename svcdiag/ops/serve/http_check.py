"""The HTTP cross-check after the log says ready: the server answers, and its own account
of the KV pool agrees with the log's (so the verdict is about this server, on this port).

Readiness: `/ready` (SGLang 0.5.23: 200 only when the server is up, and it generates
nothing), else, on older servers that answer 404, `/health_generate`, then `/health`
(each generates a token, ≥ 1 s). Server info: `/server_info`, else the deprecated
`/get_server_info` (0.5.23 logs a warning on every call to it, so it is asked only when
`/server_info` is 404). A 404 moves on to the next endpoint; any other answer is retried
until the `http_check` deadline.

`max_total_num_tokens` that disagrees with the log fails the start (`http_mismatch`:
another server may hold the port). `internal_states[].effective_max_running_requests_per_dp`
and `internal_states[].memory_usage.token_capacity` (0.5.23) that disagree with the logged
max_running_requests and KV tokens are evidence and figures, not a failure.
"""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
from typing import Any

from tenacity import RetryError, Retrying, retry_if_exception_type, stop_after_delay, wait_exponential

from svcdiag.judge.verdict import Verdict
from svcdiag.sglang.failures import Cause
from svcdiag.sglang.figures import Figures

READY_PATHS = ("/ready", "/health_generate", "/health")
INFO_PATHS = ("/server_info", "/get_server_info")


class NotYet(Exception):
    pass


def _get(url: str, timeout: float) -> tuple[int, Any]:
    try:
        with urllib.request.urlopen(url, timeout=timeout) as resp:
            body = resp.read(1 << 20)
            return resp.status, json.loads(body) if body else None
    except urllib.error.HTTPError as e:
        return e.code, None
    except ValueError:
        return 200, None


def _first_ok(base: str, paths: tuple[str, ...], timeout: float) -> tuple[str, Any]:
    """The first of `paths` that answers 200 (a 404 or no connection moves on to the next);
    NotYet (to retry) on any other answer."""
    last = "no answer"
    for path in paths:
        try:
            code, body = _get(base + path, timeout)
        except (OSError, urllib.error.URLError) as e:
            last = f"{path}: {getattr(e, 'reason', e)}"
            continue
        if code == 200:
            return path, body
        last = f"{path}: HTTP {code}"
        if code != 404:
            break
    raise NotYet(last)


def base_url(host: str, port: int) -> str:
    return f"http://{'127.0.0.1' if host in ('0.0.0.0', '::', '') else host}:{port}"


def answers_ready(host: str, port: int, timeout: float) -> bool:
    """One try, no retry: does the server answer ready now (the watchdog's question)?"""
    try:
        _first_ok(base_url(host, port), READY_PATHS, timeout)
    except (NotYet, OSError):
        return False
    return True


#: the serving watch's question after ready: SGLang's /health (every release has it)
HEALTH_PATH = "/health"


def health(host: str, port: int, timeout: float, path: str = HEALTH_PATH) -> tuple[bool, float | None, str]:
    """One GET /health (or `path`: /health_generate), no retry: (200?, seconds it took or None, what it
    said: "HTTP 200", "HTTP 503", "no answer within 5 s", "connection refused")."""
    url = base_url(host, port) + path
    t0 = time.monotonic()
    try:
        with urllib.request.urlopen(url, timeout=timeout) as resp:
            resp.read(1 << 16)
            code = resp.status
    except urllib.error.HTTPError as e:
        code = e.code
    except (OSError, urllib.error.URLError) as e:
        reason = getattr(e, "reason", e)
        if isinstance(reason, TimeoutError) or "timed out" in str(reason):
            return False, None, f"no answer within {timeout:g} s"
        return False, None, str(getattr(reason, "strerror", None) or reason)
    took = time.monotonic() - t0
    return code == 200, took, f"HTTP {code}"


def cross_check(v: Verdict, host: str, port: int, deadline_s: float) -> Verdict:
    """Healthy only when the server answers ready (/ready, else /health_generate or /health)
    and its server info's max_total_num_tokens matches the log; otherwise a verdict of its own."""
    base = base_url(host, port)
    retry = Retrying(stop=stop_after_delay(deadline_s), wait=wait_exponential(multiplier=0.05, max=1.0),
                     retry=retry_if_exception_type(NotYet), reraise=False)
    try:
        health = retry(_first_ok, base, READY_PATHS, 5.0)[0]
        info_path, info = retry(_first_ok, base, INFO_PATHS, 5.0)
    except RetryError as e:
        why = e.last_attempt.exception()
        return v.with_(verdict="failed", phase="http", cause=Cause.HTTP_UNREACHABLE,
                       message=f"the log says ready, but {base} did not answer within {deadline_s:.0f} s ({why})")
    served = _tokens(info)
    f = v.figures
    logged = f.max_total_num_tokens if f.max_total_num_tokens is not None else f.kv_tokens
    evidence = [*v.evidence, f"GET {base}{health} → 200",
                f"GET {base}{info_path} → max_total_num_tokens={served}"]
    figures = f.replace(http_max_total_num_tokens=served, **_version(info, info_path, f, evidence),
                        **_states(info, info_path, f, evidence))
    lost = f.journal_dropped_lines
    if logged is None and served is not None and lost:  # journald dropped the pool's line: nothing to compare with
        return v.with_(figures=figures, evidence=tuple(evidence),
                       message=f"{v.message}; HTTP {base}{health} answers and {info_path} reports "
                               f"max_total_num_tokens={served:,}, not compared: the journal lacks the KV pool's line "
                               f"(journald dropped {lost:,} of this start's lines)")
    if served is None or logged is None or served != logged:
        return v.with_(verdict="failed", phase="http", cause=Cause.HTTP_MISMATCH, figures=figures, evidence=tuple(evidence),
                       message=f"{base} answers, but {info_path} reports max_total_num_tokens={served} where the log "
                               f"allocated {logged}: another server may hold port {port}")
    return v.with_(figures=figures, evidence=tuple(evidence),
                   message=f"{v.message}; HTTP {base}{health} answers and {info_path} agrees "
                           f"(max_total_num_tokens={served:,})")


def _version(info: Any, path: str, f: Figures, evidence: list[str]) -> dict[str, Any]:
    """The server's own version wins; one that differs from the release the flags were
    rendered for is evidence. The figures it changes."""
    if not isinstance(info, dict) or not info.get("version"):
        return {}
    served = str(info["version"])
    rendered, source = f.sglang_version, f.sglang_version_source
    changes: dict[str, Any] = {"sglang_version": served, "sglang_version_source": "server_info"}
    if rendered and source != "server_info" and str(rendered) != served:
        changes["rendered_sglang_version"] = rendered
        evidence.append(f"{path} reports sglang {served}; the flags were rendered for sglang {rendered} ({source})")
    return changes


def _states(info: Any, path: str, f: Figures, evidence: list[str]) -> dict[str, Any]:
    """internal_states[]: the effective per-DP request limit and the KV token capacity, each
    against the log's; a disagreement is evidence and a figure. The figures it sets."""
    changes: dict[str, Any] = {}
    states = [s for s in (info.get("internal_states") or []) if isinstance(s, dict)] if isinstance(info, dict) else []
    checks = (
        ("effective_max_running_requests_per_dp", lambda s: s.get("effective_max_running_requests_per_dp"),
         "http_max_running_requests", f.max_running_requests, "max_running_requests"),
        ("memory_usage.token_capacity",
         lambda s: s.get("memory_usage", {}).get("token_capacity") if isinstance(s.get("memory_usage"), dict) else None,
         "http_token_capacity", f.kv_tokens if f.kv_tokens is not None else f.max_total_num_tokens, "KV tokens"),
    )
    for field, get, key, logged, logged_name in checks:
        values = [x for x in (get(s) for s in states) if isinstance(x, int) and not isinstance(x, bool)]
        if not values:
            continue
        changes[key] = values[0] if len(set(values)) == 1 else values
        shown = ",".join(str(x) for x in values)
        if logged is None:
            evidence.append(f"{path} → internal_states[].{field}={shown} (the log gave no {logged_name})")
        elif any(x != logged for x in values):
            changes[f"{key}_mismatch"] = True
            evidence.append(f"{path} → internal_states[].{field}={shown}, but the log says {logged_name}={logged}")
        else:
            evidence.append(f"{path} → internal_states[].{field}={shown}, as logged")
    return changes


def _tokens(info: Any) -> int | None:
    if not isinstance(info, dict):
        return None
    if isinstance(info.get("max_total_num_tokens"), int):
        return info["max_total_num_tokens"]
    for state in info.get("internal_states") or []:
        if isinstance(state, dict) and isinstance(state.get("max_total_num_tokens"), int):
            return state["max_total_num_tokens"]
    return None
