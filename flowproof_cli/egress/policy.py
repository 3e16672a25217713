"""`agent.allow_egress`: parsing entries, resolving them at run start, deciding destinations.

An entry is one of

    host:port   ip:port   cidr:port   [ipv6]:port   [ipv6-cidr]:port   ${VAR}:port
    host        ip        cidr        ipv6          (any port)

Entries are stored as written; `${VAR}` resolves when the run starts, and a hostname is
resolved to its address set once, then pinned for the run. Loopback (127/8, ::1) and the
unspecified addresses (0.0.0.0, ::, which the kernel connects to loopback) are exempt.
Port 53 off-host (DNS) is refused unless an entry names port 53 explicitly, since a recursive
resolver relays anything.
"""

from __future__ import annotations

import ipaddress
import re
import socket
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from enum import Enum

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network
Resolver = Callable[[str], list[str]]
#: Substitutes the `${VAR}` of an entry's host: the spec's own variable rules, passed in by
#: the caller so that egress does not depend on the spec package.
Substitute = Callable[[str], str]

DNS_PORT = 53

_HOSTNAME = re.compile(
    r"^(?=.{1,253}$)([A-Za-z0-9_]([A-Za-z0-9_-]{0,61}[A-Za-z0-9])?)"
    r"(\.[A-Za-z0-9_]([A-Za-z0-9_-]{0,61}[A-Za-z0-9])?)*\.?$"
)
_VARIABLE = re.compile(r"\$\{[A-Za-z_][A-Za-z0-9_]*\}")


class EntryError(ValueError):
    """An allow_egress entry that cannot be read; the message says how to write it."""


@dataclass(frozen=True)
class AllowEntry:
    text: str  # as written
    host: str  # ip, cidr, hostname, or text containing ${VAR}
    port: int | None  # None: any port

    @property
    def has_variables(self) -> bool:
        return bool(_VARIABLE.search(self.host))


def _parse_port(text: str, entry: str) -> int:
    if not text.isdigit() or not 1 <= int(text) <= 65535:
        raise EntryError(
            f"allow_egress entry `{entry}`: port `{text}` is not a number from 1 to 65535"
        )
    return int(text)


def _check_host(host: str, entry: str) -> None:
    if _VARIABLE.search(host):
        rest = _VARIABLE.sub("x", host)
        if not _HOSTNAME.match(rest) and not _is_network(rest):
            raise EntryError(f"allow_egress entry `{entry}`: `{host}` is not a host")
        return
    if _is_network(host):
        return
    if "/" in host:
        raise EntryError(
            f"allow_egress entry `{entry}`: `{host}` is not a CIDR block (e.g. 10.0.0.0/8, "
            "2001:db8::/32; host bits must be zero)"
        )
    if ":" in host or not _HOSTNAME.match(host) or host.replace(".", "").isdigit():
        raise EntryError(f"allow_egress entry `{entry}`: `{host}` is not an IP address or host")


def _is_network(text: str) -> bool:
    try:
        ipaddress.ip_network(text, strict=True)
    except ValueError:
        return False
    return True


def parse_entry(text: str) -> AllowEntry:
    """Read one entry (no environment needed); raise EntryError naming the problem."""
    entry = text.strip()
    if not entry:
        raise EntryError("an allow_egress entry is empty")
    if any(ch.isspace() for ch in entry):
        raise EntryError(f"allow_egress entry `{entry}` contains whitespace")
    if "://" in entry:
        raise EntryError(
            f"allow_egress entry `{entry}` is a URL; write `host:port` (e.g. api.example.com:443)"
        )
    if entry.startswith("["):
        closing = entry.find("]")
        if closing < 0:
            raise EntryError(f"allow_egress entry `{entry}`: unclosed `[`")
        host, rest = entry[1:closing], entry[closing + 1 :]
        if rest and not rest.startswith(":"):
            raise EntryError(f"allow_egress entry `{entry}`: expected `]:port` after the address")
        port = _parse_port(rest[1:], entry) if rest else None
        if ":" not in host:
            raise EntryError(f"allow_egress entry `{entry}`: brackets are for IPv6 addresses")
    elif entry.count(":") > 1:
        host, port = entry, None  # a bare IPv6 address or block
    elif ":" in entry:
        host, _, port_text = entry.partition(":")
        port = _parse_port(port_text, entry)
    else:
        host, port = entry, None
    _check_host(host, entry)
    return AllowEntry(text=text, host=host, port=port)


def normalise(address: IPAddress) -> IPAddress:
    """An IPv4-mapped IPv6 address (::ffff:a.b.c.d) is the IPv4 address it carries."""
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return address.ipv4_mapped
    return address


def is_local(address: IPAddress) -> bool:
    """Loopback, or the unspecified address (the kernel connects 0.0.0.0 and :: to loopback)."""
    address = normalise(address)
    return address.is_loopback or address.is_unspecified


def resolve_host(host: str) -> list[str]:
    """The address set of a hostname (getaddrinfo), resolved once at run start."""
    try:
        infos = socket.getaddrinfo(host, None, type=socket.SOCK_STREAM)
    except socket.gaierror:
        return []
    return sorted({str(info[4][0]).split("%")[0] for info in infos})


class Verdict(Enum):
    LOCAL = "local"  # loopback / unspecified: exempt
    ALLOWED = "allowed"  # matches an allow_egress entry
    DENIED = "denied"


@dataclass(frozen=True)
class Rule:
    network: IPNetwork
    port: int | None
    entry: str


@dataclass
class Policy:
    """The resolved allow-list of one run."""

    rules: list[Rule] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # e.g. a hostname that resolved to nothing

    @classmethod
    def from_entries(
        cls,
        entries: Iterable[str],
        *,
        substitute: Substitute | None = None,
        resolver: Resolver = resolve_host,
    ) -> Policy:
        policy = cls()
        for text in entries:
            entry = parse_entry(text)
            host = entry.host
            if entry.has_variables:
                if substitute is None:
                    raise ValueError(f"allow_egress entry `{text}` has a variable to substitute")
                host = substitute(host)
                resolved = parse_entry(f"[{host}]" if ":" in host else host)
                host = resolved.host
            if _is_network(host):
                network = ipaddress.ip_network(host, strict=True)
                policy.rules.extend(_rules(network, entry))
                continue
            addresses = resolver(host)
            if not addresses:
                policy.notes.append(
                    f"allow_egress entry `{entry.text}`: `{host}` did not resolve at run "
                    "start, so a contained agent cannot reach it"
                )
            for address in addresses:
                policy.rules.extend(_rules(ipaddress.ip_network(address), entry))
        return policy

    def decide(self, address: IPAddress, port: int) -> Verdict:
        address = normalise(address)
        if address.is_loopback or address.is_unspecified:  # is_local, normalised once
            return Verdict.LOCAL
        for rule in self.rules:
            if address.version != rule.network.version or address not in rule.network:
                continue
            if rule.port is None and port == DNS_PORT:
                continue  # DNS off-host needs an explicit :53
            if rule.port is None or rule.port == port:
                return Verdict.ALLOWED
        return Verdict.DENIED


def _rules(network: IPNetwork, entry: AllowEntry) -> list[Rule]:
    rules = [Rule(network, entry.port, entry.text)]
    if isinstance(network, ipaddress.IPv6Network) and network.prefixlen >= 96:
        mapped = network.network_address.ipv4_mapped
        if mapped is not None:  # ::ffff:a.b.c.d/1xx written as IPv6: match the IPv4 too
            prefix = network.prefixlen - 96
            rules.append(Rule(ipaddress.ip_network(f"{mapped}/{prefix}"), entry.port, entry.text))
    return rules


def format_destination(address: IPAddress, port: int) -> str:
    address = normalise(address)
    return f"[{address}]:{port}" if address.version == 6 else f"{address}:{port}"
