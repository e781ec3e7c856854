"""Bearer authentication of both endpoints: header shapes, key formats, generations and revocation."""

import pytest

from conversations.models import Message
from keys import tokens
from keys.models import Generation
from keys.services import revoke_key
from tests.conftest import CURRENT, LEGACY, post
from tests.factories import make_key

pytestmark = pytest.mark.django_db

BODY = {"message": "hi"}


def assert_refused(response, code):
    assert response.status_code == 401, response.content
    assert response.json()["success"] is False
    assert response.json()["code"] == code
    assert response["WWW-Authenticate"].startswith("Bearer")
    assert not Message.objects.exists()


@pytest.mark.parametrize("path", [CURRENT, LEGACY])
def test_a_missing_header_is_refused(client, path):
    assert_refused(post(client, path, None, BODY), "missing_authorization")


@pytest.mark.parametrize("path", [CURRENT, LEGACY])
@pytest.mark.parametrize(
    "template",
    [
        "{key}",  # no scheme
        "Bearer{key}",  # no space after Bearer
        "Bearer  {key}",  # two spaces
        "Bearer {key} ",  # trailing space
        "Bearer\t{key}",  # tab instead of space
        "Bearer {key}\tx",  # whitespace inside
        "Basic {key}",  # another scheme
        "Token {key}",
        "Bearer",
        "Bearer ",
        "Bearer {key} {key}",
    ],
)
def test_a_malformed_header_is_refused_without_a_query(client, v1, v2, path, template, django_assert_num_queries):
    key = v2[1] if path == CURRENT else v1[1]
    with django_assert_num_queries(0):
        response = post(client, path, None, BODY, Authorization=template.format(key=key))
    assert_refused(response, "malformed_authorization")


def test_a_newline_inside_the_header_is_refused(client, v2):
    # A client library would refuse to send a raw newline; a folded or smuggled one must not get through either.
    assert_refused(
        post(client, CURRENT, None, BODY, Authorization=f"Bearer {v2[1][:10]}\n{v2[1][10:]}"), "malformed_authorization"
    )


@pytest.mark.parametrize("scheme", ["bearer", "BEARER", "bEaReR"])
def test_the_scheme_is_case_insensitive(client, v2, scheme):
    assert post(client, CURRENT, None, BODY, Authorization=f"{scheme} {v2[1]}").status_code == 200


@pytest.mark.parametrize(
    "presented",
    [
        "psk_short",
        "hello",
        "pk_",
        "pk_tooShort",
        "ghp_0123456789012345678901234567890123456",
        "psk_" + "A" * 38,  # right shape, wrong checksum
    ],
)
def test_a_malformed_key_is_refused_without_a_query(client, db, presented, django_assert_num_queries):
    with django_assert_num_queries(0):
        response = post(client, CURRENT, presented, BODY)
    assert_refused(response, "invalid_api_key")


def test_a_truncated_or_mistyped_key_fails_its_checksum(client, v2, django_assert_num_queries):
    plaintext = v2[1]
    flipped = plaintext[:-8] + ("a" if plaintext[-8] != "a" else "b") + plaintext[-7:]
    with django_assert_num_queries(0):
        mistyped = post(client, CURRENT, flipped, BODY)
        truncated = post(client, CURRENT, plaintext[:-1], BODY)
    assert_refused(mistyped, "invalid_api_key")
    assert_refused(truncated, "invalid_api_key")


def test_an_unknown_well_formed_key_costs_one_query(client, db, django_assert_num_queries):
    with django_assert_num_queries(1):
        current = post(client, CURRENT, tokens.generate(Generation.V2), BODY)
    with django_assert_num_queries(1):
        legacy = post(client, LEGACY, tokens.generate(Generation.V1), BODY)
    assert_refused(current, "invalid_api_key")
    assert_refused(legacy, "invalid_api_key")


def test_a_v1_key_on_the_current_endpoint_names_the_legacy_one(client, v1):
    response = post(client, CURRENT, v1[1], BODY)
    assert_refused(response, "wrong_key_generation")
    assert LEGACY in response.json()["message"]


def test_a_v2_key_on_the_legacy_endpoint_names_the_current_one(client, v2):
    response = post(client, LEGACY, v2[1], BODY)
    assert_refused(response, "wrong_key_generation")
    assert CURRENT in response.json()["message"]


@pytest.mark.parametrize(("path", "generation"), [(CURRENT, Generation.V2), (LEGACY, Generation.V1)])
def test_a_revoked_key_is_refused_on_the_next_request(client, user, path, generation):
    key, plaintext = make_key(user, generation=generation)
    assert post(client, path, plaintext, BODY).status_code == 200

    revoke_key(key)

    response = post(client, path, plaintext, BODY)
    assert response.status_code == 401
    assert response.json()["code"] == "revoked_api_key"
    assert Message.objects.count() == 1


def test_revoking_one_key_leaves_the_others_working(client, user):
    first, first_plain = make_key(user, "backup script")
    _, second_plain = make_key(user, "calendar sync")
    revoke_key(first)

    assert post(client, CURRENT, first_plain, BODY).status_code == 401
    assert post(client, CURRENT, second_plain, BODY).status_code == 200


def test_the_key_is_never_echoed_in_an_error(client, v1):
    response = post(client, CURRENT, v1[1], BODY)
    assert v1[1] not in response.content.decode()
