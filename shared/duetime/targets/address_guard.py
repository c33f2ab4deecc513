"""The SSRF guard: which addresses an HTTP target may reach.

A job's URL is chosen by a tenant, and the worker runs inside the operator's network next to
the instance metadata service (169.254.169.254), the ECS credentials endpoint (169.254.170.2)
and private services. So duetime resolves the host itself, refuses the request if any answer
is not a public unicast address, and then connects to an address it checked (never resolving
the name a second time, which a DNS-rebinding attacker would answer differently).
"""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Sequence

from duetime.domain.invocation import TargetError
from duetime.observability import logger

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address

_V4 = ipaddress.IPv4Network
_V6 = ipaddress.IPv6Network

# Each refused range with the reason a user sees. Order matters only for the wording: the first
# matching range names the reason.
REFUSED_IPV4: tuple[tuple[ipaddress.IPv4Network, str], ...] = (
    (_V4("0.0.0.0/8"), "unspecified ('this network')"),
    (_V4("10.0.0.0/8"), "private (RFC 1918)"),
    (_V4("100.64.0.0/10"), "carrier-grade NAT (RFC 6598)"),
    (_V4("127.0.0.0/8"), "loopback"),
    (_V4("169.254.0.0/16"), "link-local (cloud metadata)"),
    (_V4("172.16.0.0/12"), "private (RFC 1918)"),
    (_V4("192.0.0.0/24"), "IETF protocol assignment"),
    (_V4("192.0.2.0/24"), "documentation"),
    (_V4("192.88.99.0/24"), "6to4 relay anycast"),
    (_V4("192.168.0.0/16"), "private (RFC 1918)"),
    (_V4("198.18.0.0/15"), "benchmarking"),
    (_V4("198.51.100.0/24"), "documentation"),
    (_V4("203.0.113.0/24"), "documentation"),
    (_V4("224.0.0.0/4"), "multicast"),
    (_V4("255.255.255.255/32"), "broadcast"),
    (_V4("240.0.0.0/4"), "reserved"),
)

REFUSED_IPV6: tuple[tuple[ipaddress.IPv6Network, str], ...] = (
    (_V6("::/128"), "unspecified"),
    (_V6("::1/128"), "loopback"),
    (_V6("64:ff9b:1::/48"), "local-use NAT64 (RFC 8215)"),
    (_V6("100::/64"), "discard-only"),
    (_V6("2001::/32"), "Teredo tunnel"),
    (_V6("2001:db8::/32"), "documentation"),
    (_V6("3fff::/20"), "documentation"),
    (_V6("fc00::/7"), "unique local (ULA)"),
    (_V6("fe80::/10"), "link-local"),
    (_V6("fec0::/10"), "site-local"),
    (_V6("ff00::/8"), "multicast"),
)

# IPv6 forms that carry an IPv4 address and, through the kernel, a translator or a tunnel,
# reach it.
_IPV4_MAPPED = _V6("::ffff:0:0/96")
_IPV4_COMPATIBLE = _V6("::/96")
_NAT64 = _V6("64:ff9b::/96")
_SIX_TO_FOUR = _V6("2002::/16")
# Everything routable on the IPv6 internet today lies in 2000::/3.
_GLOBAL_UNICAST = _V6("2000::/3")
_LOW_32 = 0xFFFF_FFFF


def refusal_reason(ip: IPAddress) -> str | None:
    """Why `ip` must not be contacted (e.g. "loopback"), or None for a public unicast address."""
    if isinstance(ip, ipaddress.IPv4Address):
        for network, reason in REFUSED_IPV4:
            if ip in network:
                return reason
        # Backstop: anything else Python knows to be non-global (its table grows over time).
        return None if ip.is_global else "non-global"
    ip = ipaddress.IPv6Address(int(ip))  # drop any %scope: ranges compare on the address alone
    for network6, reason in REFUSED_IPV6:
        if ip in network6:
            return reason
    if ip in _IPV4_COMPATIBLE:
        # Deprecated since RFC 4291 and never a legitimate target: refused whatever it embeds.
        return "deprecated IPv4-compatible"
    embedded = _embedded_ipv4(ip)
    if embedded is not None:
        # Judged by the IPv4 address it reaches, so ::ffff:127.0.0.1 is loopback. (The reason
        # is the tenant's to read: it names no address, the embedded one neither.)
        inner = refusal_reason(embedded)
        return None if inner is None else f"{inner}, IPv4 inside IPv6"
    if ip not in _GLOBAL_UNICAST:
        return "non-global (outside 2000::/3)"
    return None if ip.is_global else "non-global"


def _embedded_ipv4(ip: ipaddress.IPv6Address) -> ipaddress.IPv4Address | None:
    if ip in _IPV4_MAPPED or ip in _NAT64:
        return ipaddress.IPv4Address(int(ip) & _LOW_32)
    if ip in _SIX_TO_FOUR:
        return ip.sixtofour
    return None


def parse_address(text: str) -> IPAddress:
    try:
        return ipaddress.ip_address(text)
    except ValueError as exc:
        raise TargetError(f"not an IP address: {text!r}", retryable=False) from exc


def check_addresses(host: str, addresses: Sequence[str], allow_private: bool) -> str:
    """The address to connect to for `host`, given everything its name resolved to.

    Refuses (TargetError, not retryable) if ANY address is refused: an attacker controls which
    of several answers a client would pick, so one bad answer taints the name. With
    `allow_private` (local mode) every address is accepted.
    """
    if not addresses:
        raise TargetError(f"host {host} resolved to no address")
    for text in addresses:
        ip = parse_address(text)
        reason = None if allow_private else refusal_reason(ip)
        if reason is not None:
            # The run's error, which its tenant reads, does not say which address: that would
            # map the operator's internal names to their addresses. The operator's log does.
            logger.warning(
                "target address refused", extra={"host": host, "address": text, "reason": reason}
            )
            where = (
                f"{host} ({reason})"
                if host == text
                else f"{host} resolves to a non-public address ({reason})"
            )
            raise TargetError(
                f"refused: {where}; duetime only delivers to public addresses",
                retryable=False,
            )
    return addresses[0]


def resolve_host(host: str, port: int) -> list[str]:
    """Every address `host` resolves to, in the system's preference order, without duplicates.

    Module-level so that tests can replace it (monkeypatch) and run without DNS.
    """
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, proto=socket.IPPROTO_TCP)
    except (socket.gaierror, UnicodeError) as exc:
        raise TargetError(f"could not resolve host {host}: {exc}") from exc
    return list(dict.fromkeys(str(info[4][0]) for info in infos))
