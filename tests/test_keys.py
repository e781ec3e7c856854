"""Key formats, storage and revocation."""

import re

import pytest

from keys import tokens
from keys.models import ApiKey, Generation
from keys.services import create_key, find_key, revoke_key
from tests.factories import UserFactory

pytestmark = pytest.mark.django_db


def test_v2_keys_have_a_prefix_190_random_bits_and_a_checksum():
    plaintext = tokens.generate(Generation.V2)

    assert re.fullmatch(r"psk_[0-9A-Za-z]{38}", plaintext)
    assert tokens.recognise(plaintext) == tokens.PresentedKey(Generation.V2, tokens.digest(plaintext))
    assert len({tokens.generate(Generation.V2) for _ in range(1000)}) == 1000


def test_v1_keys_start_with_pk():
    plaintext = tokens.generate(Generation.V1)
    assert re.fullmatch(r"pk_[0-9A-Za-z]{40}", plaintext)
    assert tokens.recognise(plaintext).generation == Generation.V1


def test_only_the_digest_and_a_hint_are_stored():
    key, plaintext = create_key(UserFactory(), "deploy bot")

    stored = ApiKey.objects.filter(pk=key.pk).values().get()
    assert plaintext not in str(stored)
    assert stored["digest"] == tokens.digest(plaintext)
    assert stored["hint"] == f"psk_…{plaintext[-4:]}"


def test_a_key_needs_a_name():
    with pytest.raises(ValueError):
        create_key(UserFactory(), "   ")


def test_revocation_is_one_way():
    key, _plaintext = create_key(UserFactory(), "deploy bot")
    assert revoke_key(key) is True
    assert revoke_key(key) is False

    key = ApiKey.objects.get(pk=key.pk)
    key.revoked_at = None
    with pytest.raises(ValueError):
        key.save()
    assert ApiKey.objects.get(pk=key.pk).is_revoked


def test_find_key_by_its_plaintext():
    key, plaintext = create_key(UserFactory(), "deploy bot")
    assert find_key(plaintext) == key
    assert find_key(plaintext + "\n") == key
    assert find_key(tokens.generate(Generation.V2)) is None
    assert find_key("nonsense") is None
