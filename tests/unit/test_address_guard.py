"""The SSRF guard: which addresses are refused, and that the executor connects to the address it
checked. No real network: the only sockets opened are on loopback."""

from __future__ import annotations

import http.server
import io
import json
import re
import socket
import threading
from collections.abc import Iterator

import pytest

from duetime.domain.targets import HttpTarget
from duetime.targets import Invocation, TargetError, TargetExecutor, address_guard, check_addresses

REFUSED = [
    ("127.0.0.1", "loopback"),
    ("127.255.255.254", "loopback"),
    ("10.1.2.3", "private"),
    ("172.16.0.1", "private"),
    ("172.31.255.255", "private"),
    ("192.168.1.1", "private"),
    ("100.64.0.1", "carrier-grade NAT"),
    ("169.254.169.254", "link-local"),  # EC2 instance metadata
    ("169.254.170.2", "link-local"),  # ECS task credentials
    ("224.0.0.1", "multicast"),
    ("0.0.0.0", "unspecified"),
    ("255.255.255.255", "broadcast"),
    ("240.0.0.1", "reserved"),
    ("192.0.2.1", "documentation"),
    ("198.18.0.1", "benchmarking"),
    ("::1", "loopback"),
    ("::", "unspecified"),
    ("fc00::1", "unique local"),
    ("fd12::1", "unique local"),
    ("fe80::1", "link-local"),
    ("fe80::1%1", "link-local"),
    ("ff02::1", "multicast"),
    ("2001:db8::1", "documentation"),
    ("::ffff:127.0.0.1", "loopback, IPv4 inside IPv6"),
    ("::ffff:10.0.0.1", "private (RFC 1918), IPv4 inside IPv6"),
    ("::ffff:169.254.169.254", "link-local"),
    ("::7f00:1", "IPv4-compatible"),
    ("::a00:1", "IPv4-compatible"),
    ("64:ff9b::a00:1", "private (RFC 1918), IPv4 inside IPv6"),  # NAT64
    ("64:ff9b::7f00:1", "loopback"),
    ("64:ff9b:1::1", "local-use NAT64"),
    ("2002:a9fe:a9fe::1", "link-local (cloud metadata), IPv4 inside IPv6"),  # 6to4
    ("2001::1", "Teredo"),
]

ACCEPTED = [
    "93.184.216.34",
    "8.8.8.8",
    "2606:4700::1111",
    "::ffff:93.184.216.34",  # mapped forms of public addresses reach the same public host
    "64:ff9b::5db8:d822",  # NAT64 of 93.184.216.34, as DNS64 hands out on IPv6-only networks
]


@pytest.mark.parametrize(("address", "reason"), REFUSED)
def test_given_a_refused_address_when_checked_then_it_is_refused_for_good_with_its_reason(
    address: str, reason: str, logged: io.StringIO
) -> None:
    with pytest.raises(TargetError) as caught:
        check_addresses("evil.example", [address], allow_private=False)

    assert not caught.value.retryable
    assert reason in str(caught.value)
    # The run's error (the tenant's to read) does not map the name to an internal address,
    # nor to the IPv4 address an IPv6 one carries; the operator's log does.
    assert address not in str(caught.value)
    assert not re.search(r"\d+\.\d+\.\d+\.\d+|[0-9a-f]*:[0-9a-f:]*:", str(caught.value))
    (logged,) = [
        json.loads(line)
        for line in logged.getvalue().splitlines()
        if "target address refused" in line
    ]
    assert (logged["host"], logged["address"]) == ("evil.example", address)
    assert reason in logged["reason"]


@pytest.mark.parametrize("address", ACCEPTED)
def test_given_a_public_address_when_checked_then_it_is_the_address_to_connect_to(
    address: str,
) -> None:
    assert check_addresses("example.com", [address], allow_private=False) == address


@pytest.mark.parametrize("address", ["127.0.0.1", "::1", "10.0.0.5", "169.254.169.254"])
def test_given_local_mode_when_a_private_address_is_checked_then_it_is_accepted(
    address: str,
) -> None:
    assert check_addresses("localhost", [address], allow_private=True) == address


def test_given_a_host_resolving_to_public_and_private_when_checked_then_it_is_refused() -> None:
    with pytest.raises(TargetError, match=r"mixed\.example resolves to a non-public") as caught:
        check_addresses("mixed.example", ["93.184.216.34", "10.0.0.7"], allow_private=False)

    assert not caught.value.retryable
    assert "10.0.0.7" not in str(caught.value)


def test_given_several_public_addresses_when_checked_then_the_first_is_chosen() -> None:
    chosen = check_addresses("example.com", ["93.184.216.34", "2606:4700::1111"], False)

    assert chosen == "93.184.216.34"


def test_given_no_address_when_checked_then_the_failure_is_retryable() -> None:
    with pytest.raises(TargetError, match="no address") as caught:
        check_addresses("gone.example", [], allow_private=False)

    assert caught.value.retryable


def test_given_a_resolver_answer_that_is_not_an_ip_when_checked_then_it_is_refused() -> None:
    with pytest.raises(TargetError, match="not an IP address"):
        check_addresses("odd.example", ["not-an-ip"], allow_private=True)


# --- the executor: resolution happens once, and the connection goes to the checked address ---


def invocation() -> Invocation:
    return Invocation(
        tenant="acme",
        job_id="01JOB",
        run_id="01JOB-1700000000000",
        scheduled_ms=1_700_000_000_000,
        attempt=1,
        payload={"n": 1},
        timeout_seconds=2.0,
    )


class StubResolver:
    """Answers from a script, one answer per call, like a DNS server an attacker controls."""

    def __init__(self, *answers: list[str]) -> None:
        self.answers = list(answers)
        self.calls: list[tuple[str, int]] = []

    def __call__(self, host: str, port: int) -> list[str]:
        self.calls.append((host, port))
        return self.answers[min(len(self.calls), len(self.answers)) - 1]


class Recorder(http.server.BaseHTTPRequestHandler):
    requests: list[dict[str, str]]

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length", "0")))
        self.requests.append({"path": self.path, "host": self.headers.get("Host", "")})
        self.send_response(204)
        self.end_headers()

    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture
def loopback_server() -> Iterator[tuple[int, list[dict[str, str]]]]:
    requests: list[dict[str, str]] = []
    handler = type("Handler", (Recorder,), {"requests": requests})
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    yield server.server_address[1], requests
    server.shutdown()
    server.server_close()


@pytest.fixture
def no_dns(monkeypatch: pytest.MonkeyPatch) -> None:
    """Fail any name lookup that is not an IP literal: a second resolution would show up."""
    real = socket.getaddrinfo

    def numeric_only(host: object, *args: object, **kwargs: object) -> object:
        if isinstance(host, bytes):
            host = host.decode()
        try:
            socket.inet_pton(socket.AF_INET6 if ":" in str(host) else socket.AF_INET, str(host))
        except OSError as exc:
            raise AssertionError(f"unexpected DNS lookup of {host!r}") from exc
        return real(host, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(socket, "getaddrinfo", numeric_only)


def test_given_dns_that_rebinds_when_executed_then_the_checked_address_gets_the_one_request(
    monkeypatch: pytest.MonkeyPatch,
    loopback_server: tuple[int, list[dict[str, str]]],
    no_dns: None,
) -> None:
    # Given a name that first answers 127.0.0.1 (accepted in local mode) and then 127.0.0.2,
    # where nothing listens: a client resolving twice would fail to connect.
    port, requests = loopback_server
    resolver = StubResolver(["127.0.0.1"], ["127.0.0.2"])
    monkeypatch.setattr(address_guard, "resolve_host", resolver)

    # When
    TargetExecutor(allow_private=True).execute(
        HttpTarget(url=f"http://rebind.example:{port}/hook"), invocation()
    )

    # Then the server on the checked address got exactly the one request, still addressed to
    # the original host name, and the name was resolved once.
    assert requests == [{"path": "/hook", "host": f"rebind.example:{port}"}]
    assert resolver.calls == [("rebind.example", port)]


def test_given_dns_answering_public_then_loopback_when_executed_then_only_the_public_one_is_dialled(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Given a rebinding name, and a network on which every connection attempt is recorded and
    # refused (so no packet leaves the machine)
    resolver = StubResolver(["93.184.216.34"], ["127.0.0.1"])
    monkeypatch.setattr(address_guard, "resolve_host", resolver)
    dialled: list[tuple[str, int]] = []

    def refuse(address: tuple[str, int], *args: object, **kwargs: object) -> socket.socket:
        dialled.append(address)
        raise ConnectionRefusedError("refused by test")

    monkeypatch.setattr(socket, "create_connection", refuse)

    # When
    with pytest.raises(TargetError) as caught:
        TargetExecutor().execute(HttpTarget(url="http://rebind.example/hook"), invocation())

    # Then the one connection went to the address that was checked, resolved once
    assert dialled == [("93.184.216.34", 80)]
    assert resolver.calls == [("rebind.example", 80)]
    assert caught.value.retryable  # a refused connection is transient


def test_given_a_name_with_one_private_answer_when_executed_then_nothing_is_dialled(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(
        address_guard, "resolve_host", StubResolver(["93.184.216.34", "169.254.169.254"])
    )
    dialled: list[tuple[str, int]] = []
    monkeypatch.setattr(
        socket, "create_connection", lambda address, *a, **k: dialled.append(address)
    )

    with pytest.raises(TargetError, match=r"cloud metadata") as caught:
        TargetExecutor().execute(HttpTarget(url="https://mixed.example/"), invocation())

    assert not caught.value.retryable
    assert dialled == []


def test_given_an_unreachable_first_address_when_executed_then_the_next_checked_one_is_used(
    monkeypatch: pytest.MonkeyPatch, loopback_server: tuple[int, list[dict[str, str]]]
) -> None:
    # 127.0.0.2 is loopback too, but nothing listens there: like an IPv6 answer on a host
    # without IPv6 connectivity.
    port, requests = loopback_server
    monkeypatch.setattr(address_guard, "resolve_host", StubResolver(["127.0.0.2", "127.0.0.1"]))

    TargetExecutor(allow_private=True).execute(
        HttpTarget(url=f"http://two.example:{port}/"), invocation()
    )

    assert len(requests) == 1


@pytest.mark.parametrize(
    "url",
    [
        "http://127.0.0.1/",
        "http://2130706433/",  # 127.0.0.1 as one decimal number
        "http://0x7f.1/",  # 127.0.0.1 in legacy hex-and-short form
        "http://[::ffff:127.0.0.1]/",
        "http://[::1]/",
        "http://169.254.169.254/latest/meta-data/",
    ],
)
def test_given_a_url_spelling_a_refused_address_when_executed_then_it_is_refused(
    url: str,
) -> None:
    # The real resolver: every spelling is numeric, so no DNS query leaves the machine, and
    # the guard judges what the name resolved to, however it was written.
    with pytest.raises(TargetError, match="refused") as caught:
        TargetExecutor().execute(HttpTarget(url=url), invocation())

    assert not caught.value.retryable


# --- every refused range, at its edges, and its public neighbours ------------------------------

# (range, its first and last address, or a notable one inside). Both ends of each range are
# refused: a guard built from a wrong prefix length misses one of them.
RANGE_EDGES = [
    ("127.0.0.0/8", "127.0.0.0"),
    ("127.0.0.0/8", "127.255.255.255"),
    ("10.0.0.0/8", "10.0.0.0"),
    ("10.0.0.0/8", "10.255.255.255"),
    ("172.16.0.0/12", "172.16.0.0"),
    ("172.16.0.0/12", "172.20.1.1"),
    ("192.168.0.0/16", "192.168.0.0"),
    ("192.168.0.0/16", "192.168.255.255"),
    ("100.64.0.0/10", "100.64.0.0"),
    ("100.64.0.0/10", "100.127.255.255"),
    ("169.254.0.0/16", "169.254.0.1"),
    ("169.254.0.0/16", "169.254.255.255"),
    ("224.0.0.0/4", "239.255.255.250"),  # SSDP
    ("0.0.0.0/8", "0.1.2.3"),
    ("::ffff:0:0/96 loopback", "::ffff:7f00:1"),  # ::ffff:127.0.0.1 written in hex
    ("::ffff:0:0/96 private", "::ffff:192.168.0.1"),
    ("::ffff:0:0/96 private", "::ffff:172.16.0.1"),
    ("::ffff:0:0/96 CGNAT", "::ffff:100.64.0.1"),
    ("::ffff:0:0/96 unspecified", "::ffff:0.0.0.0"),
    ("::ffff:0:0/96 ECS credentials", "::ffff:169.254.170.2"),
    ("fc00::/7", "fdff:ffff:ffff:ffff:ffff:ffff:ffff:ffff"),
    ("fe80::/10", "febf:ffff:ffff:ffff:ffff:ffff:ffff:ffff"),
    ("fec0::/10", "fec0::1"),
    ("ff00::/8", "ff0e::1"),  # global-scope multicast is still multicast
    ("64:ff9b::/96 NAT64 metadata", "64:ff9b::a9fe:a9fe"),
    ("64:ff9b::/96 NAT64 ECS credentials", "64:ff9b::a9fe:aa02"),
    ("2002::/16 6to4 loopback", "2002:7f00:1::"),
    ("2002::/16 6to4 private", "2002:a00:1::1"),
    ("2001:db8::/32", "2001:db8:ffff::1"),
    ("outside 2000::/3", "fbff:ffff::1"),  # Python calls this global; nothing routes it
    ("outside 2000::/3", "fe00::1"),
    ("outside 2000::/3, IPv4-translated (SIIT)", "::ffff:0:a00:1"),
]

# Just outside each range: public, so the guard must not refuse them.
PUBLIC_NEIGHBOURS = [
    "9.255.255.255",
    "11.0.0.0",
    "126.255.255.255",
    "128.0.0.0",
    "172.15.255.255",
    "172.32.0.0",
    "192.167.255.255",
    "192.169.0.0",
    "100.63.255.255",
    "100.128.0.0",
    "169.253.255.255",
    "169.255.0.0",
    "223.255.255.255",
    "2001:4860:4860::8888",
    "2002:5db8:d822::1",  # 6to4 of the public 93.184.216.34
]


@pytest.mark.parametrize(("network", "address"), RANGE_EDGES)
def test_given_an_address_at_the_edge_of_a_refused_range_when_checked_then_it_is_refused(
    network: str, address: str
) -> None:
    with pytest.raises(TargetError, match="refused") as caught:
        check_addresses("edge.example", [address], allow_private=False)

    assert not caught.value.retryable, network


@pytest.mark.parametrize("address", PUBLIC_NEIGHBOURS)
def test_given_a_public_neighbour_of_a_refused_range_when_checked_then_it_is_accepted(
    address: str,
) -> None:
    assert check_addresses("near.example", [address], allow_private=False) == address


# One refused answer among public ones taints the name, wherever it is in the answer and
# whichever family it is in.
REFUSED_PER_RANGE = [
    "127.0.0.1",
    "10.0.0.1",
    "172.16.0.1",
    "192.168.0.1",
    "100.64.0.1",
    "169.254.169.254",
    "169.254.170.2",
    "224.0.0.1",
    "0.0.0.0",
    "::1",
    "::",
    "fd00::1",
    "fe80::1",
    "ff02::1",
    "::ffff:10.0.0.1",
    "::ffff:127.0.0.1",
    "64:ff9b::a00:1",
    "2002:a9fe:a9fe::1",
]
PUBLIC_ANSWERS = ["93.184.216.34", "2606:4700::1111"]


@pytest.mark.parametrize("position", [0, 1, 2])
@pytest.mark.parametrize("bad", REFUSED_PER_RANGE)
def test_given_a_host_with_several_answers_one_refused_when_checked_then_it_is_refused(
    bad: str, position: int
) -> None:
    answers = list(PUBLIC_ANSWERS)
    answers.insert(position, bad)

    with pytest.raises(TargetError) as caught:
        check_addresses("multi.example", answers, allow_private=False)

    assert "multi.example resolves to a non-public address" in str(caught.value)
    assert bad not in str(caught.value)
    assert not caught.value.retryable
