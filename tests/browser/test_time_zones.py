"""Times and time zones in a real Chromium: the zone a person's browser is in is offered in Settings, and every time
on a page is written one way, in the person's zone."""

import pytest

from accounts.services import profile_of, sign_up
from tests.browser.conftest import DESKTOP
from tests.browser.test_phone_console import EMAIL, PASSWORD, signed_in

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def person(db):
    return sign_up(email=EMAIL, password=PASSWORD, phone_number="+14155551234", channel="sms")


def test_settings_offer_the_browser_s_own_zone_and_save_it(browser, live_server, person):
    context, page = signed_in(browser, live_server, DESKTOP, timezone_id="Europe/Paris")
    page.goto("/settings/")
    page.get_by_role("button", name="Use this device's zone: Europe/Paris").click()
    assert page.get_by_label("Time zone").input_value() == "Europe/Paris"
    page.get_by_role("button", name="Save").click()
    page.wait_for_url("**/settings/")

    assert profile_of(person).time_zone == "Europe/Paris"
    # Once saved, the zone is the field's value and nothing more is offered.
    assert page.get_by_role("button", name="Use this device's zone: Europe/Paris").count() == 0
    assert context.problems == []
    context.close()
