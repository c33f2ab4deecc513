"""Which IP addresses a job's HTTP target may not reach, and why (a pure table): the worker's
SSRF guard (duetime.targets.address_guard) refuses them after it resolves a host, and a job
whose URL names one literally is refused at create and PATCH (duetime.services.submission),
unless the deployment allows private targets (the local stack)."""

from __future__ import annotations

import ipaddress
import re
import socket
from urllib.parse import urlsplit

from duetime.domain.urls import a_label

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


# A literal IPv4 host in any spelling the resolver takes (`127.1`, `0x7f.0.0.1`, `2130706433`).
_IPV4_SPELLING = re.compile(r"(?:0[xX][0-9A-Fa-f]*|[0-9]+)(?:\.(?:0[xX][0-9A-Fa-f]*|[0-9]+)){0,3}")


def literal_refusal(host: str) -> str | None:
    """Why a URL's host (as urlsplit's `hostname` gives it) names an address that must not be
    reached without resolving anything, or None: an IP literal refused by `refusal_reason`,
    or a `localhost` name (RFC 6761: always the loopback). Other names are judged by the
    worker once resolved, as their answers may change. Judged in the form the worker sends
    (its A-label: `ｌｏｃａｌｈｏｓｔ` and `１２７.０.０.１` are `localhost` and `127.0.0.1`)."""
    try:
        host = host if ":" in host else a_label(host)
    except ValueError:  # not a name the worker could send either (IDNA's deviations)
        return None
    name = host.rstrip(".").lower()
    if name == "localhost" or name.endswith(".localhost"):
        return "loopback"
    try:
        ip: IPAddress = ipaddress.IPv6Address(host) if ":" in host else _ipv4(name)
    except (ValueError, OSError):
        return None
    return refusal_reason(ip)


def _ipv4(host: str) -> ipaddress.IPv4Address:
    if not _IPV4_SPELLING.fullmatch(host):
        raise ValueError(host)
    return ipaddress.IPv4Address(socket.inet_aton(host))  # OSError: not an address


def url_refusal(url: str, *, require_https: bool, allow_private: bool) -> str | None:
    """Why a deployment's workers would refuse an HTTP target's URL (already valid) for good,
    whatever its host resolves to, or None: checked at create and PATCH, so such a job is a
    `400` rather than one whose every run fails (until 2026-11-30 it was)."""
    parts = urlsplit(url)
    if require_https and parts.scheme.lower() != "https":
        return "must use https on this deployment (plain http is refused)"
    reason = None if allow_private else literal_refusal(parts.hostname or "")
    if reason is not None:
        return f"names a {reason} address, which this deployment does not call"
    return None
