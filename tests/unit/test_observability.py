"""Observability helpers for multi-threaded hosts."""

from __future__ import annotations

from duetime.observability import metrics, serialized_metrics


def test_metrics_stay_serialized_until_the_last_threaded_host_exits() -> None:
    provider = metrics.provider
    with serialized_metrics():
        wrapped = provider.add_metric
        with serialized_metrics():
            pass
        assert provider.add_metric is wrapped  # the inner exit kept the outer guard
    assert "add_metric" not in vars(provider)
