#!/usr/bin/env python3
"""Verify duetime's webhook signatures (Standard Webhooks), with the standard library only.

Copy `verify` into a receiver, or run this file as a tiny receiver that checks every request:

    python3 scripts/verify_webhook.py --secret whsec_...        # or DUETIME_WEBHOOK_SECRET=...
    python3 scripts/verify_webhook.py --port 9998 --tolerance-seconds 300

It answers 204 to a request whose signature verifies and 401 (with the reason) otherwise, and
prints one line per request. Get the secret with `GET /webhook-secret` (docs/api.md).

What is checked (docs/targets.md, "Signatures"):
- `webhook-timestamp` is within `tolerance_seconds` of now (replayed old requests fail);
- one of the space-separated `v1,<base64>` entries of `webhook-signature` equals
  base64(HMAC-SHA256(key, f"{webhook-id}.{webhook-timestamp}.{body}")), where the key is the
  base64-decoded part of the secret after `whsec_`, and the body is the raw bytes received.
"""

from __future__ import annotations

import argparse
import base64
import binascii
import hashlib
import hmac
import math
import os
import sys
import time
from collections.abc import Iterable, Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

SECRET_PREFIX = "whsec_"
# A delivery is at most a 256 KiB payload in its envelope: a request over 1 MiB is no delivery.
MAX_BODY_BYTES = 1 << 20


class WebhookVerificationError(Exception):
    """The request is not a genuine, fresh delivery."""


def verify(
    secret: str | Iterable[str],
    headers: Mapping[str, str],
    body: bytes,
    tolerance_seconds: float = 300,
    *,
    now: float | None = None,
) -> None:
    """Return if the request was signed with `secret` (or, during a rotation, with any of
    several secrets), at most `tolerance_seconds` ago or ahead; raise otherwise.

    `headers` is any mapping of header names to values, case-insensitive names (an
    `http.client.HTTPMessage`, a dict, a framework's header object). `body` is the raw body
    exactly as received: b"" when there is none. Parse the JSON only after verifying.
    """
    lowered = {name.lower(): value for name, value in headers.items()}
    msg_id = lowered.get("webhook-id")
    timestamp = lowered.get("webhook-timestamp")
    signatures = lowered.get("webhook-signature")
    if not msg_id or not timestamp or not signatures:
        raise WebhookVerificationError("missing webhook-id, webhook-timestamp or -signature")
    try:
        sent = int(timestamp)
    except ValueError:
        raise WebhookVerificationError("webhook-timestamp is not an integer") from None
    current = time.time() if now is None else now
    if not 0 <= tolerance_seconds < math.inf:  # NaN or infinity would take any timestamp
        raise ValueError("tolerance_seconds must be a finite number of seconds, 0 or more")
    if abs(current - sent) > tolerance_seconds:
        raise WebhookVerificationError("webhook-timestamp is outside the tolerance")
    content = f"{msg_id}.{sent}.".encode() + body
    secrets = [secret] if isinstance(secret, str) else list(secret)
    expected = [
        base64.b64encode(hmac.new(_key(s), content, hashlib.sha256).digest()) for s in secrets
    ]
    for entry in signatures.split():
        version, _, signature = entry.partition(",")
        if version != "v1":
            continue  # a scheme this receiver does not know
        if any(hmac.compare_digest(signature.encode(), e) for e in expected):
            return
    raise WebhookVerificationError("no signature matches")


def _key(secret: str) -> bytes:
    try:
        return base64.b64decode(secret.removeprefix(SECRET_PREFIX), validate=True)
    except (binascii.Error, ValueError):
        raise ValueError("the secret is not whsec_<base64>") from None


def handler(secret: str, tolerance_seconds: float) -> type[BaseHTTPRequestHandler]:
    """The request handler that verifies every delivery (401 when its signature fails, 400
    when its Content-Length is not a length up to MAX_BODY_BYTES, 204 when it is verified)."""

    class Handler(BaseHTTPRequestHandler):
        def _handle(self) -> None:
            length = self.headers.get("Content-Length") or "0"
            if not length.isdecimal() or int(length) > MAX_BODY_BYTES:
                self._reply(400, f"Content-Length must be 0 to {MAX_BODY_BYTES} bytes")
                return
            body = self.rfile.read(int(length))
            try:
                verify(secret, self.headers, body, tolerance_seconds)
            except WebhookVerificationError as exc:
                print(f"REJECTED {self.command} {self.path}: {exc}", flush=True)
                self._reply(401, str(exc))
                return
            run_id = self.headers.get("webhook-id")
            print(f"verified {self.command} {self.path} run {run_id}: {body[:200]!r}", flush=True)
            self.send_response(204)
            self.end_headers()

        def _reply(self, status: int, text: str) -> None:
            reply = text.encode()
            self.send_response(status)
            self.send_header("Content-Type", "text/plain; charset=utf-8")
            self.send_header("Content-Length", str(len(reply)))
            self.end_headers()
            self.wfile.write(reply)

        do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = _handle

        def log_message(self, format: str, *args: object) -> None:
            pass

    return Handler


def serve(secret: str, host: str, port: int, tolerance_seconds: float) -> None:
    server = ThreadingHTTPServer((host, port), handler(secret, tolerance_seconds))
    print(f"verifying deliveries on http://{host}:{server.server_address[1]}", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--secret", default=os.environ.get("DUETIME_WEBHOOK_SECRET", ""))
    parser.add_argument("--host", default="127.0.0.1")
    # 9998: beside scripts/webhook_echo.py on 9999 (README, docs/targets.md)
    parser.add_argument("--port", type=int, default=9998)
    parser.add_argument("--tolerance-seconds", type=float, default=300)
    args = parser.parse_args(argv)
    if not args.secret.startswith(SECRET_PREFIX):
        parser.error("--secret (or DUETIME_WEBHOOK_SECRET) must be a whsec_... secret")
    try:
        _key(args.secret)
    except ValueError as exc:
        parser.error(f"--secret: {exc}")
    if not 0 <= args.tolerance_seconds < math.inf:
        parser.error("--tolerance-seconds must be a finite number of seconds, 0 or more")
    if not 0 <= args.port <= 65535:
        parser.error("--port must be from 0 to 65535")
    try:
        serve(args.secret, args.host, args.port, args.tolerance_seconds)
    except OSError as exc:
        parser.exit(
            1, f"verify_webhook: cannot listen on {args.host}:{args.port}: {exc.strerror}\n"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
