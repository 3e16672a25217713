"""The url driver's trigger POST: body, headers, status, and its bounds."""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from flowproof_cli.errors import ConfigError
from flowproof_cli.runner.url_driver import TriggerOutcome, trigger


class Service(ThreadingHTTPServer):
    daemon_threads = True
    seen: list[dict[str, Any]]
    status = 200
    delay_s = 0.0


class Handler(BaseHTTPRequestHandler):
    server: Service

    def log_message(self, *args: Any) -> None:
        pass

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["content-length"])))
        self.server.seen.append(
            {
                "path": self.path,
                "headers": {k.lower(): v for k, v in self.headers.items()},
                "body": body,
            }
        )
        time.sleep(self.server.delay_s)
        payload = json.dumps({"reply": "x" * 5000 + "END"}).encode()
        self.send_response(self.server.status)
        self.send_header("content-length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)


@pytest.fixture
def service() -> Iterator[Service]:
    server = Service(("127.0.0.1", 0), Handler)
    server.seen = []
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()


def fire(url: str, timeout_s: float = 10, **headers: str) -> TriggerOutcome:
    return asyncio.run(trigger(url, "do it\nnow", headers=headers, timeout_s=timeout_s))


def url_of(service: Service, path: str = "/run?x=1") -> str:
    return f"http://127.0.0.1:{service.server_address[1]}{path}"


def test_posts_the_prompt_with_the_headers(service: Service) -> None:
    outcome = fire(url_of(service), Authorization="Bearer t0k")
    assert outcome.status == 200 and outcome.answered_ok
    assert outcome.body.endswith('END"}') and len(outcome.body) == 2000
    assert outcome.error is None and not outcome.timed_out
    (seen,) = service.seen
    assert seen["path"] == "/run?x=1"
    assert seen["body"] == {"prompt": "do it\nnow"}
    assert seen["headers"]["authorization"] == "Bearer t0k"
    assert seen["headers"]["content-type"] == "application/json"


def test_an_error_status_is_an_answer_not_an_error(service: Service) -> None:
    service.status = 500
    outcome = fire(url_of(service))
    assert outcome.status == 500 and not outcome.answered_ok
    assert outcome.error is None


def test_unreachable_is_named() -> None:
    with ThreadingHTTPServer(("127.0.0.1", 0), Handler) as closed:
        port = closed.server_address[1]
    outcome = fire(f"http://127.0.0.1:{port}/run")
    assert outcome.status is None
    assert outcome.error == "connection refused (is the service running and listening there?)"


def test_a_slow_service_is_bounded(service: Service) -> None:
    service.delay_s = 5
    started = time.monotonic()
    outcome = fire(url_of(service), timeout_s=0.5)
    assert outcome.timed_out and outcome.status is None
    assert time.monotonic() - started < 2


@pytest.mark.parametrize("url", ["ftp://127.0.0.1/x", "not a url", "http:///path"])
def test_a_non_http_url_is_a_config_error(url: str) -> None:
    with pytest.raises(ConfigError, match="is not an http"):
        fire(url)
