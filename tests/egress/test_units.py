"""Unit tests of the egress package that need no kernel: allow_egress parsing and decisions,
sockaddr reading, the report, the launcher's reasons (the filter: test_rules.py)."""

from __future__ import annotations

import ast
import errno
import ipaddress
import struct

import pytest

from flowproof_cli.egress import constants as c
from flowproof_cli.egress.filesystem import open_flags
from flowproof_cli.egress.launcher import STUB, Launch, refusal_reason, yama_reason
from flowproof_cli.egress.policy import EntryError, Policy, Verdict, parse_entry
from flowproof_cli.egress.report import Blocked, Containment, EgressReport, FsEvent
from flowproof_cli.egress.sockaddr import Malformed, parse

# --- allow_egress ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "host", "port"),
    [
        ("api.example.com:443", "api.example.com", 443),
        ("198.51.100.9:443", "198.51.100.9", 443),
        ("10.0.0.0/8:443", "10.0.0.0/8", 443),
        ("api.example.com", "api.example.com", None),
        ("198.51.100.9", "198.51.100.9", None),
        ("10.0.0.0/8", "10.0.0.0/8", None),
        ("${SERVICE_HOST}:443", "${SERVICE_HOST}", 443),
        ("[2001:db8::1]:443", "2001:db8::1", 443),
        ("2001:db8::1", "2001:db8::1", None),
        ("[2001:db8::/32]:8443", "2001:db8::/32", 8443),
        ("2001:db8::/32", "2001:db8::/32", None),
        ("localhost", "localhost", None),
    ],
)
def test_entries_parse(text: str, host: str, port: int | None) -> None:
    entry = parse_entry(text)
    assert (entry.host, entry.port, entry.text) == (host, port, text)


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("", "empty"),
        ("api.example.com:https", "port `https`"),
        ("api.example.com:0", "port `0`"),
        ("api.example.com:70000", "port `70000`"),
        ("10.0.0.1/8:443", "not a CIDR block"),
        ("[2001:db8::1:443", "unclosed"),
        ("[10.0.0.1]:443", "brackets are for IPv6"),
        ("300.1.2.3", "not an IP address or host"),
        ("bad host", "whitespace"),
        ("http://x.example:443", "is a URL"),
    ],
)
def test_bad_entries_are_named(text: str, problem: str) -> None:
    with pytest.raises(EntryError, match=r"allow_egress entry|empty") as caught:
        parse_entry(text)
    assert problem in str(caught.value)


def ip(text: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address:
    return ipaddress.ip_address(text)


def test_loopback_and_unspecified_are_exempt_v4_mapped_normalised() -> None:
    policy = Policy()
    for text in ("127.0.0.1", "127.9.9.9", "::1", "0.0.0.0", "::", "::ffff:127.0.0.1"):
        assert policy.decide(ip(text), 443) is Verdict.LOCAL, text
    for text in ("10.0.0.1", "0.1.2.3", "169.254.169.254", "224.0.0.1", "255.255.255.255",
                 "fe80::1", "::ffff:10.0.0.1", "64:ff9b::a00:1", "::10.0.0.1"):  # fmt: skip
        assert policy.decide(ip(text), 443) is Verdict.DENIED, text


def test_rules_match_address_and_port() -> None:
    policy = Policy.from_entries(
        ["198.51.100.9:443", "10.0.0.0/8:8443", "[2001:db8::1]:443", "192.0.2.7"],
        resolver=lambda host: [],
    )
    assert policy.decide(ip("198.51.100.9"), 443) is Verdict.ALLOWED
    assert policy.decide(ip("::ffff:198.51.100.9"), 443) is Verdict.ALLOWED
    assert policy.decide(ip("198.51.100.9"), 80) is Verdict.DENIED
    assert policy.decide(ip("10.200.3.4"), 8443) is Verdict.ALLOWED
    assert policy.decide(ip("11.0.0.1"), 8443) is Verdict.DENIED
    assert policy.decide(ip("2001:db8::1"), 443) is Verdict.ALLOWED
    assert policy.decide(ip("2001:db8::2"), 443) is Verdict.DENIED
    assert policy.decide(ip("192.0.2.7"), 22) is Verdict.ALLOWED  # bare: any port...
    assert policy.decide(ip("192.0.2.7"), 53) is Verdict.DENIED  # ...except DNS


def test_dns_needs_an_explicit_port_53() -> None:
    policy = Policy.from_entries(["192.0.2.53:53"])
    assert policy.decide(ip("192.0.2.53"), 53) is Verdict.ALLOWED


def test_v4_mapped_entry_also_matches_the_ipv4_address() -> None:
    policy = Policy.from_entries(["[::ffff:198.51.100.9]:443"])
    assert policy.decide(ip("198.51.100.9"), 443) is Verdict.ALLOWED


def test_hostnames_are_resolved_once_and_pinned() -> None:
    calls: list[str] = []

    def resolver(host: str) -> list[str]:
        calls.append(host)
        return ["198.51.100.20", "2001:db8::20"]

    policy = Policy.from_entries(["api.example.com:443"], resolver=resolver)
    assert calls == ["api.example.com"]
    assert policy.decide(ip("198.51.100.20"), 443) is Verdict.ALLOWED
    assert policy.decide(ip("2001:db8::20"), 443) is Verdict.ALLOWED
    assert policy.decide(ip("198.51.100.21"), 443) is Verdict.DENIED
    assert calls == ["api.example.com"]


def test_unresolvable_hostname_is_a_note_not_an_error() -> None:
    policy = Policy.from_entries(["nowhere.invalid:443"], resolver=lambda host: [])
    assert policy.rules == []
    assert "did not resolve" in policy.notes[0]


def _from_spec(entries: list[str], environ: dict[str, str]) -> Policy:
    """The policy as the runner builds it: `${VAR}` substituted by the spec's rules."""
    agent = _spec(f"  command: a\n  allow_egress: {entries}\n").agent
    return Policy.from_entries(
        entries, substitute=lambda host: agent.resolved_egress_host(host, environ)
    )


def test_variables_resolve_at_execution() -> None:
    policy = _from_spec(["${SERVICE_HOST}:443"], {"SERVICE_HOST": "198.51.100.30"})
    assert policy.decide(ip("198.51.100.30"), 443) is Verdict.ALLOWED
    v6 = _from_spec(["${V6}:443"], {"V6": "2001:db8::30"})
    assert v6.decide(ip("2001:db8::30"), 443) is Verdict.ALLOWED
    from flowproof_cli.errors import ConfigError

    with pytest.raises(ConfigError, match="SERVICE_HOST is not set"):
        _from_spec(["${SERVICE_HOST}:443"], {})
    with pytest.raises(ValueError, match="has a variable to substitute"):
        Policy.from_entries(["${SERVICE_HOST}:443"])  # a caller that forgot the spec's rules


# --- sockaddr ----------------------------------------------------------------------------------


def v4(host: str, port: int, family: int = c.AF_INET) -> bytes:
    return struct.pack("<H", family) + struct.pack(">H", port) + bytes(ip(host).packed) + bytes(8)


def v6(host: str, port: int) -> bytes:
    return struct.pack("<H", c.AF_INET6) + struct.pack(">HI", port, 0) + ip(host).packed + bytes(4)


def test_sockaddr_forms() -> None:
    assert parse(v4("10.1.2.3", 443)).describe() == "10.1.2.3:443"
    assert parse(v6("2001:db8::1", 443)).describe() == "[2001:db8::1]:443"
    mapped = parse(v6("::ffff:10.1.2.3", 80))
    assert (mapped.family, str(mapped.ip), mapped.describe()) == (
        c.AF_INET6,
        "10.1.2.3",
        "10.1.2.3:80",
    )
    assert parse(v6("2001:db8::1", 443)[:24]).port == 443  # without sin6_scope_id
    unix = struct.pack("<H", c.AF_UNIX)
    assert parse(unix + b"/run/x.sock\0").describe() == "/run/x.sock"
    assert parse(unix + b"\0abstract").describe() == "@abstract"
    assert parse(unix).describe() == "(unnamed)"
    assert parse(struct.pack("<H", c.AF_UNSPEC) + bytes(14)).describe() == "AF_UNSPEC"


@pytest.mark.parametrize("raw", [b"", b"\x02", v4("10.1.2.3", 1)[:15], v6("::1", 1)[:23]])
def test_short_sockaddr_is_malformed(raw: bytes) -> None:
    with pytest.raises(Malformed):
        parse(raw)


# --- report ----------------------------------------------------------------------------------


def test_tier_lines() -> None:
    assert Containment(True).line == "egress containment: enforced (linux seccomp)"
    assert (
        Containment(False, "a url agent is a running service").line
        == "egress containment: not contained (a url agent is a running service)"
    )


def test_trace_section_only_when_contained_sorted_by_time() -> None:
    report = EgressReport(Containment(True))
    report.add_blocked(Blocked("10.0.0.2:80", "tcp", 30))
    report.add_blocked(Blocked("10.0.0.1:53", "udp", 12, "sendto"))
    assert report.trace_section() == [
        {"destination": "10.0.0.1:53", "protocol": "udp", "at_ms": 12},
        {"destination": "10.0.0.2:80", "protocol": "tcp", "at_ms": 30},
    ]
    assert not report.certifiable
    report.containment = Containment(False, "x")
    assert report.trace_section() == []
    assert EgressReport(Containment(True)).certifiable
    assert not EgressReport(Containment(False, "x")).certifiable


def test_filesystem_report_format() -> None:
    report = EgressReport(Containment(True))
    assert report.fs_lines() == []
    report.add_fs(FsEvent("openat", "[O_WRONLY|O_CREAT|O_TRUNC] /home/u/db.sqlite", 899))
    report.add_fs(FsEvent("unlinkat", "/home/u/exports/2025.csv", 412))
    assert report.fs_lines() == [
        "filesystem observation: observed (linux seccomp); 2 destructive syscall(s)",
        "  unlinkat /home/u/exports/2025.csv at 412ms",
        "  openat [O_WRONLY|O_CREAT|O_TRUNC] /home/u/db.sqlite at 899ms",
    ]


def test_open_flags() -> None:
    assert open_flags(0o1101) == "O_WRONLY|O_CREAT|O_TRUNC"
    assert open_flags(0o1002) == "O_RDWR|O_TRUNC"
    assert open_flags(c.O_TRUNC) == "O_RDONLY|O_TRUNC"


def test_refusal_reasons() -> None:
    assert "nested sandbox" in refusal_reason(f"ERR {errno.EBUSY} seccomp: busy")
    assert "5.19" in refusal_reason(f"ERR {errno.EINVAL} seccomp: invalid")
    assert "launcher failed" in refusal_reason("")


def test_yama_reasons() -> None:
    ptrace = 1 << c.DROPPED_CAPABILITIES["CAP_SYS_PTRACE"]
    assert yama_reason(0, 0) is None
    assert yama_reason(1, 0) is None  # the supervisor is the agent's ancestor
    assert yama_reason(2, ptrace) is None
    assert "CAP_SYS_PTRACE" in str(yama_reason(2, 0))
    assert "ptrace_scope is 3" in str(yama_reason(3, ptrace))


def test_a_launch_that_cannot_contain_passes_the_command_through() -> None:
    launch = Launch.prepare(
        reason="egress containment is Linux-only; this platform is not contained"
    )
    assert not launch.contained
    assert launch.wrap(["agent", "--flag"]) == ["agent", "--flag"]
    assert launch.pass_fds == ()
    launch.attach_sync(12345)
    report = launch.finish()
    assert report.containment.line.endswith(
        "not contained (egress containment is Linux-only; this platform is not contained)"
    )
    assert report.trace_section() == []


# --- the runner's glue -----------------------------------------------------------------------


def _spec(agent: str, steps: str = "  - assert_no_egress\n"):
    from flowproof_cli.spec import parse_spec

    return parse_spec(
        f"name: n\napp: agent\nagent:\n{agent}steps:\n  - prompt: hi\n{steps}", "n.flow.yaml"
    )


def test_url_agent_cannot_be_certified() -> None:
    from flowproof_cli.egress import verdicts
    from flowproof_cli.runner.judge import no_egress_failures

    spec = _spec("  url: http://127.0.0.1:9/\n  proxy_port: 4646\n")
    report = verdicts.url_report()
    assert report.containment.line == (
        "egress containment: not contained (a url agent is a running service that flowproof "
        "did not start)"
    )
    assert [failure.text for failure in no_egress_failures(spec, report)] == [
        "assert_no_egress: cannot certify: a url agent is a running service that flowproof "
        "did not start (step at line 8)"
    ]


def test_verdicts_and_warning() -> None:
    """egress/ reports what was refused; the judge applies the spec's `assert_no_egress`
    step to it, with the step's line as data."""
    from flowproof_cli.egress import verdicts
    from flowproof_cli.runner.judge import allow_list_warning, no_egress_failures
    from flowproof_cli.verdict import Failure

    certified = _spec("  command: a\n  allow_egress: [198.51.100.1:443]\n")
    clean = EgressReport(Containment(True))
    assert no_egress_failures(certified, clean) == []
    assert allow_list_warning(certified, clean) == []
    leaky = EgressReport(Containment(True))
    leaky.add_blocked(Blocked("203.0.113.7:443", "tcp", 40))
    assert leaky.refused_attempts() == ["tcp 203.0.113.7:443 (connect at 40ms)"]
    assert no_egress_failures(certified, leaky) == [
        Failure(
            "assert_no_egress: the agent attempted 1 undeclared destination(s): "
            "tcp 203.0.113.7:443 (connect at 40ms)",
            line=8,
        )
    ]
    declared = _spec("  command: a\n  allow_egress: [198.51.100.1:443]\n", steps="")
    assert no_egress_failures(declared, leaky) == []  # declared, not asserted: recorded only
    uncontained = EgressReport(Containment(False, "egress containment is Linux-only"))
    assert uncontained.uncontained_reason == "egress containment is Linux-only"
    assert clean.uncontained_reason is None
    [warning] = allow_list_warning(declared, uncontained)
    assert warning.startswith("warning: agent.allow_egress [198.51.100.1:443] was not applied")
    assert "`- assert_no_egress`" in warning
    assert allow_list_warning(declared, clean) == []
    plain = _spec("  command: a\n", steps="")
    assert not plain.engages_egress
    launch = verdicts.launch_for(plain, {})
    assert not launch.contained and launch.wrap(["a"]) == ["a"]
    assert launch.finish().containment.reason == verdicts.NOT_ENGAGED


def test_the_standalone_stub_agrees_with_the_constants() -> None:
    """_stub.py imports nothing of flowproof, so it spells its numbers out: they must not drift."""
    constants = [
        node
        for node in ast.parse(STUB.read_text()).body
        if isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name)
        if node.targets[0].id.isupper()
    ]
    stub: dict[str, object] = {}
    exec(compile(ast.Module(body=constants, type_ignores=[]), str(STUB), "exec"), stub)
    assert stub["SYS_SECCOMP"] == c.NR["seccomp"]
    assert stub["SECCOMP_SET_MODE_FILTER"] == c.SECCOMP_SET_MODE_FILTER
    assert stub["FLAGS"] == (
        c.SECCOMP_FILTER_FLAG_NEW_LISTENER | c.SECCOMP_FILTER_FLAG_WAIT_KILLABLE_RECV
    )
    assert stub["PR_SET_DUMPABLE"] == c.PR_SET_DUMPABLE
    assert stub["CAPS"] == c.DROPPED_CAPABILITIES
