"""What the console shows of hostile or awkward data, in headless Chromium against `duetime
local`: bidirectional controls in a payload, an HTTP target's credentials, long unbroken
values, a tenant name outside ASCII, and an API answer that is not JSON. Found by an outside
audit of the console (2026-11-30); each test fails on the console before it."""

from __future__ import annotations

import json
import time
from typing import Any

import jwt
import pytest

from duetime.local.keys import load_or_create_key
from tests.browser.conftest import Page
from tests.e2e.conftest import Stack

pytestmark = pytest.mark.slow
RLO = "\u202e"


class Utf8(json.JSONEncoder):
    def __init__(self, **options: Any) -> None:
        super().__init__(
            **{**options, "ensure_ascii": False}
        )  # RIGHT-TO-LEFT OVERRIDE: "\u202e0001 USD" is drawn as "DSU 1000"


@pytest.fixture(scope="module", autouse=True)
def signed_in(page: Page, stack: Stack) -> None:
    page.sign_in(stack.token("tenant-a"))


def create(stack: Stack, body: dict[str, Any]) -> str:
    created = stack.call("POST", "/jobs", {"schedule": {"cron": "0 9 * * *"}, **body})
    assert created.status == 201, created.body
    return str(created.body["id"])


def test_a_payload_s_bidirectional_controls_are_shown_escaped(page: Page, stack: Stack) -> None:
    job_id = create(
        stack,
        {
            "payload": {"amount": f"{RLO}0001 USD"},
            "target": {"type": "handler", "name": "duetime.noop"},
        },
    )
    page.open(f"#/jobs/{job_id}")
    shown = page.find("#job-payload").text
    assert RLO not in shown
    assert '"amount":"\\u202e0001 USD"' in shown

    page.open(f"#/jobs/{job_id}/edit")
    box = page.find("textarea[name=payload]")
    assert box.get_attribute("value") == '{"amount":"\\u202e0001 USD"}'  # the same JSON


def test_an_http_target_s_header_values_are_hidden_on_its_page(page: Page, stack: Stack) -> None:
    secret = "Bearer s3cret-of-the-tenant"
    target = {
        "type": "http",
        "url": "https://hooks.example/x",
        "headers": {"Authorization": secret},
    }
    job_id = create(stack, {"target": target})
    page.open(f"#/jobs/{job_id}")
    shown = page.find("#job-target").text
    assert '"Authorization":"••••••"' in shown
    assert "s3cret" not in page.find("body").text


def test_long_unbroken_values_do_not_widen_the_page(page: Page, stack: Stack) -> None:
    job_id = create(
        stack,
        {
            "name": "n" * 128,
            "tags": {"k": "v" * 256},
            "target": {"type": "http", "url": "https://hooks.example/" + "p" * 1500},
        },
    )
    for view in (f"#/jobs/{job_id}", "#/jobs"):
        page.open(view)
        page.find(f"#job-status, tr[data-job-id='{job_id}']")
        widths = page.driver.execute_script(
            "return [document.documentElement.scrollWidth, window.innerWidth]"
        )
        assert widths[0] <= widths[1], (view, widths)


def test_a_tenant_outside_ascii_is_named_as_it_is(page: Page, stack: Stack) -> None:
    # The token's claims were decoded as Latin-1: "Zürich-Ops" showed as "ZÃ¼rich-Ops".
    key, _ = load_or_create_key(stack.state_dir)
    now = int(time.time())
    claims = {"iss": "duetime-local", "aud": "duetime", "sub": "Zürich-Ops", "iat": now}
    # As an identity provider writes it: UTF-8 in the JSON, not `\u00fc` escapes.
    token = jwt.encode({**claims, "exp": now + 600}, key, algorithm="HS256", json_encoder=Utf8)
    try:
        page.open()
        page.driver.execute_script("sessionStorage.clear()")
        page.open()
        area = page.find("#token")
        area.clear()
        area.send_keys(token)
        page.find("#signin button[type=submit]").click()
        page.until(lambda: page.find("#who-tenant").text == "Signed in as Zürich-Ops")
    finally:
        page.sign_in(stack.token("tenant-a"))


def test_a_401_that_is_not_json_signs_out_and_says_why(page: Page, stack: Stack) -> None:
    # A proxy's HTML 401 threw the parser's words ("Unexpected token '<'") and signed nobody
    # out; and after a JSON 401, the view's own "HTTP 401" replaced the sign-out's reason.
    page.open("#/jobs")
    page.find("#jobs")
    page.driver.execute_script(
        """
        const original = window.fetch;
        window.fetch = async (path, init) => {
          if (String(path).startsWith("/jobs")) {
            window.fetch = original;
            return new Response("<html><body>401 Authorization Required</body></html>",
              { status: 401, headers: { "Content-Type": "text/html" } });
          }
          return original(path, init);
        };
        location.hash = "#/jobs?status=paused";
        """
    )
    notice = page.find("#notice .notice")
    page.until(lambda: "sign in again" in page.find("#notice .notice").text)
    assert "Unexpected token" not in page.find("body").text
    assert page.driver.execute_script("return sessionStorage.getItem('duetime.token')") is None
    assert notice.is_displayed()
    page.sign_in(stack.token("tenant-a"))


def test_a_cron_in_words_follows_the_day_rule(page: Page) -> None:
    # Found by an outside audit (2026-12-01): "0 9 13 * 5" read "on Friday on day 13 of the
    # month", Friday the 13th, while it runs every Friday and every 13th (docs/schedules.md,
    # Vixie cron); `?` and the day extensions were shown raw ("on day ? of the month", "on 5L").
    page.open("#/jobs")
    page.find("#jobs")
    said = page.driver.execute_async_script(
        """const [crons, done] = arguments;
        import('/console/format.js')
          .then((f) => done(crons.map(f.describeCron)), (e) => done(String(e)));""",
        ["0 9 13 * 5", "0 9 ? * 1", "0 0 */2 * 1", "0 18 L * 5L", "* 9 * * *"],
    )
    assert said == [
        "at 09:00 on Friday or on day 13 of the month",
        "at 09:00 on Monday",
        "at 00:00 on Monday on day every 2 of the month",
        'at 18:00, cron "0 18 L * 5L"',
        "every minute of hour 9",
    ]
