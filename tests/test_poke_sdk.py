"""The published `poke` SDK (PyPI) is a real client of our API: it must work unchanged against our base URL."""

import pytest
from poke import AuthenticationError, Poke, PokeError

from conversations.models import Message, Role
from keys.models import Generation
from keys.services import revoke_key
from tests.factories import make_key

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def base_url(live_server, monkeypatch):
    url = f"{live_server.url}/api/v1"
    monkeypatch.setenv("POKE_API", url)
    return url


def test_send_message_succeeds_with_a_v2_key(base_url):
    _key, plaintext = make_key(generation=Generation.V2)

    result = Poke(api_key=plaintext).send_message("Remind me to water the plants in 2 hours")

    assert result["success"] is True
    assert result["message"] == "Message sent successfully"
    sent = Message.objects.get(role=Role.USER)
    assert sent.text == "Remind me to water the plants in 2 hours"
    assert result["id"] == sent.public_id
    # The live server runs the default hand-off: the local assistant has acted and answered in the thread.
    assert Message.objects.get(role=Role.ASSISTANT).text.startswith("Okay! I'll remind you to water the plants")


def test_send_message_raises_the_authentication_error_with_a_v1_key(base_url):
    _, plaintext = make_key(generation=Generation.V1)
    with pytest.raises(AuthenticationError) as raised:
        Poke(api_key=plaintext).send_message("hi")
    assert raised.value.status == 401
    assert not Message.objects.exists()


def test_send_message_raises_the_authentication_error_with_a_revoked_key(base_url):
    key, plaintext = make_key()
    revoke_key(key)
    with pytest.raises(AuthenticationError):
        Poke(api_key=plaintext).send_message("hi")


def test_the_sdk_shows_our_message_for_other_errors(base_url):
    _, plaintext = make_key()
    with pytest.raises(PokeError) as raised:
        Poke(api_key=plaintext).send_message("   ")
    assert raised.value.status == 400
    assert "blank" in str(raised.value)
