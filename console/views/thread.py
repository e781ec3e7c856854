from datetime import timedelta

from django.contrib.auth.decorators import login_required
from django.db.models import Q, QuerySet
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import redirect, render
from django.template.loader import render_to_string
from django.urls import reverse
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET, require_POST

from console.forms.thread import ConsoleMessageForm
from conversations.models import Conversation, Endpoint, Message, is_message_id
from conversations.services import conversation_of
from ingestion.hotpath.recording import record_user_message
from ops.errors import json_error

PAGE_SIZE = 100
# A message is visible to readers only once its transaction commits, which can be after a message created later
# has committed. The poll looks back this far from the newest message the page has, and the page skips the ones it
# already shows, so a late commit is not missed.
POLL_LOOKBACK = timedelta(seconds=30)


def _messages_of(conversation: Conversation) -> QuerySet[Message]:
    # The reply's actions come along (two queries for the page), for "What the assistant did" under each reply.
    return (
        conversation.messages.select_related("api_key", "trigger")
        .prefetch_related("answered_delivery__actions")
        .order_by("created_at", "id")
    )


def _wants_json(request: HttpRequest) -> bool:
    return "application/json" in request.headers.get("Accept", "")


def _thread_context(request: HttpRequest, before: str = "") -> dict[str, object]:
    """The latest PAGE_SIZE messages, or with ``before`` (a message of this thread) the PAGE_SIZE before it."""
    conversation = conversation_of(request.user)  # type: ignore[arg-type]
    messages = _messages_of(conversation)
    # Only a message of the user's own thread can anchor a page; anything else shows the latest messages.
    anchor = (
        conversation.messages.filter(public_id=before).values("created_at", "id").first()
        if is_message_id(before)
        else None
    )
    if anchor is not None:
        at, pk = anchor["created_at"], anchor["id"]
        messages = messages.filter(Q(created_at__lt=at) | Q(created_at=at, id__lt=pk))  # the thread's own order
    page = list(reversed(messages.reverse()[: PAGE_SIZE + 1]))  # one more, to know whether earlier ones exist
    has_earlier = len(page) > PAGE_SIZE
    page = page[-PAGE_SIZE:]
    # Not "messages": that name belongs to django.contrib.messages in every template.
    return {
        "thread_messages": page,
        "cursor": page[-1].public_id if page else "",
        "total": None if anchor else conversation.messages.count(),  # shown on the latest page only
        "earlier_before": page[0].public_id if has_earlier else "",
        "reading_earlier": anchor is not None,
    }


@login_required
@require_GET
def thread(request: HttpRequest) -> HttpResponse:
    context = _thread_context(request, before=request.GET.get("before", ""))
    return render(request, "conversations/thread.html", {**context, "form": ConsoleMessageForm()})


@login_required
@require_POST
def send(request: HttpRequest) -> HttpResponse:
    """Type a message as the user: it goes through the same write path (and hand-off) as the API's messages."""
    form = ConsoleMessageForm(request.POST)
    if not form.is_valid():
        if _wants_json(request):
            error = form.errors["text"][0]
            return json_error("invalid_body", str(error))
        return render(request, "conversations/thread.html", {**_thread_context(request), "form": form}, status=400)
    message = record_user_message(
        user=request.user,  # type: ignore[arg-type]
        endpoint=Endpoint.CONSOLE,
        text=form.cleaned_data["text"],
        request_id=getattr(request, "request_id", ""),
    )
    if _wants_json(request):
        return JsonResponse({"success": True, "id": message.public_id}, status=201)
    return redirect(reverse("conversations:thread") + f"#{message.public_id}")


@login_required
@never_cache
@require_GET
def updates(request: HttpRequest) -> JsonResponse:
    """The thread's messages from the page's newest one on (and a little before it; see POLL_LOOKBACK)."""
    conversation = conversation_of(request.user)  # type: ignore[arg-type]
    after = request.GET.get("after", "")
    messages = _messages_of(conversation)
    # Only a message of the user's own thread can anchor the window; anything else reads as "from the start".
    if is_message_id(after):
        anchor = conversation.messages.filter(public_id=after).values_list("created_at", flat=True).first()
        if anchor is not None:
            messages = messages.filter(created_at__gte=anchor - POLL_LOOKBACK)
    else:
        after = ""  # not echoed back as the cursor either
    newest = list(reversed(messages.reverse()[:PAGE_SIZE]))
    return JsonResponse(
        {
            "messages": [
                {"id": m.public_id, "html": render_to_string("conversations/_message.html", {"message": m}, request)}
                for m in newest
            ],
            "cursor": newest[-1].public_id if newest else after,
        }
    )
