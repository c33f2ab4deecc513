"""SSRF at create and PATCH: a job whose URL names, literally, an address the worker would
refuse (or plain http where https is required) is a `400` naming `target.url`, not a `201`
whose every run fails. Names are judged by the worker when it resolves them (their answers
may change): tests/security/test_ssrf.py. The local stack allows private targets and http."""

from __future__ import annotations

import dataclasses

import pytest

from duetime.entrypoints import api as api_handler
from duetime.wiring import build
from tests.integration import test_api
from tests.integration.test_api import Api

api = test_api.api  # the fixture: the API handler over the moto engine


@pytest.fixture
def deployed(api: Api) -> Api:
    """The API of a deployment with duetime's defaults: https only, no private targets."""
    settings = dataclasses.replace(
        api.engine.aws.settings, require_https=True, allow_private_targets=False
    )
    parts = build(settings, api.engine.aws.session, jitter=lambda: 0.5)
    api.monkeypatch.setattr(api_handler, "components", lambda: parts)
    api_handler.resolver.cache_clear()
    return api


def http_job(url: str) -> dict[str, object]:
    return {"schedule": {"delay_seconds": 60}, "target": {"type": "http", "url": url}}


@pytest.mark.parametrize(
    ("url", "reason"),
    [
        ("https://169.254.169.254/latest/meta-data/", "link-local"),
        ("https://127.0.0.1:8443/", "loopback"),
        ("https://2130706433/", "loopback"),  # 127.0.0.1 as one number
        ("https://0x7f.1/", "loopback"),
        ("https://017700000001/", "loopback"),  # octal
        ("https://10.1.2.3/hook", "private"),
        ("https://[::1]/", "loopback"),
        ("https://[::ffff:192.168.0.1]/", "private"),
        ("https://[fd00::1]/", "unique local"),
        ("https://localhost/", "loopback"),
        ("https://LocalHost./", "loopback"),
        ("https://api.localhost/", "loopback"),
        ("https://0.0.0.0/", "unspecified"),
        ("https://127.0.0.1./", "loopback"),  # a trailing dot
        ("https://\uff4c\uff4f\uff43\uff41\uff4c\uff48\uff4f\uff53\uff54/", "loopback"),
        ("https://\uff11\uff12\uff17.0.0.1/", "loopback"),  # full-width digits: 127.0.0.1
        ("https://127\u30020\u30020\u30021/", "loopback"),  # ideographic full stops
    ],
)
def test_a_literal_internal_address_is_a_400_on_target_url(
    deployed: Api, url: str, reason: str
) -> None:
    reply = deployed.call("POST", "/jobs", http_job(url))

    assert reply.status == 400
    assert reply.error["field"] == "target.url"
    assert reason in reply.error["message"]
    assert deployed.job_items() == []


def test_plain_http_is_a_400_on_target_url_where_https_is_required(deployed: Api) -> None:
    reply = deployed.call("POST", "/jobs", http_job("http://hooks.example.com/plain"))

    assert (reply.status, reply.error["field"]) == (400, "target.url")
    assert "https" in reply.error["message"]
    assert deployed.job_items() == []


@pytest.mark.parametrize(
    "url",
    [
        "https://hooks.example.com/x",  # a name: judged by the worker once resolved
        "https://93.184.216.34/x",
        "https://[2606:4700::1111]/x",
        "https://localhost.example.com/x",
        "https://1.2.3.4.nip.io/x",
    ],
)
def test_a_public_address_or_a_name_is_taken(deployed: Api, url: str) -> None:
    assert deployed.call("POST", "/jobs", http_job(url)).status == 201


def test_a_patch_to_an_internal_address_is_refused_and_the_job_kept(deployed: Api) -> None:
    job = deployed.call("POST", "/jobs", http_job("https://hooks.example.com/x")).json

    reply = deployed.call(
        "PATCH", f"/jobs/{job['id']}", {"target": {"type": "http", "url": "https://10.0.0.1/"}}
    )

    assert (reply.status, reply.error["field"]) == (400, "target.url")
    kept = deployed.call("GET", f"/jobs/{job['id']}").json
    assert kept["target"]["url"] == "https://hooks.example.com/x"
    assert kept["version"] == job["version"]


def test_the_local_stack_s_settings_take_both(api: Api) -> None:
    # The tests' engine runs as the local stack does: private targets and http allowed.
    assert api.call("POST", "/jobs", http_job("http://127.0.0.1:8080/hook")).status == 201


def test_a_batch_item_naming_an_internal_address_is_refused_alone(deployed: Api) -> None:
    jobs = [http_job("https://hooks.example.com/x"), http_job("https://169.254.169.254/")]

    reply = deployed.call("POST", "/jobs/batch", {"jobs": jobs})

    first, second = reply.json["items"]
    assert first["status"] == 201
    assert (second["status"], second["error"]["field"]) == (400, "target.url")
    assert len(deployed.job_items()) == 1
