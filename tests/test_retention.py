"""Retention (ops/pruning.py, docs/reference/settings.md): finished deliveries, texts and audit lines
older than their setting are deleted in batches of PRUNE_BATCH_ROWS, each its own transaction; what is still to do,
and what is recent, stays; a message outlives its delivery and still says what became of it."""

import io
from datetime import timedelta

import pytest
from django.core.management import call_command
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from accounts.models import AuditEvent, AuditKind
from channels.models import OutboundMessage, OutboundStatus
from conversations.models import Delivery, DeliveryStatus, Message
from delivery.housekeeping import JOBS
from tests.conftest import CURRENT, post
from tests.factories import make_key

pytestmark = pytest.mark.django_db

LONG_AGO = timedelta(days=200)


@pytest.fixture
def small_batches(settings):
    settings.PRUNE_BATCH_ROWS = 2
    settings.DELIVERY_RETENTION_DAYS = settings.OUTBOX_RETENTION_DAYS = 90
    settings.AUDIT_RETENTION_DAYS = 100


def sent(client, plaintext: str, texts: list[str]) -> list[Message]:
    ids = [post(client, CURRENT, plaintext, {"message": text}).json()["id"] for text in texts]
    return [Message.objects.get(public_id=public_id) for public_id in ids]


def age(messages: list[Message], status: str, by: timedelta = LONG_AGO) -> None:
    Delivery.objects.filter(message__in=messages).update(status=status, created_at=timezone.now() - by, attempts=1)


def deletes_of(table: str, queries: CaptureQueriesContext) -> list[str]:
    return [q["sql"] for q in queries.captured_queries if q["sql"].startswith(f'DELETE FROM "{table}"')]


def test_finished_deliveries_are_pruned_in_batches_and_their_messages_keep_the_outcome(client, user, small_batches):
    _, plaintext = make_key(user, may_read_replies=True)
    delivered = sent(client, plaintext, ["one", "two", "three"])
    failed = sent(client, plaintext, ["four", "five"])
    waiting, recent = sent(client, plaintext, ["six", "seven"])
    age(delivered, DeliveryStatus.DELIVERED)
    age(failed, DeliveryStatus.FAILED)
    age([waiting], DeliveryStatus.QUEUED)  # still to do, however old
    age([recent], DeliveryStatus.DELIVERED, by=timedelta(days=10))

    with CaptureQueriesContext(connection) as queries:
        call_command("prunedeliveries", stdout=(out := io.StringIO()))

    assert "Deleted 5 finished deliveries older than 90 days." in out.getvalue()
    assert len(deletes_of("conversations_delivery", queries)) == 3  # 2 + 2 + 1
    assert set(Delivery.objects.values_list("message_id", flat=True)) == {waiting.pk, recent.pk}
    assert Message.objects.count() == 7  # the person's history stays
    outcomes = dict(Message.objects.values_list("text", "outcome"))
    assert outcomes == {"one": "delivered", "two": "delivered", "three": "delivered", "four": "failed",
                        "five": "failed", "six": "", "seven": ""}  # fmt: skip

    receipt = client.get(f"/api/v1/inbound/messages/{failed[0].public_id}", headers=_bearer(plaintext)).json()
    assert (receipt["status"], receipt["reply"]) == ("failed", None)
    assert "Could not be delivered" in receipt["message"]
    assert (
        client.get(f"/api/v1/inbound/messages/{delivered[0].public_id}", headers=_bearer(plaintext)).json()["status"]
        == "delivered"
    )

    client.force_login(user)
    page = client.get(f"/conversation/messages/{failed[0].public_id}/").content.decode()
    assert "Failed" in page and "no longer" in page
    thread = client.get("/conversation/").content.decode()
    assert thread.count("badge--delivered") >= 3 and "badge--failed" in thread


def test_texts_sent_or_given_up_on_are_pruned_and_those_still_to_send_stay(client, user, small_batches):
    _, plaintext = make_key(user)
    messages = sent(client, plaintext, ["a", "b", "c", "d"])
    long_ago = timezone.now() - LONG_AGO
    for message, status in zip(messages, ["sent", "failed", "queued", "sent"], strict=True):
        OutboundMessage.objects.create(
            message=message, person=user, channel="sms", address="+1", text=".", status=status
        )
    OutboundMessage.objects.exclude(message=messages[3]).update(created_at=long_ago)

    call_command("prunetexts", stdout=io.StringIO())

    assert sorted(OutboundMessage.objects.values_list("status", flat=True)) == [OutboundStatus.QUEUED, "sent"]


def test_audit_lines_past_their_retention_are_pruned(user, small_batches):
    now = timezone.now()
    for days in [150, 120, 101, 99, 1]:
        AuditEvent.objects.create(account=user, at=now - timedelta(days=days), kind=AuditKind.KEY_CREATED, summary=".")
    kept_before = AuditEvent.objects.filter(at__gte=now - timedelta(days=100)).count()

    call_command("pruneaudit", stdout=io.StringIO())

    assert AuditEvent.objects.count() == kept_before


def test_the_prunes_are_housekeeping_jobs():
    assert {"prunedeliveries", "prunetexts", "pruneaudit"} <= {job.command for job in JOBS}


def _bearer(plaintext: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {plaintext}"}
