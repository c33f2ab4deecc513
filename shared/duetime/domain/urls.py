"""The URL of an HTTP target or an SQS queue, as a tenant may give it and as the worker sends
it (duetime.targets.http): what is checked, and the host's A-label form."""

from __future__ import annotations

import ipaddress
import re
import stringprep
import unicodedata
from urllib.parse import SplitResult, urlsplit

from duetime.domain.errors import ValidationError

MAX_URL_CHARS = 2048
# A URL's host as the worker sends it (its IDNA A-label form, `a_label`): DNS labels of
# letters, digits, `-` and `_` (an IPv4 address in any spelling is one too), or a bracketed
# IPv6 address without a zone.
_DNS_HOST = re.compile(r"[A-Za-z0-9_-]+(?:\.[A-Za-z0-9_-]+)*\.?")
_IPV6_HOST = re.compile(r"[0-9A-Fa-f:.]+")
MAX_HOST_CHARS = 254  # 253 and a trailing dot
# ß, final sigma, zero-width non-joiner and joiner (UTS #46's deviations).
_DEVIATIONS = frozenset("\u00df\u03c2\u200c\u200d")


def a_label(hostname: str) -> str:
    """The host as DNS, the Host header and TLS SNI take it: an internationalised name in its
    A-label (`xn--`) form. Python's codec is IDNA 2003, which maps IDNA 2008's four deviation
    characters otherwise than browsers and curl (UTS #46, non-transitional) do: it sends
    `faß.de` to `fass.de` (another domain, where browsers go to `xn--fa-hia.de`), `ς` as `σ`,
    and drops the joiners. A name holding one is a ValueError: give it in its `xn--` form.
    (UnicodeError, also a ValueError: no name, as an empty or too long label.)"""
    encoded = hostname.encode("idna")
    if not hostname.isascii() and _DEVIATIONS & set(
        unicodedata.normalize("NFKC", hostname).lower()
    ):
        raise ValueError(f"IDNA 2003 and 2008 encode {hostname!r} differently")
    return encoded.decode("ascii")


def split_url(url: str, where: str) -> SplitResult:
    """urlsplit, whose ValueError (a bracketed host that is not an IP address, an unclosed
    bracket) is the client's mistake, not a server error."""
    try:
        return urlsplit(url)
    except ValueError:
        raise ValidationError(where, "not a valid URL") from None


def _unsafe_character(text: str) -> str | None:
    """The first space or control character of `text` (urlsplit silently drops tab, CR and LF,
    and http.client refuses the others in a request line), or None. U+FEFF counts as a space,
    as in the OpenAPI document's patterns (ECMA-262's white space): IDNA drops it from a host name
    (until 2026-12-01 accepted, and a validating client refused the job's answers), as does
    any other character IDNA maps to nothing (a soft hyphen, a variation selector: RFC 3454's
    table B.1): the job showed a host the worker did not call."""
    for char in text:
        if char.isspace() or stringprep.in_table_b1(char) or unicodedata.category(char) == "Cc":
            return char
    return None


def checked_url(url: str, where: str, *, strict: bool = True) -> SplitResult:
    """An absolute http(s) URL that the worker's client sends as it is (duetime.targets.http):
    printable ASCII, but for a host name, which may be internationalised (it is sent in its
    IDNA A-label form); no credentials; a port from 0 to 65535. Not `strict` (a stored
    job's): only an absolute http(s) URL."""
    bad = _unsafe_character(url) if strict else None
    if bad is not None:
        raise ValidationError(
            where,
            f"must not contain spaces, control or invisible characters (found U+{ord(bad):04X})",
        )
    parts = split_url(url, where)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValidationError(where, "must be an absolute http(s) URL")
    if not strict:
        return parts
    try:
        port = parts.port  # urlsplit checks the port only when it is read
    except ValueError:
        port = 0
    if port == 0:  # (0 is no port to connect to: it read as the scheme's default)
        raise ValidationError(where, "the port must be a number from 1 to 65535")
    if parts.username or parts.password:
        raise ValidationError(where, "must not carry credentials")
    if not (parts.path + parts.query + parts.fragment).isascii():
        raise ValidationError(
            where, "only the host name may hold non-ASCII characters: percent-encode the rest"
        )
    _host(parts.hostname, where, bracketed="[" in parts.netloc)
    return parts


def _host(hostname: str, where: str, *, bracketed: bool) -> None:
    if bracketed:  # an IPv6 address; urlsplit also takes RFC 3986's IPvFuture, `[v1.name]`
        if "%" in hostname:
            raise ValidationError(where, "an IPv6 address in a URL may not carry a zone")
        if not _IPV6_HOST.fullmatch(hostname) or not _is_ipv6(hostname):
            raise ValidationError(where, "brackets in a URL may hold only an IPv6 address")
        return
    try:
        encoded = a_label(hostname)
    except UnicodeError:
        encoded = ""
    except ValueError:
        raise ValidationError(
            where,
            "this internationalised host name is encoded differently by IDNA 2003 and 2008 "
            "(ß, ς, joiners): give it in its xn-- form",
        ) from None
    if len(encoded) > MAX_HOST_CHARS or not _DNS_HOST.fullmatch(encoded):
        raise ValidationError(where, "the host must be a DNS name or an IP address")


def _is_ipv6(text: str) -> bool:
    try:
        ipaddress.IPv6Address(text)
    except ValueError:
        return False
    return True
