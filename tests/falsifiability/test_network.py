"""flowproof on the network: loopback listeners only, an upstream no request can choose, and
a replay that dials nothing.

One run of `tests/falsifiability/network_lab.py` (module fixture), inside a network
namespace with nothing but loopback, measures a record of a hostile flow (its agent sends
requests naming an "evil" listener every way HTTP allows), a record and a replay of a plain
flow, and that replay again under `strace`. Each test reads one part of it. The controls
make every zero a measurement: the evil listener counts a connection made to it directly,
the socket watch sees a listener on 0.0.0.0, strace sees a connect to an off-host address.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.falsifiability.network_lab import (
    connects,
    is_loopback,
    namespace_problem,
    off_host,
    parse_net_table,
    run_lab,
)

#: What a hostile probe may get: an answer from the configured upstream (200) or flowproof's
#: own refusal (an error status the upstream never saw: the count of what it received says).
REFUSED = range(400, 600)
#: Probes the proxy must refuse, never forward anywhere.
MUST_REFUSE = (
    "absolute-form http",
    "absolute-form https",
    "absolute-form naming the proxy itself",
    "authority-form POST",
    "CONNECT",
    "OPTIONS *",
)


@pytest.fixture(scope="module")
def lab() -> dict[str, Any]:
    problem = namespace_problem()
    if problem is not None:
        pytest.skip(problem)
    return run_lab()


# -- the helpers fail when they should -----------------------------------------------------------

TCP_TABLE = """\
  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 0100007F:1F90 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 111
   1: 00000000:1F91 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 222
   2: 0100007F:1F92 0100007F:D431 01 00000000:00000000 00:00000000 00000000     0        0 333
"""
TCP6_TABLE = """\
  sl  local_address                         remote_address                        st ... inode
   0: 00000000000000000000000001000000:1F90 00000000000000000000000000000000:0000 0A 0 0 0 0 0 444
   1: 00000000000000000000000000000000:1F91 00000000000000000000000000000000:0000 0A 0 0 0 0 0 555
   2: 0000000000000000FFFF00000100007F:1F92 00000000000000000000000000000000:0000 0A 0 0 0 0 0 666
"""


def test_the_socket_tables_are_read_with_their_addresses() -> None:
    v4 = parse_net_table("tcp", TCP_TABLE)
    assert [(s.host, s.port, s.listening) for s in v4.values()] == [
        ("127.0.0.1", 8080, True),
        ("0.0.0.0", 8081, True),
        ("127.0.0.1", 8082, False),
    ]
    v6 = parse_net_table("tcp6", TCP6_TABLE)
    assert [v6[inode].host for inode in (444, 555, 666)] == ["::1", "::", "::ffff:127.0.0.1"]
    assert [is_loopback(s.host) for s in v6.values()] == [True, False, True]
    assert not is_loopback("0.0.0.0") and not is_loopback("10.0.0.1")


def test_the_strace_reader_names_every_connect_and_flags_off_host_ones() -> None:
    log = (
        '12 connect(3, {sa_family=AF_INET, sin_port=htons(8080), sin_addr=inet_addr("127.0.0.1")}'
        ", 16) = 0\n"
        "12 connect(4, {sa_family=AF_INET6, sin6_port=htons(443), sin6_flowinfo=htonl(0), "
        'inet_pton(AF_INET6, "2001:db8::1", &sin6_addr), sin6_scope_id=0}, 28) = -1 ENETUNREACH\n'
        '13 connect(5, {sa_family=AF_UNIX, sun_path="/run/x.sock"}, 110) = 0\n'
        '13 connect(6, {sa_family=AF_INET, sin_port=htons(53), sin_addr=inet_addr("10.0.0.2")}, '
        "16) = -1 ENETUNREACH\n"
    )
    found = connects(log)
    assert found == [
        "AF_INET 127.0.0.1:8080",
        "AF_INET6 [2001:db8::1]:443",
        'AF_UNIX sun_path="/run/x.sock"',
        "AF_INET 10.0.0.2:53",
    ]
    assert [off_host(connect) for connect in found] == [False, True, False, True]


# -- the controls: each measure can move ----------------------------------------------------------


@pytest.mark.slow
def test_the_controls_see_what_they_should(lab: dict[str, Any]) -> None:
    assert lab["evil_control"] == {"accepted": 1, "received": 1}
    assert any(entry.startswith("tcp 0.0.0.0:") for entry in lab["listener_control"])
    if "strace_control" not in lab:
        pytest.skip("strace is not installed")
    assert lab["strace_control"] == ["AF_INET 203.0.113.7:80"]
    assert lab["routes"] == []  # the namespace routes nowhere: only loopback is up


# -- loopback only -------------------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize("run", ["record_hostile", "record_plain", "replay_plain"])
def test_every_listener_flowproof_opens_is_on_loopback(lab: dict[str, Any], run: str) -> None:
    """Every listening socket of flowproof's process tree, polled all along the run."""
    seen = lab[run]
    assert seen["polls"] > 1, seen
    assert seen["listening"], seen  # the proxy's own listener was seen
    for entry in seen["listening"]:
        proto, address = entry.split(" ", 1)
        host = address.rsplit(":", 1)[0].strip("[]")
        assert proto == "tcp" and is_loopback(host), (run, entry)


# -- no request chooses the upstream --------------------------------------------------------------


@pytest.mark.slow
def test_no_request_reaches_a_listener_it_names(lab: dict[str, Any]) -> None:
    """Not the listener the probes name, not the placeholder target a fall-through dials."""
    assert lab["evil"] == {"accepted": 0, "received": 0}, lab["probes"]
    assert lab["placeholder"] == {"accepted": 0, "received": 0}, lab["probes"]


@pytest.mark.slow
def test_every_probe_is_answered_by_the_configured_upstream_or_refused(
    lab: dict[str, Any],
) -> None:
    """Each probe (marked with its name in X-Probe) either reached the fake model, with the
    fake's own Host, or got flowproof's refusal without reaching it."""
    seen = lab["probes"]["seen"]
    assert len(seen) >= 25
    fake_host = lab["fake_base"].removeprefix("http://")
    received = {name for name, _, _ in lab["fake_received"]}
    assert {host for _, host, _ in lab["fake_received"]} == {fake_host}
    for name, statuses in seen.items():
        if name in received:
            continue
        assert statuses and all(
            status in REFUSED or str(status).startswith("closed") for status in statuses
        ), (name, statuses)
    assert not received & set(MUST_REFUSE), received & set(MUST_REFUSE)
    assert "plain" in received and len(received) > 10, received


# -- replay dials nothing ------------------------------------------------------------------------


@pytest.mark.slow
def test_replay_passes_in_a_namespace_that_routes_nowhere(lab: dict[str, Any]) -> None:
    assert lab["record_plain"]["code"] == 0, lab["record_plain"]
    replay = lab["replay_plain"]
    assert replay["code"] == 0, replay
    assert replay["stdout"].startswith("PASS: plain"), replay


@pytest.mark.slow
def test_replay_attempts_no_connect_off_loopback(lab: dict[str, Any]) -> None:
    """Every connect of flowproof and its agent, from strace: loopback or unix only, and the
    agent's connect to the proxy is among them (the trace is not empty by accident)."""
    if "replay_traced" not in lab:
        pytest.skip("strace is not installed")
    traced = lab["replay_traced"]
    assert traced["code"] == 0, traced
    assert [connect for connect in traced["connects"] if off_host(connect)] == []
    proxy = traced["listening"][0].split(" ", 1)[1]
    assert f"AF_INET {proxy}" in traced["connects"], traced
