from collections.abc import Iterable
from datetime import datetime, timedelta

from django.contrib.auth.decorators import login_required
from django.db.models import F, QuerySet
from django.db.models.fields.tuple_lookups import Tuple, TupleLessThan
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import redirect, render
from django.template.loader import render_to_string
from django.urls import reverse
from django.utils import timezone
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET, require_POST

from console.forms.thread import ConsoleMessageForm
from console.signed_in import AuthenticatedRequest
from conversations.models import Conversation, Endpoint, Message, is_message_id
from conversations.services import conversation_of
from ingestion.hotpath.recording import record_user_message
from ops.errors import json_error
from ops.request_id import request_id_of

PAGE_SIZE = 100
# A message is visible to readers only once its transaction commits, which can be after a message created later
# has committed. Each poll sends in full only the messages created since the previous poll, plus the ids (ids only)
# of those created this long before it, so that the page can ask for one that committed late.
LATE_COMMIT_WINDOW = timedelta(seconds=30)
MAX_IDS_ASKED = 100


def _messages_of(conversation: Conversation) -> QuerySet[Message]:
    # The reply's actions come along (two queries for the page), for "What the assistant did" under each reply, and
    # the outbox rows (one query), for what became of each on the person's phone.
    return (
        conversation.messages.filter(test=False)  # a test key's messages and their replies are kept apart
        .select_related("api_key", "trigger", "delivery")
        .prefetch_related("answered_delivery__actions", "outbound")
        .order_by("created_at", "id")
    )


def _wants_json(request: HttpRequest) -> bool:
    return "application/json" in request.headers.get("Accept", "")


def _thread_context(request: AuthenticatedRequest, before: str = "") -> dict[str, object]:
    """The latest PAGE_SIZE messages, or with ``before`` (a message of this thread) the PAGE_SIZE before it."""
    conversation = conversation_of(request.user)
    since = timezone.now().isoformat()  # before reading: the first poll asks for what was created from here on
    messages = _messages_of(conversation)
    # Only a message of the user's own thread can anchor a page; anything else shows the latest messages.
    anchor = (
        conversation.messages.filter(public_id=before).values("created_at", "id").first()
        if is_message_id(before)
        else None
    )
    if anchor is not None:
        at, pk = anchor["created_at"], anchor["id"]
        # Before it in the thread's own order, as one row comparison: its index bound stops at the anchor, where
        # "created_at < X OR (created_at = X AND id < Y)" read the thread's whole past and filtered it (60-157 ms at
        # 100k messages).
        messages = messages.filter(TupleLessThan(Tuple(F("created_at"), F("id")), (at, pk)))
    page = list(reversed(messages.reverse()[: PAGE_SIZE + 1]))  # one more, to know whether earlier ones exist
    has_earlier = len(page) > PAGE_SIZE
    page = page[-PAGE_SIZE:]
    # Not "messages": that name belongs to django.contrib.messages in every template.
    return {
        "since": since,
        "thread_messages": page,
        "earlier_before": page[0].public_id if has_earlier else "",
        "reading_earlier": anchor is not None,
    }


@login_required
@require_GET
def thread(request: AuthenticatedRequest) -> HttpResponse:
    context = _thread_context(request, before=request.GET.get("before", ""))
    return render(request, "conversations/thread.html", {**context, "form": ConsoleMessageForm()})


@login_required
@require_POST
def send(request: AuthenticatedRequest) -> HttpResponse:
    """Type a message as the user: it goes through the same write path (and hand-off) as the API's messages."""
    form = ConsoleMessageForm(request.POST)
    if not form.is_valid():
        if _wants_json(request):
            error = form.errors["text"][0]
            return json_error("invalid_body", str(error))
        return render(request, "conversations/thread.html", {**_thread_context(request), "form": form}, status=400)
    message = record_user_message(
        user=request.user,
        endpoint=Endpoint.CONSOLE,
        text=form.cleaned_data["text"],
        request_id=request_id_of(request),
    )
    if _wants_json(request):
        return JsonResponse({"success": True, "id": message.public_id}, status=201)
    return redirect(reverse("conversations:thread") + f"#{message.public_id}")


def _rendered(
    request: HttpRequest, messages: Iterable[Message], template: str = "conversations/_message.html"
) -> list[dict[str, str]]:
    return [{"id": m.public_id, "html": render_to_string(template, {"message": m}, request)} for m in messages]


def _asked(request: HttpRequest, parameter: str) -> list[str]:
    """The message ids of ``?parameter=a,b`` (at most MAX_IDS_ASKED)."""
    return [value for value in request.GET.get(parameter, "").split(",")[:MAX_IDS_ASKED] if is_message_id(value)]


def _parse_since(value: str) -> datetime | None:
    try:
        moment = datetime.fromisoformat(value) if 0 < len(value) <= 40 else None
    except ValueError:
        return None
    return moment if moment is not None and moment.tzinfo is not None else None


@login_required
@never_cache
@require_GET
def updates(request: AuthenticatedRequest) -> JsonResponse:
    """What is new since the page's previous poll, and nothing it already has.

    ``since``: the ``since`` of the previous answer (or of the page). The answer holds, rendered, the messages created
    from then on; ``recent``, the ids (only the ids) of those created in the LATE_COMMIT_WINDOW before it, so that the
    page can ask for one it lacks (``ids=``: one that committed after an earlier poll had passed its time). With
    ``ids=a,b``: those messages of the user's own thread, rendered, whenever they were created. ``unsettled=a,b``:
    also the statuses of those messages anew (``statuses``)."""
    conversation = conversation_of(request.user)
    messages = _messages_of(conversation)
    if "ids" in request.GET:
        return JsonResponse({"messages": _rendered(request, messages.filter(public_id__in=_asked(request, "ids")))})
    now = timezone.now()  # before reading, so that the next poll misses nothing created while this one reads
    since = _parse_since(request.GET.get("since", ""))
    if since is None or since > now:  # no page to continue from: the latest, as the page itself would show them
        new = list(reversed(messages.reverse()[:PAGE_SIZE]))
        recent: list[str] = []
    else:
        new = list(reversed(messages.filter(created_at__gte=since).reverse()[:PAGE_SIZE]))  # the newest, in order
        recent = list(
            messages.filter(created_at__gte=since - LATE_COMMIT_WINDOW, created_at__lt=since).values_list(
                "public_id", flat=True
            )
        )
    answer = {"messages": _rendered(request, new), "recent": recent, "since": now.isoformat()}
    return JsonResponse({**answer, "statuses": _statuses(request, messages)})


def _statuses(request: HttpRequest, messages: QuerySet[Message]) -> list[dict[str, str]]:
    """``unsettled=a,b``: the page's messages whose status may still change (queued, retrying, being delivered),
    each with its statuses rendered anew, for the page to swap in."""
    asked = messages.filter(public_id__in=_asked(request, "unsettled"))  # none asked: no query (an empty IN)
    return _rendered(request, asked, "conversations/_message_statuses.html")


@login_required
@require_GET
def message_detail(request: AuthenticatedRequest, message_id: str) -> HttpResponse:
    """One message of the user's thread, whole (the thread shortens long ones), with what became of it: its delivery
    to the assistant and the reply; for a reply, the message it answers. Another user's message is a 404."""
    conversation = conversation_of(request.user)
    message = (
        _messages_of(conversation).filter(public_id=message_id).select_related("delivery__reply").first()
        if is_message_id(message_id)
        else None
    )
    if message is None:
        raise Http404("No such message in your conversation.")
    if _wants_json(request):
        html = render_to_string("conversations/_message.html", {"message": message, "full": True}, request)
        return JsonResponse({"id": message.public_id, "html": html})
    delivery = getattr(message, "delivery", None)
    answered = getattr(message, "answered_delivery", None)
    return render(
        request,
        "conversations/message.html",
        {
            "message": message,
            "delivery": delivery,
            "reply": delivery.reply if delivery is not None else None,
            "question": answered.message if answered is not None else None,
        },
    )
