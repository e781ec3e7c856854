"""Every endpoint that takes an API key declares the scope each of its methods needs (``required_scopes`` on the
view: method → ``keys.scopes.Scope``), and ``KeyScopes``, the API's default permission, refuses a key without it:
403 ``insufficient_scope``, naming the scope. A key-authenticated method that declares none is a bug, refused with
a 500 rather than let through (tests/test_scopes.py walks the URL resolver so that this never ships).

The check reads the key's row as authentication loaded it: no query. A key the process remembers
(ingestion/hotpath/recent.py) is looked up afresh before it is refused, so a scope added a moment ago counts; one
removed a moment ago is caught by the message's insert, which writes only while the key still has messages:send.

It also notes the key's use ("last used", at most once a minute per key: keys.services.note_key_used) for every
authenticated call; the message endpoints note it themselves, after the message is written."""

from collections.abc import Mapping
from typing import Any

from django.core.exceptions import ImproperlyConfigured
from rest_framework.permissions import BasePermission
from rest_framework.request import Request

from ingestion.authentication import is_unconfirmed, look_up_afresh
from ingestion.exceptions import InsufficientScope
from keys.models import ApiKey
from keys.scopes import ACTION_OF, Scope
from keys.services import note_key_used


def required_scope(view: Any, method: str) -> Scope | None:
    """The scope a method of a view needs; None for OPTIONS, which says nothing about the account, and for a method
    the view does not answer (its 405 follows)."""
    if method == "OPTIONS" or method.lower() not in view.http_method_names or not hasattr(view, method.lower()):
        return None
    declared: Mapping[str, Scope] = getattr(view, "required_scopes", {})
    scope = declared.get("GET" if method == "HEAD" else method)
    if scope is None:
        raise ImproperlyConfigured(f"{type(view).__name__} takes an API key but declares no scope for {method}.")
    return scope


class KeyScopes(BasePermission):
    def has_permission(self, request: Request, view: Any) -> bool:
        key = request.auth
        if not isinstance(key, ApiKey):
            return True  # not a key: a trigger's token, a signed callback, or no credential at all
        scope = required_scope(view, request.method or "")
        if scope is None:
            return True
        if not key.has_scope(scope) and is_unconfirmed(request):
            key = look_up_afresh(request, view)
        if not key.has_scope(scope):
            raise InsufficientScope(scope.value, ACTION_OF[scope])
        if getattr(view, "notes_key_use", True):
            note_key_used(key)
        return True
