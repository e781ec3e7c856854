"""SECRET_KEY rotated with the old key in SECRET_KEY_FALLBACKS (docs/howto/backups-and-upgrades.md): what the old key
signed still verifies (a signed-in session, a password-reset link, a signature) until the old key is removed."""

import json

import pytest
from django.contrib.auth.tokens import default_token_generator
from django.core import signing
from django.test import Client

from tests.test_deploy_settings import manage, production_env

OLD = "the-key-before-rotation-" + "o" * 40
NEW = "the-key-after-rotation-" + "n" * 40

pytestmark = pytest.mark.django_db


def signed_in_as(client):
    """Whom the session cookie signs in, as a console page sees it (None: nobody)."""
    user = client.get("/keys/").wsgi_request.user
    return user if user.is_authenticated else None


def test_the_fallbacks_are_read_from_the_environment_comma_separated():
    shown = manage(
        "shell",
        "-c",
        "import json; from django.conf import settings; print(json.dumps(settings.SECRET_KEY_FALLBACKS))",
        env=production_env(SECRET_KEY=NEW, SECRET_KEY_FALLBACKS=f"{OLD}, older-key-{'x' * 40}"),
    )
    assert shown.returncode == 0, shown.stderr
    assert json.loads(shown.stdout.strip().splitlines()[-1]) == [OLD, f"older-key-{'x' * 40}"]


def test_what_the_old_key_signed_verifies_while_it_is_a_fallback_and_not_after(user, settings):
    settings.SECRET_KEY, settings.SECRET_KEY_FALLBACKS = OLD, []
    back_during, back_after = Client(), Client()  # two browsers signed in before the rotation
    for browser in (back_during, back_after):
        browser.force_login(user)
        assert signed_in_as(browser) == user
    reset_token = default_token_generator.make_token(user)
    signed = signing.dumps({"user": user.pk})

    settings.SECRET_KEY, settings.SECRET_KEY_FALLBACKS = NEW, [OLD]  # rotated, the old key kept as a fallback

    assert signed_in_as(back_during) == user  # still signed in; the session now carries the new key's hash
    assert default_token_generator.check_token(user, reset_token)
    assert signing.loads(signed) == {"user": user.pk}

    settings.SECRET_KEY_FALLBACKS = []  # the old key removed: nothing it alone signed verifies any more

    assert signing.loads(signing.dumps("fresh")) == "fresh"
    with pytest.raises(signing.BadSignature):
        signing.loads(signed)
    assert not default_token_generator.check_token(user, reset_token)
    assert signed_in_as(back_after) is None  # not back while the old key was a fallback: signed out
    assert signed_in_as(back_during) == user
