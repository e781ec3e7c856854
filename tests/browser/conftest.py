"""Drive the console in a real Chromium (Debian's, not Playwright's download) against pytest-django's live server.

The tests skip, with the reason in the summary, when no Chromium is installed; `.ci/run` installs it, so CI runs them.
"""

import re
from collections.abc import Iterator

import pytest

from tests.browser import CHROMIUM, SKIP_REASON

try:
    from playwright.sync_api import Error as PlaywrightError
except ImportError:  # the browser tests skip; the name is only needed when they run
    PlaywrightError = Exception  # type: ignore[misc,assignment]

CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--disable-dev-shm-usage",
]
DESKTOP = {"width": 1280, "height": 860}
# The strict policy production is meant to send (no inline script or style, nothing from another host). The tests add
# it to every response themselves, so the console is held to it whatever the settings of the day say.
STRICT_CSP = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; "
    "font-src 'self'; object-src 'none'; base-uri 'self'; form-action 'self'; frame-ancestors 'none'"
)
PHONE = {"width": 390, "height": 844}


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if not item.get_closest_marker("browser"):
            continue
        if not CHROMIUM:
            item.add_marker(pytest.mark.skip(reason=SKIP_REASON))
        # In a parallel run (make test) one worker runs every journey: one Chromium and one live server, not one
        # per worker, and no two journeys' polling pages compete for the CPU.
        item.add_marker(pytest.mark.xdist_group("browser"))
        item.add_marker(pytest.mark.slow)


@pytest.fixture(scope="session")
def browser(django_db_setup, live_server) -> Iterator:
    # Requesting the database and the server first makes them start before Playwright's event loop runs in this
    # thread, and stop after it has gone: Django refuses synchronous database work beside a running loop.
    if not CHROMIUM:
        pytest.skip(SKIP_REASON)
    from playwright.sync_api import sync_playwright

    # Playwright's sync API keeps an event loop in this thread while the browser is open. The tests' own database
    # work (seeding, assertions, the transactional flush after each test) is still synchronous and safe.
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
        with sync_playwright() as playwright:
            launched = playwright.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
            yield launched
            launched.close()


def new_context(browser, live_server, viewport: dict[str, int], **options):
    """A browser context that records every script error and console error (a CSP violation is one) of its pages.
    `options` go to Playwright's new_context (has_touch=True, is_mobile=True: a phone's touch screen)."""
    options = {"timezone_id": "UTC", "locale": "en-US", **options}
    context = browser.new_context(base_url=live_server.url, viewport=viewport, **options)
    # Every wait of a page (navigation, a click, a wait_for) is bounded by this. Generous: the live server answers one
    # request at a time on SQLite, and at load 15 on the 2-core machine a process's first page took 7.7 s alone.
    context.set_default_timeout(30_000)
    context.problems = []

    def watch(page) -> None:
        page.on("pageerror", lambda error: context.problems.append(f"{page.url}: {error}"))
        page.on(
            "console",
            lambda message: message.type == "error" and context.problems.append(f"{page.url}: {message.text}"),
        )

    context.on("page", watch)

    def with_strict_csp(route) -> None:
        try:
            response = route.fetch(max_redirects=0)
            route.fulfill(response=response, headers={**response.headers, "content-security-policy": STRICT_CSP})
        except PlaywrightError:
            # The page went away while its request was under way (a poll when the test closes the context).
            pass

    context.route("**/*", with_strict_csp)
    return context


@pytest.fixture
def context(browser, live_server):
    context = new_context(browser, live_server, DESKTOP)
    yield context
    problems = context.problems
    context.close()
    assert problems == [], "the pages logged errors"


@pytest.fixture
def page(context):
    return context.new_page()


def log_in(page, email: str, password: str = "a long and uncommon passphrase") -> None:
    """Log in from the log-in page; the console opens on the keys page."""
    page.goto("/login/")
    page.get_by_label("Email").fill(email)
    page.get_by_label("Password").fill(password)
    page.get_by_role("button", name="Log in").click()
    page.wait_for_url("**/keys/")


def sign_up(page, email: str, password: str = "a long and uncommon passphrase", phone: str = "+14155551234") -> None:
    page.goto("/signup/")
    page.get_by_label("Email").fill(email)
    page.get_by_label("Password", exact=True).fill(password)
    page.get_by_label("Password again").fill(password)
    page.get_by_label("Phone number").fill(phone)
    page.get_by_label("WhatsApp").check()
    page.get_by_role("button", name="Create account").click()
    page.wait_for_url(re.compile(r"/keys/$"))
