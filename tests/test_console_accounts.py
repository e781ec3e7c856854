"""Sign up, log in, log out, password change and contact settings in the console."""

import re

import pytest
from django.contrib.auth import get_user_model
from django.test import Client

from tests.factories import UserFactory

pytestmark = pytest.mark.django_db

PASSWORD = "a long and uncommon passphrase"
CONSOLE_PAGES = ["/keys/", "/keys/new/", "/conversation/", "/settings/", "/settings/password/", "/settings/advanced/"]


def signup(client: Client, HTTP_ACCEPT_LANGUAGE: str = "", **overrides: str):
    data = {
        "email": "ada@example.com",
        "password1": PASSWORD,
        "password2": PASSWORD,
        "phone_number": "+14155551234",
        "channel": "whatsapp",
        **overrides,
    }
    return client.post("/signup/", data, HTTP_ACCEPT_LANGUAGE=HTTP_ACCEPT_LANGUAGE)


def test_signing_up_creates_the_account_with_its_contact_and_logs_in(client):
    response = signup(client, phone_number="+1 (415) 555-1234")

    assert response.status_code == 302
    assert response["Location"] == "/keys/"
    user = get_user_model().objects.get()
    assert (user.username, user.email) == ("ada@example.com", "ada@example.com")
    assert user.check_password(PASSWORD)
    assert (user.profile.phone_number, user.profile.channel) == ("+14155551234", "whatsapp")
    assert client.get("/keys/").status_code == 200


def test_the_username_settles_sign_ups_that_differ_only_in_case(client, db):
    from accounts.services import get_or_create_user, sign_up

    user = sign_up(email="Ada@Example.com", password=PASSWORD, phone_number="+14155551234", channel="sms")
    assert (user.username, user.email) == ("ada@example.com", "Ada@example.com")
    assert get_or_create_user("ADA@example.COM") == (user, False)
    # Any later spelling of the address maps to the same username, so two racing sign-ups meet its unique index.


@pytest.mark.parametrize(
    ("overrides", "field", "text"),
    [
        ({"email": "not-an-email"}, "email", "valid email"),
        ({"password2": "something else entirely"}, "password2", "The two passwords differ"),
        ({"password1": "password", "password2": "password"}, "password1", "too common"),
        ({"password1": "ada@example.com1", "password2": "ada@example.com1"}, "password1", "too similar"),
        ({"phone_number": "call me maybe"}, "phone_number", "Enter a phone number"),
        ({"phone_number": "020 7946 0958"}, "phone_number", "not a valid phone number in US"),  # a London number
        ({"phone_number": "+1415555"}, "phone_number", "not a valid phone number"),
        ({"channel": "fax"}, "channel", "Select a valid choice"),
        ({"phone_number": ""}, "phone_number", "Type the number your assistant should text"),
    ],
)
def test_signing_up_with_a_bad_field_says_what_is_wrong_next_to_it(client, overrides, field, text):
    response = signup(client, **overrides)

    assert response.status_code == 200
    errors = response.context["form"].errors
    assert field in errors
    assert text in " ".join(errors[field])
    assert f'id="id_{field}_error"' in response.content.decode()
    assert not get_user_model().objects.exists()


@pytest.mark.parametrize(
    "typed", ["(415) 555-0134", "415 555 0134", "415.555.0134", "001 415 555 0134", "+1 415-555-0134", "14155550134"]
)
def test_a_phone_number_typed_any_way_is_stored_in_e164(client, typed):
    """Without a country code, a number is read as one of PHONE_DEFAULT_REGION (US unless configured)."""
    assert signup(client, phone_number=typed).status_code == 302
    assert get_user_model().objects.get().profile.phone_number == "+14155550134"


def test_the_browser_s_region_reads_a_national_number_first(client):
    response = signup(client, phone_number="020 7946 0958", HTTP_ACCEPT_LANGUAGE="en-GB,en;q=0.8")

    assert response.status_code == 302
    assert get_user_model().objects.get().profile.phone_number == "+442079460958"


def test_the_default_region_is_a_setting(client, settings):
    settings.PHONE_DEFAULT_REGION = "DE"
    page = client.get("/signup/").content.decode()
    assert "as dialled in DE (030 123456)" in page

    assert signup(client, phone_number="030 1234567").status_code == 302
    assert get_user_model().objects.get().profile.phone_number == "+49301234567"


def test_the_phone_input_has_one_type_and_says_how_to_write_the_number(client):
    page = client.get("/signup/", HTTP_ACCEPT_LANGUAGE="en-US").content.decode()
    (tag,) = re.findall(r'<input[^>]*name="phone_number"[^>]*>', page)

    assert re.findall(r"\stype=", tag) == [" type="] and 'type="tel"' in tag
    assert 'autocomplete="tel"' in tag and 'inputmode="tel"' in tag
    assert "or as dialled in US ((201) 555-0123)" in page


@pytest.mark.parametrize(
    ("header", "regions"),
    [
        ("en-GB,en;q=0.8,de-CH;q=0.5", ["GB", "CH"]),
        ("de;q=0.9, fr-CA", ["CA"]),  # by quality, not by position
        ("zh-Hant-TW", ["TW"]),  # the region after a script subtag
        ("en-XX, en-001, *, en-US;q=0", []),  # unknown and numeric regions, a wildcard, q=0
        ("en-GB;q=bogus", []),
        ("", []),
    ],
)
def test_the_regions_a_browser_names(header, regions):
    from accounts.phones import regions_from_accept_language

    assert regions_from_accept_language(header) == regions


def test_a_national_number_in_the_contact_settings_too(client, user):
    client.force_login(user)
    response = client.post(
        "/settings/", {"phone_number": "(415) 555-0134", "channel": "sms"}, HTTP_ACCEPT_LANGUAGE="fr-FR"
    )  # not a valid French number: read as the default region's

    assert response.status_code == 302
    user.profile.refresh_from_db()
    assert user.profile.phone_number == "+14155550134"


def test_signing_up_twice_with_the_same_email_in_other_letters_is_refused(client):
    UserFactory(email="ada@example.com")
    response = signup(client, email="ADA@Example.com")
    assert "already exists" in response.context["form"].errors["email"][0]
    assert get_user_model().objects.count() == 1


def test_logging_in_takes_the_email_in_any_capitalisation(client):
    signup(Client())
    response = client.post("/login/", {"username": "Ada@EXAMPLE.com", "password": PASSWORD})
    assert response.status_code == 302
    assert response["Location"] == "/keys/"


def test_a_wrong_password_is_refused_with_a_clear_message(client):
    signup(Client())
    response = client.post("/login/", {"username": "ada@example.com", "password": "nope"})
    assert response.status_code == 200
    assert "do not match an account" in response.content.decode()


@pytest.mark.parametrize("path", CONSOLE_PAGES)
def test_every_console_page_needs_a_login(client, path):
    response = client.get(path)
    assert response.status_code == 302
    assert response["Location"].startswith("/login/?next=")


def test_logging_out_takes_a_post_and_ends_the_session(client):
    client.force_login(UserFactory())
    assert client.get("/logout/").status_code == 405
    assert client.post("/logout/").status_code == 302
    assert client.get("/keys/").status_code == 302


def test_the_landing_page_shows_visitors_what_the_service_does_and_sends_members_to_their_keys(client):
    page = client.get("/").content.decode()
    assert "/signup/" in page
    assert "/api/docs/" in page
    assert "/api/v1/inbound/api-message" in page

    client.force_login(UserFactory())
    assert client.get("/")["Location"] == "/keys/"


def test_the_landing_pages_sample_answer_has_the_fields_a_real_answer_has(client, v2):
    """The sample under the curl command: the same members as the endpoint's answer, the message id included."""
    import html
    import json

    from tests.conftest import CURRENT, post

    page = html.unescape(client.get("/").content.decode())
    sample = json.loads(re.search(r'\n(\{"success": true.*?\})</code>', page).group(1))
    real = post(client, CURRENT, v2[1], {"message": "The nightly backup failed, open a ticket"}).json()

    assert sample.keys() == real.keys()
    assert sample["message"] == real["message"] and re.fullmatch(r"msg_[0-9A-Za-z]{24}", sample["id"])


def test_contact_settings_show_and_change_the_phone_number_and_channel(client, user):
    client.force_login(user)
    page = client.get("/settings/").content.decode()
    assert 'value="+14155551234"' in page

    response = client.post("/settings/", {"phone_number": "+44 20 7946 0958", "channel": "imessage"})

    assert response.status_code == 302
    user.profile.refresh_from_db()
    assert (user.profile.phone_number, user.profile.channel) == ("+442079460958", "imessage")


def test_contact_settings_refuse_a_bad_number_and_keep_the_old_one(client, user):
    client.force_login(user)
    response = client.post("/settings/", {"phone_number": "call me maybe", "channel": "sms"})
    assert response.status_code == 200
    assert "phone_number" in response.context["form"].errors
    user.profile.refresh_from_db()
    assert user.profile.phone_number == "+14155551234"


@pytest.mark.parametrize("typed", ["europe/paris", "EUROPE/PARIS", " Europe/Paris ", "Europe/Paris"])
def test_the_time_zone_is_taken_in_any_case_and_stored_as_its_iana_name(client, user, typed):
    client.force_login(user)
    response = client.post("/settings/", {"phone_number": "+14155551234", "channel": "sms", "time_zone": typed})

    assert response.status_code == 302
    user.profile.refresh_from_db()
    assert user.profile.time_zone == "Europe/Paris"


def test_an_unknown_time_zone_is_refused_next_to_the_field(client, user):
    client.force_login(user)
    response = client.post(
        "/settings/", {"phone_number": "+14155551234", "channel": "sms", "time_zone": "Mars/Olympus"}
    )

    assert response.status_code == 200
    assert "Mars/Olympus is not a time zone name" in response.context["form"].errors["time_zone"][0]
    user.profile.refresh_from_db()
    assert user.profile.time_zone == "UTC"


def test_the_time_zone_field_offers_the_known_names(client, user):
    client.force_login(user)
    page = client.get("/settings/").content.decode()

    field = re.search(r'<input[^>]*name="time_zone"[^>]*>', page)
    assert field is not None
    listed = re.search(r'list="([^"]+)"', field.group(0))
    assert listed is not None, "the field names a datalist"
    datalist = re.search(rf'<datalist id="{listed.group(1)}">(.*?)</datalist>', page, re.S)
    assert datalist is not None
    names = re.findall(r'<option value="([^"]+)"', datalist.group(1))
    assert {"Europe/Paris", "America/New_York", "UTC", "Asia/Kolkata"} <= set(names)
    assert names == sorted(names)
    assert "data-browser-time-zone" in field.group(0), "console.js offers the browser's own zone next to it"


def test_changing_the_password_needs_the_old_one(client):
    user = UserFactory()
    client.force_login(user)
    wrong = client.post(
        "/settings/password/",
        {"old_password": "wrong", "new_password1": PASSWORD, "new_password2": PASSWORD},
    )
    assert "old_password" in wrong.context["form"].errors

    right = client.post(
        "/settings/password/",
        {"old_password": "correct horse battery staple", "new_password1": PASSWORD, "new_password2": PASSWORD},
    )
    assert right.status_code == 302
    user.refresh_from_db()
    assert user.check_password(PASSWORD)
    assert client.get("/keys/").status_code == 200  # still signed in


@pytest.mark.parametrize("path", ["/signup/", "/login/", "/settings/", "/logout/"])
def test_console_posts_need_the_csrf_token(path):
    client = Client(enforce_csrf_checks=True)
    client.force_login(UserFactory())
    assert client.post(path, {}).status_code == 403


def test_a_server_with_a_telegram_bot_offers_it_at_sign_up_and_links_the_chat_next(
    client, providers, django_capture_on_commit_callbacks
):
    from channels.models import LinkedAddress

    assert 'value="telegram"' in client.get("/signup/").content.decode()
    response = signup(client, phone_number="", channel="telegram")

    assert response.status_code == 200  # the chat's one-time link, shown at once
    page = response.content.decode()
    token = re.search(r"https://t\.me/assistant_test_bot\?start=([A-Za-z0-9_-]+)", page).group(1)
    assert "It works once, for 10 minutes" in page
    user = get_user_model().objects.get()
    assert (user.profile.phone_number, user.profile.channel) == ("", "sms")  # the spec's values for the legacy API
    with django_capture_on_commit_callbacks(execute=True):
        assert providers.telegram.inbound(5151, f"/start {token}").send(Client()).status_code == 200
    assert LinkedAddress.objects.get(user=user).channel == "telegram"


def test_without_a_telegram_bot_sign_up_does_not_offer_it(client, settings):
    settings.TELEGRAM_BOT_TOKEN = ""
    assert 'value="telegram"' not in client.get("/signup/").content.decode()
    response = signup(client, phone_number="", channel="telegram")

    assert "Select a valid choice" in " ".join(response.context["form"].errors["channel"])
    assert not get_user_model().objects.exists()


def test_without_telegram_the_phone_number_is_required_and_marked_so(client, settings):
    """Every channel offered needs the number: the field is required (its input says so) and its error does not
    point at a Telegram the server does not offer."""
    settings.TELEGRAM_BOT_TOKEN = ""
    page = client.get("/signup/").content.decode()
    assert re.search(r'<input[^>]*name="phone_number"[^>]*required', page), page

    response = signup(client, phone_number="")

    assert response.context["form"].errors["phone_number"] == ["Type the number your assistant should text."]
    assert "Telegram" not in response.content.decode()
    assert not get_user_model().objects.exists()


def test_with_telegram_the_phone_number_is_optional_and_says_when_it_is_needed(client, providers):
    page = client.get("/signup/").content.decode()
    assert not re.search(r'<input[^>]*name="phone_number"[^>]*required', page)
    assert "not for Telegram" in page

    response = signup(client, phone_number="", channel="sms")

    assert "or choose Telegram" in " ".join(response.context["form"].errors["phone_number"])
