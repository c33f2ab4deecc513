"""Through the API: every input the outside contract test found accepted (201) and then failing
at delivery, or slipping past a check, is a 400 whose JSON body names the field, and nothing is
stored. (The domain's tests, tests/unit/test_target_validation_strict.py and
tests/unit/test_job_text_validation.py, cover the rules one by one.)"""

from __future__ import annotations

from typing import Any

import pytest

from tests.integration.test_api import Api

HANDLER = {"type": "handler", "name": "test.record"}
ACCOUNT = "us-east-1:123456789012"


@pytest.mark.parametrize(
    ("fields", "field"),
    [
        (
            {"target": {"type": "http", "url": "http://127.0.0.1:18099/a\r\nX-Injected: yes"}},
            "target.url",
        ),
        ({"target": {"type": "http", "url": "http://x y/"}}, "target.url"),
        ({"target": {"type": "http", "url": "https://hooks.example.com/\x00"}}, "target.url"),
        (
            {
                "target": {
                    "type": "http",
                    "url": "https://hooks.example.com/",
                    "headers": {"X-Key": "a\u2028b"},
                }
            },
            "target.headers.X-Key",
        ),
        (
            {
                "target": {
                    "type": "http",
                    "url": "https://hooks.example.com/",
                    "headers": {"X-Key": "a\x00b"},
                }
            },
            "target.headers.X-Key",
        ),
        (
            {
                "target": {
                    "type": "http",
                    "url": "https://hooks.example.com/",
                    "headers": {"X-Key": "a\x7fb"},
                }
            },
            "target.headers.X-Key",
        ),
        (
            {
                "target": {
                    "type": "lambda",
                    "function_arn": f"arn:aws:lambda:{ACCOUNT}:function:%64uetime-worker",
                }
            },
            "target.function_arn",
        ),
        (
            {
                "target": {
                    "type": "eventbridge",
                    "source": "acme",
                    "detail_type": "d",
                    "event_bus": f"arn:aws:events:{ACCOUNT}:event-bus/%64uetime-bus",
                }
            },
            "target.event_bus",
        ),
        (
            {
                "target": {
                    "type": "sqs",
                    "queue_url": "https://sqs.us-east-1.amazonaws.com/123456789012/"
                    "%2564uetime-lambda-normal",
                }
            },
            "target.queue_url",
        ),
        ({"name": "report\x00"}, "name"),
        ({"name": "invoice\u202efdp.exe"}, "name"),
        ({"description": "a\u2066b"}, "description"),
        ({"tags": {"team": "ops\u202e"}}, "tags.team"),
    ],
)
def test_a_refused_input_is_a_400_naming_its_field_and_stores_nothing(
    api: Api, fields: dict[str, Any], field: str
) -> None:
    body = {"schedule": {"delay_seconds": 60}, "target": HANDLER, **fields}
    reply = api.call("POST", "/jobs", body)
    assert reply.status == 400, reply.json
    assert reply.error["code"] == "invalid"
    assert reply.error["field"] == field
    assert api.job_items() == []


def test_ordinary_text_emoji_and_a_multiline_description_are_accepted(api: Api) -> None:
    job = api.create(
        {
            "schedule": {"delay_seconds": 60},
            "name": "deploy \U0001f469\u200d\U0001f4bb caf\u00e9",
            "description": "Closes the day.\n\tThen reports.",
            "tags": {"team": "\u05d3\u05d5\u05d7\u200f"},
        }
    )
    assert job["name"] == "deploy \U0001f469\u200d\U0001f4bb caf\u00e9"
    assert job["description"] == "Closes the day.\n\tThen reports."
