"""The escape suite: a hostile agent, one technique per case, each in a network namespace of
its own (tests/egress/lab.py), asserting the exact errno and the packet counters.

`tx` is how many packets left the lab's namespace towards "the internet" (a veth peer
namespace) while the agent ran; `peer` is what the peer's servers received. The control
tests at the end run the same techniques uncontained and see the counters move, so a zero
here is a measurement, not a counter that never counts.
"""

from __future__ import annotations

import errno
from typing import Any

import pytest

from tests.egress.lab import OFFHOST4, OFFHOST6, PEER4, run_lab

pytestmark = [pytest.mark.egress, pytest.mark.usefixtures("netns")]

NOTHING_ALLOWED: list[str] = []
PEER_DECLARED = [f"{PEER4}:8080", "[2001:db8:77::2]:8080"]


def lab(case: str, allow: list[str] | None = None, **kwargs: Any) -> dict[str, Any]:
    outcome = run_lab(case, allow=NOTHING_ALLOWED if allow is None else allow, **kwargs)
    assert outcome["result"] is not None, outcome
    return outcome


def assert_nothing_left(outcome: dict[str, Any]) -> None:
    assert outcome["tx"] == 0, outcome
    assert outcome["peer"] == {"tcp_accepted": 0, "udp_received": 0}, outcome


def blocked(outcome: dict[str, Any]) -> list[str]:
    return [
        (f"dns {', '.join(b['queries'])} via " if b.get("queries") else "")
        + f"{b['protocol']} {b['destination']} ({b['syscall']})"
        for b in outcome["report"]["blocked"]
    ]


# --- connect, every address form ---------------------------------------------------------------


def test_connect_ipv4_refused_and_recorded() -> None:
    outcome = lab("connect_v4", allow=[f"{PEER4}:9"])
    assert outcome["result"] == {"offhost": "ECONNREFUSED", "peer_undeclared_port": "ECONNREFUSED"}
    assert_nothing_left(outcome)
    assert blocked(outcome) == [f"tcp {OFFHOST4}:80 (connect)", f"tcp {PEER4}:8080 (connect)"]
    report = outcome["report"]
    assert report["containment"] == "egress containment: enforced (linux seccomp)"
    assert [(b["destination"], b["protocol"]) for b in report["trace"]] == [
        (f"{OFFHOST4}:80", "tcp"),
        (f"{PEER4}:8080", "tcp"),
    ]
    assert all(isinstance(b["at_ms"], int) and b["at_ms"] >= 0 for b in report["trace"])


def test_connect_ipv6_refused() -> None:
    outcome = lab("connect_v6")
    assert outcome["result"] == {"offhost": "ECONNREFUSED", "peer_undeclared": "ECONNREFUSED"}
    assert_nothing_left(outcome)
    assert blocked(outcome)[0] == f"tcp [{OFFHOST6}]:80 (connect)"


def test_v4_mapped_ipv6_is_normalised() -> None:
    outcome = lab("connect_v4mapped")
    assert outcome["result"] == {"offhost": "ECONNREFUSED", "mapped_loopback": "OK"}
    assert_nothing_left(outcome)
    assert blocked(outcome) == [f"tcp {OFFHOST4}:80 (connect)"]  # reported as the IPv4 it is
    assert outcome["local"]["tcp"] == 1


def test_unspecified_address_connects_locally() -> None:
    """0.0.0.0 and :: are this host (the kernel routes them to loopback): exempt, listed."""
    outcome = lab("connect_any")
    assert outcome["result"] == {
        "any4": "OK",
        "reply": "pong:ping",
        "any6": "OK",
        "bound_unused_port": "ECONNREFUSED",  # the local stack's own refusal, over lo
    }
    assert_nothing_left(outcome)
    assert blocked(outcome) == []
    assert any(key.startswith("tcp 0.0.0.0:") for key in outcome["report"]["local"])


# --- address-bearing sends ---------------------------------------------------------------------


def test_udp_sendto_offhost_and_dns_refused() -> None:
    outcome = lab("udp_sendto")
    assert outcome["result"] == {
        "offhost": "ECONNREFUSED",
        "dns": "ECONNREFUSED",
        "offhost6": "ECONNREFUSED",
    }
    assert_nothing_left(outcome)
    assert blocked(outcome) == [
        f"udp {OFFHOST4}:9 (sendto)",
        f"dns registry.npmjs.org via udp {OFFHOST4}:53 (sendto)",  # the query it carried
        f"udp [{OFFHOST6}]:9 (sendto)",
    ]


def test_udp_sendto_af_unspec_is_read_as_ipv4() -> None:
    """udp_sendmsg treats an AF_UNSPEC sockaddr as AF_INET: decided as the address it carries."""
    outcome = lab("udp_unspec")
    assert outcome["result"] == {"unspec": "ECONNREFUSED"}
    assert_nothing_left(outcome)


def test_sendmsg_name_on_connected_socket_refused() -> None:
    outcome = lab("sendmsg_name", allow=[f"{PEER4}:8081"])
    assert outcome["result"] == {"connected_send": "OK", "redirected": "ECONNREFUSED"}
    assert outcome["tx"] == 1  # the connected datagram, and nothing else
    assert outcome["peer"] == {"tcp_accepted": 0, "udp_received": 1}
    assert blocked(outcome) == [f"udp {OFFHOST4}:9 (sendmsg)"]


def test_sendmmsg_refused_whole_and_emulated_when_local() -> None:
    outcome = lab("sendmmsg")
    assert outcome["result"] == {"mixed": "ECONNREFUSED", "local_only": 1, "msg_len": 4}
    assert_nothing_left(outcome)
    assert outcome["local"]["udp"] == 1  # only the all-local call was sent


def test_msg_fastopen_refused() -> None:
    outcome = lab("fastopen")
    assert outcome["result"] == {"fastopen": "ECONNREFUSED"}
    assert_nothing_left(outcome)


# --- refused in the filter ---------------------------------------------------------------------


def test_io_uring_refused() -> None:
    outcome = lab("io_uring")
    assert outcome["result"] == {"io_uring_setup": "EPERM"}
    assert_nothing_left(outcome)


def test_af_packet_refused() -> None:
    outcome = lab("af_packet")
    assert outcome["result"] == {"packet_raw": "EAFNOSUPPORT", "packet_dgram": "EAFNOSUPPORT"}
    assert_nothing_left(outcome)


def test_raw_and_sctp_sockets_refused() -> None:
    outcome = lab("raw_socket")
    assert outcome["result"] == {
        "raw4": "EPERM",
        "raw6": "EPERM",
        "raw4_nonblock": "EPERM",
        "sctp": "EPROTONOSUPPORT",
        "tcp_still_fine": "OK",
    }
    assert_nothing_left(outcome)


def test_af_vsock_refused() -> None:
    outcome = lab("vsock")
    assert outcome["result"] == {"vsock": "EAFNOSUPPORT"}
    assert_nothing_left(outcome)


def test_multicast_join_refused() -> None:
    outcome = lab("multicast_join")
    assert outcome["result"] == {"join": "EPERM"}
    assert_nothing_left(outcome)


def test_choosing_the_outgoing_interface_is_refused() -> None:
    """127.0.0.1 is exempt, so a socket bound to veth0 would carry 'loopback' traffic out of
    the host: SO_BINDTODEVICE, SO_BINDTOIFINDEX and IP(V6)_UNICAST_IF are refused."""
    outcome = lab("bind_to_device")
    assert outcome["result"] == {
        "bindtodevice": "EPERM",
        "tcp_loopback": "OK",  # the socket stayed unbound: it reached the local server
        "bindtodevice_lo": "EPERM",
        "bindtoifindex": "EPERM",
        "unicast_if": "EPERM",
        "udp_loopback": "OK",
        "unicast_if6": "EPERM",
    }
    assert_nothing_left(outcome)
    assert outcome["local"] == {"tcp": 1, "udp": 1, "unix": 0}


def test_a_send_choosing_its_interface_in_control_data_is_refused() -> None:
    outcome = lab("pktinfo_interface")
    assert outcome["result"] == {
        "v4_named": "ECONNREFUSED",
        "v4_connected": "ECONNREFUSED",
        "v6_named": "ECONNREFUSED",
        "v4_through_lo": "OK",
        "dontroute": "OK",
    }
    assert_nothing_left(outcome)
    assert outcome["local"]["udp"] == 2  # through lo, and MSG_DONTROUTE: both stayed local
    assert [b["syscall"] for b in outcome["report"]["blocked"]] == ["sendmsg"] * 3


def test_interface_choice_with_high_garbage_bits_is_still_refused() -> None:
    outcome = lab("interface_choice_high_bits")
    assert outcome["result"] == {"bindtodevice": "EPERM", "connect_loopback": "OK"}
    assert_nothing_left(outcome)


def test_sendmsg_fastopen_refused() -> None:
    outcome = lab("sendmsg_fastopen")
    assert outcome["result"] == {"fastopen_sendmsg": "ECONNREFUSED"}
    assert_nothing_left(outcome)
    assert blocked(outcome) == [f"tcp {OFFHOST4}:80 (sendmsg)"]


def test_an_address_on_a_connected_loopback_stream_is_refused() -> None:
    """The kernel would ignore it (and send to the loopback peer); it is refused, recorded."""
    outcome = lab("address_on_connected_stream")
    assert outcome["result"] == {"sendto_offhost": "ECONNREFUSED"}
    assert_nothing_left(outcome)
    assert blocked(outcome) == [f"tcp {OFFHOST4}:80 (sendto)"]


def test_metadata_link_local_broadcast_and_multicast_are_off_host() -> None:
    outcome = lab("special_addresses")
    assert outcome["result"] == {
        "metadata": "ECONNREFUSED",
        "link_local4": "ECONNREFUSED",
        "link_local6_scoped": "ECONNREFUSED",
        "broadcast": "ECONNREFUSED",
        "subnet_broadcast": "ECONNREFUSED",
        "multicast": "ECONNREFUSED",
        "multicast6": "ECONNREFUSED",
    }
    assert_nothing_left(outcome)
    assert len(blocked(outcome)) == 7


def test_ipv6_forms_embedding_an_ipv4_address_are_off_host() -> None:
    """Only ::ffff:a.b.c.d is the IPv4 address; compatible, NAT64, SIIT, 6to4 and Teredo
    forms are IPv6 destinations routed off-host, each refused."""
    outcome = lab("ipv6_embeddings")
    assert outcome["result"] == dict.fromkeys(
        ("compatible", "nat64", "translated", "6to4", "teredo"), "ECONNREFUSED"
    )
    assert_nothing_left(outcome)
    assert len(blocked(outcome)) == 5


def test_malformed_sockaddrs_get_the_kernels_errno() -> None:
    """Lengths and pointers the kernel rejects are rejected alike; an IPv4 address on an
    IPv6 socket, which the kernel would reject as EINVAL, is refused as a destination."""
    outcome = lab("malformed_sockaddr")
    assert outcome["result"] == {
        "addrlen_4096": "EINVAL",
        "addrlen_0": "EINVAL",
        "addrlen_short": "EINVAL",
        "addrlen_negative": "EINVAL",
        "null": "EFAULT",
        "unmapped": "EFAULT",
        "family_mismatch": "ECONNREFUSED",
    }
    assert_nothing_left(outcome)


def test_a_send_without_address_on_an_unconnected_socket_goes_nowhere() -> None:
    outcome = lab("unaddressed_send")
    assert outcome["result"] == {
        "connect_first": "ECONNREFUSED",
        "send": "EDESTADDRREQ",
        "write": "EDESTADDRREQ",
    }
    assert_nothing_left(outcome)


def test_a_route_through_netlink_is_refused() -> None:
    """rtnetlink needs CAP_NET_ADMIN, which a privileged agent runs without."""
    outcome = lab("netlink_route")
    assert outcome["result"] == {"route_add": "EPERM"}
    assert_nothing_left(outcome)


def test_i386_int80_refused(helper: dict[str, str]) -> None:
    control = lab("int80", contained=False, options=helper)
    if control["result"].get("int80_socket") == -errno.ENOSYS:
        pytest.skip("this kernel has no IA32 emulation: `int 0x80` does not exist here")
    outcome = lab("int80", options=helper)
    assert outcome["result"] == {"int80_socket": -errno.EPERM, "int80_connect": -errno.EPERM}
    assert_nothing_left(outcome)


def test_x32_syscall_refused() -> None:
    outcome = lab("x32")
    assert outcome["result"] == {"x32_connect": "EPERM"}  # the kernel alone would say ENOSYS
    assert_nothing_left(outcome)


# --- every task of the agent -------------------------------------------------------------------


def test_connect_from_a_thread() -> None:
    outcome = lab("thread")
    assert outcome["result"] == {"thread": "ECONNREFUSED"}
    assert_nothing_left(outcome)


def test_connect_from_a_forked_child() -> None:
    outcome = lab("fork")
    assert outcome["result"] == {"forked": "ECONNREFUSED"}
    assert_nothing_left(outcome)


def test_connect_from_a_vforked_child(helper: dict[str, str]) -> None:
    outcome = lab("vfork", options=helper)
    assert outcome["result"] == {"vfork_connect": errno.ECONNREFUSED}
    assert_nothing_left(outcome)


def test_connect_from_exec_children_and_grandchildren() -> None:
    outcome = lab("exec")
    assert outcome["result"] == {"exec_child": "ECONNREFUSED", "exec_grandchild": "ECONNREFUSED"}
    assert_nothing_left(outcome)
    assert len(blocked(outcome)) == 2


# --- races and tampering -----------------------------------------------------------------------


@pytest.mark.slow
def test_sockaddr_rewritten_while_the_supervisor_decides() -> None:
    """Two sibling threads flip the sockaddr between loopback and an undeclared peer during
    2,000 connects: each call goes where the COPY said, and the peer never sees one."""
    outcome = lab("race_sockaddr", options={"iterations": 2000})
    outcomes = outcome["result"]["outcomes"]
    assert set(outcomes) <= {"OK", "ECONNREFUSED"}, outcomes
    assert sum(outcomes.values()) == 2000
    assert outcomes.get("ECONNREFUSED", 0) > 0 and outcomes.get("OK", 0) > 0, outcomes
    assert_nothing_left(outcome)
    assert outcome["local"]["tcp"] == outcomes["OK"]  # every success reached loopback


def test_descriptor_swapped_during_the_call() -> None:
    """A sibling dup2()s TCP and UDP sockets onto the descriptor while the agent connects a
    unix socket and sends a declared-TCP-only fast-open: nothing goes out over UDP, and a
    unix address on a swapped-in inet socket fails as the kernel fails it."""
    outcome = lab("dup2_swap", allow=[f"{PEER4}:8081"], options={"iterations": 600})
    outcomes = outcome["result"]["outcomes"]
    assert set(outcomes) <= {
        "OK",  # unix connect on the unix socket; fast-open on a swapped-in TCP socket
        "EAFNOSUPPORT",  # unix address on a swapped-in inet socket
        "ENOTSUP",  # MSG_FASTOPEN on a unix socket (EOPNOTSUPP)
        "ECONNREFUSED",  # the declared destination over UDP: unconnected datagrams refused
        "EISCONN",
        "EALREADY",
        "EINPROGRESS",
    }, outcomes
    assert outcome["peer"]["udp_received"] == 0, outcome
    assert {b["protocol"] for b in outcome["report"]["blocked"]} <= {"udp"}


def test_descriptor_swap_with_nothing_declared_sends_nothing() -> None:
    outcome = lab("dup2_swap", options={"iterations": 600})
    assert set(outcome["result"]["outcomes"]) <= {"OK", "EAFNOSUPPORT", "ENOTSUP", "ECONNREFUSED"}
    assert_nothing_left(outcome)


def test_stealing_the_listener_from_the_supervisor() -> None:
    outcome = lab("steal_listener")
    assert outcome["result"] == {
        "pidfd_open": "OK",  # a pidfd is harmless...
        "pidfd_getfd": {"EPERM": 64},  # ...but no descriptor of the supervisor can be taken
        "proc_fd": outcome["result"]["proc_fd"],
        "ptrace_attach": "EPERM",
        "proc_mem": "EACCES",
        "connect_after": "ECONNREFUSED",
    }
    assert "OK" not in outcome["result"]["proc_fd"]
    assert set(outcome["result"]["proc_fd"]) <= {"EACCES", "ENOENT"}
    assert_nothing_left(outcome)


def test_stealing_the_listener_without_capabilities() -> None:
    """The pitfall as an ordinary user meets it: same uid, no CAP_SYS_PTRACE anywhere."""
    outcome = lab("steal_listener", unprivileged=True)
    assert outcome["result"]["pidfd_getfd"] == {"EPERM": 64}
    assert outcome["result"]["ptrace_attach"] == "EPERM"
    assert outcome["result"]["connect_after"] == "ECONNREFUSED"
    assert_nothing_left(outcome)


def test_making_itself_non_dumpable() -> None:
    outcome = lab("nondumpable")
    assert outcome["result"] == {
        "set_dumpable": "OK",  # answered by the filter, without effect
        "dumpable_now": 1,
        "offhost": "ECONNREFUSED",
        "loopback": "OK",
    }
    assert_nothing_left(outcome)


def test_unreadable_agent_fails_closed(helper: dict[str, str]) -> None:
    """exec of an execute-only binary makes a process non-dumpable, which blinds a supervisor
    without CAP_SYS_PTRACE: every connect is then refused, loopback included."""
    outcome = lab("exec_unreadable", unprivileged=True, options=helper)
    refused = {"connect": errno.ECONNREFUSED}
    assert outcome["result"] == {
        "readable_offhost": refused,
        "unreadable_offhost": refused,
        "unreadable_loop": refused,
    }
    assert_nothing_left(outcome)
    assert outcome["local"]["tcp"] == 0
    unknown = [b for b in outcome["report"]["blocked"] if b["destination"].startswith("unknown")]
    assert len(unknown) == 2


@pytest.mark.slow
def test_signal_storm_during_connects() -> None:
    outcome = lab("signal_storm", options={"iterations": 400})
    assert outcome["result"]["outcomes"] == {"allowed:OK": 200, "denied:ECONNREFUSED": 200}
    assert_nothing_left(outcome)


def test_supervisor_killed_fails_closed() -> None:
    outcome = lab("kill_supervisor")
    assert outcome["result"] == {"offhost": "ENOSYS", "loopback": "ENOSYS", "orphaned": True}
    assert outcome["supervisor_exit"] == -9
    assert_nothing_left(outcome)


def test_nested_sandbox_is_not_contained_by_itself() -> None:
    """Pitfall 9: a second listener in one process tree is EBUSY. The inner run says so, and
    the outer filter still holds for everything the inner agent does."""
    outcome = lab("nested")
    assert outcome["result"] == {
        "inner_tier": "egress containment: not contained (another seccomp user-notification "
        "sandbox already supervises this process tree (EBUSY): a nested sandbox cannot be "
        "supervised)",
        "inner_exit": 0,
        "still_refused_by_outer": "ECONNREFUSED",
    }
    assert_nothing_left(outcome)


@pytest.mark.slow
def test_a_blocking_connect_does_not_stall_the_others() -> None:
    """Pitfall 4: a declared destination that never answers holds one worker, not the agent."""
    outcome = lab("stall", allow=[f"{OFFHOST4}:80"])
    result = outcome["result"]
    assert result["fast"] == ["OK"] and result["fast_under_1s"] is True, result
    assert result["slow_still_blocked"] is True
    assert result["slow"] == "EINPROGRESS"  # the agent's own SO_SNDTIMEO, honoured on our dup
    assert result["slow_s"] >= 2.5
    assert outcome["peer"] == {"tcp_accepted": 0, "udp_received": 0}  # declared, dropped there


def test_sendmsg_is_emulated_with_rights_and_gathered_iovecs() -> None:
    outcome = lab("scm_rights")
    assert outcome["result"] == {
        "sent": 13,
        "data": "one-two-three",
        "pipe": "through the passed descriptor",
    }
    assert_nothing_left(outcome)


# --- what is allowed -------------------------------------------------------------------------


def test_declared_destination_is_really_reached() -> None:
    outcome = lab("allowed_tcp", allow=PEER_DECLARED)
    assert outcome["result"] == {
        "v4": "OK pong:ping",
        "v6": "OK pong:ping",
        "v4mapped": "OK pong:ping",
    }
    assert outcome["peer"]["tcp_accepted"] == 3
    assert outcome["tx"] > 0
    assert blocked(outcome) == []


def test_loopback_and_unix_work_and_are_listed() -> None:
    outcome = lab("loopback")
    assert outcome["result"] == {
        "v4": "pong:ping",
        "v6": "pong:ping",
        "udp": "echo:hi",
        "unix": "pong:ping",
        "unix_relative": "pong:ping",
    }
    assert_nothing_left(outcome)
    local = outcome["report"]["local"]
    assert {key.split()[0] for key in local} == {"tcp", "udp", "unix"}
    assert "unix local.sock" in local
    assert any(
        line.startswith("egress report: 5 loopback/unix")
        for line in outcome["report"]["stderr_lines"]
    )


def test_non_blocking_connect_returns_einprogress_then_completes() -> None:
    outcome = lab("nonblocking", allow=PEER_DECLARED)
    assert outcome["result"] == {
        "first": "EINPROGRESS",
        "writable": True,
        "so_error": 0,
        "reply": "pong:ping",
    }
    assert outcome["peer"]["tcp_accepted"] == 1


def test_unconnected_udp_offhost_is_refused_even_when_declared() -> None:
    outcome = lab("udp_connected", allow=[f"{PEER4}:8081"])
    assert outcome["result"] == {"unconnected": "ECONNREFUSED", "connect": "OK", "reply": "echo:c"}
    assert outcome["tx"] == 1, outcome  # the connected datagram, and nothing else
    assert outcome["peer"]["udp_received"] == 1
    assert blocked(outcome) == [f"udp {PEER4}:8081 (sendto)"]


def test_dns_offhost_needs_an_explicit_port_53() -> None:
    """A refused lookup is named by its query: the datagram socket's connect is answered
    without connecting it, so the query sent next reaches the supervisor (and nothing else:
    the socket is unconnected, a plain send fails in the kernel)."""
    outcome = lab("dns", allow=[PEER4])  # any port of the peer... but not 53
    assert outcome["result"] == {
        "udp53": "OK",  # recorded as blocked, the socket left unconnected
        "query": "ECONNREFUSED",  # named, refused
        "send": "EDESTADDRREQ",  # the kernel's own refusal: nowhere to send it
        "tcp53": "ECONNREFUSED",
    }
    assert_nothing_left(outcome)
    assert blocked(outcome) == [
        f"dns registry.npmjs.org via udp {PEER4}:53 (connect)",
        f"tcp {PEER4}:53 (connect)",
    ]
    named = f"  blocked dns registry.npmjs.org (udp {PEER4}:53, connect) at "
    assert any(line.startswith(named) for line in outcome["report"]["stderr_lines"]), outcome
    explicit = lab("dns", allow=[f"{PEER4}:53"])
    assert explicit["result"]["udp53"] == "OK"  # connected UDP, no packet yet
    assert explicit["result"]["query"] == "OK"  # allowed: sent to the peer
    assert explicit["result"]["tcp53"] == "ECONNREFUSED"  # the peer's own RST
    assert explicit["tx"] > 0
    assert blocked(explicit) == []


def test_listen_only_on_loopback() -> None:
    outcome = lab("listen")
    assert outcome["result"] == {
        "any4": "EPERM",
        "veth4": "EPERM",
        "loop4": "OK",
        "any6": "EPERM",
        "loop6": "OK",
        "unbound": "EPERM",
    }
    assert_nothing_left(outcome)
    assert [b["syscall"] for b in outcome["report"]["blocked"]] == ["listen"] * 4


def test_a_stream_send_beyond_1_mib_returns_a_short_count() -> None:
    outcome = lab("stream_cap")
    assert outcome["result"] == {
        "sent": 1 << 20,
        "received": 1 << 20,
        "offered": (1 << 20) + 65536,
    }
    assert_nothing_left(outcome)
    assert any(key.startswith("tcp 127.0.0.1:") for key in outcome["report"]["local"])


# --- controls: the same techniques uncontained DO reach the peer --------------------------------


@pytest.mark.slow
@pytest.mark.parametrize(
    "case",
    ["connect_v4", "connect_v6", "connect_v4mapped", "udp_sendto", "udp_unspec", "sendmsg_name",
     "sendmmsg", "fastopen", "thread", "fork", "exec", "bind_to_device", "pktinfo_interface",
     "interface_choice_high_bits", "sendmsg_fastopen", "special_addresses", "ipv6_embeddings",
     "unaddressed_send"],
)  # fmt: skip
def test_control_uncontained_packets_do_leave(case: str) -> None:
    outcome = lab(case, contained=False)
    if case == "sendmsg_name":  # one datagram to the connected peer, one redirected
        assert outcome["tx"] == 2 and outcome["result"]["redirected"] == "OK", outcome
    assert outcome["tx"] > 0, outcome
    assert outcome["report"]["reason"] == "the test asked for an uncontained control run"


@pytest.mark.slow
def test_control_uncontained_helper_techniques_leave(helper: dict[str, str]) -> None:
    for case in ("int80", "vfork"):
        outcome = lab(case, contained=False, options=helper)
        if case == "int80" and outcome["result"].get("int80_socket") == -errno.ENOSYS:
            continue
        assert outcome["tx"] > 0, (case, outcome)


@pytest.mark.slow
def test_control_uncontained_filter_refusals_succeed() -> None:
    """What the filter refuses does work without it (so the errno above is the filter's)."""
    outcome = lab("raw_socket", contained=False)
    assert outcome["result"]["raw4"] == "OK" and outcome["result"]["raw6"] == "OK"
    assert lab("io_uring", contained=False)["result"] == {"io_uring_setup": "OK"}
    assert lab("af_packet", contained=False)["result"]["packet_raw"] == "OK"
    assert lab("x32", contained=False)["result"] == {"x32_connect": "ENOSYS"}
    assert lab("multicast_join", contained=False)["result"] == {"join": "OK"}
    whole = (1 << 20) + 65536  # the 1 MiB cap is the supervisor's, not the kernel's
    assert lab("stream_cap", contained=False)["result"]["sent"] == whole
    vsock = lab("vsock", contained=False)["result"]["vsock"]  # socket() only, never connect
    assert vsock in ("OK", "EAFNOSUPPORT")  # EAFNOSUPPORT: this kernel has no vsock at all
