"""A webhook receiver for trying duetime locally: prints each delivery and answers 200.

    python3 scripts/webhook_echo.py [--port 9999] [--fail-first N]

`--fail-first N` answers 500 to the first N requests of each path, to watch retries.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
import time
from collections import Counter
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=9999)
    parser.add_argument("--fail-first", type=int, default=0)
    args = parser.parse_args()
    if not 0 <= args.port <= 65535:
        parser.error("--port must be from 0 to 65535")
    sys.stdout.reconfigure(line_buffering=True)  # type: ignore[attr-defined]
    seen: Counter[str] = Counter()

    class Echo(BaseHTTPRequestHandler):
        def __getattr__(self, name: str) -> object:
            if name.startswith("do_"):  # any method
                return self.deliver
            raise AttributeError(name)

        def deliver(self) -> None:
            body = self.rfile.read(int(self.headers.get("content-length") or 0))
            seen[self.path] += 1
            status = 500 if seen[self.path] <= args.fail_first else 200
            # duetime's headers, and its Standard Webhooks signature (scripts/verify_webhook.py
            # checks one)
            prefixes = ("duetime-", "webhook-")
            ids = {k: v for k, v in self.headers.items() if k.lower().startswith(prefixes)}
            now = time.time()
            stamp = time.strftime("%H:%M:%S", time.gmtime(now)) + f".{int(now * 1000) % 1000:03d}Z"
            text = body.decode(errors="replace")
            print(f"{stamp} {self.command} {self.path} -> {status} {json.dumps(ids)} {text}")
            self.send_response(status)
            self.send_header("content-length", "0")
            self.end_headers()

        def log_message(self, *_: object) -> None:
            pass

    try:
        server = ThreadingHTTPServer(("127.0.0.1", args.port), Echo)
    except OSError as exc:
        parser.exit(1, f"webhook_echo: cannot listen on 127.0.0.1:{args.port}: {exc.strerror}\n")
    print(f"listening on http://127.0.0.1:{args.port} (Ctrl-C stops)")
    with contextlib.suppress(KeyboardInterrupt):
        server.serve_forever()


if __name__ == "__main__":
    main()
