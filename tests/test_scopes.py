"""Scopes on keys (keys/scopes.py, ingestion/scopes.py): every endpoint that takes a key, walked from the URL
resolver, against a key holding each scope alone; the hot path's cost; a remembered key whose scopes changed;
createapikey --scopes; the console's choice and its CSRF; the migration that keeps existing keys' abilities."""

import importlib
import re
from io import StringIO

import pytest
from django.core.management import CommandError, call_command
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.urls import NoReverseMatch, URLPattern, URLResolver, get_resolver, reverse
from rest_framework.views import APIView

from ingestion.authentication import ApiKeyAuthentication
from keys.models import ApiKey, Generation
from keys.scopes import BEFORE_SCOPES, CONSOLE_DEFAULT, Scope, stored
from keys.services import set_scopes
from tests.conftest import CURRENT, post
from tests.console import form_nonce
from tests.factories import UserFactory, make_key

pytestmark = pytest.mark.django_db
on_postgresql = pytest.mark.skipif(
    connection.vendor != "postgresql",
    reason="PostgreSQL's hot path writes a message in one statement; SQLite cannot alter a table in a transaction",
)


def _patterns(resolvers, prefix=""):
    for entry in resolvers:
        if isinstance(entry, URLResolver):
            yield from _patterns(entry.url_patterns, prefix + str(entry.pattern))
        elif isinstance(entry, URLPattern):
            yield entry


def key_endpoints() -> list[tuple[str, str, type[APIView]]]:
    """(URL name, method, view) for every method of every API view that takes an API key."""
    found = []
    for pattern in _patterns(get_resolver().url_patterns):
        view = getattr(pattern.callback, "cls", None)
        if view is None or not issubclass(view, APIView):
            continue
        if not any(issubclass(auth, ApiKeyAuthentication) for auth in view.authentication_classes):
            continue
        for method in view.http_method_names:
            if method not in ("options", "head") and hasattr(view, method):
                found.append((pattern.name, method.upper(), view))
    return found


ENDPOINTS = key_endpoints()


def test_the_walk_finds_every_kind_of_key_endpoint():
    # So that the table below cannot pass by finding nothing.
    names = {name for name, _method, _view in ENDPOINTS}
    assert {"api-message", "legacy-webhook", "message-receipt", "create-webhook-trigger", "user-profile"} <= names
    assert {"mcp-connections", "mcp-connection-add", "mcp-connection", "mcp-connection-sync"} <= names


@pytest.mark.parametrize(("name", "method", "view"), ENDPOINTS, ids=[f"{m} {n}" for n, m, _ in ENDPOINTS])
def test_every_endpoint_that_takes_a_key_declares_a_scope_for_each_method(name, method, view):
    declared = getattr(view, "required_scopes", {})
    assert method in declared, (
        f"{view.__name__} ({name}) takes an API key but declares no scope for {method}: add it to its "
        "required_scopes (keys/scopes.py lists the scopes), and to the table of scopes in docs/howto/keys-and-scopes.md"
    )
    assert isinstance(declared[method], Scope)


def _url(name: str, view: type[APIView]) -> str:
    pattern = next(p for p in _patterns(get_resolver().url_patterns) if p.name == name)
    arguments = {group: "x" for group in pattern.pattern.regex.groupindex}
    try:
        return reverse(name, kwargs=arguments)
    except NoReverseMatch:  # an alternation Django cannot reverse, (?:a|b): take its first branch
        regex = re.sub(r"\(\?:([^|)]+)[^)]*\)", r"\1", str(pattern.pattern))
        regex = re.sub(r"\(\?P<\w+>[^)]*\)", "x", regex)
        return "/" + regex.strip("^$").replace("/?", "/")


def _key_with_only(scope: Scope, view: type[APIView]) -> str:
    generation = getattr(view.authentication_classes[0], "generation", None) or Generation.V2
    key, plaintext = make_key(UserFactory(), "scoped", generation)
    ApiKey.objects.filter(pk=key.pk).update(scopes=stored([scope]))  # V1 keys cannot choose; the table can
    return plaintext


@pytest.mark.parametrize("scope", list(Scope))
@pytest.mark.parametrize(("name", "method", "view"), ENDPOINTS, ids=[f"{m} {n}" for n, m, _ in ENDPOINTS])
def test_each_endpoint_takes_exactly_the_keys_with_its_scope(client, name, method, view, scope):
    needed = view.required_scopes[method]
    plaintext = _key_with_only(scope, view)
    headers = {"Authorization": f"Bearer {plaintext}"}
    url = _url(name, view)
    if method in ("POST", "PUT", "PATCH"):
        response = client.generic(method, url, data="{}", content_type="application/json", headers=headers)
    else:
        response = client.generic(method, url, headers=headers)

    refused = response.status_code == 403 and response.json().get("code") == "insufficient_scope"
    assert refused is (scope != needed), (response.status_code, response.content[:300])
    if refused:
        assert needed.value in response.json()["message"]
        assert response["WWW-Authenticate"] == f'Bearer realm="api", error="insufficient_scope", scope="{needed}"'
    else:
        assert response.status_code != 500


def test_a_key_without_messages_send_is_refused_and_nothing_is_written(client):
    from conversations.models import Message

    _, plaintext = make_key(scopes=[Scope.RECEIPTS_READ])
    response = post(client, CURRENT, plaintext, {"message": "hi"})
    assert (response.status_code, response.json()["code"]) == (403, "insufficient_scope")
    assert response.json()["message"].startswith("This key may not send messages: it lacks the scope messages:send.")
    assert not Message.objects.exists()


@on_postgresql
def test_the_scope_check_adds_no_query_to_a_message(client, django_assert_num_queries):
    _, plaintext = make_key(scopes=CONSOLE_DEFAULT)
    assert post(client, CURRENT, plaintext, {"message": "first"}).status_code == 200  # looks the key up, stamps it
    with django_assert_num_queries(1):  # the remembered key's check, the message and its delivery: one statement
        assert post(client, CURRENT, plaintext, {"message": "second"}).status_code == 200


def test_a_scope_removed_from_a_remembered_key_counts_from_its_next_message(client):
    from conversations.models import Message

    key, plaintext = make_key(scopes=CONSOLE_DEFAULT)
    assert post(client, CURRENT, plaintext, {"message": "before"}).status_code == 200
    set_scopes(key, [Scope.RECEIPTS_READ])  # as the console does: nothing tells this process

    response = post(client, CURRENT, plaintext, {"message": "after"})

    assert (response.status_code, response.json()["code"]) == (403, "insufficient_scope")
    assert list(Message.objects.values_list("text", flat=True)) == ["before"]


def test_a_scope_added_to_a_remembered_key_counts_at_once(client):
    key, plaintext = make_key(scopes=[Scope.MESSAGES_SEND])
    assert post(client, CURRENT, plaintext, {"message": "remembered now"}).status_code == 200
    set_scopes(key, [Scope.MESSAGES_SEND, Scope.WEBHOOKS_MANAGE])

    response = post(client, "/api/v1/api-keys/webhook", plaintext, {"condition": "When it rains", "action": "Say so"})

    assert response.status_code == 201, response.content


def test_a_new_key_gets_the_consoles_default_unless_told_otherwise():
    from keys.services import create_key

    owner = UserFactory()
    assert create_key(owner, "default")[0].scope_set == CONSOLE_DEFAULT
    assert create_key(owner, "chosen", scopes=[Scope.PROFILE_READ])[0].scope_set == {Scope.PROFILE_READ}
    assert create_key(owner, "legacy", Generation.V1, scopes=[Scope.PROFILE_READ])[0].scope_set == {
        Scope.MESSAGES_SEND,
        Scope.RECEIPTS_READ,
        Scope.PROFILE_READ,
    }


def test_createapikey_takes_scopes_and_says_them():
    out = StringIO()
    call_command(
        "createapikey", email="ops@example.com", name="hooks", scopes="webhooks:manage, profile:read", stdout=out
    )
    key = ApiKey.objects.get(name="hooks")
    assert key.scope_set == {Scope.WEBHOOKS_MANAGE, Scope.PROFILE_READ}
    assert "with scopes webhooks:manage,profile:read" in out.getvalue()

    call_command("createapikey", email="ops@example.com", name="plain", stdout=StringIO())
    assert ApiKey.objects.get(name="plain").scope_set == CONSOLE_DEFAULT


@pytest.mark.parametrize(
    ("scopes", "problem"), [("webhooks:manage,admin:all", "'admin:all' is not a scope"), (" , ", "at least one")]
)
def test_createapikey_refuses_unknown_scopes_and_creates_nothing(scopes, problem):
    with pytest.raises(CommandError, match=problem):
        call_command("createapikey", email="ops@example.com", name="bad", scopes=scopes, stdout=StringIO())
    assert not ApiKey.objects.exists()


def test_the_console_creates_a_key_with_the_scopes_ticked(client):
    owner = UserFactory()
    client.force_login(owner)
    page = client.get("/keys/new/").content.decode()
    for scope in Scope:
        assert f'value="{scope.value}"' in page
    nonce = form_nonce(client, "/keys/new/")

    client.post("/keys/new/", {"name": "hooks", "nonce": nonce, "scopes": ["webhooks:manage", "messages:send"]})

    assert ApiKey.objects.get(owner=owner).scope_set == {Scope.WEBHOOKS_MANAGE, Scope.MESSAGES_SEND}


def test_the_add_key_form_ticks_the_default_scopes(client):
    client.force_login(UserFactory())
    page = client.get("/keys/new/").content.decode()
    for scope in Scope:
        tag = page.split(f'value="{scope.value}"')[1].split(">")[0]
        assert ("checked" in tag) is (scope in CONSOLE_DEFAULT), scope


def test_a_key_without_scopes_is_refused_by_the_form(client):
    owner = UserFactory()
    client.force_login(owner)
    page = client.post("/keys/new/", {"name": "none", "nonce": form_nonce(client, "/keys/new/")})
    assert "Choose at least one thing the key may do." in page.content.decode()
    assert not ApiKey.objects.filter(owner=owner).exists()


def test_the_keys_page_changes_its_scopes_with_csrf_only(client):
    key, _ = make_key()
    strict = Client(enforce_csrf_checks=True)
    strict.force_login(key.owner)
    assert strict.post(f"/keys/{key.pk}/scopes/", {"scopes": ["profile:read"]}).status_code == 403
    assert ApiKey.objects.get(pk=key.pk).scope_set == BEFORE_SCOPES

    client.force_login(key.owner)
    client.post(f"/keys/{key.pk}/scopes/", {"scopes": ["profile:read"]})
    assert ApiKey.objects.get(pk=key.pk).scope_set == {Scope.PROFILE_READ}


def test_the_keys_page_says_when_a_key_predates_scopes(client):
    key, _ = make_key()
    ApiKey.objects.filter(pk=key.pk).update(scopes_predate_choice=True)
    client.force_login(key.owner)
    assert "created before keys had scopes" in client.get(f"/keys/{key.pk}/").content.decode()

    client.post(f"/keys/{key.pk}/scopes/", {"scopes": ["messages:send"]})
    assert "created before keys had scopes" not in client.get(f"/keys/{key.pk}/").content.decode()


@on_postgresql
def test_the_migration_keeps_what_existing_keys_could_do():
    migration = importlib.import_module("keys.migrations.0003_scopes_and_expiry")

    owner = UserFactory()
    make_key(owner, "old v2", scopes=[Scope.MESSAGES_SEND])
    reader, _ = make_key(owner, "old reader", scopes=[Scope.MESSAGES_SEND])
    make_key(owner, "old v1", Generation.V1)
    ApiKey.objects.update(scopes="")
    if connection.vendor == "postgresql":  # no ALTER TABLE while the test's rows have deferred checks pending
        with connection.cursor() as cursor:
            cursor.execute("SET CONSTRAINTS ALL IMMEDIATE")
    with connection.schema_editor() as editor:
        editor.add_field(ApiKey, _may_read_replies_field())
    try:
        with connection.cursor() as cursor:
            cursor.execute(f"UPDATE {ApiKey._meta.db_table} SET may_read_replies = (id = %s)", [reader.pk])
        migration.grant_what_keys_could_do(_apps_at_the_data_step(migration), None)
    finally:
        with connection.schema_editor() as editor:
            editor.remove_field(ApiKey, _may_read_replies_field())

    keys = {key.name: key for key in ApiKey.objects.all()}
    assert keys["old v2"].scope_set == BEFORE_SCOPES
    assert keys["old reader"].scope_set == BEFORE_SCOPES | {Scope.REPLIES_READ}
    assert keys["old v1"].scope_set == {Scope.MESSAGES_SEND, Scope.RECEIPTS_READ, Scope.PROFILE_READ}
    assert all(key.scopes_predate_choice for key in keys.values())


def _may_read_replies_field():
    from django.db import models

    field = models.BooleanField(default=False)
    field.set_attributes_from_name("may_read_replies")
    field.model = ApiKey
    return field


def _apps_at_the_data_step(migration):
    """The models the migration's function gets: after its new columns, before may_read_replies is dropped."""
    from django.db.migrations.loader import MigrationLoader

    state = MigrationLoader(connection).project_state(("keys", "0002_apikey_may_read_replies"), at_end=True)
    for operation in migration.Migration.operations:
        if operation.__class__.__name__ == "RunPython":
            break
        operation.state_forwards("keys", state)
    return state.apps


def test_device_log_in_grants_what_the_cli_calls_and_says_so(client):
    from devices import services
    from keys.scopes import CLI

    owner = UserFactory()
    authorization, device_code = services.start("node", "127.0.0.1")
    client.force_login(owner)
    page = client.get(f"/device?code={authorization.display_code}").content.decode()
    for scope in Scope:
        assert (f"<code>{scope.value}</code>" in page) is (scope in CLI), scope
    services.approve(authorization, owner)
    token = services.poll(device_code).token
    assert token
    assert ApiKey.objects.get(owner=owner).scope_set == CLI


def test_a_key_may_not_be_used_for_more_after_it_is_remembered_by_another_worker(client):
    # The SQL condition a remembered key's message is written under names the scope whole, not a substring.
    key, plaintext = make_key(scopes=[Scope.MESSAGES_SEND])
    assert post(client, CURRENT, plaintext, {"message": "one"}).status_code == 200
    ApiKey.objects.filter(pk=key.pk).update(scopes="xmessages:sendx")
    with CaptureQueriesContext(connection):
        response = post(client, CURRENT, plaintext, {"message": "two"})
    assert response.status_code == 403
