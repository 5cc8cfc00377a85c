"""The HTTP cross-check against a tiny local server: which endpoints it asks, in which order,
and what it makes of the answers."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest

from svcdiag.judge.verdict import Verdict
from svcdiag.ops.serve.http_check import cross_check

from .json_server import Server

TOKENS = 649_789


@pytest.fixture
def serve() -> Iterator[Any]:
    servers: list[Server] = []

    def start(routes: dict[str, list[tuple[int, Any]]]) -> Server:
        s = Server(routes).__enter__()
        servers.append(s)
        return s

    yield start
    for s in servers:
        s.__exit__()


def logged(**figures: Any) -> Verdict:
    base = {"kv_tokens": TOKENS, "max_total_num_tokens": TOKENS, "max_running_requests": 4}
    return Verdict(ts=0.0, verdict="healthy", phase="ready", cause=None, message="the server is fired up",
                   figures={**base, **figures}, evidence=("The server is fired up and ready to roll!",))


def info_0523(tokens: int = TOKENS, per_dp: int = 4, capacity: int = TOKENS) -> dict[str, Any]:
    return {"version": "0.5.23", "max_total_num_tokens": tokens, "max_running_requests": 4096,
            "internal_states": [{"effective_max_running_requests_per_dp": per_dp,
                                 "memory_usage": {"weight": 50.3, "kvcache": 20.1, "token_capacity": capacity,
                                                  "token_capacity_swa": 0, "graph": 1.2}}]}


def test_0_5_23_server_ready_and_server_info(serve) -> None:
    s = serve({"/ready": [(200, {"status": "ok"})], "/server_info": [(200, info_0523())]})
    v = cross_check(logged(sglang_version="0.5.23", sglang_version_source="config"), "0.0.0.0", s.port, 5.0)
    assert v.verdict == "healthy", v.message
    assert set(s.hits) == {"/ready", "/server_info"}  # nothing that generates, nothing deprecated
    base = f"http://127.0.0.1:{s.port}"
    assert f"GET {base}/ready → 200" in v.evidence
    assert f"GET {base}/server_info → max_total_num_tokens={TOKENS}" in v.evidence
    assert any("effective_max_running_requests_per_dp=4, as logged" in e for e in v.evidence)
    assert any("token_capacity=649789, as logged" in e for e in v.evidence)
    f = v.figures
    assert f.sglang_version == "0.5.23" and f.sglang_version_source == "server_info"
    assert f.http_max_running_requests == 4 and f.http_token_capacity == TOKENS
    assert "/ready" in v.message and "/server_info agrees" in v.message


def test_old_server_falls_back(serve) -> None:
    info = {"version": "0.4.6.post1", "internal_states": [{"max_total_num_tokens": TOKENS}]}
    s = serve({"/health_generate": [(200, None)], "/get_server_info": [(200, info)]})
    v = cross_check(logged(), "127.0.0.1", s.port, 5.0)
    assert v.verdict == "healthy", v.message
    assert s.hits == Counter({"/ready": 1, "/health_generate": 1, "/server_info": 1, "/get_server_info": 1})
    base = f"http://127.0.0.1:{s.port}"
    assert f"GET {base}/health_generate → 200" in v.evidence
    assert f"GET {base}/get_server_info → max_total_num_tokens={TOKENS}" in v.evidence
    assert not any(f"{base}/ready" in e or f"{base}/server_info" in e for e in v.evidence)
    assert v.figures.sglang_version == "0.4.6.post1" and v.figures.http_max_running_requests is None


def test_oldest_server_has_only_health(serve) -> None:
    s = serve({"/health": [(200, None)], "/get_server_info": [(200, {"max_total_num_tokens": TOKENS})]})
    v = cross_check(logged(), "127.0.0.1", s.port, 5.0)
    assert v.verdict == "healthy" and f"GET http://127.0.0.1:{s.port}/health → 200" in v.evidence


def test_ready_503_then_200_is_retried_not_skipped(serve) -> None:
    s = serve({"/ready": [(503, {"status": "starting"}), (503, None), (200, {"status": "ok"})],
               "/server_info": [(200, info_0523())]})
    v = cross_check(logged(), "127.0.0.1", s.port, 10.0)
    assert v.verdict == "healthy", v.message
    assert s.hits["/ready"] == 3 and s.hits["/health_generate"] == 0 and s.hits["/health"] == 0


def test_max_total_num_tokens_mismatch_fails(serve) -> None:
    s = serve({"/ready": [(200, None)], "/server_info": [(200, info_0523(tokens=12345))]})
    v = cross_check(logged(), "127.0.0.1", s.port, 5.0)
    assert (v.verdict, v.cause, v.phase) == ("failed", "http_mismatch", "http")
    assert "/server_info reports max_total_num_tokens=12345" in v.message and str(TOKENS) in v.message


def test_a_kv_pool_line_journald_dropped_is_not_compared_not_a_mismatch(serve) -> None:
    # under load journald's rate limit can drop the KV pool's lines and keep the ready line after them: the
    # supervisor, which read them, said READY=1; `up` must not call the server another one on that port
    s = serve({"/ready": [(200, None)], "/server_info": [(200, info_0523())]})
    lost = Verdict(ts=0.0, verdict="healthy", phase="ready", cause=None, message="the server is fired up",
                   figures={"journal_dropped_lines": 24_005}, evidence=())
    v = cross_check(lost, "127.0.0.1", s.port, 5.0)
    assert v.verdict == "healthy", v.message
    assert "not compared" in v.message and "journald dropped 24,005" in v.message
    assert v.figures.http_max_total_num_tokens == TOKENS
    kept = cross_check(lost.with_(figures={}), "127.0.0.1", s.port, 5.0)  # journald dropped nothing: a mismatch
    assert (kept.verdict, kept.cause) == ("failed", "http_mismatch")


def test_request_limit_and_capacity_mismatch_is_evidence_not_failure(serve) -> None:
    s = serve({"/ready": [(200, None)], "/server_info": [(200, info_0523(per_dp=2, capacity=600_000))]})
    v = cross_check(logged(), "127.0.0.1", s.port, 5.0)
    assert v.verdict == "healthy", v.message
    assert v.figures.http_max_running_requests == 2 and v.figures.http_max_running_requests_mismatch
    assert v.figures.http_token_capacity == 600_000 and v.figures.http_token_capacity_mismatch
    assert any("effective_max_running_requests_per_dp=2, but the log says max_running_requests=4" in e
               for e in v.evidence)
    assert any("token_capacity=600000, but the log says KV tokens=649789" in e for e in v.evidence)


def test_server_version_differing_from_the_rendered_one_is_evidence(serve) -> None:
    s = serve({"/ready": [(200, None)], "/server_info": [(200, info_0523())]})
    v = cross_check(logged(sglang_version="0.5.12", sglang_version_source="config"), "127.0.0.1", s.port, 5.0)
    assert v.figures.sglang_version == "0.5.23" and v.figures.rendered_sglang_version == "0.5.12"
    assert any("reports sglang 0.5.23; the flags were rendered for sglang 0.5.12 (config)" in e for e in v.evidence)


def test_nobody_answers(serve) -> None:
    s = serve({})
    s.__exit__()
    v = cross_check(logged(), "127.0.0.1", s.port, 0.5)
    assert (v.verdict, v.cause) == ("failed", "http_unreachable")


def test_ready_never_200_is_unreachable(serve) -> None:
    s = serve({"/ready": [(503, None)], "/health_generate": [(200, None)]})
    v = cross_check(logged(), "127.0.0.1", s.port, 0.6)
    assert (v.verdict, v.cause) == ("failed", "http_unreachable") and "/ready: HTTP 503" in v.message
    assert s.hits["/health_generate"] == 0
