"""The local gateway under a burst of concurrent clients: its listen backlog holds them all,
so none is refused or reset (Python's default backlog of 5 reset one of 16 clients)."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from duetime.local.gateway import Gateway

KEY = b"k" * 48
CLIENTS = 64


def _health(_event: dict[str, Any], _context: Any) -> dict[str, Any]:
    return {"statusCode": 200, "headers": {"content-type": "application/json"}, "body": "{}"}


@pytest.fixture
def bound_gateway() -> Iterator[Gateway]:
    """A gateway listening but not yet accepting: connections wait in its backlog."""
    gateway = Gateway(_health, KEY, port=0)
    try:
        yield gateway
    finally:
        gateway.stop()


def _connect(port: int) -> socket.socket:
    # A SYN dropped by a full accept queue is retried after 1 s: the timeout catches it.
    return socket.create_connection(("127.0.0.1", port), timeout=0.5)


def _ask_health(sock: socket.socket) -> bytes:
    sock.settimeout(10)
    sock.sendall(b"GET /health HTTP/1.1\r\nHost: local\r\nConnection: close\r\n\r\n")
    chunks = []
    while chunk := sock.recv(65_536):
        chunks.append(chunk)
    sock.close()
    return b"".join(chunks)


def test_given_64_clients_connecting_before_any_is_accepted_then_every_one_is_answered(
    bound_gateway: Gateway,
) -> None:
    # Given 64 connections made while the gateway accepts none (all in the listen backlog)
    sockets = [_connect(bound_gateway.port) for _ in range(CLIENTS)]

    # When the gateway starts serving and all 64 send a request at once
    bound_gateway.start()
    with ThreadPoolExecutor(CLIENTS) as pool:
        answers = list(pool.map(_ask_health, sockets))

    # Then every client gets its 200: no refusal, no reset, no timeout
    assert [a.split(b"\r\n", 1)[0] for a in answers] == [b"HTTP/1.1 200 OK"] * CLIENTS


def test_given_64_clients_at_once_on_a_serving_gateway_then_none_gets_a_connection_error(
    bound_gateway: Gateway,
) -> None:
    bound_gateway.start()

    def client(_: int) -> bytes:
        return _ask_health(_connect(bound_gateway.port))

    with ThreadPoolExecutor(CLIENTS) as pool:
        answers = list(pool.map(client, range(CLIENTS)))

    assert all(a.startswith(b"HTTP/1.1 200 OK\r\n") for a in answers)
