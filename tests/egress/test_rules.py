"""The seccomp filter (egress/rules.py): the rules libseccomp compiles, run through a cBPF
interpreter (tests/egress/cbpf.py) as the kernel would, and what happens without libseccomp."""

from __future__ import annotations

import errno
import random
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from flowproof_cli.egress import constants as c
from flowproof_cli.egress import launcher, rules
from flowproof_cli.egress.launcher import Launch
from flowproof_cli.egress.policy import Policy
from tests.conftest import REPO, run_cli
from tests.e2e.flows import write_flow
from tests.egress import cbpf
from tests.fakes.fake_upstream import FakeUpstream

PROGRAM = cbpf.unpack(rules.program())
ALLOW = c.SECCOMP_RET_ALLOW
NOTIFY = c.SECCOMP_RET_USER_NOTIF


def refused(number: int) -> int:
    return c.SECCOMP_RET_ERRNO | number


def verdict(name: str, *args: int, arch: int = c.AUDIT_ARCH_X86_64, nr: int | None = None) -> int:
    number = c.NR[name] if nr is None else nr
    return cbpf.run(PROGRAM, cbpf.seccomp_data(number, args, arch))


# --- the filter ------------------------------------------------------------------------------


def test_program_is_valid_classic_bpf() -> None:
    assert 0 < len(PROGRAM) < 4096  # BPF_MAXINSNS
    for index, (code, jt, jf, k) in enumerate(PROGRAM):
        if code == cbpf.JMP_JA:
            assert index + 1 + k < len(PROGRAM)
        elif code & 0x07 == 0x05:  # BPF_JMP: forward only, inside the program
            assert index + 1 + max(jt, jf) < len(PROGRAM)
    assert PROGRAM[-1][0] == cbpf.RET_K
    assert len(rules.program()) == 8 * len(PROGRAM)


@pytest.mark.parametrize("name", ["connect", "sendmsg", "sendmmsg", "listen"])
def test_network_calls_reach_the_supervisor(name: str) -> None:
    assert verdict(name, 3, 0x7FFF0000, 16) == NOTIFY


def test_sendto_with_an_address_reaches_the_supervisor_without_one_does_not() -> None:
    assert verdict("sendto", 3, 0x1000, 10, 0, 0, 0) == ALLOW
    assert verdict("sendto", 3, 0x1000, 10, 0, 0x7FFF1000, 16) == NOTIFY
    assert verdict("sendto", 3, 0x1000, 10, 0, 0x1_0000_0000, 16) == NOTIFY  # high word only


def test_foreign_architecture_and_x32_are_refused() -> None:
    assert verdict("connect", arch=0x40000003) == refused(errno.EPERM)  # AUDIT_ARCH_I386
    assert verdict("connect", nr=c.X32_SYSCALL_BIT | c.NR["connect"]) == refused(errno.EPERM)
    assert verdict("read", nr=c.X32_SYSCALL_BIT) == refused(errno.EPERM)


@pytest.mark.parametrize("family", c.ALLOWED_FAMILIES)
def test_allowed_socket_families(family: int) -> None:
    assert verdict("socket", family, c.SOCK_STREAM, 0) == ALLOW


@pytest.mark.parametrize("family", [0, 3, 4, 17, 21, 29, 30, 31, 40, 44, 45, 255])
def test_other_socket_families_are_refused(family: int) -> None:
    assert verdict("socket", family, c.SOCK_STREAM, 0) == refused(errno.EAFNOSUPPORT)


def test_socket_arguments_are_read_as_ints() -> None:
    assert verdict("socket", (1 << 32) | c.AF_INET, c.SOCK_STREAM, 0) == ALLOW
    assert verdict("socket", (1 << 32) | c.AF_PACKET, c.SOCK_RAW, 0) == refused(errno.EAFNOSUPPORT)


@pytest.mark.parametrize("family", [c.AF_INET, c.AF_INET6])
def test_raw_sctp_and_mptcp_refused_on_inet(family: int) -> None:
    flags = 0o4000 | 0o2000000  # SOCK_NONBLOCK | SOCK_CLOEXEC
    assert verdict("socket", family, c.SOCK_RAW | flags, 1) == refused(errno.EPERM)
    assert verdict("socket", family, c.SOCK_PACKET, 0) == refused(errno.EPERM)
    assert verdict("socket", family, c.SOCK_STREAM, c.IPPROTO_SCTP) == refused(
        errno.EPROTONOSUPPORT
    )
    assert verdict("socket", family, c.SOCK_STREAM, c.IPPROTO_MPTCP) == refused(
        errno.EPROTONOSUPPORT
    )
    assert verdict("socket", family, c.SOCK_DGRAM | flags, c.IPPROTO_UDP) == ALLOW
    assert verdict("socket", family, c.SOCK_DGRAM, 1) == ALLOW  # ICMP ping sockets: sendto traps


@pytest.mark.parametrize("name", ["io_uring_setup", "io_uring_enter", "io_uring_register"])
def test_io_uring_is_refused(name: str) -> None:
    assert verdict(name) == refused(errno.EPERM)


def test_set_dumpable_succeeds_without_effect() -> None:
    assert verdict("prctl", c.PR_SET_DUMPABLE, 0) == c.SECCOMP_RET_ERRNO  # errno 0: returns 0
    assert verdict("prctl", c.PR_GET_DUMPABLE) == ALLOW
    assert verdict("prctl", c.PR_SET_NO_NEW_PRIVS, 1) == ALLOW


def test_multicast_joins_are_refused() -> None:
    for option in c.MULTICAST_JOIN_V4:
        assert verdict("setsockopt", 3, c.IPPROTO_IP, option) == refused(errno.EPERM)
    for option in c.MULTICAST_JOIN_V6:
        assert verdict("setsockopt", 3, c.IPPROTO_IPV6, option) == refused(errno.EPERM)
    assert verdict("setsockopt", 3, 1, 2) == ALLOW  # SOL_SOCKET SO_REUSEADDR
    assert verdict("setsockopt", 3, c.IPPROTO_IP, 1) == ALLOW  # IP_TOS
    assert verdict("setsockopt", 3, c.IPPROTO_TCP, 35) == ALLOW


def test_choosing_the_outgoing_interface_is_refused() -> None:
    for level, options in c.INTERFACE_CHOICE:
        for option in options:
            assert verdict("setsockopt", 3, level, option) == refused(errno.EPERM)
            high = verdict("setsockopt", 3, (7 << 32) | level, (9 << 32) | option)
            assert high == refused(errno.EPERM)  # the kernel reads both as C ints
    assert verdict("setsockopt", 3, c.IPPROTO_IP, c.IP_PKTINFO) == ALLOW  # a receive option
    assert verdict("setsockopt", 3, c.SOL_SOCKET, 24) == ALLOW  # SO_SNDLOWAT, beside 25


@pytest.mark.parametrize(
    "name",
    ["unlink", "unlinkat", "rmdir", "rename", "renameat", "renameat2", "truncate", "ftruncate",
     "creat", "openat2"],
)  # fmt: skip
def test_destructive_filesystem_calls_reach_the_supervisor(name: str) -> None:
    assert verdict(name, 0, 0, 0, 0) == NOTIFY


def test_open_reaches_the_supervisor_only_with_o_trunc() -> None:
    read, append, write = 0, 0o2000 | 1, 0o100 | 1
    for flags in (read, append, write):
        assert verdict("open", 0x1000, flags) == ALLOW
        assert verdict("openat", c.AT_FDCWD, 0x1000, flags) == ALLOW
    assert verdict("open", 0x1000, 1 | c.O_TRUNC) == NOTIFY
    assert verdict("openat", c.AT_FDCWD, 0x1000, 0o101 | c.O_TRUNC) == NOTIFY
    assert verdict("openat", c.AT_FDCWD, c.O_TRUNC, 0) == ALLOW  # O_TRUNC's value in arg 1


@pytest.mark.parametrize("number", [0, 1, 3, 9, 56, 57, 59, 231, 232, 434, 438])
def test_everything_else_is_allowed(number: int) -> None:
    assert verdict("read", nr=number) == ALLOW


def test_x32_and_foreign_calls_never_reach_a_rule() -> None:
    """libseccomp's own bad-architecture path: even a call that a rule would allow."""
    assert verdict("read", nr=c.X32_SYSCALL_BIT | 1) == refused(errno.EPERM)
    assert verdict("socket", c.AF_INET, c.SOCK_STREAM, 0, arch=0x40000003) == refused(errno.EPERM)


# --- the family whitelist as masked compares --------------------------------------------------


def _matches(patterns: list[tuple[int, int]], value: int) -> bool:
    return any(value & mask == expected for mask, expected in patterns)


def test_outside_matches_every_number_but_the_given_ones() -> None:
    patterns = rules.outside(c.ALLOWED_FAMILIES)
    for value in range(4096):
        assert _matches(patterns, value) is (value not in c.ALLOWED_FAMILIES), value
    for bit in range(6, 32):
        for low in (*c.ALLOWED_FAMILIES, 0, 63):
            assert _matches(patterns, (1 << bit) | low), (bit, low)
    generator = random.Random(11)
    for _ in range(20):
        values = {generator.randrange(1 << 8) for _ in range(generator.randrange(1, 9))}
        patterns = rules.outside(values, width=8)
        assert [v for v in range(256) if not _matches(patterns, v)] == sorted(values)


def test_every_rule_names_a_known_syscall_and_compares_ints_under_a_mask() -> None:
    for rule in rules.rules():
        assert rule.syscall in c.NR
        for comparison in rule.where:
            assert comparison.op in ("NE", "MASKED_EQ")
            if comparison.op == "MASKED_EQ":
                assert comparison.a <= rules.INT and comparison.b & ~comparison.a == 0


# --- without libseccomp -----------------------------------------------------------------------


CACHES = (rules.program, launcher.unavailable_reason, launcher._program_hex)


@pytest.fixture
def fresh_caches() -> Iterator[None]:
    """The program and the availability check are computed once per process: start and end
    each simulation from nothing."""
    for cache in CACHES:
        cache.cache_clear()
    yield
    for cache in CACHES:
        cache.cache_clear()


def _host_can_contain() -> None:
    reason = launcher.unavailable_reason()
    for cache in CACHES:
        cache.cache_clear()
    if reason is not None:
        pytest.skip(f"containment is unavailable here for another reason: {reason}")


@pytest.mark.parametrize("failure", ["not installed", "no libseccomp.so"])
def test_without_libseccomp_the_run_is_not_contained_with_the_reason(
    failure: str, fresh_caches: None, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    _host_can_contain()
    if failure == "not installed":
        monkeypatch.setitem(sys.modules, "pyseccomp", None)  # import raises ImportError
    else:  # what pyseccomp itself raises when ctypes finds no libseccomp.so
        (tmp_path / "pyseccomp.py").write_text(FAKE_PYSECCOMP)
        monkeypatch.delitem(sys.modules, "pyseccomp", raising=False)
        monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(rules.FilterUnavailable, match=r"^libseccomp not found$"):
        rules.program()
    assert launcher.unavailable_reason() == "libseccomp not found"
    launch = Launch.prepare(Policy())
    assert not launch.contained
    assert launch.wrap(["agent", "--flag"]) == ["agent", "--flag"]
    report = launch.finish()
    assert report.containment.line == "egress containment: not contained (libseccomp not found)"
    assert launcher.FIXES[rules.LIBSECCOMP_MISSING] in report.notes
    assert "apt-get install libseccomp2" in launcher.FIXES[rules.LIBSECCOMP_MISSING]


def test_a_rule_libseccomp_refuses_is_a_reason_not_a_traceback(
    fresh_caches: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    bad = rules.Rule(c.SECCOMP_RET_ALLOW, "connect")  # the default action again: EACCES
    monkeypatch.setattr(rules, "rules", lambda: iter([bad]))
    assert rules.unavailable_reason() == "libseccomp refused the filter (Permission denied)"


FAKE_PYSECCOMP = 'raise RuntimeError("Unable to find libseccomp")\n'


def test_the_cli_without_libseccomp_says_not_contained_and_cannot_certify(
    tmp_path: Path,
) -> None:
    """Red path through the real CLI: exit 1, the reason on the tier line and in the failed
    step, the fix in a note, no traceback, no trace written."""
    _host_can_contain()
    shadow = tmp_path / "shadow"
    shadow.mkdir()
    (shadow / "pyseccomp.py").write_text(FAKE_PYSECCOMP)
    flow = write_flow(tmp_path, name="uncertified")
    spec = yaml.safe_load(flow.read_text())
    spec["agent"]["allow_egress"] = []
    spec["steps"].append("assert_no_egress")
    flow.write_text(yaml.safe_dump(spec, sort_keys=False))
    with FakeUpstream() as fake:
        env = {
            "PYTHONPATH": f"{shadow}:{REPO}",
            "FLOWPROOF_AGENT_UPSTREAM": f"{fake.base_url}/v1",
            "FLOWPROOF_AGENT_KEY": "k",
        }
        result = run_cli("record", flow, env=env)
    output = result.stdout + result.stderr
    assert result.code == 1, output
    assert "egress containment: not contained (libseccomp not found)" in output
    assert "assert_no_egress: cannot certify: libseccomp not found (step at line" in output
    assert "apt-get install libseccomp2" in output
    assert "Traceback" not in output
    assert not flow.with_name("uncertified.trace.yaml").exists()
