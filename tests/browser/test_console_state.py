"""The console's words, buttons and tables follow the API's state, in headless Chromium against
`duetime local`: a failed run said to be in the DLQ only when it is, actions offered only where
the API takes them, a job changed elsewhere drawn again, older runs and filtered lists reached,
what was typed kept over an expired token, the focus kept by the schedule's kind, and every
filter labelled. Found by an outside audit of the console (2026-11-30, its third round); each
test fails on the console before it. Each test has a tenant of its own."""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta
from typing import Any

import jwt
import pytest
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys

from duetime.local.keys import issue_token, load_or_create_key
from tests.browser.conftest import Page
from tests.e2e.conftest import Stack, Webhook

pytestmark = pytest.mark.slow
NOOP = {"type": "handler", "name": "duetime.noop"}
YEARLY = {"cron": "0 0 1 1 *"}


def create(stack: Stack, tenant: str, body: dict[str, Any]) -> dict[str, Any]:
    created = stack.call("POST", "/jobs", {"target": NOOP, **body}, tenant=tenant)
    assert created.status == 201, created.body
    job: dict[str, Any] = created.body
    return job


def runs_of(stack: Stack, tenant: str, job_id: str) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = stack.call(
        "GET", f"/jobs/{job_id}/runs?limit=100", tenant=tenant
    ).body["items"]
    return found


def test_a_failed_run_is_said_in_the_dlq_only_when_no_cancel_ended_its_retries(
    page: Page, stack: Stack, webhook: Webhook
) -> None:
    # A run waiting for a retry that a cancel ends is recorded `failed`, "...; not retried: the
    # job is cancelled", and is not in the DLQ: the console said "failed, in the DLQ" of it.
    tenant = "tenant-not-dlq"
    failing = {"type": "http", "url": f"{webhook.url}/flaky/100/not-dlq-{time.time_ns()}"}
    dropped = create(
        stack,
        tenant,
        {
            "name": "dropped",
            "schedule": {"delay_seconds": 0},
            "target": failing,
            "retry": {"max_attempts": 3, "backoff_seconds": 10, "max_backoff_seconds": 10},
        },
    )
    dead = create(
        stack,
        tenant,
        {
            "name": "dead",
            "schedule": {"delay_seconds": 0},
            "target": failing,
            "retry": {"max_attempts": 1},
        },
    )
    page.until(lambda: [r["status"] for r in runs_of(stack, tenant, dropped["id"])] == ["retrying"])
    cancelled = stack.call("DELETE", f"/jobs/{dropped['id']}", tenant=tenant)
    assert cancelled.status == 200, cancelled.body
    for job in (dropped, dead):
        page.until(
            lambda j=job: [r["status"] for r in runs_of(stack, tenant, j["id"])] == ["failed"], 60
        )
    assert "not retried: the job is cancelled" in runs_of(stack, tenant, dropped["id"])[0]["error"]

    page.sign_in(stack.token(tenant))
    page.open("#/jobs")
    row = page.find(f"tr[data-job-id='{dropped['id']}']")
    assert "failed, not retried (the job is cancelled)" in row.text
    assert "DLQ" not in row.text
    assert "failed, in the DLQ" in page.find(f"tr[data-job-id='{dead['id']}']").text
    page.open(f"#/jobs/{dropped['id']}")
    page.until(
        lambda: page.texts(".title .reason") == ["failed, not retried (the job is cancelled)"]
    )

    # Only the server's own end of the error says so, not a target's words quoted in it: a
    # dead-lettered run whose target answered "..., not retried: the job is cancelled" read
    # "not retried" (an outside audit, 2026-12-01).
    said = page.driver.execute_async_script(
        """const [errors, done] = arguments;
        import('/console/format.js').then((f) => done(errors.map((error) =>
          f.attention({status: 'failed', error}))), (e) => done(String(e)));""",
        [
            "HTTP 500 Internal Server Error: card declined, not retried: the job is cancelled",
            "HTTP 500 Internal Server Error: x; not retried: the job is cancelled, said the target",
            "HTTP 500 Internal Server Error: boom; not retried: the job is paused",
            "not retried: the job was paused or changed since",
        ],
    )
    assert said == [
        "failed, in the DLQ",
        "failed, in the DLQ",
        "failed, not retried (the job is paused)",
        "failed, not retried (the job was paused or changed since)",
    ]


def test_an_expired_token_keeps_what_was_typed_in_the_edit_form(page: Page, stack: Stack) -> None:
    # A background preview with the expired token was refused (401), which signed the person
    # out: the form went, and signing in again drew it from the server, their edit lost.
    tenant = "tenant-expiry"
    job = create(stack, tenant, {"name": "before", "schedule": {"cron": "0 9 * * *"}})
    key, _ = load_or_create_key(stack.state_dir)
    short = issue_token(tenant, 15, key)
    expires = jwt.decode(short, options={"verify_signature": False})["exp"]
    page.sign_in(short)
    page.open(f"#/jobs/{job['id']}/edit")
    page.find("#f-name")
    time.sleep(max(0.0, expires - time.time() + 1.5))  # the token has expired

    name = page.find("#f-name")
    name.clear()
    name.send_keys("a carefully typed name")
    page.find("#f-tags").send_keys("team:payments")
    cron = page.find("#f-schedule-cron")
    cron.clear()
    cron.send_keys("30 8 * * *")
    time.sleep(1.5)  # past the preview's 400 ms pause and an answer it might have asked for
    assert page.driver.find_elements(By.CSS_SELECTOR, "#token") == []
    assert "session has expired" in page.find("#preview-note").text
    assert page.find("#f-name").get_attribute("value") == "a carefully typed name"

    # Saving is refused (401): signed out, then back to the form, as typed, once signed in
    page.find("#save").click()
    area = page.find("#token")
    assert "sign in again" in page.find("#notice").text
    area.send_keys(stack.token(tenant))
    page.find("#signin button[type=submit]").click()
    page.until(lambda: page.find("#f-name").get_attribute("value") == "a carefully typed name")
    assert page.find("#f-tags").get_property("value") == "team:payments"
    assert page.find("#f-schedule-cron").get_attribute("value") == "30 8 * * *"
    assert "is back" in page.find("#notice").text
    page.find("#save").click()
    page.until(lambda: page.driver.current_url.endswith(f"#/jobs/{job['id']}"))
    stored = stack.call("GET", f"/jobs/{job['id']}", tenant=tenant).body
    assert (stored["name"], stored["tags"], stored["schedule"]["cron"]) == (
        "a carefully typed name",
        {"team": "payments"},
        "30 8 * * *",
    )


def offered(page: Page, job_id: str, status: str) -> set[str]:
    """The actions the job's page offers, once it shows the job at `status`."""
    page.open(f"#/jobs/{job_id}")
    page.until(lambda: page.texts("#job-status") == [status])
    page.find("#runs-body tr")
    actions = {
        str(b.get_attribute("data-action"))
        for b in page.driver.find_elements(By.CSS_SELECTOR, "#actions button")
    }
    return actions | (
        {"backfill"} if page.driver.find_elements(By.CSS_SELECTOR, "#backfill") else set()
    )


def iso(instant: datetime) -> str:
    return instant.isoformat(timespec="seconds").replace("+00:00", "Z")


def test_actions_are_offered_only_where_the_api_takes_them(page: Page, stack: Stack) -> None:
    # "Run now" was offered on a completed job, and the backfill form on a paused one: the
    # API refuses both (409).
    tenant = "tenant-offers"
    now = datetime.now(UTC)
    ended = create(
        stack,
        tenant,
        {"schedule": {"rate_seconds": 2, "end_at": iso(now + timedelta(seconds=6))}},
    )
    ending = create(
        stack,
        tenant,
        {
            "schedule": {
                "rate_seconds": 10,
                "start_at": iso(now + timedelta(seconds=60)),
                "end_at": iso(now + timedelta(seconds=90)),
            }
        },
    )
    paused = create(stack, tenant, {"schedule": YEARLY})
    assert stack.call("POST", f"/jobs/{paused['id']}/pause", tenant=tenant).status == 200
    scheduled = create(stack, tenant, {"schedule": YEARLY})
    dependent = create(stack, tenant, {"schedule": {"after": {"job_id": scheduled["id"]}}})
    page.sign_in(stack.token(tenant))

    # An `after` job pauses (docs/api.md): Pause was not offered (an outside audit, 2026-12-01)
    assert offered(page, dependent["id"], "scheduled") == {"pause", "run-now", "cancel-job"}
    page.click("[data-action=pause]")
    page.until(lambda: page.texts("#job-status") == ["paused"])

    assert offered(page, scheduled["id"], "scheduled") == {
        "pause",
        "run-now",
        "cancel-job",
        "backfill",
    }
    assert offered(page, paused["id"], "paused") == {"resume", "cancel-job"}
    # Its end_at is to come: its runs may be cancelled, and its past backfilled (the API takes
    # it from completion: until 2026-11-30 the console offered it only past its end_at).
    assert offered(page, ending["id"], "completed") == {"cancel-job", "backfill"}
    page.until(
        lambda: (
            stack.call("GET", f"/jobs/{ended['id']}", tenant=tenant).body["status"] == "completed"
            and datetime.now(UTC) > now + timedelta(seconds=7)
        ),
        60,
    )
    assert offered(page, ended["id"], "completed") == {"backfill"}


def test_an_actions_done_notice_stays_shown(page: Page, stack: Stack) -> None:
    # The page drawn again after the action cleared "Pause: done." as it was shown.
    tenant = "tenant-done"
    job = create(stack, tenant, {"schedule": YEARLY})
    page.sign_in(stack.token(tenant))
    page.open(f"#/jobs/{job['id']}")
    page.click("[data-action=pause]")
    page.until(lambda: page.texts("#job-status") == ["paused"])
    assert page.find("#notice").text == "Pause: done."
    page.click("[data-action=resume]")
    page.until(lambda: page.texts("#job-status") == ["scheduled"])
    assert page.find("#notice .notice.ok").text == "Resume: done."


def test_a_job_changed_elsewhere_is_drawn_again(page: Page, stack: Stack) -> None:
    # The page kept showing `scheduled` and its buttons after another client's cancel, even
    # after a refused action had said the job was cancelled.
    tenant = "tenant-stale"
    job = create(stack, tenant, {"schedule": YEARLY})
    page.sign_in(stack.token(tenant))
    page.open(f"#/jobs/{job['id']}")
    page.find("[data-action=pause]")
    assert stack.call("DELETE", f"/jobs/{job['id']}", tenant=tenant).status == 200
    page.until(lambda: page.texts("#job-status") == ["cancelled"], 15)
    assert page.texts("#actions button") == []
    assert "has changed" in page.find("#notice").text

    # A refused action draws the job again: the refresh held off meanwhile (it waits while a
    # backfill range is being typed in), then a click that leaves the focus there.
    other = create(stack, tenant, {"schedule": YEARLY})
    page.open(f"#/jobs/{other['id']}")
    page.find("#backfill-from").click()
    assert stack.call("DELETE", f"/jobs/{other['id']}", tenant=tenant).status == 200
    time.sleep(4)  # past a refresh
    assert page.texts("#job-status") == ["scheduled"]
    page.driver.execute_script("arguments[0].click()", page.find("[data-action=pause]"))
    page.until(lambda: page.texts("#job-status") == ["cancelled"], 10)
    assert "Pause:" in page.find("#notice .notice.error").text
    assert "cancelled" in page.find("#notice .notice.error").text


def test_a_one_off_s_status_is_drawn_again_when_its_run_ends(page: Page, stack: Stack) -> None:
    # A one-off's status is its run's, and its version does not change when the run ends: the
    # badge stayed `scheduled` beside a `succeeded` run (until 2026-11-30; an outside audit).
    tenant = "tenant-one-off-badge"
    job = create(stack, tenant, {"schedule": {"delay_seconds": 8}})
    page.sign_in(stack.token(tenant))
    page.open(f"#/jobs/{job['id']}")
    page.until(lambda: page.texts("#job-status") == ["scheduled"], 8)
    page.until(lambda: page.texts("#job-status") == ["succeeded"], 30)
    page.until(lambda: page.texts("#runs-body .badge") == ["succeeded"], 10)


def test_older_runs_are_loaded_and_kept_by_the_refresh(page: Page, stack: Stack) -> None:
    # Only the newest 50 runs were shown, with no way to the older ones.
    tenant = "tenant-many-runs"
    job = create(stack, tenant, {"schedule": YEARLY})
    for _ in range(53):
        while (ran := stack.call("POST", f"/jobs/{job['id']}/run", tenant=tenant)).status == 429:
            time.sleep(1)
        assert ran.status == 202, ran.body
    page.until(lambda: len(runs_of(stack, tenant, job["id"])) == 53, 90)
    page.sign_in(stack.token(tenant))
    page.open(f"#/jobs/{job['id']}")
    page.until(lambda: len(page.texts("#runs-body tr")) == 50)
    # Pressed on the last page, the button hides: the focus goes to the table, not to <body>
    # (an outside audit, 2026-12-01).
    page.driver.execute_script("arguments[0].focus()", page.find("#older-runs"))
    page.driver.switch_to.active_element.send_keys(Keys.ENTER)
    page.until(lambda: len(page.texts("#runs-body tr")) == 53)
    assert not page.driver.find_element(By.ID, "older-runs").is_displayed()
    assert page.driver.switch_to.active_element.get_attribute("id") == "runs"

    # A new run comes in through the refresh; the older ones stay
    assert stack.call("POST", f"/jobs/{job['id']}/run", tenant=tenant).status == 202
    page.until(lambda: len(page.texts("#runs-body tr")) == 54, 30)
    shown = {
        r.get_attribute("data-run-id")
        for r in page.driver.find_elements(By.CSS_SELECTOR, "#runs-body tr")
    }
    assert shown == {r["run_id"] for r in runs_of(stack, tenant, job["id"])}


def test_a_filtered_list_with_no_match_on_its_first_page_says_so(page: Page, stack: Stack) -> None:
    # An empty table above "Load more", with no word, read as "no match".
    tenant = "tenant-needle"
    needle = create(stack, tenant, {"name": "needle-old", "schedule": YEARLY})
    hay = [{"name": f"hay-{i}", "schedule": YEARLY, "target": NOOP} for i in range(55)]
    made = stack.call("POST", "/jobs/batch", {"jobs": hay}, tenant=tenant)
    assert [item["status"] for item in made.body["items"]] == [201] * 55, made.body
    page.sign_in(stack.token(tenant))
    page.open("#/jobs?name_prefix=needle")
    page.until(
        lambda: (
            page.texts("#jobs tbody tr")
            == ["No matches among the newest 50 jobs yet: Load more to search further."]
        )
    )
    page.driver.execute_script("arguments[0].focus()", page.find("#more"))
    page.driver.switch_to.active_element.send_keys(Keys.ENTER)
    page.find(f"tr[data-job-id='{needle['id']}']")
    assert len(page.texts("#jobs tbody tr")) == 1
    # The last page: "Load more" hides, and its focus goes to the job it loaded, not to <body>
    # (an outside audit, 2026-12-01).
    assert page.driver.switch_to.active_element.text == "needle-old"


def test_changing_kind_or_type_with_the_keyboard_keeps_the_focus(page: Page, stack: Stack) -> None:
    # The select was taken out of the page and put back as its fields were drawn again: the
    # focus fell to the page at each arrow key.
    page.sign_in(stack.token("tenant-keys"))
    page.open("#/new")
    for select, field in (
        ("f-schedule-kind", "#f-schedule-rate_seconds"),
        ("f-target-type", "#f-target-queue_url"),
    ):
        page.driver.execute_script("arguments[0].focus()", page.find(f"#{select}"))
        page.driver.switch_to.active_element.send_keys(Keys.ARROW_DOWN)
        page.find(field)
        assert page.driver.switch_to.active_element.get_attribute("id") == select


def test_every_filter_box_is_named_by_its_label(page: Page, stack: Stack) -> None:
    # The "Name starts with" label pointed at no box (for=filter-name_prefix, id=filter-name).
    page.sign_in(stack.token("tenant-labels"))
    page.open("#/jobs")
    page.find("#filters")
    labels = page.driver.find_elements(By.CSS_SELECTOR, "#filters label")
    assert len(labels) == 3
    for label in labels:
        target = page.driver.execute_script(
            "return document.getElementById(arguments[0].htmlFor)?.labels.length ?? 0", label
        )
        assert target == 1, label.text
    page.driver.find_element(By.XPATH, "//label[text()='Name starts with']").click()
    assert page.driver.switch_to.active_element.get_attribute("name") == "name_prefix"


def test_a_skipped_last_run_is_shown_without_a_lateness(page: Page, stack: Stack) -> None:
    # "skipped — late": a run that never started has no lateness (a new user's walk, round
    # three).
    tenant = "tenant-skips"
    job = create(
        stack,
        tenant,
        {
            "schedule": {"rate_seconds": 1},
            "target": {"type": "handler", "name": "duetime.sleep"},
            "payload": {"seconds": 4},
            "overlap": "skip",
        },
    )
    page.until(
        lambda: any(r["status"] == "skipped" for r in runs_of(stack, tenant, job["id"])[:1]), 60
    )
    stack.call("POST", f"/jobs/{job['id']}/pause", tenant=tenant)  # its newest run stays
    page.sign_in(stack.token(tenant))
    page.open("#/jobs")

    page.until(lambda: "skipped" in " ".join(page.texts(f"tr[data-job-id='{job['id']}'] td")))
    cells = page.texts(f"tr[data-job-id='{job['id']}'] td")
    assert not any("late" in cell for cell in cells if "skipped" in cell), cells


def test_a_refused_filter_is_said_at_its_box(page: Page, stack: Stack) -> None:
    # Found by an outside audit (2026-12-01): the API's 400 for a filter was shown without the
    # filter's name, the box unmarked, the table empty with no words; a status from the
    # address that the API refuses showed the select on "any".
    page.sign_in(stack.token("tenant-filters"))
    page.open(f"#/jobs?name_prefix={'x' * 129}")
    page.until(lambda: page.find("#notice").text.startswith("Name starts with: "))
    box = page.find("#filter-name_prefix")
    assert box.get_attribute("aria-invalid") == "true"
    assert page.find("#filter-name_prefix-error").text != ""
    assert page.texts("#jobs tbody tr") == ["This filter was refused: no jobs listed."]

    page.open("#/jobs?status=running")
    page.until(lambda: page.find("#notice").text.startswith("Status: "))
    status = page.find("#filter-status")
    assert (status.get_attribute("value"), status.get_attribute("aria-invalid")) == (
        "running",
        "true",
    )


def test_a_one_off_made_in_the_form_keeps_its_notice_and_its_runs_table(
    page: Page, stack: Stack
) -> None:
    # Found by an outside audit (2026-12-01): "Job created." was erased when the one-off's run
    # ended (the page drawn again); and the runs table was rebuilt every 3 s, changed or not,
    # clearing a selection in it (a run's error, being copied).
    page.sign_in(stack.token("tenant-created"))
    page.open("#/new")
    page.driver.find_element(By.CSS_SELECTOR, "#f-schedule-kind option[value=delay]").click()
    box = page.find("#f-schedule-delay_seconds")
    box.clear()
    box.send_keys("3")
    page.driver.find_element(By.CSS_SELECTOR, "#f-target-type option[value=handler]").click()
    page.find("#f-target-name").send_keys("duetime.noop")
    page.find("#f-name").send_keys("soon")
    page.find("#save").click()
    page.until(lambda: page.find("#notice").text == "Job created.", 10)
    page.until(lambda: page.texts("#job-status") == ["succeeded"], 30)
    page.until(lambda: page.texts("#runs-body .badge") == ["succeeded"], 10)
    assert page.find("#notice").text == "Job created."

    page.driver.execute_script(
        """const cell = document.querySelector('#runs-body tr td:nth-child(3)');
        window.selectedCell = cell;
        const range = document.createRange(); range.selectNodeContents(cell);
        getSelection().removeAllRanges(); getSelection().addRange(range);"""
    )
    selected = page.driver.execute_script("return getSelection().toString()")
    assert selected
    time.sleep(3.5)  # a refresh (every 3 s) that finds nothing changed
    assert page.driver.execute_script(
        "return [getSelection().toString(), window.selectedCell.isConnected]"
    ) == [selected, True]
