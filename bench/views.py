"""The baseline the service is compared with: a bare Django view (no DRF, no auth) doing one INSERT of the same row."""

import json

from django.conf import settings
from django.http import HttpRequest, JsonResponse
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_POST

from conversations.models import Message, Role, Source


@csrf_exempt
@require_POST
def baseline(request: HttpRequest) -> JsonResponse:
    body = json.loads(request.body)
    Message.objects.create(
        conversation_id=settings.BENCH_CONVERSATION_ID,
        role=Role.USER,
        source=Source.API,
        text=body.get("message", ""),
        context=body,
        api_key_id=settings.BENCH_API_KEY_ID,
    )
    return JsonResponse({"success": True, "message": "Message sent successfully"})
