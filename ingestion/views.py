from collections.abc import Callable, Sequence
from typing import Any

from django.conf import settings
from django.db.models import Model, Q
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.http.response import HttpResponseBase
from django.utils.http import http_date
from django.views.decorators.csrf import csrf_exempt
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerSplitView
from rest_framework.renderers import JSONRenderer
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from accounts.models import Profile
from accounts.services import profile_of
from conversations.models import Endpoint, Message, Role, is_message_id
from ingestion import accept as fast_path
from ingestion import body as body_rules
from ingestion import listing, openapi
from ingestion.authentication import (
    CURRENT_PATH,
    UNCONFIRMED,
    AnyKeyAuthentication,
    V1KeyAuthentication,
    V2KeyAuthentication,
    is_unconfirmed,
    key_of,
    look_up_afresh,
)
from ingestion.exceptions import (
    ApiError,
    InvalidJson,
    LengthRequired,
    MessageNotFound,
    NotFound,
    ReceiptWaitsBusy,
    Unauthorized,
)
from ingestion.hotpath import recent
from ingestion.hotpath.recording import record_user_message
from ingestion.idempotency import answer_once, idempotency_key_of, idempotent, once_in_statement, request_digest
from ingestion.negotiation import JsonOnly
from ingestion.parsers import PlainTextParser, StrictJSONParser
from ingestion.receipts import receipt
from ingestion.throttling import ReceiptReadThrottle, WindowThrottle
from ingestion.triggers import KeyOrWebhookTokenAuthentication
from keys.models import ApiKey
from keys.scopes import Scope
from ops.errors import json_error
from ops.http import REPLAYED_HEADER
from ops.request_id import request_id_of
from triggers.models import WebhookTrigger

SENT = "Message sent successfully"
# A message with a receipt: one handed to the assistant, whose delivery row exists or was pruned (its outcome kept).
HANDED_OVER = Q(delivery__isnull=False) | ~Q(outcome="")


class _Accepted(HttpResponse):
    """The fast path's answer, which keeps its payload as a DRF response does (the access log reads it)."""

    data: Any


class _MessageView(APIView):
    """POST a JSON body with a Bearer key; the message is recorded in the key owner's thread."""

    http_method_names = ["post", "options"]
    content_negotiation_class = JsonOnly
    required_scopes = {"POST": Scope.MESSAGES_SEND}
    notes_key_use = False  # record_user_message notes it, once the message is written
    endpoint: Endpoint
    text_of: Callable[[Any], str]
    empty_body_hint = 'Send a JSON object, for example {"message": "Hello"}.'

    def read_body(self, request: Request) -> tuple[Any, str]:
        data = request.data
        if request.stream is None:
            if "chunked" in request.META.get("HTTP_TRANSFER_ENCODING", "").lower():
                raise LengthRequired()  # WSGI gives Django no body without a Content-Length
            raise InvalidJson(f"The body is empty. {type(self).empty_body_hint}")
        return data, type(self).text_of(data)

    def accept(self, request: Request) -> tuple[ApiKey, Message]:
        body, text = self.read_body(request)
        try:
            return self.record(request, text, body)
        except recent.NoLongerHolds:
            return self.record_confirmed(request, text, body)

    def record_confirmed(self, request: Request, text: str, body: Any) -> tuple[ApiKey, Message]:
        """After a remembered key did not hold (nothing was written): the key was revoked or deleted, or its owner's
        thread replaced, since it was looked up. Look it up afresh: an error that says why, or the message recorded
        after all (if the key may still send: the scope is checked again on the fresh row)."""
        look_up_afresh(request, self)
        self.check_permissions(request)
        return self.record(request, text, body)

    def record(self, request: Request, text: str, body: Any) -> tuple[ApiKey, Message]:
        key = key_of(request)
        return key, self.write(key, text, body, request, confirm_key=is_unconfirmed(request))

    def write(
        self,
        key: ApiKey,
        text: str,
        body: Any,
        request: HttpRequest,
        *,
        confirm_key: bool,
        before_writing: Callable[[], None] | None = None,
        along: Callable[[Message], Sequence[Model]] | None = None,
    ) -> Message:
        """The message and its delivery, for the full path and the fast one (CurrentMessageView.serve_remembered)."""
        return record_user_message(
            user=key.owner,
            endpoint=self.endpoint,
            text=text,
            context=body,
            api_key=key,
            request_id=request_id_of(request),
            confirm_key=confirm_key,
            before_writing=before_writing,
            along=along,
        )

    def handle_exception(self, exc: Exception) -> Response:
        # A request with an unconfirmed key that ends in an error (a bad body, the rate limit, …) is answered as if the
        # key had been looked up: a revoked or deleted key gets its 401, not the other error.
        if is_unconfirmed(self.request) and not isinstance(exc, Unauthorized):
            exc = self.refusal_of_unconfirmed_key() or exc
        return super().handle_exception(exc)

    def refusal_of_unconfirmed_key(self) -> ApiError | None:
        try:
            look_up_afresh(self.request, self)
        except ApiError as refused:  # revoked, deleted, or the failed-authentication limit
            return refused
        except Exception:
            return None  # the database is out too, say: the first error is the answer
        return None


class CurrentMessageView(_MessageView):
    authentication_classes = [V2KeyAuthentication]
    # A text/plain body is the message (ingestion/parsers.py). A form body is refused, not guessed at: it is what
    # curl -d sends by default, and a JSON object sent that way would otherwise become the text of a message.
    parser_classes = [StrictJSONParser, PlainTextParser]
    media_type_hint = (
        "Send the text of the message with 'Content-Type: text/plain', or a JSON object with 'Content-Type: "
        "application/json' (curl -d sends application/x-www-form-urlencoded unless you add one of these with -H)."
    )
    empty_body_hint = 'Send the text of the message (text/plain) or a JSON object, for example {"message": "Hello"}.'
    endpoint = Endpoint.CURRENT
    text_of = staticmethod(body_rules.current_endpoint_text)

    @openapi.current_endpoint
    @idempotent
    def post(self, request: Request) -> Response:
        _key, message = self.accept(request)
        return Response(accepted_body(message))

    def dispatch(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponseBase:
        key = fast_path.remembered_key(request)
        if key is None:
            return super().dispatch(request, *args, **kwargs)
        return self.serve_remembered(request, key)

    def serve_remembered(self, request: HttpRequest, key: ApiKey) -> HttpResponseBase:
        """The ordinary request (ingestion/accept.py): the full path's checks in its order, on Django's request."""
        # What the authentication leaves for a remembered key, and what DRF copies onto Django's request.
        request.META[UNCONFIRMED] = True
        request.user = key.owner
        request.auth = key  # type: ignore[attr-defined]  # as DRF sets it on Django's request
        body: Any = None
        text = ""
        try:
            # (the scope was checked by remembered_key: KeyScopes would pass it, and this view notes no key use)
            # The per-key count travels to Redis and back while the body is parsed and the rows are made; its answer
            # is read before they are written, and a refusal by a limit comes before any other (check_throttles'
            # place in the full path).
            limits_answer = self.start_throttles(request)
            try:
                idempotency_key = idempotency_key_of(request)  # checked where the full path's post checks it
                body = fast_path.parsed_body(request)
                text = type(self).text_of(body)
                answer = self.answer_remembered(request, key, text, body, idempotency_key, limits_answer)
            finally:
                limits_answer()  # read already, unless a step before the writing failed
        except Exception as refused:
            return self.continue_in_full(request, key, refused, text, body)
        payload, status, replayed = answer
        response = _Accepted(_RENDERER.render(payload), status=status, content_type=_RENDERER.media_type)
        response.data = payload
        for name, value in self.default_response_headers.items():
            response[name] = value
        if replayed:
            response[REPLAYED_HEADER] = "true"
        return response

    def answer_remembered(
        self,
        request: HttpRequest,
        key: ApiKey,
        text: str,
        body: Any,
        idempotency_key: str | None,
        before_writing: Callable[[], None],
    ) -> tuple[Any, int, bool]:
        """The response's body, its status and whether it is a replay: the message accepted (with an Idempotency-Key,
        its record written in the message's own statement), or the first response replayed
        (ingestion/idempotency.py)."""

        def write(along: Callable[[Message], Sequence[Model]] | None = None) -> Message:
            return self.write(key, text, body, request, confirm_key=True, before_writing=before_writing, along=along)

        if idempotency_key is None:
            return accepted_body(write()), 200, False
        digest = request_digest(str(self.endpoint), body)
        written = once_in_statement(key, idempotency_key, digest, write, accepted_body)
        if isinstance(written, Message):
            return accepted_body(written), 200, False
        return written.data, written.status_code, True

    def start_throttles(self, request: HttpRequest) -> Callable[[], None]:
        """``check_throttles`` in two halves (``WindowThrottle.start``): every limit counts the request now; the
        returned call reads their answers and raises the first refusal. (This view's limits are all window
        counters: the per-key limit.)"""
        throttles = self.get_throttles()
        assert all(isinstance(throttle, WindowThrottle) for throttle in throttles)
        answers = [throttle.start(request) for throttle in throttles if isinstance(throttle, WindowThrottle)]
        refusals: list[Exception | None] = []  # after the first call: the refusal, or None

        def read() -> None:
            """The first call reads the answers; a later one gives the same outcome."""
            if not refusals:
                try:
                    for answer in answers:
                        answer()
                except Exception as refused:
                    refusals.append(refused)
                    raise
                refusals.append(None)
            elif refusals[0] is not None:
                raise refusals[0]

        return read

    def continue_in_full(
        self, request: HttpRequest, key: ApiKey, refused: Exception, text: str, body: Any
    ) -> HttpResponseBase:
        """Where a check refused the ordinary request: DRF's request and response from here on, as the full path
        would have them at that point (the key authenticated, unconfirmed), and the full path's exception handling."""
        self.args, self.kwargs = (), {}
        drf_request = self.initialize_request(request)
        self.format_kwarg = self.get_format_suffix()
        self.request, self.headers = drf_request, self.default_response_headers
        drf_request.user, drf_request.auth = key.owner, key
        drf_request.accepted_renderer, drf_request.accepted_media_type = self.perform_content_negotiation(drf_request)
        try:
            if not isinstance(refused, recent.NoLongerHolds):
                raise refused
            # The key did not hold: written nothing. Looked up afresh, the request is the full path's from here on.
            look_up_afresh(drf_request, self)
            self.check_permissions(drf_request)
            response = answer_once(
                drf_request,
                str(self.endpoint),
                body,
                lambda: Response(accepted_body(self.record(drf_request, text, body)[1])),
            )
        except Exception as error:
            response = self.handle_exception(error)
        self.response = self.finalize_response(drf_request, response)
        return self.response


_RENDERER = JSONRenderer()


def accepted_body(message: Message) -> dict[str, Any]:
    # "id" is additive (docs/design.md#the-two-endpoints): the receipt's address, GET /api/v1/inbound/messages/{id}.
    return {"success": True, "message": SENT, "id": message.public_id}


class LegacyWebhookView(_MessageView):
    """Deprecated: V1 keys only, and its response also tells the caller where the assistant reaches the user."""

    authentication_classes = [V1KeyAuthentication]
    endpoint = Endpoint.LEGACY
    text_of = staticmethod(body_rules.legacy_endpoint_text)

    @openapi.legacy_endpoint
    @idempotent
    def post(self, request: Request) -> Response:
        # The reply's contact details are read before the message is recorded: nothing after the insert may fail,
        # or the caller would be told of an error for a message that was recorded and queued, and its retry would
        # send it twice. A person whose profile was deleted (the admin allows it) gets the default one back.
        profile = _profile_of(request.auth)
        _key, message = self.accept(request)
        return Response(
            {
                "success": True,
                "message": SENT,
                "channel": profile.channel,
                "phoneNumber": profile.phone_number,
                "id": message.public_id,
            }
        )

    def finalize_response(self, request: Request, response: Response, *args: Any, **kwargs: Any) -> Response:
        response = super().finalize_response(request, response, *args, **kwargs)
        add_deprecation_headers(request, response)
        return response


class MessageReceiptView(APIView):
    """GET what became of a message, with the key that sent it; the assistant's reply too if that key may read it."""

    # A webhook trigger's token reads the receipts of its own firings (ingestion/triggers.py), never their replies.
    authentication_classes = [KeyOrWebhookTokenAuthentication]
    throttle_classes = [ReceiptReadThrottle]  # reads have their own limit, apart from what may be sent
    http_method_names = ["get"]
    content_negotiation_class = JsonOnly
    required_scopes = {"GET": Scope.RECEIPTS_READ}

    def initial(self, request: Request, *args: Any, **kwargs: Any) -> None:
        listing.refuse_when_busy(request.query_params)
        super().initial(request, *args, **kwargs)

    @openapi.receipt_endpoint
    def get(self, request: Request, message_id: str) -> Response:
        seconds = listing.wait_of(request.query_params)
        if not is_message_id(message_id):
            raise MessageNotFound()
        if isinstance(request.auth, WebhookTrigger):
            # A webhook trigger's token: its own firings' receipts, never their replies.
            mine = Message.objects.select_related("delivery").filter(trigger_id=request.auth.pk)
            with_reply = False
        else:
            key = key_of(request)
            with_reply = key.may_read_replies
            # The sending key's own messages only: another key's message, even the same account's, is as absent as
            # one that never existed (a leaked key reads nothing but what it sent itself).
            mine = Message.objects.select_related("delivery__reply" if with_reply else "delivery").filter(
                api_key_id=key.pk
            )
        found = mine.filter(HANDED_OVER, public_id=message_id, role=Role.USER)

        def load() -> Message:
            message = found.first()
            if message is None:
                raise MessageNotFound()
            return message

        message, could_not_wait = listing.when_final(load, seconds, with_reply=with_reply)
        response = Response(receipt(message, with_reply=with_reply))
        if could_not_wait:
            response["Retry-After"] = str(ReceiptWaitsBusy.wait)  # the last slot went between the glance and now
        return response


class MessageListView(APIView):
    """GET what the key sent, newest first, a page at a time (ingestion/listing.py)."""

    authentication_classes = [AnyKeyAuthentication]
    throttle_classes = [ReceiptReadThrottle]
    http_method_names = ["get"]
    content_negotiation_class = JsonOnly
    required_scopes = {"GET": Scope.RECEIPTS_READ}

    @openapi.message_list_endpoint
    def get(self, request: Request) -> Response:
        key = key_of(request)
        limit = listing.limit_of(request.query_params)
        return Response(listing.page(key, request.query_params.get("cursor"), limit))


def _profile_of(key: Any) -> Profile:
    assert isinstance(key, ApiKey)  # set by the endpoint's authentication class
    try:
        return key.owner.profile  # loaded with the key (V1KeyAuthentication.with_profile)
    except Profile.DoesNotExist:
        return profile_of(key.owner)


def add_deprecation_headers(request: Request, response: Response) -> None:
    """RFC 9745 Deprecation, RFC 8594 Sunset (when a removal date is configured) and the successor's Link."""
    response["Deprecation"] = f"@{settings.LEGACY_DEPRECATED_AT}"
    response["Link"] = f'<{request.build_absolute_uri(CURRENT_PATH)}>; rel="successor-version"'
    if settings.LEGACY_SUNSET_AT:
        response["Sunset"] = http_date(settings.LEGACY_SUNSET_AT)


class _JsonErrors(APIView):
    """Errors as JSON, like the rest of /api/, where the view's own renderer is YAML or an HTML page."""

    def handle_exception(self, exc: Exception) -> Response:
        self.request.accepted_renderer = JSONRenderer()
        self.request.accepted_media_type = JSONRenderer.media_type
        return super().handle_exception(exc)


class SchemaView(_JsonErrors, SpectacularAPIView):
    """GET /api/schema/: the OpenAPI document."""


class DocsView(_JsonErrors, SpectacularSwaggerSplitView):
    """GET /api/docs/: Swagger UI for the document."""


@csrf_exempt
def api_not_found(request: HttpRequest, *args: Any, **kwargs: Any) -> JsonResponse:
    """Unknown paths under /api/ answer JSON too, never the HTML 404 page."""
    error = NotFound()
    return json_error(error.default_code, str(error.detail))
