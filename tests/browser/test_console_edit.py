"""Editing a job that changed meanwhile (PATCH with If-Match → 412, the offer to reload), and a
backfill through the job page, in headless Chromium against `duetime local`."""

from __future__ import annotations

import re
import time
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys

from tests.browser.conftest import Page
from tests.e2e.conftest import Stack

# The module's tests share a page (signed in, a job made by the first): they run in file order
# in one process. The full suite's first xdist chunk holds them (tests/api and tests/browser
# sort first, far under the chunk's ~450 tests); a subset under `-n` may split them between
# workers: run the browser tests alone without `-n`.
pytestmark = pytest.mark.slow
TENANT = "tenant-edit"
NOOP = {"type": "handler", "name": "duetime.noop"}


def create(stack: Stack, name: str, schedule: dict[str, object]) -> dict[str, object]:
    created = stack.call(
        "POST", "/jobs", {"name": name, "schedule": schedule, "target": NOOP}, tenant=TENANT
    )
    assert created.status == 201, created.body
    body: dict[str, object] = created.body
    return body


def save_name(page: Page, stack: Stack, job_id: str, name: str) -> dict[str, Any]:
    """Types `name` in the open edit form, saves, and answers the job as stored."""
    return save_field(page, stack, job_id, "#f-name", name)


def save_field(page: Page, stack: Stack, job_id: str, css: str, text: str) -> dict[str, Any]:
    """Types `text` in the open edit form's field `css`, saves, and answers the job as stored."""
    field = page.find(css)
    field.clear()
    field.send_keys(text)
    page.find("#save").click()
    page.until(lambda: page.driver.current_url.endswith(f"#/jobs/{job_id}"))
    stored: dict[str, Any] = stack.call("GET", f"/jobs/{job_id}", tenant=TENANT).body
    return stored


def test_an_edit_after_a_concurrent_change_is_a_conflict_then_goes_through_after_reload(
    page: Page, stack: Stack
) -> None:
    job = create(stack, "edited twice", {"cron": "0 9 * * *"})
    page.sign_in(stack.token(TENANT))
    page.open(f"#/jobs/{job['id']}/edit")
    name = page.find("#f-name")
    assert name.get_attribute("value") == "edited twice"

    # Meanwhile someone else changes the job through the API.
    changed = stack.call(
        "PATCH", f"/jobs/{job['id']}", {"name": "changed meanwhile"}, tenant=TENANT
    )
    assert changed.status == 200, changed.body
    name.clear()
    name.send_keys("mine")
    page.find("#save").click()

    error = page.find("#form-error a")
    message = page.find("#form-error").text
    assert "changed this job since you opened it" in message
    assert "nothing was saved" in message
    assert error.text == "Reload the job"
    page.shot("edit-conflict")
    stored = stack.call("GET", f"/jobs/{job['id']}", tenant=TENANT).body
    assert (stored["name"], stored["version"]) == ("changed meanwhile", changed.body["version"])

    error.click()
    page.until(lambda: page.find("#f-name").get_attribute("value") == "changed meanwhile")
    assert page.texts("#form-error") == [""]
    after = save_name(page, stack, str(job["id"]), "mine after reload")
    assert after["name"] == "mine after reload"
    assert after["version"] == changed.body["version"] + 1


def test_an_edit_keeps_the_payload_and_the_targets_headers_the_form_does_not_change(
    page: Page, stack: Stack
) -> None:
    # Found by review: the payload box opened empty (a <textarea> ignores a `value`
    # attribute), so saving sent `payload: null`; and the target, which an update replaces
    # whole, lost its headers, so renaming a job stripped its Authorization header.
    target = {
        "type": "http",
        "url": "https://hooks.example.com/nightly",
        "headers": {"Authorization": "Bearer s3cret"},
    }
    created = stack.call(
        "POST",
        "/jobs",
        {
            "name": "kept",
            "schedule": {"cron": "0 9 * * *"},
            "target": target,
            "payload": {"report": "daily", "n": 3},
        },
        tenant=TENANT,
    )
    assert created.status == 201, created.body
    job = created.body
    page.sign_in(stack.token(TENANT))
    page.open(f"#/jobs/{job['id']}/edit")
    assert page.find("#f-payload").get_property("value") == '{"report":"daily","n":3}'
    after = save_name(page, stack, job["id"], "renamed")

    assert after["name"] == "renamed"
    assert after["payload"] == {"report": "daily", "n": 3}
    assert after["target"]["headers"] == {"Authorization": "Bearer s3cret"}
    assert after["target"]["url"] == "https://hooks.example.com/nightly"


def test_a_target_moved_to_another_host_does_not_take_its_hidden_headers(
    page: Page, stack: Stack
) -> None:
    # Found by an outside audit: the form keeps an http target's headers, which it does not
    # show, so moving the URL to another host sent its credentials there unseen. As a browser
    # drops Authorization on a redirect to another origin, the edit drops them, and says so.
    target = {
        "type": "http",
        "url": "https://hooks.example.com/nightly",
        "headers": {"Authorization": "Bearer s3cret"},
    }
    body = {"name": "moved", "schedule": {"cron": "0 9 * * *"}, "target": target}
    created = stack.call("POST", "/jobs", body, tenant=TENANT)
    assert created.status == 201, created.body
    job_id = created.body["id"]
    page.sign_in(stack.token(TENANT))

    # Another path on the same host keeps them
    page.open(f"#/jobs/{job_id}/edit")
    url = page.find("#f-target-url")
    url.clear()
    url.send_keys("https://hooks.example.com/weekly")
    page.find("#save").click()
    page.until(lambda: page.driver.current_url.endswith(f"#/jobs/{job_id}"))
    kept = stack.call("GET", f"/jobs/{job_id}", tenant=TENANT).body["target"]
    assert kept["headers"] == {"Authorization": "Bearer s3cret"}
    assert page.find("#notice").text == "Job updated."

    # Another host does not
    page.open(f"#/jobs/{job_id}/edit")
    url = page.find("#f-target-url")
    url.clear()
    url.send_keys("https://elsewhere.example.net/hook")
    page.find("#save").click()
    page.until(lambda: page.driver.current_url.endswith(f"#/jobs/{job_id}"))
    moved = stack.call("GET", f"/jobs/{job_id}", tenant=TENANT).body["target"]
    assert moved["url"] == "https://elsewhere.example.net/hook"
    assert moved.get("headers") in (None, {})
    assert "headers were not kept" in page.find("#notice .notice.ok").text


def test_an_edit_keeps_tags_whose_values_hold_commas_or_spaces(page: Page, stack: Stack) -> None:
    # Found by an outside audit: the tags box split on commas, so saving a job from the
    # console turned {"owners": "alice,bob"} into {"owners": "alice", "bob": ""}.
    tags = {"owners": "alice,bob", "note": " padded ", "team": "core"}
    created = stack.call(
        "POST",
        "/jobs",
        {"name": "tagged", "schedule": {"cron": "0 9 * * *"}, "target": NOOP, "tags": tags},
        tenant=TENANT,
    )
    assert created.status == 201, created.body
    job_id = created.body["id"]
    page.sign_in(stack.token(TENANT))

    # An edit that leaves the tags alone keeps them exactly
    page.open(f"#/jobs/{job_id}/edit")
    assert save_name(page, stack, job_id, "tagged, renamed")["tags"] == tags

    # A tag added on a line of its own: the others are read one per line, commas and all
    page.open(f"#/jobs/{job_id}/edit")
    box = page.find("#f-tags")
    box.send_keys("\nenv:prod")
    page.find("#save").click()
    page.until(lambda: page.driver.current_url.endswith(f"#/jobs/{job_id}"))
    stored = stack.call("GET", f"/jobs/{job_id}", tenant=TENANT).body
    assert stored["tags"] == {
        "owners": "alice,bob",
        "note": "padded",
        "team": "core",
        "env": "prod",
    }


def test_a_backfill_from_the_job_page_shows_the_apis_answer(page: Page, stack: Stack) -> None:
    job = create(stack, "backfilled", {"rate_seconds": 60})
    page.sign_in(stack.token(TENANT))
    page.open(f"#/jobs/{job['id']}")
    now = datetime.now(UTC).replace(microsecond=0)

    # A range ending in the future: the API's error, naming its field, shown on the page.
    page.find("#backfill-from").send_keys(f"{now - timedelta(minutes=5):%Y-%m-%dT%H:%M:%SZ}")
    page.find("#backfill-to").send_keys(f"{now + timedelta(hours=1):%Y-%m-%dT%H:%M:%SZ}")
    page.click("#backfill button[type=submit]")
    refused = page.find("#notice .notice.error")
    assert refused.text.startswith("Backfill (to): must not be in the future")

    # A recent past range: the number of occurrences the API queued (0 or more: the job is new).
    to = page.find("#backfill-to")
    to.clear()
    to.send_keys(f"{now:%Y-%m-%dT%H:%M:%SZ}")
    page.click("#backfill button[type=submit]")
    done = page.find("#notice .notice.ok")
    shown = re.fullmatch(r"Backfill: (\d+) occurrence\(s\) queued\.", done.text)
    assert shown is not None, done.text
    # The API answers the same range the same way once the page's backfill has been sent.
    again = stack.call(
        "POST",
        f"/jobs/{job['id']}/backfill",
        {
            "from": f"{now - timedelta(minutes=5):%Y-%m-%dT%H:%M:%SZ}",
            "to": f"{now:%Y-%m-%dT%H:%M:%SZ}",
        },
        tenant=TENANT,
    )
    assert again.status == 202, again.body
    assert int(shown.group(1)) >= again.body["occurrences"]
    assert page.driver.find_elements(By.CSS_SELECTOR, "#backfill")
    page.shot("job-backfill")

    # A double-click sends one backfill: its button is off while it is on its way (it sent
    # two, the second saying "0 occurrence(s) queued": an outside audit, 2026-12-01).
    page.driver.execute_script("performance.clearResourceTimings()")
    double_click(page, "#backfill button[type=submit]")
    time.sleep(2)  # both answers would be in by now
    sent = page.driver.execute_script(
        "return performance.getEntriesByType('resource')"
        ".filter((e) => e.name.endsWith('/backfill')).length"
    )
    assert sent == 1


def test_a_job_completed_with_runs_to_come_can_be_cancelled(page: Page, stack: Stack) -> None:
    # All its occurrences are handed over at once (within two minutes): `completed`, but its
    # runs not started yet can still be stopped (docs/api.md, cancel).
    start = datetime.now(UTC) + timedelta(seconds=60)
    end = (start + timedelta(seconds=30)).isoformat().replace("+00:00", "Z")
    job = create(
        stack,
        "ending soon",
        {"rate_seconds": 10, "start_at": start.isoformat().replace("+00:00", "Z"), "end_at": end},
    )
    assert stack.call("GET", f"/jobs/{job['id']}", tenant=TENANT).body["status"] == "completed"
    page.sign_in(stack.token(TENANT))
    page.open(f"#/jobs/{job['id']}")
    page.until(lambda: page.texts("#job-status") == ["completed"])
    assert page.texts("[data-action=pause]") == []
    page.click("[data-action=cancel-job]")
    page.driver.switch_to.alert.accept()
    page.until(lambda: page.texts("#job-status") == ["cancelled"])
    assert stack.call("GET", f"/jobs/{job['id']}", tenant=TENANT).body["status"] == "cancelled"


def answered(page: Page, form: str) -> bool:
    """The delay box's error is shown, or the form was left (saved)."""
    shown = page.texts("#f-schedule-delay_seconds-error") != [""]
    return shown or not page.driver.current_url.endswith(form)


def test_an_emptied_or_unreadable_delay_box_is_an_error_at_its_field_not_a_run_now(
    page: Page, stack: Stack
) -> None:
    # Number("") is 0: an emptied delay box (or "1e", which the browser cannot read as a
    # number) sent delay_seconds 0, and a job due in a week ran as the edit was saved.
    job = create(stack, "in a week", {"delay_seconds": 604_800})
    page.sign_in(stack.token(TENANT))
    for typed in ("", "1e"):
        page.open(f"#/jobs/{job['id']}/edit")
        box = page.find("#f-schedule-delay_seconds")
        box.clear()
        box.send_keys(typed)
        page.find("#save").click()
        page.until(lambda: answered(page, f"#/jobs/{job['id']}/edit"), 30)
        stored = stack.call("GET", f"/jobs/{job['id']}", tenant=TENANT).body
        assert (stored["schedule"], stored["status"]) == (job["schedule"], "scheduled")
        assert page.driver.current_url.endswith(
            "/edit"
        )  # not saved: the form stays, with the error
        assert page.find("#f-schedule-delay_seconds").get_attribute("aria-invalid") == "true"
        assert (stored["version"], stored["next_run_at"]) == (job["version"], job["next_run_at"])


def five_instants(page: Page, selector: str) -> list[str | None]:
    """The instants of the 5 occurrences a page lists, once it lists them."""
    page.until(lambda: len(page.driver.find_elements(By.CSS_SELECTOR, selector)) == 5, 30)
    found = page.driver.find_elements(By.CSS_SELECTOR, selector)
    return [element.get_attribute("data-instant") for element in found]


def test_a_rate_jobs_next_occurrences_are_its_own_on_its_page_and_in_its_edit(
    page: Page, stack: Stack
) -> None:
    # The table previewed the schedule as if submitted when the page opened: a rate without
    # start_at is anchored at the job's creation, so the table was off by up to a period.
    job = create(stack, "hourly", {"rate_seconds": 3600})
    first = datetime.fromisoformat(str(job["next_run_at"]).replace("Z", "+00:00"))
    expected = [
        (first + timedelta(hours=k)).isoformat(timespec="milliseconds").replace("+00:00", "Z")
        for k in range(5)
    ]
    time.sleep(1.5)  # a page opened later previewed from its own instant
    page.sign_in(stack.token(TENANT))
    page.open(f"#/jobs/{job['id']}")
    assert five_instants(page, "#occurrences-body tr") == expected
    page.open(f"#/jobs/{job['id']}/edit")
    assert five_instants(page, "#preview li") == expected
    # paused, it has no next occurrences to show
    assert stack.call("POST", f"/jobs/{job['id']}/pause", tenant=TENANT).status == 200
    page.open(f"#/jobs/{job['id']}")
    page.until(lambda: page.texts("#job-status") == ["paused"])
    assert page.driver.find_elements(By.CSS_SELECTOR, "#occurrences") == []


def test_the_zone_box_suggests_zones_and_a_delay_of_0_reads_at_submission(
    page: Page, stack: Stack
) -> None:
    # The box named a datalist that did not exist, and a 0 s delay read "0 days after
    # submission" (found by an outside audit).
    page.sign_in(stack.token(TENANT))
    page.open("#/new")
    page.until(lambda: page.find("#preview-note").text != "")
    options = page.driver.find_elements(By.CSS_SELECTOR, "datalist#zones option")
    values = {o.get_attribute("value") for o in options}
    assert {"UTC", "Europe/Paris", "America/New_York"} <= values
    page.driver.find_element(By.CSS_SELECTOR, "#f-schedule-kind option[value=delay]").click()
    box = page.find("#f-schedule-delay_seconds")
    box.clear()
    box.send_keys("0")
    page.until(lambda: page.find("#preview-note").text.startswith("once, at submission"), 30)


def test_a_payloads_numbers_are_shown_and_kept_exactly_by_an_edit(page: Page, stack: Stack) -> None:
    # Found by an outside audit: every edit sent the payload through JavaScript's doubles, so
    # renaming a job turned 12345678901234567891 into 12345678901234567000 and 1.0 into 1,
    # and its page showed them so.
    raw = b'{"name": "exact", "schedule": {"cron": "0 9 * * *"}, "target": {"type": "handler",'
    raw += b' "name": "duetime.noop"}, '
    raw += b'"payload": {"order_id": 12345678901234567891, "amount": 1.0}}'
    created = stack.call("POST", "/jobs", raw=raw, tenant=TENANT)
    assert created.status == 201, created.body
    job_id = created.body["id"]
    page.sign_in(stack.token(TENANT))
    page.open(f"#/jobs/{job_id}")
    page.until(lambda: "12345678901234567891" in page.find("main").text)
    assert '"amount":1.0' in page.find("main").text

    page.open(f"#/jobs/{job_id}/edit")
    box = page.find("#f-payload").get_property("value")
    assert box == '{"order_id":12345678901234567891,"amount":1.0}'
    after = save_name(page, stack, job_id, "exact-renamed")

    assert after["name"] == "exact-renamed"
    assert after["payload"]["order_id"] == 12345678901234567891
    assert isinstance(after["payload"]["amount"], float)

    # An edit of the payload itself keeps what it does not change exactly too
    page.open(f"#/jobs/{job_id}/edit")
    text = '{"order_id": 98765432109876543210, "amount": 2.50}'
    payload = save_field(page, stack, job_id, "#f-payload", text)["payload"]
    assert payload["order_id"] == 98765432109876543210
    assert payload["amount"] == 2.5


def test_a_double_click_creates_one_job_and_starts_one_run(page: Page, stack: Stack) -> None:
    # Found by an outside audit: the buttons stayed on while their request was on its way,
    # and no Idempotency-Key was sent: a double-click made two jobs, or two runs.
    page.sign_in(stack.token(TENANT))
    page.open("#/new")
    page.find("#f-name").send_keys("double-create")
    page.find("#f-schedule-cron").send_keys("0 9 * * *")
    page.driver.find_element(By.CSS_SELECTOR, "#f-target-type option[value=handler]").click()
    page.find("#f-target-name").send_keys("duetime.noop")
    double_click(page, "#save")
    page.until(lambda: re.search(r"#/jobs/[0-9A-Z]{26}$", page.driver.current_url))
    listed = stack.call("GET", "/jobs", tenant=TENANT).body["items"]
    made = [j for j in listed if j["name"] == "double-create"]
    assert len(made) == 1
    job_id = made[0]["id"]

    double_click(page, "button[data-action=run-now]")

    def runs() -> list[Any]:
        found: list[Any] = stack.call("GET", f"/jobs/{job_id}/runs", tenant=TENANT).body["items"]
        return found

    page.until(runs)
    time.sleep(2)  # a second run would be recorded by now
    assert len(runs()) == 1


def double_click(page: Page, css: str) -> None:
    """Two clicks on the button in one go, as a double-click sends them."""
    page.driver.execute_script("arguments[0].click(); arguments[0].click();", page.find(css))


def test_an_edit_sends_only_the_fields_it_changed(page: Page, stack: Stack) -> None:
    # Found by an outside audit (2026-12-01): an edit sent back every box trimmed, so renaming a
    # job whose cron the API stored as "0 3 * * * " sent a new cron, which re-armed the job and
    # dropped its run waiting for a retry; an EventBridge source "billing " became "billing".
    target = {
        "type": "eventbridge",
        "source": "billing ",
        "detail_type": "Invoice due",
        "event_bus": f"{TENANT}-bus",
    }
    body = {"name": " padded ", "schedule": {"cron": "0 3 * * * "}, "target": target}
    created = stack.call("POST", "/jobs", body, tenant=TENANT)
    assert created.status == 201, created.body
    job = created.body
    assert (job["schedule"]["cron"], job["target"]["source"]) == ("0 3 * * * ", "billing ")
    page.sign_in(stack.token(TENANT))

    page.open(f"#/jobs/{job['id']}/edit")
    tags = page.find("#f-tags")
    tags.send_keys("team:billing")
    page.find("#save").click()
    page.until(lambda: page.driver.current_url.endswith(f"#/jobs/{job['id']}"))
    stored = stack.call("GET", f"/jobs/{job['id']}", tenant=TENANT).body
    assert stored["tags"] == {"team": "billing"}
    assert (stored["name"], stored["schedule"], stored["target"]) == (
        job["name"],
        job["schedule"],
        job["target"],
    )

    # A box changed in the target: the others go back as stored, spaces and all
    page.open(f"#/jobs/{job['id']}/edit")
    after = save_field(page, stack, job["id"], "#f-target-detail_type", "Invoice overdue")
    assert after["target"] == {**job["target"], "detail_type": "Invoice overdue"}
    assert (after["name"], after["schedule"]) == (job["name"], job["schedule"])


def test_an_after_jobs_form_shows_no_error_for_its_schedule(page: Page, stack: Stack) -> None:
    # Found by an outside audit (2026-12-01): the preview asked the API for the occurrences of
    # an `after` schedule, which has none (400 at schedule.after), and the form showed that
    # as its own error, an alert, on opening a dependent job's edit form.
    upstream = create(stack, "upstream", {"rate_seconds": 3600})
    dependent = create(stack, "dependent", {"after": {"job_id": upstream["id"]}})
    page.sign_in(stack.token(TENANT))
    page.open(f"#/jobs/{dependent['id']}/edit")
    page.until(lambda: "no occurrences of its own" in page.find("#preview-note").text)
    time.sleep(1)  # past the preview's 400 ms pause and an answer it might have asked for
    assert page.texts("#form-error") == [""]
    assert page.texts("#job-form .field-error:not(:empty)") == []

    page.open("#/new")
    page.driver.find_element(By.CSS_SELECTOR, "#f-schedule-kind option[value=after]").click()
    page.find("#f-schedule-after-job_id").send_keys(str(upstream["id"]))
    page.until(lambda: str(upstream["id"]) in page.find("#preview-note").text)
    time.sleep(1)
    assert page.texts("#form-error") == [""]


def test_a_corrected_create_after_a_lost_answer_goes_through(page: Page, stack: Stack) -> None:
    # Found by an outside audit (2026-12-01): the form's Idempotency-Key went with a corrected
    # body after a create whose answer was lost (the job was made): "already used for a
    # different request", at every save. The same values still make no second job.
    page.sign_in(stack.token(TENANT))
    page.open("#/new")
    page.find("#f-name").send_keys("lost-answer first")
    page.find("#f-schedule-cron").send_keys("0 9 * * *")
    page.driver.find_element(By.CSS_SELECTOR, "#f-target-type option[value=handler]").click()
    page.find("#f-target-name").send_keys("duetime.noop")
    page.driver.execute_script(
        """const real = window.fetch; let lost = 0;
        window.fetch = async (url, init) => {
          const reply = await real(url, init);
          const create = url === '/jobs' && init?.method === 'POST';
          if (create && lost++ < 2) throw new TypeError('Failed to fetch');
          return reply;
        };"""
    )
    page.find("#save").click()
    page.until(lambda: "may have been created" in page.find("#notice").text)
    page.find("#save").click()  # the same values, answer lost again: the same job
    time.sleep(1)
    name = page.find("#f-name")
    name.clear()
    name.send_keys("lost-answer second")
    page.find("#save").click()
    page.until(lambda: re.search(r"#/jobs/[0-9A-Z]{26}$", page.driver.current_url))
    listed = stack.call("GET", "/jobs?name_prefix=lost-answer", tenant=TENANT).body["items"]
    assert sorted(j["name"] for j in listed) == ["lost-answer first", "lost-answer second"]


def test_the_skip_link_moves_the_focus_and_keeps_the_page(page: Page, stack: Stack) -> None:
    # Found by an outside audit (2026-12-01): "Skip to content" (href="#main") was a route to
    # the hash router, which drew the jobs list: what was typed in a form was lost.
    job = create(stack, "skip", {"rate_seconds": 3600})
    page.sign_in(stack.token(TENANT))
    route = f"#/jobs/{job['id']}/edit"
    page.open(route)
    name = page.find("#f-name")
    name.clear()
    name.send_keys("typed, not saved")
    page.driver.execute_script("document.querySelector('a.skip').focus()")
    page.driver.switch_to.active_element.send_keys(Keys.ENTER)
    time.sleep(1)
    assert page.driver.current_url.endswith(route)
    assert page.find("#f-name").get_attribute("value") == "typed, not saved"
    assert page.driver.switch_to.active_element.get_attribute("id") == "main"
