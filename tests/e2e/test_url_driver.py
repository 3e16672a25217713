"""`agent.url`: a real long-lived service, triggered by POST, recorded then replayed offline.

The test starts the service (Starlette + the openai SDK) itself, with its OPENAI_BASE_URL at
the fixed `proxy_port` of the spec; flowproof only binds the proxy there and triggers it.
The service stays up across record and replay; the fake model is gone before replay.
"""

from __future__ import annotations

import socket
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.conftest import CliResult, run_cli
from tests.e2e.flows import AGENTS, DEFAULT_STEPS, DEFAULT_TOOLS
from tests.e2e.sockets_and_pids import free_port, is_listening
from tests.e2e.url_services import Service, url_services
from tests.fakes.fake_upstream import FakeUpstream

pytestmark = pytest.mark.slow

SERVICE = AGENTS / "svc_openai_service.py"
TOKEN = "tok-very-secret-42"


@pytest.fixture
def start_service() -> Iterator[Callable[..., Service]]:
    """Start the service (url_services.py); every one started is stopped after the test."""
    with url_services(SERVICE, "run") as start:
        yield start


def write_url_flow(
    folder: Path,
    service: Service,
    *,
    name: str = "service",
    headers: dict[str, str] | None = None,
    **extra: Any,
) -> Path:
    spec = {
        "name": f"{name} flow",
        "app": "agent",
        "agent": {
            "url": service.url,
            "proxy_port": service.proxy_port,
            "headers": headers if headers is not None else {"Authorization": "Bearer ${SVC_TOKEN}"},
        },
        "tools": DEFAULT_TOOLS,
        "steps": DEFAULT_STEPS,
        **extra,
    }
    path = folder / f"{name}.flow.yaml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    return path


def record(spec: Path, fake: FakeUpstream, *extra: str | Path) -> CliResult:
    return run_cli(
        "record",
        spec,
        *extra,
        env={"FLOWPROOF_AGENT_UPSTREAM": f"{fake.base_url}/v1", "SVC_TOKEN": TOKEN},
    )


def replay(spec: Path, *extra: str | Path) -> CliResult:
    return run_cli("run", spec, *extra, env={"SVC_TOKEN": TOKEN})


@pytest.fixture
def recorded(tmp_path: Path, start_service: Callable[..., Service]) -> tuple[Path, Service]:
    service = start_service(SERVICE_TOKEN=TOKEN)
    spec = write_url_flow(tmp_path, service)
    with FakeUpstream() as fake:
        result = record(spec, fake)
        assert result.code == 0, result.output
        assert len(fake.model_requests()) == 2
    return spec, service


def elsewhere(tmp_path: Path) -> Path:
    """A folder for a second spec replaying the first one's trace with `-t`."""
    folder = tmp_path / "other"
    folder.mkdir()
    return folder


def trace_of(spec: Path) -> Path:
    return spec.with_name(spec.name.replace(".flow.yaml", ".trace.yaml"))


def test_service_records_then_replays_offline(recorded: tuple[Path, Service]) -> None:
    spec, service = recorded
    assert TOKEN not in trace_of(spec).read_text()
    result = replay(spec)
    assert result.code == 0, result.output
    assert result.stdout.startswith("PASS: service flow")
    assert TOKEN not in result.output
    assert not is_listening(service.proxy_port)


def test_replay_json_reports_the_service_answer(recorded: tuple[Path, Service]) -> None:
    spec, _ = recorded
    result = replay(spec, "--json")
    assert result.code == 0, result.output
    (flow,) = yaml.safe_load(result.stdout)["flows"]
    assert flow["model_calls"] == 2
    assert '"reply"' in flow["stdout_tail"] and "sunny" in flow["stdout_tail"]


@pytest.mark.parametrize(("knobs", "status"), [({}, 500), ({"SERVICE_SWALLOW_ERRORS": "1"}, 200)])
def test_divergence_fails_whatever_the_service_answers(
    recorded: tuple[Path, Service],
    start_service: Callable[..., Service],
    tmp_path: Path,
    knobs: dict[str, str],
    status: int,
) -> None:
    spec, _ = recorded
    changed = start_service(
        SERVICE_TOKEN=TOKEN, AGENT_SYSTEM="You are a terse weather assistant.", **knobs
    )
    other = write_url_flow(elsewhere(tmp_path), changed, name="changed")
    result = replay(other, "-t", trace_of(spec))
    assert result.code == 1, result.output
    assert "divergence at turn 1: message 0 (system) content changed" in result.stdout
    if status != 200:
        assert f"answered the trigger with HTTP {status}" in result.stdout
    else:
        assert "answered the trigger with HTTP" not in result.stdout


def test_clean_trajectory_passes_even_when_the_service_answers_500(
    recorded: tuple[Path, Service], start_service: Callable[..., Service], tmp_path: Path
) -> None:
    spec, _ = recorded
    grumpy = start_service(SERVICE_TOKEN=TOKEN, SERVICE_STATUS="500")
    other = write_url_flow(elsewhere(tmp_path), grumpy, name="grumpy")
    result = replay(other, "-t", trace_of(spec))
    assert result.code == 0, result.output
    assert result.stdout.startswith("PASS: grumpy flow")
    assert "answered the trigger with HTTP 500; flowproof judges the trajectory" in result.stdout


def test_mispointed_service_fails_with_the_address_to_use(
    tmp_path: Path, start_service: Callable[..., Service]
) -> None:
    with FakeUpstream() as fake:
        # The service talks to the model directly: it works, but flowproof sees nothing.
        service = start_service(model_base=f"{fake.base_url}/v1", SERVICE_TOKEN=TOKEN)
        spec = write_url_flow(tmp_path, service)
        result = record(spec, fake)
        assert len(fake.model_requests()) == 2
    port = service.proxy_port
    assert result.code == 1, result.output
    assert f"no model request reached flowproof's proxy on 127.0.0.1:{port}" in result.stdout
    assert f"the service at {service.url} answered HTTP 200" in result.stdout
    assert f"OPENAI_BASE_URL=http://127.0.0.1:{port}/v1" in result.stdout
    assert f"ANTHROPIC_BASE_URL=http://127.0.0.1:{port}" in result.stdout
    assert not trace_of(spec).exists()


def test_wrong_token_is_reported_with_the_status(
    tmp_path: Path, start_service: Callable[..., Service]
) -> None:
    service = start_service(SERVICE_TOKEN="another-token")
    spec = write_url_flow(tmp_path, service)
    with FakeUpstream() as fake:
        result = record(spec, fake)
    assert result.code == 1, result.output
    assert f"the service at {service.url} answered HTTP 401" in result.stdout
    assert "answered the trigger with HTTP 401" in result.stdout
    assert TOKEN not in result.output


def test_unreachable_service_fails_naming_the_url(tmp_path: Path) -> None:
    service = Service(f"http://127.0.0.1:{free_port()}/run", free_port(), None)  # type: ignore[arg-type]
    spec = write_url_flow(tmp_path, service)
    with FakeUpstream() as fake:
        result = record(spec, fake)
    assert result.code == 1, result.output
    assert f"could not reach the agent service at {service.url}: connection refused" in (
        result.stdout
    )
    assert f"http://127.0.0.1:{service.proxy_port}/v1" in result.stdout


def test_hanging_service_is_bounded_by_the_timeout(
    tmp_path: Path, start_service: Callable[..., Service]
) -> None:
    service = start_service(SERVICE_TOKEN=TOKEN, SERVICE_HANG="1")
    spec = write_url_flow(tmp_path, service)
    with FakeUpstream() as fake:
        started = time.monotonic()
        result = record(spec, fake, "--timeout", "2")
        assert time.monotonic() - started < 20  # the pending POST does not hold flowproof
    assert result.code == 1, result.output
    assert f"the service at {service.url} did not answer within 2 s; it made 0 model call(s)" in (
        result.stdout
    )
    assert not is_listening(service.proxy_port)


def test_taken_proxy_port_is_a_named_error(tmp_path: Path) -> None:
    with socket.socket() as squatter:
        squatter.bind(("127.0.0.1", 0))
        squatter.listen()
        port = squatter.getsockname()[1]
        service = Service("http://127.0.0.1:9/run", port, None)  # type: ignore[arg-type]
        spec = write_url_flow(tmp_path, service)
        with FakeUpstream() as fake:
            result = record(spec, fake)
    assert result.code == 2, result.output
    assert f"proxy_port {port} is already in use" in result.stderr


def test_unset_header_variable_is_an_error(
    tmp_path: Path, start_service: Callable[..., Service]
) -> None:
    service = start_service()
    spec = write_url_flow(tmp_path, service, headers={"X-Key": "${NOT_SET_ANYWHERE}"})
    with FakeUpstream() as fake:
        result = record(spec, fake)
    assert result.code == 2, result.output
    assert "NOT_SET_ANYWHERE is not set (used in agent.headers.X-Key)" in result.stderr
