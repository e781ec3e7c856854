"""What a caller may learn about a message it sent: where its delivery stands, and the assistant's reply only where
the key's owner allowed it.

Readable only with the key that sent the message. The assistant's reply goes to the person in their conversation,
not to the caller (spec): a receipt carries it (``reply``), and what the assistant did (``actions``, its tool calls),
only for a key created or switched to "may read replies" (``ApiKey.may_read_replies``, off by default). Never the
delivery's last error: it describes our side and the assistant runtime, which is for staff.
"""

from typing import Any

from django.conf import settings

from conversations.models import Delivery, DeliveryStatus, Message


def _summary(delivery: Delivery) -> str:
    if delivery.status == DeliveryStatus.QUEUED:
        if delivery.attempts:
            return "The assistant could not be reached yet; another attempt is scheduled."
        return "Queued for the assistant."
    if delivery.status == DeliveryStatus.PROCESSING:
        return "Being handed to the assistant now."
    if delivery.status == DeliveryStatus.FAILED and delivery.takeovers >= settings.DELIVERY_MAX_TAKEOVERS:
        return (
            "Could not be delivered: every attempt stopped with its worker lost, so it was given up and the "
            "conversation's later messages went on. The message stays in the conversation; support can retry it."
        )
    if delivery.status == DeliveryStatus.FAILED:
        return "Could not be delivered to the assistant. The message stays in the conversation; support can retry it."
    if delivery.reply_id is None:
        return "Delivered to the assistant; its reply has not arrived yet."
    return "Delivered to the assistant, which replied."


def receipt(message: Message, *, with_reply: bool) -> dict[str, Any]:
    delivery = getattr(message, "delivery", None)  # the reverse one-to-one raises an AttributeError when absent
    if delivery is None:
        return _receipt_after_pruning(message, with_reply=with_reply)
    body = {
        "success": True,
        "message": _summary(delivery),
        "id": message.public_id,
        "status": delivery.status,
        "attempts": delivery.attempts,
        "created_at": message.created_at,
        "started_at": delivery.started_at,
        "finished_at": delivery.finished_at,
        "next_attempt_at": delivery.next_attempt_at,
    }
    if with_reply:
        reply = delivery.reply
        body["reply"] = (
            {"id": reply.public_id, "text": reply.text, "created_at": reply.created_at} if reply is not None else None
        )
        # What the assistant did while answering (its tool calls): the person's, like the reply.
        body["actions"] = [action.as_json() for action in delivery.actions.all()]
    return body


PRUNED_SUMMARY: dict[str, str] = {
    DeliveryStatus.DELIVERED: "Delivered to the assistant. The details of its delivery are no longer kept.",
    DeliveryStatus.FAILED: "Could not be delivered to the assistant. The message stays in the conversation.",
}


def _receipt_after_pruning(message: Message, *, with_reply: bool) -> dict[str, Any]:
    """A message whose delivery was pruned (DELIVERY_RETENTION_DAYS): its final status, kept on the message."""
    body: dict[str, Any] = {
        "success": True,
        "message": PRUNED_SUMMARY.get(message.outcome, PRUNED_SUMMARY[DeliveryStatus.DELIVERED]),
        "id": message.public_id,
        "status": message.outcome or DeliveryStatus.DELIVERED,
        "attempts": 0,
        "created_at": message.created_at,
        "started_at": None,
        "finished_at": None,
        "next_attempt_at": None,
    }
    if with_reply:
        body["reply"] = None
        body["actions"] = []
    return body
