"""The supervisor's HTTP probes for a kubelet (`--probe-port`), and `svcdiag probe` for exec probes.

SGLang's own endpoints answer 503 (or nothing) for the whole start, so a kubelet's budget must
cover the slowest start there will ever be, and says nothing when it runs out. The supervisor
knows the phase and its deadline, so its probes can be honest:

- `/startupz`: 200 once the start is judged healthy (the log said ready and HTTP agreed); 503
  while a phase progresses within its deadline, and after a failed verdict (the body says which).
- `/livez`: 200 while the start progresses, and after a healthy start while SGLang runs: a slow
  weight load or a DeepGEMM compile is not a dead server; 503 once the start has failed or timed
  out (the supervisor is then stopping it, and exits with the verdict's code).
- `/readyz`: 200 while the start is healthy and SGLang's /ready answers (a worker node, rank ≥ 1,
  serves no HTTP: healthy is ready).

Each answer's body is one line: the supervisor's status (the phase, its seconds so far, the
news), the verdict, or after ready the serving watch's word (`serving …`, `wedged [cause] since
HH:MM:SS (N s): …`). After ready, `/livez` fails once the serving watch says wedged
(svcdiag.judge.watch: `health_failures` failed /health in a row with a silent log).

`/metrics` (where the supervisor gives one): Prometheus's text format, the textfile's names.
"""

from __future__ import annotations

import threading
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

#: probe name (`svcdiag probe NAME`) → path
PATHS = {"startup": "/startupz", "ready": "/readyz", "live": "/livez"}
#: Prometheus's text exposition format
METRICS_TYPE = "text/plain; version=0.0.4; charset=utf-8"
#: how long /readyz waits for SGLang's /ready (a kubelet's own timeoutSeconds is 1 s by default)
READY_TIMEOUT_S = 0.8


@dataclass(frozen=True, slots=True)
class Answer:
    """A probe's answer: its HTTP status and the words the kubelet records."""

    ok: bool
    text: str

    @property
    def status(self) -> int:
        return 200 if self.ok else 503


#: each probe's answer, asked on every request: (path → a function of nothing)
Answers = dict[str, Callable[[], Answer]]


class ProbeServer:
    """A small threaded HTTP server on (host, port), in a daemon thread, answering `answers`."""

    def __init__(self, host: str, port: int, answers: Answers, *, metrics: Callable[[], str] | None = None):
        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                path = self.path.split("?", 1)[0]
                if path == "/metrics" and metrics is not None:
                    self._send(200, metrics().encode(), METRICS_TYPE)
                    return
                ask = answers.get(path)
                a = ask() if ask is not None else Answer(False, f"no such probe: {self.path} "
                                                                f"(one of {', '.join(sorted(answers))})")
                self._send(a.status if ask is not None else 404, (a.text + "\n").encode(), "text/plain; charset=utf-8")

            def _send(self, code: int, body: bytes, kind: str) -> None:
                self.send_response(code)
                self.send_header("Content-Type", kind)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *_args: object) -> None:
                pass  # a kubelet asks every few seconds: never into the server's own output

        ThreadingHTTPServer.allow_reuse_address = True
        self.httpd = ThreadingHTTPServer((host, port), Handler)
        self.httpd.daemon_threads = True
        self.port = self.httpd.server_address[1]
        self._thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.2}, daemon=True)

    def start(self) -> ProbeServer:
        self._thread.start()
        return self

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


def ask(name: str, port: int, host: str = "127.0.0.1", timeout: float = 2.0) -> Answer:
    """`svcdiag probe NAME`: the supervisor's answer to one probe (an exec probe's exit status)."""
    url = f"http://{host}:{port}{PATHS[name]}"
    try:
        with urllib.request.urlopen(url, timeout=timeout) as r:
            return Answer(r.status == 200, r.read().decode("utf-8", "replace").strip())
    except urllib.error.HTTPError as e:
        return Answer(False, e.read().decode("utf-8", "replace").strip() or f"HTTP {e.code}")
    except OSError as e:
        reason = getattr(e, "reason", e)
        return Answer(False, f"the supervisor's probe port {host}:{port} does not answer: {reason} "
                             "(is `svcdiag supervise --probe-port` the container's command?)")
