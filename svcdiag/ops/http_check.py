"""The HTTP cross-check after the log says ready: the server answers, and its own account
of the KV pool agrees with the log's (so the verdict is about this server, on this port)."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from typing import Any

from tenacity import RetryError, Retrying, retry_if_exception_type, stop_after_delay, wait_exponential

from svcdiag.judge.verdict import Verdict


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


def cross_check(v: Verdict, host: str, port: int, deadline_s: float) -> Verdict:
    """Healthy only when /health_generate (or /health) answers 200 and /get_server_info's
    max_total_num_tokens matches the log; otherwise a verdict of its own."""
    base = f"http://{'127.0.0.1' if host in ('0.0.0.0', '::', '') else host}:{port}"
    retry = Retrying(stop=stop_after_delay(deadline_s), wait=wait_exponential(multiplier=0.05, max=1.0),
                     retry=retry_if_exception_type(NotYet), reraise=False)
    try:
        health = retry(_first_ok, base, ("/health_generate", "/health"), 5.0)[0]
        _, info = retry(_first_ok, base, ("/get_server_info", "/server_info"), 5.0)
    except RetryError as e:
        why = e.last_attempt.exception()
        return v.with_(verdict="failed", phase="http", cause="http_unreachable",
                       message=f"the log says ready, but {base} did not answer within {deadline_s:.0f} s ({why})")
    served = _tokens(info)
    logged = v.figures.get("max_total_num_tokens", v.figures.get("kv_tokens"))
    figures = {**v.figures, "http_max_total_num_tokens": served}
    if isinstance(info, dict) and info.get("version"):
        figures["sglang_version"] = str(info["version"])
    evidence = (*v.evidence, f"GET {base}{health} → 200", f"GET {base}/get_server_info → max_total_num_tokens={served}")
    if served is None or logged is None or served != logged:
        return v.with_(verdict="failed", phase="http", cause="http_mismatch", figures=figures, evidence=evidence,
                       message=f"{base} answers, but reports max_total_num_tokens={served} where the log "
                               f"allocated {logged}: another server may hold port {port}")
    return v.with_(figures=figures, evidence=evidence,
                   message=f"{v.message}; HTTP {base}{health} answers and agrees "
                           f"(max_total_num_tokens={served:,})")


def _tokens(info: Any) -> int | None:
    if not isinstance(info, dict):
        return None
    if isinstance(info.get("max_total_num_tokens"), int):
        return info["max_total_num_tokens"]
    for state in info.get("internal_states") or []:
        if isinstance(state, dict) and isinstance(state.get("max_total_num_tokens"), int):
            return state["max_total_num_tokens"]
    return None
