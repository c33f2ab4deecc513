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

from duetime.domain.addresses import IPAddress, refusal_reason
from duetime.domain.invocation import TargetError
from duetime.observability import logger


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
