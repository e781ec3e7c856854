"""The console on a phone (390 px wide, a touch screen, no keyboard), in a real Chromium: what issue 18 found
unreadable or wrong there. CONSOLE_SHOTS=<folder> saves a screenshot of each page checked, to look at."""

import itertools
import os
import re
from pathlib import Path

import pytest

from accounts.services import sign_up
from conversations.models import Endpoint
from ingestion.hotpath.recording import record_user_message
from keys.services import create_key, revoke_key
from tests.browser.conftest import DESKTOP, PHONE, log_in, new_context

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

EMAIL = "grace@example.com"
PASSWORD = "a long and uncommon passphrase"
SHOTS = os.environ.get("CONSOLE_SHOTS")
LONG = "The quarterly report, line by line. " * 200  # 7 KB: shortened in the thread
NO_TEXT = {"event": "deploy", "service": "shop-api", "status": "ok", "url": "https://ci.example.com/runs/" + "8" * 60}


def shoot(page, name: str) -> None:
    if SHOTS:
        Path(SHOTS).mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(Path(SHOTS) / f"{name}.png"), full_page=True)


def signed_in(browser, live_server, viewport, **options):
    context = new_context(browser, live_server, viewport, **options)
    page = context.new_page()
    log_in(page, EMAIL, PASSWORD)
    return context, page


def on_a_phone(browser, live_server):
    return signed_in(browser, live_server, PHONE, has_touch=True, is_mobile=True)


def nothing_hidden_sideways(page) -> list[str]:
    """Code blocks whose lines run past their box (a sideways scroll inside it, or clipped). Measured once the page
    has loaded: a click's navigation resolves when the new page commits, and a block measured before the stylesheet
    applies has no wrapping yet (seen once in CI, on a busy machine)."""
    page.wait_for_load_state("load")
    return page.evaluate(
        """[...document.querySelectorAll('pre')]
             .filter(pre => pre.getClientRects().length && pre.scrollWidth > pre.clientWidth + 1)
             .map(pre => pre.textContent.slice(0, 40))"""
    )


@pytest.fixture
def seeded(db):
    user = sign_up(email=EMAIL, password=PASSWORD, phone_number="+14155551234", channel="sms")
    key, _ = create_key(user, "GitHub deploys")
    record_user_message(
        user=user, endpoint=Endpoint.CURRENT, text="Deployed shop-api v2.14.0",
        context={"message": "Deployed shop-api v2.14.0", "sha": "4f2c9e1"}, api_key=key,
    )  # fmt: skip
    record_user_message(user=user, endpoint=Endpoint.CURRENT, text="", context=NO_TEXT, api_key=key)
    long = record_user_message(user=user, endpoint=Endpoint.CONSOLE, text=LONG)
    return key, long


def test_the_thread_on_a_phone(browser, live_server, seeded):
    _, long = seeded
    context, page = on_a_phone(browser, live_server)
    page.goto("/conversation/")
    page.get_by_text("Live", exact=True).wait_for()
    for details in page.locator("details.disclosure summary").all():
        details.click()  # every Context JSON open
    shoot(page, "conversation-phone")

    # No keyboard, so no keyboard shortcut offered; the error line beside it stays.
    assert not page.locator(".composer__keys").is_visible()
    # A body without a `message` member: a summary of its JSON, not an empty bubble.
    summary = page.locator(".msg__text--summary")
    assert summary.is_visible() and '"event": "deploy"' in summary.inner_text()
    # Times say their zone (the browser's, here UTC).
    assert all(re.search(r"\b(UTC|GMT)\b", text) for text in page.locator(".msg time").all_inner_texts())
    # Code (the context JSON) wraps inside its box instead of running past it.
    assert nothing_hidden_sideways(page) == []

    # A long message is shortened; "Show all" puts the whole of it in place.
    bubble = page.locator(f"#{long.public_id} .msg__text")
    assert len(bubble.inner_text()) < 2_000
    page.locator(f"#{long.public_id} [data-expand]").click()
    page.locator(f"#{long.public_id} [data-expand]").wait_for(state="detached")
    assert len(page.locator(f"#{long.public_id} .msg__text").inner_text()) > 7000
    assert page.url.endswith("/conversation/")  # in place, not another page

    problems = context.problems
    context.close()
    assert problems == []


def test_the_ctrl_enter_hint_stays_where_there_is_a_keyboard(browser, live_server, seeded):
    context, page = signed_in(browser, live_server, DESKTOP)
    page.goto("/conversation/")
    assert page.locator(".composer__keys").is_visible()
    context.close()


def test_a_key_s_page_on_a_phone(browser, live_server, seeded):
    key, _ = seeded
    context, page = on_a_phone(browser, live_server)
    page.goto(f"/keys/{key.pk}/")
    shoot(page, "key-detail-phone")

    # The chart's labels keep a readable size (they were 10 px scaled down to under 5 px) and never overlap.
    labels = page.evaluate(
        """[...document.querySelectorAll('.chart text')].filter(t => t.getClientRects().length)
             .map(t => { const r = t.getBoundingClientRect(); return {text: t.textContent, left: r.left,
                         right: r.right, height: r.height, day: t.classList.contains('day')}; })"""
    )
    days = sorted((label for label in labels if label["day"]), key=lambda label: label["left"])
    assert len(days) >= 3
    assert all(label["height"] >= 11 for label in labels), labels
    assert all(left["right"] < right["left"] for left, right in itertools.pairwise(days)), days
    chart = page.locator(".chart").bounding_box()
    assert all(chart["x"] <= label["left"] and label["right"] <= chart["x"] + chart["width"] for label in labels)

    # Every delivery links to its message, what became of it and the reply; none is a blank cell.
    cells = page.locator('td[data-label="Message"]')
    assert all(text.strip() for text in cells.all_inner_texts())
    cells.filter(has_text="{").get_by_role("link").click()  # the JSON summary (jsonb may reorder its members)
    page.get_by_text("What became of it").wait_for()
    shoot(page, "message-phone")
    assert nothing_hidden_sideways(page) == []

    problems = context.problems
    context.close()
    assert problems == []


def test_a_new_key_s_examples_and_the_api_docs_on_a_phone(browser, live_server, seeded):
    context, page = on_a_phone(browser, live_server)
    page.goto("/keys/new/")
    page.get_by_label("Name", exact=True).fill("phone")
    page.get_by_role("button", name="Create key").click()
    page.get_by_text("It will not be shown again").wait_for()
    shoot(page, "key-created-phone")
    assert nothing_hidden_sideways(page) == []  # the curl, Python and GitHub Actions examples wrap

    page.goto("/api/docs/")
    page.locator(".swagger-ui .opblock").first.wait_for()
    sections = page.locator(".swagger-ui .opblock-tag").all_inner_texts()
    assert sections[0].startswith("messages") and sections[-1].startswith("assistant runtime"), sections
    shoot(page, "api-docs-phone")
    back = page.get_by_role("link", name="← Back to Assistant Inbox")
    assert back.is_visible()
    back.click()
    page.wait_for_url("**/keys/")
    context.close()


NAV_PAGES = ["/keys/", "/webhooks/", "/conversation/", "/connections/", "/reminders/", "/settings/"]


def nav_problems(page) -> list[str]:
    """What is wrong with the navigation as drawn: a tab outside the screen (or clipped by its bar), a tab whose name
    wraps, the current tab not in view."""
    return page.evaluate(
        """() => {
          const problems = [];
          const width = document.documentElement.clientWidth;
          const bar = document.querySelector('.topnav').getBoundingClientRect();
          for (const link of document.querySelectorAll('.topnav a')) {
            const box = link.getBoundingClientRect();
            const name = link.textContent.trim();
            if (box.left < 0 || box.right > width || box.left < bar.left - 0.5 || box.right > bar.right + 0.5) {
              problems.push(`${name}: off-screen (${Math.round(box.left)}..${Math.round(box.right)} of ${width})`);
            }
            const lineHeight = parseFloat(getComputedStyle(link).lineHeight) || 20;
            const range = document.createRange();
            range.selectNodeContents(link);
            if (range.getClientRects().length > 1 || box.height > 2 * lineHeight) {
              problems.push(`${name}: wraps`);
            }
          }
          return problems;
        }"""
    )


@pytest.mark.parametrize("extra_tabs", [0, 3])
def test_every_tab_of_the_navigation_is_in_reach_on_a_phone(browser, live_server, seeded, extra_tabs):
    # extra_tabs: the navigation grows (Channels, an audit log...): add tabs to the page as the template would.
    context, page = on_a_phone(browser, live_server)
    for path in NAV_PAGES:
        page.goto(path)
        page.wait_for_load_state("load")
        if extra_tabs:
            page.evaluate(
                """count => { const list = document.querySelector('.topnav .nav');
                   for (let i = 0; i < count; i++) { const item = list.lastElementChild.cloneNode(true);
                     item.querySelector('a').removeAttribute('aria-current');
                     item.querySelector('a').textContent = ['Channels', 'Audit log', 'Billing'][i];
                     list.appendChild(item); } }""",
                extra_tabs,
            )
        shoot(page, f"nav{extra_tabs}-{path.strip('/')}-phone")
        assert nav_problems(page) == [], path
        current = page.locator('.topnav a[aria-current="page"]')
        assert current.count() == 1 and current.is_visible(), path
    problems = context.problems
    context.close()
    assert problems == []


def line_count(locator) -> int:
    return locator.evaluate(
        "element => { const range = document.createRange(); range.selectNodeContents(element); "
        "return new Set([...range.getClientRects()].map(r => Math.round(r.top))).size; }"
    )


@pytest.mark.parametrize(
    "viewport", [PHONE, {"width": 768, "height": 1024}, DESKTOP], ids=["phone", "tablet", "desktop"]
)
def test_a_revoked_key_s_name_keeps_its_room_beside_its_status(browser, live_server, seeded, viewport):
    key, _ = seeded
    long, _ = create_key(key.owner, "Nightly backup of the production database")
    revoke_key(long)
    context, page = signed_in(browser, live_server, viewport)
    page.goto("/keys/")
    page.wait_for_load_state("load")
    shoot(page, f"keys-revoked-{viewport['width']}")
    row = page.locator(f'tr[data-key-id="{long.pk}"]')
    # The status's badge and its time once took the row's width, and the name wrapped word by word beside them.
    name_cell, status_cell = row.locator("td.cell-primary"), row.locator('td[data-label="Status"]')
    assert name_cell.bounding_box()["width"] >= min(status_cell.bounding_box()["width"], 150)
    assert line_count(row.locator(".key-name")) <= 4
    assert line_count(row.locator(".badge", has_text="Revoked")) == 1
    cells = page.evaluate(
        """() => { const wrap = document.querySelector('.table-wrap').getBoundingClientRect();
                   return [...document.querySelectorAll('.table td')].filter(td => td.getClientRects().length)
                     .filter(td => td.getBoundingClientRect().right > wrap.right + 1)
                     .map(td => td.textContent.trim()); }"""
    )
    assert cells == [], "cells cut off at the table's right edge"
    sideways = page.evaluate("document.documentElement.scrollWidth - document.documentElement.clientWidth")
    assert sideways <= 0, "the page scrolls sideways"
    problems = context.problems
    context.close()
    assert problems == []


def test_connections_fit_a_phone_and_the_cli_command_keeps_its_options_whole(browser, live_server, seeded):
    """At 390 px the redirect URI's block made the page 405 px wide, and `poke mcp add <url> --name <name>` broke
    inside `--name` (a hyphen is a break opportunity)."""
    context, page = on_a_phone(browser, live_server)
    page.goto("/connections/")
    page.wait_for_load_state("load")
    shoot(page, "connections-phone")

    assert page.evaluate("document.documentElement.scrollWidth") <= 390
    lines_of_option = page.evaluate(
        """(() => {
             const code = [...document.querySelectorAll('code')].find(c => c.textContent.includes('--name'));
             const walker = document.createTreeWalker(code, NodeFilter.SHOW_TEXT);
             let text = walker.nextNode();
             while (!text.textContent.includes('--name')) text = walker.nextNode();
             const at = text.textContent.indexOf('--name');
             const range = document.createRange();
             range.setStart(text, at);
             range.setEnd(text, at + '--name'.length);
             return new Set([...range.getClientRects()].map(r => Math.round(r.top))).size;
           })()"""
    )
    assert lines_of_option == 1
    context.close()
