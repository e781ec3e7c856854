"""Putting a person's new assistant and tool messages in the outbox, inside the transaction that wrote them
(conversations/outbound.py calls this). Nothing linked, nothing configured, an empty text, or a message marked
``NOT_TEXTED``: no rows, and the message lives in the thread only.

Each message goes to one address (channels/outbound/window.py chooses it), flattened from markdown to plain text
(every channel shows text as it is sent: SMS and iMessage have no markup, and WhatsApp's and Telegram's differ from
markdown; an approval request is plain text already, and flattening could drop a line of it, such as an argument
written like a link's definition), with control and direction characters shown, not obeyed (ops/visible.py), and cut
at the provider's limit, one row per part. Quiet hours are read now, so that a message written
inside them shows "quiet hours" at once; the worker reads them again before sending.
"""

from collections import defaultdict
from collections.abc import Sequence

from django.utils import timezone

from accounts.models import Profile
from assistant.approval.requests import APPROVAL_CONTEXT
from channels.adapters import configured
from channels.models import LinkedAddress, OutboundMessage, QuietHours
from channels.outbound.quiet import quiet_until
from channels.outbound.text import flatten_markdown, split_text
from channels.outbound.window import Route, choose_route
from conversations.models import Message, Role
from conversations.outbound import NOT_TEXTED
from ops.visible import visible


def enqueue(message_ids: Sequence[int]) -> int:
    """The outbox rows for these messages (only the assistant's and tools' ones); how many were written."""
    adapters = configured()
    if not adapters:
        return 0
    messages = [
        (pk, text, person, context)
        for pk, text, person, context in Message.objects.filter(
            # A reply to a test key's message is never texted.
            pk__in=message_ids,
            role__in=[Role.ASSISTANT, Role.TOOL],
            test=False,
        ).values_list("pk", "text", "conversation__user_id", "context")
        if not (isinstance(context, dict) and context.get(NOT_TEXTED))
    ]
    people = {person for _, _, person, _ in messages}
    if not people:
        return 0
    linked: dict[int, list[Route]] = defaultdict(list)
    for link in LinkedAddress.objects.filter(user_id__in=people, channel__in=list(adapters)).order_by("linked_at"):
        linked[link.user_id].append(Route(link.channel, link.address, link.last_inbound_at))
    if not linked:
        return 0
    profiles = {p.user_id: p for p in Profile.objects.filter(user_id__in=linked)}
    quiet = {q.person_id: q for q in QuietHours.objects.filter(person_id__in=linked)}
    now = timezone.now()
    rows = []
    for message_id, text, person, context in sorted(messages):
        profile = profiles.get(person)
        route = choose_route(linked.get(person, []), profile.channel if profile else "", now)
        if route is None:
            continue
        hours = quiet.get(person)
        wait = quiet_until(now, profile.time_zone if profile else "UTC", hours.starts, hours.ends) if hours else None
        parts = split_text(_as_plain_text(text, context), adapters[route.channel].max_text_length)
        rows += [
            OutboundMessage(
                message_id=message_id,
                person_id=person,
                part=number,
                parts=len(parts),
                channel=route.channel,
                address=route.address,
                text=part,
                next_attempt_at=wait,
                waiting_for_quiet_hours=wait is not None,
                created_at=now,
            )
            for number, part in enumerate(parts, start=1)
        ]
    OutboundMessage.objects.bulk_create(rows)
    return len(rows)


def _as_plain_text(text: str, context: object) -> str:
    """What a phone shows: markdown flattened (an approval request is plain text already), control and direction
    characters shown, not obeyed."""
    is_request = isinstance(context, dict) and APPROVAL_CONTEXT in context
    return visible(text if is_request else flatten_markdown(text))
