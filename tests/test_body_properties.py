"""Property tests (hypothesis) for the body rules: any JSON object is either accepted and stored exactly as sent, or
refused with a 4xx in the error shape and nothing recorded; any bytes at all never get a 5xx."""

import json
from decimal import Decimal
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conversations.models import Delivery, Message
from tests.conftest import CURRENT, LEGACY, post

pytestmark = [pytest.mark.slow, pytest.mark.django_db]

# Every code point, lone surrogates and NUL included: the hostile part of "any JSON".
ANY_TEXT = st.text(alphabet=st.characters(exclude_categories=()), max_size=20)
JSON_VALUES = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(10**60), max_value=10**60)
    | st.floats(allow_nan=False, allow_infinity=False)
    | ANY_TEXT,
    lambda children: st.lists(children, max_size=4) | st.dictionaries(ANY_TEXT, children, max_size=4),
    max_leaves=12,
)
JSON_OBJECTS = st.dictionaries(ANY_TEXT | st.just("message"), JSON_VALUES, max_size=5)
LOOSE = settings(
    max_examples=120,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


def as_json_numbers(value: Any) -> Any:
    """JSON has one kind of number: PostgreSQL's jsonb keeps 7.205759403792138e+16 as the same number written
    72057594037921380, which Python then reads as an int. Compare numbers as numbers, exactly."""
    return json.loads(json.dumps(value), parse_float=Decimal, parse_int=Decimal)


@pytest.fixture
def unlimited(settings):
    settings.INGEST_RATE_LIMIT = "1000000/m"  # hundreds of examples from one key


def assert_refused_cleanly(response, before: int) -> None:
    assert 400 <= response.status_code < 500, (response.status_code, response.content[:300])
    error = response.json()
    assert set(error) == {"success", "message", "code"}
    assert error["success"] is False
    assert error["message"] and error["code"]
    assert Message.objects.count() == before
    assert Delivery.objects.count() == before


@LOOSE
@given(body=JSON_OBJECTS)
def test_any_object_is_stored_exactly_or_refused_with_nothing_recorded(client, v2, unlimited, body):
    before = Message.objects.count()
    response = post(client, CURRENT, v2[1], body)

    if response.status_code == 200:
        stored = Message.objects.order_by("-id").first()
        assert as_json_numbers(stored.context) == as_json_numbers(body)
        assert stored.text == body.get("message", "")
        assert Message.objects.count() == Delivery.objects.count() == before + 1
    else:
        assert_refused_cleanly(response, before)


@LOOSE
@given(body=JSON_OBJECTS)
def test_the_legacy_endpoint_obeys_the_same_property(client, v1, unlimited, body):
    before = Message.objects.count()
    response = post(client, LEGACY, v1[1], body)

    if response.status_code == 200:
        assert as_json_numbers(Message.objects.order_by("-id").first().context) == as_json_numbers(body)
    else:
        assert_refused_cleanly(response, before)


@LOOSE
@given(raw=st.binary(max_size=200) | st.text(max_size=200).map(str.encode))
def test_any_bytes_get_an_answer_never_a_5xx(client, v2, unlimited, raw):
    before = Message.objects.count()
    response = post(client, CURRENT, v2[1], raw=raw)

    if response.status_code != 200:
        assert_refused_cleanly(response, before)
    else:
        assert isinstance(json.loads(raw), dict)


DEEP_VALUES = st.recursive(
    st.none() | st.integers() | ANY_TEXT,
    lambda children: st.lists(children, max_size=3) | st.dictionaries(ANY_TEXT, children, max_size=3),
    max_leaves=20,
)


@pytest.mark.django_db(databases=[])
@LOOSE
@given(value=DEEP_VALUES, max_depth=st.integers(min_value=1, max_value=5))
def test_the_quick_storability_pass_refuses_what_the_full_pass_refuses(value, max_depth):
    """ingestion/body.py checks a body in a quick pass and runs the full pass (which names the value) only when the
    quick one finds something: the two must agree on every value and depth limit, or a bad body would be stored."""
    from ingestion import body as body_rules
    from ingestion.exceptions import InvalidBody

    try:
        body_rules._check_storable(value, 1, max_depth, body_rules._root)
        refused = False
    except InvalidBody:
        refused = True
    assert body_rules._needs_a_closer_look(value, 1, max_depth) is refused
