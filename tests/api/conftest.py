"""Fixtures of the HTTP contract tests: the in-process API of tests/integration/test_api.py
(API Gateway payload-2.0 events through the real Lambda handler, on moto)."""

from __future__ import annotations

from tests.integration.conftest import engine  # noqa: F401 - fixtures, re-exported
from tests.integration.test_api import api  # noqa: F401
