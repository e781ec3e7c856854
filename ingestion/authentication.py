"""Bearer API-key authentication: a malformed key is refused with no query, a well-formed one costs one query
that also brings the owner and their conversation, and for the legacy endpoint their profile (what the request
needs next). Only a failure touches the failed-authentication limit.

The current endpoint's POSTs may instead take a key this process found valid lately (ingestion/hotpath/recent.py), with
no query:
such a key is *unconfirmed* until the message's insert confirms it, and the view looks it up afresh
(``authenticate_afresh``) whenever that did not happen."""

import re
from typing import TYPE_CHECKING, ClassVar

from django.contrib.auth.models import User
from rest_framework.authentication import BaseAuthentication
from rest_framework.request import Request

from ingestion import throttling
from ingestion.exceptions import (
    AccountDisabled,
    ExpiredApiKey,
    InvalidApiKey,
    MalformedAuthorization,
    MissingAuthorization,
    RevokedApiKey,
    Unauthorized,
    WrongKeyGeneration,
)
from ingestion.hotpath import lookup, recent
from keys import tokens
from keys.models import ApiKey, Generation
from keys.services import note_expired

if TYPE_CHECKING:  # rest_framework.views imports DRF's settings, which import this module (ingestion/scopes.py)
    from rest_framework.views import APIView

# Any character str.isspace() calls whitespace (the regex engine uses the same test), found in C.
_WHITESPACE = re.compile(r"\s")

CURRENT_PATH = "/api/v1/inbound/api-message"
LEGACY_PATH = "/api/v1/inbound-sms/webhook"

_WRONG_GENERATION = {
    # (key presented, endpoint expects): what to tell the caller
    (Generation.V1, Generation.V2): (
        f"This is a V1 key (pk_…); V1 keys work only with the legacy endpoint POST {LEGACY_PATH}. "
        "Create a V2 key in the console under API Keys to use this endpoint."
    ),
    (Generation.V2, Generation.V1): (
        f"This is a V2 key; it works only with POST {CURRENT_PATH}. "
        "The deprecated legacy endpoint accepts only V1 (pk_) keys."
    ),
}


def bearer_token(header: str | None) -> str:
    """The key from 'Bearer <key>': scheme case-insensitive (RFC 9110), exactly one space, no whitespace in the key."""
    if header is None or header == "":
        raise MissingAuthorization()
    scheme, space, key = header.partition(" ")
    if scheme.lower() != "bearer" or not space or not key or _WHITESPACE.search(key):
        raise MalformedAuthorization()
    return key


# Set in the request's WSGI environ (request.META, Django's and DRF's alike) while its key is one remembered and not
# yet confirmed (is_unconfirmed).
UNCONFIRMED = "poke.api_key_unconfirmed"


def is_unconfirmed(request: Request) -> bool:
    """Whether the request's key came from what the process remembers and is not yet confirmed by the database."""
    return bool(request.META.get(UNCONFIRMED, False))


def key_of(request: Request) -> ApiKey:
    """The API key that authenticated ``request``, on a view whose authentication classes take only keys."""
    key = request.auth
    assert isinstance(key, ApiKey)
    return key


def look_up_afresh(request: Request, view: "APIView") -> ApiKey:
    """Replace the request's key, perhaps one remembered and unconfirmed (ingestion/hotpath/recent.py), by a fresh
    lookup through the view's authentication; raises the error if it no longer holds."""
    authenticator = view.get_authenticators()[0]
    assert isinstance(authenticator, ApiKeyAuthentication)
    request.user, request.auth = authenticator.authenticate_afresh(request)
    return key_of(request)


def confirmed_key(request: Request, view: "APIView") -> ApiKey:
    """The request's key, looked up afresh first if it is an unconfirmed one: for an endpoint whose work is no
    message, whose insert would confirm it (a key revoked a moment ago gets its 401)."""
    return look_up_afresh(request, view) if is_unconfirmed(request) else key_of(request)


class ApiKeyAuthentication(BaseAuthentication):
    # The generation the endpoint accepts; None accepts either (the receipts endpoint).
    generation: ClassVar[Generation | None] = None
    # The key's own query always brings the owner's thread (where the message goes); the profile only where the
    # reply needs it: each table joined costs rows to build on every request.
    with_profile: ClassVar[bool] = False
    # Whether a POST may take a key remembered by ingestion/hotpath/recent.py, unconfirmed. Only where the view
    # confirms it: the
    # current endpoint (the legacy reply carries the profile, which the insert does not confirm).
    recalls: ClassVar[bool] = False

    def authenticate(self, request: Request) -> tuple[User, ApiKey]:
        # Not for an Idempotency-Key request, which may be answered by replaying a stored response, nor for other
        # methods: only a message's insert confirms a remembered key.
        recall = self.recalls and request.method == "POST" and "HTTP_IDEMPOTENCY_KEY" not in request.META
        return self._authenticate(request, recall=recall)

    def authenticate_afresh(self, request: Request) -> tuple[User, ApiKey]:
        """Look the key up again, whatever the process remembers: confirms (or refuses) an unconfirmed key."""
        return self._authenticate(request, recall=False)

    def _authenticate(self, request: Request, *, recall: bool) -> tuple[User, ApiKey]:
        request.META[UNCONFIRMED] = False
        try:
            return self.identify(request, recall=recall)
        except Unauthorized:
            # The per-address limit is on failed attempts (docs/design.md#limits): an address over it gets 429 for
            # each further failure, while a valid key is never taxed with the check, nor locked out by someone
            # else's failures behind the same address.
            throttling.count_failed_authentication(request)
            raise

    def identify(self, request: Request, *, recall: bool = False) -> tuple[User, ApiKey]:
        presented = tokens.recognise(bearer_token(request.META.get("HTTP_AUTHORIZATION")))
        if presented is None:
            raise InvalidApiKey()
        if self.generation is not None and presented.generation != self.generation:
            raise WrongKeyGeneration(_WRONG_GENERATION[(presented.generation, self.generation)])
        if recall:
            remembered = recent.recall(presented.digest)
            if remembered is not None and not remembered.is_expired():
                request.META[UNCONFIRMED] = True
                return remembered.owner, remembered
        key = lookup.key_with_owner(presented.digest, with_profile=self.with_profile)
        if key is None or key.is_revoked or not key.owner.is_active or key.is_expired():
            if self.recalls:
                recent.forget(presented.digest)
            if key is None:
                raise InvalidApiKey()
            if key.is_revoked:
                raise RevokedApiKey()
            if not key.owner.is_active:
                raise AccountDisabled()
            note_expired(key)  # the audit log's "expired", once, if the owner's page has not noted it yet
            raise ExpiredApiKey()
        if self.recalls:
            recent.remember(presented.digest, key)
        return key.owner, key

    def authenticate_header(self, request: Request) -> str:
        return 'Bearer realm="api"'


class V2KeyAuthentication(ApiKeyAuthentication):
    generation = Generation.V2
    recalls = True


class V1KeyAuthentication(ApiKeyAuthentication):
    generation = Generation.V1
    with_profile = True  # the legacy reply carries the phone number and channel


class AnyKeyAuthentication(ApiKeyAuthentication):
    """Either generation: the legacy endpoint hands out message ids too (read with the key that sent the message)."""

    generation = None
