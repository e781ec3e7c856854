"""Times and time zones in a real Chromium: the zone a person's browser is in is offered in Settings, and every time
on a page is written one way, in the person's zone."""

import pytest

from accounts.services import profile_of, sign_up, update_contact
from conversations.models import Endpoint, Message
from ingestion.hotpath.recording import record_user_message
from tests.browser.conftest import DESKTOP
from tests.browser.test_phone_console import EMAIL, PASSWORD, signed_in
from tests.test_console_times import MOMENT

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


def test_times_stay_in_the_person_s_zone_whatever_the_browser_s(browser, live_server, person):
    update_contact(person, time_zone="America/New_York")
    message = record_user_message(user=person, endpoint=Endpoint.CONSOLE, text="Hello")
    Message.objects.filter(pk=message.pk).update(created_at=MOMENT)
    context, page = signed_in(browser, live_server, DESKTOP, timezone_id="Asia/Tokyo")

    page.goto("/conversation/")
    page.wait_for_load_state("load")
    assert page.locator(f"#{message.public_id} time").first.inner_text() == "Nov 25, 12:50 EST"
    page.goto(f"/conversation/messages/{message.public_id}/")
    page.wait_for_load_state("load")
    assert "Nov 25, 12:50 EST" in page.locator("time").all_inner_texts()
    assert context.problems == []
    context.close()
