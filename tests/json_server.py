"""A tiny local HTTP server that answers JSON, for the tests that stand in for a server svcdiag
or a tool asks (SGLang's health endpoints, an API server's discovery)."""

from __future__ import annotations

import json
import threading
from collections import Counter
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class Server:
    """Answers each path (its query left out) from a list of (status, body) as JSON, the last one
    repeating; 404 for others."""

    def __init__(self, routes: dict[str, list[tuple[int, Any]]]):
        self.routes = routes
        self.hits: Counter[str] = Counter()
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                path = self.path.split("?", 1)[0]
                server.hits[path] += 1
                answers = server.routes.get(path) or [(404, {"detail": "Not Found"})]
                code, body = answers[min(server.hits[path], len(answers)) - 1]
                data = json.dumps(body).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: Any) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.httpd.server_address[1]
        self.thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)

    def __enter__(self) -> Server:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
