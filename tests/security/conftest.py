"""Fixtures of the security tests.

The in-process API (`api`) is the one tests/integration/test_api.py drives: API Gateway
payload-2.0 events through the real Lambda handler, on moto, every reply validated against the
OpenAPI document. (The stateful schemathesis test, which needs the local stack, lives with the
other end-to-end tests in tests/e2e/test_stateful_api.py.)
"""

from __future__ import annotations

from tests.integration.conftest import engine  # noqa: F401 - fixtures, re-exported
from tests.integration.test_api import api  # noqa: F401
