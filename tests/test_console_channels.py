"""Settings → Channels: linking a number by a code sent through that channel (to the fake provider), Telegram by a
one-time deep link that the bot's /start update redeems, unlinking; and every way a guess, a reuse, a late code or
someone else's number is refused."""

import re
from datetime import timedelta

import pytest
from django.test import Client
from django.utils import timezone

from accounts.services import profile_of
from channels.models import LinkCode, LinkedAddress
from conversations.models import Message
from tests.factories import UserFactory

pytestmark = pytest.mark.django_db

PAGE = "/settings/channels/"
NUMBER = "+14155550134"


@pytest.fixture
def signed_in(client, user):
    client.force_login(user)
    return client


def _ask(client: Client, number: str = "(415) 555-0134", channel: str = "sms"):
    return client.post(PAGE, {"channel": channel, "phone_number": number}, headers={"Accept-Language": "en-US"})


def _code_sent(provider, address: str = NUMBER) -> str:
    match = re.search(r"\b(\d{6})\b", provider.texts_to(address)[-1])
    assert match, "no code in the text"
    return match.group(1)


def test_the_page_offers_only_configured_channels(signed_in, settings):
    for name in ("TWILIO_ACCOUNT_SID", "WHATSAPP_CLOUD_ACCESS_TOKEN", "BLUEBUBBLES_URL", "TELEGRAM_BOT_TOKEN"):
        setattr(settings, name, "")
    page = signed_in.get(PAGE).content.decode()
    assert "offers no channels" in page and "Send a code" not in page and "Telegram link" not in page


def test_the_page_lists_the_offered_channels(signed_in, providers, settings):
    settings.BLUEBUBBLES_URL = ""
    page = signed_in.get(PAGE).content.decode()
    assert 'value="sms"' in page and 'value="whatsapp"' in page and 'value="imessage"' not in page
    assert "Make a Telegram link" in page


def test_linking_a_number_by_the_code_sent_to_it(signed_in, user, providers):
    profile_of(user).__class__.objects.filter(user=user).update(phone_number="")
    response = _ask(signed_in)
    assert response.status_code == 302
    code = _code_sent(providers.twilio)
    assert LinkCode.objects.get().code_digest != code and code not in LinkCode.objects.get().code_digest
    page = signed_in.get(PAGE).content.decode()
    assert "Type the code" in page and NUMBER in page
    linked = signed_in.post("/settings/channels/code/", {"code": code})
    assert linked.status_code == 302
    assert LinkedAddress.objects.filter(user=user, channel="sms", address=NUMBER).exists()
    # The first number proven fills an empty profile (what the legacy endpoint reports).
    assert profile_of(user).phone_number == NUMBER


@pytest.mark.parametrize(("seconds", "words"), [(600, "10 minutes"), (300, "5 minutes"), (60, "1 minute")])
def test_the_text_and_the_page_give_the_code_the_same_lifetime(signed_in, providers, settings, seconds, words):
    settings.LINK_CODE_TTL_SECONDS = seconds
    _ask(signed_in)

    assert f"It expires in {words}." in providers.twilio.texts_to(NUMBER)[-1]
    assert f"The code works once, for {words}." in signed_in.get(PAGE).content.decode()


def test_linking_keeps_a_profile_number_already_set(signed_in, user, providers):
    profile = profile_of(user)
    profile.phone_number, profile.channel = "+447946095800", "whatsapp"
    profile.save()
    _ask(signed_in, channel="imessage")
    signed_in.post("/settings/channels/code/", {"code": _code_sent(providers.bluebubbles)})
    assert LinkedAddress.objects.filter(user=user, channel="imessage").exists()
    profile.refresh_from_db()
    assert (profile.phone_number, profile.channel) == ("+447946095800", "whatsapp")


def test_a_code_works_once(signed_in, user, providers):
    _ask(signed_in)
    code = _code_sent(providers.twilio)
    signed_in.post("/settings/channels/code/", {"code": code})
    LinkedAddress.objects.all().delete()
    again = signed_in.post("/settings/channels/code/", {"code": code})
    assert again.status_code == 400 and "expired or was already used" in again.content.decode()
    assert not LinkedAddress.objects.exists()


def test_guessing_is_stopped_after_five_wrong_codes(signed_in, user, providers):
    _ask(signed_in)
    code = _code_sent(providers.twilio)
    wrong = f"{(int(code) + 1) % 10**6:06d}"
    texts = [signed_in.post("/settings/channels/code/", {"code": wrong}).content.decode() for _ in range(5)]
    assert "4 tries left" in texts[0] and "last try" in texts[4]
    late = signed_in.post("/settings/channels/code/", {"code": code})
    assert late.status_code == 400 and "Too many wrong codes" in late.content.decode()
    assert not LinkedAddress.objects.exists()


def test_an_expired_code_is_refused(signed_in, providers):
    _ask(signed_in)
    code = _code_sent(providers.twilio)
    LinkCode.objects.update(expires_at=timezone.now() - timedelta(seconds=1))
    response = signed_in.post("/settings/channels/code/", {"code": code})
    assert response.status_code == 400 and "expired" in response.content.decode()
    assert not LinkedAddress.objects.exists()


def test_a_code_for_one_number_is_not_a_code_for_a_later_one(signed_in, providers):
    _ask(signed_in)
    first = _code_sent(providers.twilio)
    _ask(signed_in, number="+14155550177")
    response = signed_in.post("/settings/channels/code/", {"code": first})
    assert response.status_code == 400
    assert not LinkedAddress.objects.filter(address=NUMBER).exists()


def test_a_number_someone_else_linked_is_refused_only_after_proof(signed_in, user, providers):
    other = UserFactory()
    LinkedAddress.objects.create(user=other, channel="sms", address=NUMBER)
    response = _ask(signed_in)
    assert response.status_code == 302  # the page tells a stranger nothing about who linked what
    result = signed_in.post("/settings/channels/code/", {"code": _code_sent(providers.twilio)})
    assert result.status_code == 400 and "linked to another account" in result.content.decode()
    assert LinkedAddress.objects.get(channel="sms", address=NUMBER).user == other


def test_codes_are_limited_per_person_and_per_number(signed_in, providers, settings):
    settings.LINK_CODE_ADDRESS_RATE_LIMIT = "2/h"
    settings.LINK_CODE_RATE_LIMIT = "3/h"
    assert _ask(signed_in).status_code == 302
    assert _ask(signed_in).status_code == 302
    refused = _ask(signed_in)
    assert refused.status_code == 429 and "this number" in refused.content.decode()
    assert _ask(signed_in, number="+14155550177").status_code == 302
    refused = _ask(signed_in, number="+14155550178")
    assert refused.status_code == 429 and "several codes" in refused.content.decode()
    assert len(providers.twilio.sent) == 3


def test_a_code_that_cannot_be_sent_says_so(signed_in, providers):
    providers.twilio.fail_next(400, body={"code": 21211, "message": "The 'To' number is not valid.", "status": 400})
    response = _ask(signed_in)
    assert response.status_code == 502 and "could not be sent" in response.content.decode()
    assert "Type the code" not in signed_in.get(PAGE).content.decode()


def test_an_invalid_number_is_a_form_error(signed_in, providers):
    response = _ask(signed_in, number="12")
    assert response.status_code == 400 and not providers.twilio.sent


def test_unlinking_is_immediate(signed_in, user, providers, django_capture_on_commit_callbacks):
    linked = LinkedAddress.objects.create(user=user, channel="sms", address=NUMBER)
    other = UserFactory()
    theirs = LinkedAddress.objects.create(user=other, channel="sms", address="+14155550177")
    assert signed_in.post(f"/settings/channels/{theirs.pk}/unlink/").status_code == 302
    assert LinkedAddress.objects.filter(pk=theirs.pk).exists()  # not anyone else's
    signed_in.post(f"/settings/channels/{linked.pk}/unlink/")
    assert not LinkedAddress.objects.filter(pk=linked.pk).exists()
    with django_capture_on_commit_callbacks(execute=True):
        providers.twilio.inbound(NUMBER, "still there?").send(Client())
    assert not Message.objects.exists()  # an unknown sender now
    assert "not linked" in providers.twilio.texts_to(NUMBER)[-1]


def test_linking_telegram_by_a_one_time_deep_link(signed_in, user, providers, django_capture_on_commit_callbacks):
    page = signed_in.post("/settings/channels/telegram/").content.decode()
    token = re.search(r"https://t\.me/assistant_test_bot\?start=([A-Za-z0-9_-]+)", page).group(1)
    assert token not in LinkCode.objects.get().code_digest
    with django_capture_on_commit_callbacks(execute=True):
        assert providers.telegram.inbound(5151, f"/start {token}").send(Client()).status_code == 200
    assert LinkedAddress.objects.get(channel="telegram").address == "5151"
    assert "Linked" in providers.telegram.texts_to("5151")[-1]
    assert not Message.objects.exists()  # the /start is not a message to the assistant
    # Used once: someone else's chat cannot redeem it again.
    with django_capture_on_commit_callbacks(execute=True):
        providers.telegram.inbound(6262, f"/start {token}").send(Client())
    assert not LinkedAddress.objects.filter(address="6262").exists()
    assert "expired or was already used" in providers.telegram.texts_to("6262")[-1]


def test_an_expired_or_guessed_telegram_link_is_refused(signed_in, providers, django_capture_on_commit_callbacks):
    page = signed_in.post("/settings/channels/telegram/").content.decode()
    token = re.search(r"start=([A-Za-z0-9_-]+)", page).group(1)
    LinkCode.objects.update(expires_at=timezone.now() - timedelta(seconds=1))
    with django_capture_on_commit_callbacks(execute=True):
        providers.telegram.inbound(5151, f"/start {token}").send(Client())
        providers.telegram.inbound(5152, "/start AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA").send(Client())
        providers.telegram.inbound(5153, "/start <script>").send(Client())
    assert not LinkedAddress.objects.exists()


def test_the_settings_tabs_lead_to_channels(signed_in):
    page = signed_in.get("/settings/").content.decode()
    assert 'href="/settings/channels/"' in page
    assert 'aria-current="page">Settings' in signed_in.get(PAGE).content.decode()


def test_posts_need_the_csrf_token(user, providers):
    client = Client(enforce_csrf_checks=True)
    client.force_login(user)
    assert _ask(client).status_code == 403
    assert not providers.twilio.sent


@pytest.fixture
def staff_client():
    from django.contrib.auth import get_user_model

    client = Client()
    client.force_login(get_user_model().objects.create_superuser("admin", "admin@example.com", "pw"))
    return client


def test_staff_see_links_and_codes_but_never_a_codes_digest(staff_client, signed_in, user, providers):
    LinkedAddress.objects.create(user=user, channel="telegram", address="5151")
    _ask(signed_in)
    code = LinkCode.objects.get()
    assert "5151" in staff_client.get("/admin/channels/linkedaddress/").content.decode()
    listing = staff_client.get("/admin/channels/linkcode/").content.decode()
    assert NUMBER in listing and code.code_digest not in listing
    assert code.code_digest not in staff_client.get(f"/admin/channels/linkcode/{code.pk}/change/").content.decode()
    assert (
        staff_client.get(f"/admin/channels/linkcode/?code_digest__startswith={code.code_digest[:2]}").status_code == 400
    )
    assert staff_client.get("/admin/channels/linkedaddress/add/").status_code == 403
