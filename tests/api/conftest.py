"""Fixtures of the HTTP contract tests: the in-process API of tests/integration/test_api.py
(API Gateway payload-2.0 events through the real Lambda handler, on moto)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from duetime.entrypoints import api as api_handler
from duetime.settings import QuotaEnv
from tests.integration.conftest import Engine, engine  # noqa: F401 - fixture, re-exported
from tests.integration.test_api import Api


@pytest.fixture
def api(engine: Engine, monkeypatch: pytest.MonkeyPatch) -> Iterator[Api]:  # noqa: F811
    for name in (*vars(QuotaEnv).values(), "DUETIME_TENANT_CLAIM"):
        if isinstance(name, str) and name.startswith("DUETIME_"):
            monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(api_handler, "components", lambda: engine.parts)
    api_handler.resolver.cache_clear()
    yield Api(engine, monkeypatch)
    api_handler.resolver.cache_clear()
