"""A form's action URL opened by GET (pasted, bookmarked, the console guide's table) leads to the page that holds the
form, never to a blank 405; other methods are still refused; POST still does the work (the pages' own tests)."""

import pytest

from channels.models import LinkedAddress

pytestmark = pytest.mark.django_db

FORM_ACTIONS = [
    ("/settings/channels/quiet-hours/", "/settings/channels/#quiet-hours"),
    ("/settings/channels/code/", "/settings/channels/"),
    ("/settings/channels/telegram/", "/settings/channels/"),
    ("/settings/channels/7/unlink/", "/settings/channels/"),
    ("/connections/calendar/", "/connections/#calendar-title"),
    ("/connections/mailbox/", "/connections/#mailbox-title"),
    ("/reminders/rem_nothing/cancel/", "/reminders/"),
]


@pytest.fixture
def signed_in(client, user):
    LinkedAddress.objects.create(user=user, channel="sms", address="+14155550100")  # quiet hours need a phone
    client.force_login(user)
    return client


@pytest.mark.parametrize(("action", "page"), FORM_ACTIONS)
def test_a_get_of_a_form_action_goes_to_the_form(signed_in, action, page):
    response = signed_in.get(action)

    assert response.status_code == 302
    assert response["Location"] == page
    path, _, anchor = page.partition("#")
    shown = signed_in.get(path)
    assert shown.status_code == 200
    if anchor:
        assert f'id="{anchor}"' in shown.content.decode()


@pytest.mark.parametrize(("action", "page"), FORM_ACTIONS)
def test_other_methods_are_still_refused(signed_in, action, page):
    assert signed_in.put(action).status_code == 405
    assert signed_in.delete(action).status_code == 405


def test_a_signed_out_get_asks_to_sign_in_first(client):
    response = client.get("/settings/channels/quiet-hours/")

    assert response.status_code == 302 and response["Location"].startswith("/login/")
