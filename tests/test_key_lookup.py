"""ingestion/hotpath/lookup.py: the request path's one-query key lookup gives what the ORM's select_related query
gives."""

import pytest
from django.contrib.auth.models import User
from django.forms.models import model_to_dict

from conversations.models import Conversation
from ingestion.hotpath.lookup import key_with_owner
from keys.models import ApiKey, Generation
from keys.services import revoke_key
from tests.factories import make_key


def test_it_loads_the_key_its_owner_and_their_thread_in_one_query(user, v2, django_assert_num_queries):
    key, _ = v2
    expected = ApiKey.objects.select_related("owner__conversation").get(pk=key.pk)

    with django_assert_num_queries(1):
        found = key_with_owner(key.digest)
        assert found is not None
        assert found.owner.conversation == expected.owner.conversation
        assert found.owner.conversation.user is found.owner

    assert model_to_dict(found) == model_to_dict(expected)
    assert found.created_at == expected.created_at and found.created_at.tzinfo is not None
    assert found._state.adding is False  # saving it updates the row, as for any loaded instance
    # Of the owner only the id and whether the account is active are read (no password hash on the request path);
    # the rest loads when read.
    assert (found.owner.pk, found.owner.is_active) == (expected.owner.pk, True)
    assert found.owner.get_deferred_fields() == {f.attname for f in User._meta.concrete_fields} - {"id", "is_active"}
    with django_assert_num_queries(1):
        assert found.owner.date_joined == expected.owner.date_joined
    assert model_to_dict(found.owner) == model_to_dict(expected.owner)


def test_with_the_profile_the_legacy_reply_needs_no_query_either(user, v1, django_assert_num_queries):
    key, _ = v1
    with django_assert_num_queries(1):
        found = key_with_owner(key.digest, with_profile=True)
        assert found is not None
        assert found.owner.profile.phone_number == "+14155551234"
        assert found.owner.profile.channel == "whatsapp"


def test_a_revoked_key_is_found_with_its_revocation(v2):
    key, _ = v2
    revoke_key(key)

    found = key_with_owner(key.digest)

    assert found is not None and found.is_revoked


def test_an_unknown_digest_finds_nothing(db):
    assert key_with_owner("0" * 64) is None


def test_an_owner_without_a_thread_raises_like_the_orm(db):
    key, _ = make_key(generation=Generation.V2)
    Conversation.objects.filter(user=key.owner).delete()

    found = key_with_owner(key.digest)

    assert found is not None
    with pytest.raises(Conversation.DoesNotExist):
        found.owner.conversation  # noqa: B018 (the access is the test)
