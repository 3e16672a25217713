"""Agents served over HTTP for `agent: url:` flows: a service script started on a free port,
its model client aimed at flowproof's proxy, stopped after the test."""

from __future__ import annotations

import contextlib
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from tests.conftest import clean_environ
from tests.e2e.sockets_and_pids import accepts, eventually, free_port


@dataclass
class Service:
    url: str
    proxy_port: int
    process: subprocess.Popen[bytes]


@contextlib.contextmanager
def url_services(
    script: Path, route: str, *, quiet: bool = True
) -> Iterator[Callable[..., Service]]:
    """`start(model_base=None, **knobs)` runs `script PORT` on a free port, its model client
    aimed at `model_base` (default: the proxy at a free `proxy_port`), `knobs` in its
    environment; the service's URL is `/route`. `quiet`: its stderr is dropped. Every service
    started is stopped on exit (killed when a hanging request holds it)."""
    started: list[Service] = []

    def start(model_base: str | None = None, **knobs: str) -> Service:
        port, proxy_port = free_port(), free_port()
        environ = clean_environ(
            {
                "OPENAI_BASE_URL": model_base or f"http://127.0.0.1:{proxy_port}/v1",
                "OPENAI_API_KEY": "service-placeholder-key",
                **knobs,
            }
        )
        process = subprocess.Popen(
            [sys.executable, str(script), str(port)],
            env=environ,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL if quiet else None,
        )
        service = Service(f"http://127.0.0.1:{port}/{route}", proxy_port, process)
        started.append(service)
        assert eventually(lambda: accepts(port), 30), "the service did not start listening"
        return service

    try:
        yield start
    finally:
        for service in started:
            service.process.terminate()
            try:
                service.process.wait(timeout=5)
            except subprocess.TimeoutExpired:  # uvicorn waits for a hanging request
                service.process.kill()
                service.process.wait(timeout=10)
