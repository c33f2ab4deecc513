"""Browser tests: the console in a real headless Chromium (Debian's chromium + chromedriver,
driven by Selenium) against `duetime local` (the e2e stack fixture, reused). Screenshots go to
test-artifacts/console/."""

from __future__ import annotations

import shutil
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.e2e.conftest import Stack, free_port, stack, webhook  # noqa: F401 (fixtures)
from tests.waiting import wait_for

ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts" / "console"
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
CHROMEDRIVER = shutil.which("chromedriver")

if CHROMIUM is None or CHROMEDRIVER is None:
    pytest.fail(
        "browser tests need Debian's chromium and chromium-driver: "
        "apt-get install -y chromium chromium-driver (scripts/test does it as root)",
        pytrace=False,
    )

from selenium import webdriver  # noqa: E402
from selenium.common.exceptions import (  # noqa: E402
    StaleElementReferenceException,
    WebDriverException,
)
from selenium.webdriver.chrome.service import Service  # noqa: E402
from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.remote.webdriver import WebDriver  # noqa: E402
from selenium.webdriver.remote.webelement import WebElement  # noqa: E402


@pytest.fixture(scope="module")
def browser() -> Iterator[WebDriver]:
    """One headless Chromium per test module."""
    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)
    for flag in (
        "--headless=new",
        "--no-sandbox",
        "--disable-dev-shm-usage",
        "--window-size=1280,1000",
        "--lang=en-US",
    ):
        options.add_argument(flag)
    # The page's console (script errors, failed requests) for the report of a failed test.
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(options=options, service=Service(str(CHROMEDRIVER)))
    driver.set_script_timeout(20)
    yield driver
    driver.quit()


class Page:
    def __init__(self, driver: WebDriver, stack: Stack) -> None:  # noqa: F811
        self.driver = driver
        self.stack = stack

    def open(self, hash_: str = "#/jobs") -> None:
        """A freshly drawn view: the address the page is already at is loaded again (going to
        it would change nothing, and the view would keep what an earlier test typed).

        On a loaded machine chromedriver now and then gives up on a load ("timeout ... aborted
        by navigation": seen once in a run beside a busy loop); the load is asked for again,
        up to twice. What the page then shows is still checked by the test."""
        url = f"{self.stack.url}/console/{hash_}"
        for tries_left in reversed(range(3)):
            try:
                if self.driver.current_url == url:
                    self.driver.refresh()
                else:
                    self.driver.get(url)
                return
            except WebDriverException:
                if not tries_left:
                    raise

    # The console re-renders a view when its data changes (a job's page after an action, its
    # runs every few seconds): an element found a moment ago may be gone. Every read here
    # treats a stale element as "not yet" and looks again, until its timeout.

    def find(self, css: str, timeout: float = 15) -> WebElement:
        found: list[WebElement] = []

        def present() -> bool:
            found[:] = [
                e for e in self.driver.find_elements(By.CSS_SELECTOR, css) if e.is_displayed()
            ]
            return bool(found)

        self.until(present, timeout)
        return found[0]

    def click(self, css: str, timeout: float = 15) -> None:
        """Click the element, found again if a re-render replaced it before the click."""
        self.until(lambda: self.find(css, timeout).click() is None, timeout)

    def texts(self, css: str) -> list[str]:
        return [e.text for e in self.driver.find_elements(By.CSS_SELECTOR, css)]

    def until(self, check: Callable[[], object], timeout: float = 20) -> None:
        def settled() -> bool:
            try:
                return bool(check())
            except StaleElementReferenceException:
                return False

        wait_for(settled, timeout)

    def sign_in(self, token: str) -> None:
        self.open()
        self.driver.execute_script("sessionStorage.clear()")
        self.open()  # drawn again, signed out
        area = self.find("#token")
        area.clear()
        area.send_keys(token)
        self.find("#signin button[type=submit]").click()
        self.find("#jobs")

    def evidence(self, name: str) -> str:
        """What a failed test leaves behind: a screenshot, and the page's address, text and
        console messages (for the report)."""
        path = self.shot(f"failed-{name}")
        main = self.texts("main")
        log = [f"{e['level']} {e['message']}" for e in self.driver.get_log("browser")]
        return "\n".join(
            [f"screenshot: {path}", f"url: {self.driver.current_url}", "main:"]
            + [(main[0] if main else "(no <main>)")[:3000], "browser console:"]
            + (log[-50:] or ["(empty)"])
        )

    def shot(self, name: str) -> Path:
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        path = ARTIFACTS / f"{name}.png"
        self.driver.save_screenshot(str(path))
        return path


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    """A failed browser test's report carries the page as the test left it (Page.evidence)."""
    report = yield
    page = getattr(item, "funcargs", {}).get("page")
    if report.when == "call" and report.failed and isinstance(page, Page):
        try:
            report.sections.append(("page when the test failed", page.evidence(item.name)))
        except Exception as exc:  # the browser may be what failed
            report.sections.append(("page when the test failed", f"not captured: {exc!r}"))
    return report


@pytest.fixture(scope="module")
def page(browser: WebDriver, stack: Stack) -> Page:  # noqa: F811
    return Page(browser, stack)
