"""manage.py retrydeliveries: staff give failed or overdue deliveries a fresh round of attempts."""

import io
from datetime import timedelta

import pytest
from django.core.management import CommandError, call_command
from django.utils import timezone

from conversations.models import Delivery, DeliveryStatus, Role
from tests.conftest import CURRENT, post

pytestmark = pytest.mark.django_db


def run(*args: str) -> list[str]:
    out = io.StringIO()
    call_command("retrydeliveries", *args, stdout=out)
    return out.getvalue().strip().splitlines()


@pytest.fixture
def sent(client, v2):
    """Three recorded messages whose hand-off has not run: queued, like after a lost task."""
    ids = [post(client, CURRENT, v2[1], {"message": f"m{n}"}).json()["id"] for n in range(3)]
    return [Delivery.objects.get(message__public_id=message_id) for message_id in ids]


def test_failed_deliveries_are_retried_and_reported(sent, django_capture_on_commit_callbacks):
    failed = sent[0]
    Delivery.objects.filter(pk=failed.pk).update(status=DeliveryStatus.FAILED, attempts=5, last_error="HTTP 503")

    with django_capture_on_commit_callbacks(execute=True):
        lines = run("--failed")

    assert lines == [
        f"Retried delivery {failed.pk} of {failed.message.public_id} (was failed, 5 attempt(s)): now queued.",
        "Retried 1 of 1 deliveries.",
    ]
    failed.refresh_from_db()
    # After the commit the immediate backend ran the new round: the local assistant answered.
    assert (failed.status, failed.attempts) == (DeliveryStatus.DELIVERED, 1)
    assert failed.reply.role == Role.ASSISTANT
    assert failed.last_error == "HTTP 503"  # the history of the earlier round stays for staff


def test_by_message_id_or_delivery_number(sent):
    lines = run("--id", sent[0].message.public_id, "--id", str(sent[1].pk))
    assert lines[-1] == "Retried 2 of 2 deliveries."
    assert Delivery.objects.filter(status=DeliveryStatus.QUEUED).count() == 3


def test_delivered_ones_are_skipped(sent):
    Delivery.objects.filter(pk=sent[0].pk).update(status=DeliveryStatus.DELIVERED, attempts=1)
    lines = run("--id", sent[0].message.public_id)
    assert lines == [
        f"Skipped delivery {sent[0].pk} of {sent[0].message.public_id}: delivered.",
        "Retried 0 of 1 deliveries.",
    ]
    assert Delivery.objects.get(pk=sent[0].pk).status == DeliveryStatus.DELIVERED


def test_due_picks_overdue_retries_lost_tasks_and_dead_workers(sent):
    long_ago = timezone.now() - timedelta(hours=1)
    overdue, lost, dead = sent
    Delivery.objects.filter(pk=overdue.pk).update(next_attempt_at=long_ago, attempts=2)
    Delivery.objects.filter(pk=lost.pk).update(created_at=long_ago)
    Delivery.objects.filter(pk=dead.pk).update(status=DeliveryStatus.PROCESSING, started_at=long_ago)

    assert run("--due")[-1] == "Retried 3 of 3 deliveries."


def test_an_abandoned_attempt_is_followed_by_the_next_attempt_number_not_the_same_one(
    sent, django_capture_on_commit_callbacks
):
    abandoned = sent[0]
    long_ago = timezone.now() - timedelta(hours=1)
    Delivery.objects.filter(pk=abandoned.pk).update(status=DeliveryStatus.PROCESSING, started_at=long_ago, attempts=1)

    with django_capture_on_commit_callbacks(execute=True):
        run("--id", abandoned.message.public_id)

    # The immediate backend ran the attempt after the commit: the local assistant answered it as attempt 2.
    abandoned.refresh_from_db()
    assert (abandoned.status, abandoned.attempts) == (DeliveryStatus.DELIVERED, 2)


def test_due_leaves_fresh_and_future_ones_alone(sent):
    Delivery.objects.filter(pk=sent[0].pk).update(next_attempt_at=timezone.now() + timedelta(minutes=5))
    Delivery.objects.filter(pk=sent[1].pk).update(status=DeliveryStatus.PROCESSING, started_at=timezone.now())
    assert run("--due") == ["No deliveries to retry."]  # the third was created just now: within the grace


def test_it_needs_a_selection():
    with pytest.raises(CommandError, match="--failed, --due, or --id"):
        run()


@pytest.mark.parametrize("value", ["msg_" + "Q" * 24, "999999", "bogus"])
def test_unknown_ids_are_refused(sent, value):
    with pytest.raises(CommandError):
        run("--id", value)
    assert Delivery.objects.filter(attempts=0, status=DeliveryStatus.QUEUED).count() == 3
