"""The current endpoint's ordinary request, served without DRF's request, content negotiation and response objects.

Nearly every request to ``POST /api/v1/inbound/api-message`` is alike: a JSON body with a Content-Length, perhaps
an Idempotency-Key, and a V2 key this process remembers (ingestion/hotpath/recent.py) that may send. DRF's machinery
around such a request (wrapping it, negotiating a parser and a renderer, its response class) cost about a tenth of
an accepted message's Python calls (docs/benchmarks.md, "The accept path against the bare view").

``remembered_key`` says whether a request is such a one, without side effects; the view (ingestion/views.py,
``CurrentMessageView.dispatch``) then runs the same checks, in the same order, with the same functions as its full
path: the key as the authentication takes a remembered one (unconfirmed), its scope, the per-key limit, the
Idempotency-Key's form, the body's parsing and rules, the insert that confirms the key (and writes the
Idempotency-Key's record with the message: ingestion/idempotency.py; a retry is replayed only once that statement
has confirmed the key). The first check that refuses hands the request to the full
view's own exception handling, so every refusal is answered as before (same body, status and headers). Any other
request (another method or media type, a compressed or chunked body, a query string, a key not remembered,
expired or without the scope) goes to the full view from the start.
"""

from typing import Any

from django.conf import settings
from django.http import HttpRequest

from ingestion.authentication import bearer_token
from ingestion.exceptions import Unauthorized
from ingestion.hotpath import recent
from ingestion.parsers import StrictJSONParser
from keys import tokens
from keys.models import ApiKey, Generation
from keys.scopes import Scope
from ops.http import declared_length

MEDIA_TYPE = "application/json"
_PARSER = StrictJSONParser()


def remembered_key(request: HttpRequest) -> ApiKey | None:
    """The remembered key, still unexpired and with messages:send, when the request is an ordinary one; else None
    (the full view serves it). Reads the request's headers only: nothing is counted, read or written."""
    meta = request.META
    if (
        request.method != "POST"
        or meta.get("CONTENT_TYPE") != MEDIA_TYPE  # exactly: no charset or other parameter to read
        or "HTTP_CONTENT_ENCODING" in meta
        or "HTTP_TRANSFER_ENCODING" in meta
        or meta.get("QUERY_STRING")
    ):
        return None
    length = declared_length(request)
    if length is None or not 0 < length <= settings.INGEST_MAX_BODY_BYTES:
        return None  # no body, or one over the limit: the full view's refusal
    try:
        plaintext = bearer_token(meta.get("HTTP_AUTHORIZATION"))
    except Unauthorized:
        return None
    presented = tokens.recognise(plaintext)
    if presented is None or presented.generation != Generation.V2:
        return None
    key = recent.recall(presented.digest)
    if key is None or key.is_expired() or not key.has_scope(Scope.MESSAGES_SEND):
        return None
    return key


def parsed_body(request: HttpRequest) -> Any:
    """The body as the endpoint's parser reads it (the size limit, UTF-8, strict JSON), or its ApiError."""
    # Django's request reads as a stream of the body, as DRF hands it to the parser (its stubs do not say so).
    return _PARSER.parse(request, MEDIA_TYPE, {"request": request})  # type: ignore[arg-type]
