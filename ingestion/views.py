from collections.abc import Callable
from typing import Any

from django.conf import settings
from django.http import HttpRequest, JsonResponse
from django.utils.http import http_date
from django.views.decorators.csrf import csrf_exempt
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from conversations.models import Endpoint
from conversations.services import record_user_message
from ingestion import body as body_rules
from ingestion.authentication import CURRENT_PATH, V1KeyAuthentication, V2KeyAuthentication
from ingestion.exceptions import InvalidJson, LengthRequired, NotFound
from ingestion.idempotency import idempotent
from keys.models import ApiKey

SENT = "Message sent successfully"


class _MessageView(APIView):
    """POST a JSON body with a Bearer key; the message is recorded in the key owner's thread."""

    http_method_names = ["post", "options"]
    endpoint: Endpoint
    text_of: Callable[[Any], str]

    def read_body(self, request: Request) -> tuple[Any, str]:
        data = request.data
        if request.stream is None:
            if "chunked" in request.META.get("HTTP_TRANSFER_ENCODING", "").lower():
                raise LengthRequired()  # WSGI gives Django no body without a Content-Length
            raise InvalidJson('The body is empty. Send a JSON object, for example {"message": "Hello"}.')
        return data, type(self).text_of(data)

    def accept(self, request: Request) -> ApiKey:
        body, text = self.read_body(request)
        key = request.auth
        assert isinstance(key, ApiKey)  # set by the endpoint's authentication class
        record_user_message(
            user=key.owner,
            endpoint=self.endpoint,
            text=text,
            context=body,
            api_key=key,
            request_id=getattr(request._request, "request_id", ""),
        )
        return key


class CurrentMessageView(_MessageView):
    authentication_classes = [V2KeyAuthentication]
    endpoint = Endpoint.CURRENT
    text_of = staticmethod(body_rules.current_endpoint_text)

    @idempotent
    def post(self, request: Request) -> Response:
        self.accept(request)
        return Response({"success": True, "message": SENT})


class LegacyWebhookView(_MessageView):
    """Deprecated: V1 keys only, and its response also tells the caller where the assistant reaches the user."""

    authentication_classes = [V1KeyAuthentication]
    endpoint = Endpoint.LEGACY
    text_of = staticmethod(body_rules.legacy_endpoint_text)

    @idempotent
    def post(self, request: Request) -> Response:
        key = self.accept(request)
        profile = key.owner.profile
        response = Response(
            {"success": True, "message": SENT, "channel": profile.channel, "phoneNumber": profile.phone_number}
        )
        return response

    def finalize_response(self, request: Request, response: Response, *args: Any, **kwargs: Any) -> Response:
        response = super().finalize_response(request, response, *args, **kwargs)
        add_deprecation_headers(request, response)
        return response


def add_deprecation_headers(request: Request, response: Response) -> None:
    """RFC 9745 Deprecation, RFC 8594 Sunset (when a removal date is configured) and the successor's Link."""
    response["Deprecation"] = f"@{settings.LEGACY_DEPRECATED_AT}"
    response["Link"] = f'<{request.build_absolute_uri(CURRENT_PATH)}>; rel="successor-version"'
    if settings.LEGACY_SUNSET_AT:
        response["Sunset"] = http_date(settings.LEGACY_SUNSET_AT)


@csrf_exempt
def api_not_found(request: HttpRequest, *args: Any, **kwargs: Any) -> JsonResponse:
    """Unknown paths under /api/ answer JSON too, never the HTML 404 page."""
    error = NotFound()
    return JsonResponse({"success": False, "message": str(error.detail), "code": error.default_code}, status=404)
