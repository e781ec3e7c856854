"""Whether an address has an account cannot be read off the password reset (issue 18 item 15): the request does the
same work for every address (it enqueues one task with the address typed in) and answers the same; the task, later
and elsewhere, finds the account and sends the email."""

import pytest
from django.core import mail
from django.tasks import default_task_backend

from console.password_reset import send_reset_link
from tests.factories import UserFactory

pytestmark = pytest.mark.django_db


@pytest.fixture
def deferred_tasks(settings):
    """A task backend that only records what was enqueued, as the database backend leaves it to the worker."""
    settings.TASKS = {"default": {"BACKEND": "django.tasks.backends.dummy.DummyBackend"}}
    settings.MAILERS = {"default": {"BACKEND": "django.core.mail.backends.locmem.EmailBackend"}}
    settings.PASSWORD_RESET_BY_EMAIL = True
    default_task_backend.clear()
    yield default_task_backend
    default_task_backend.clear()


def test_a_real_and_an_unknown_address_cost_the_request_the_same_work(client, deferred_tasks):
    UserFactory(username="ada@example.com", email="ada@example.com")

    answers = [client.post("/password-reset/", {"email": email}) for email in ("ada@example.com", "nobody@example.com")]

    assert [(a.status_code, a["Location"]) for a in answers] == [(302, "/password-reset/sent/")] * 2
    assert mail.outbox == []  # nothing sent, nothing looked up: the request only enqueued
    enqueued = [(result.task.func, result.args) for result in deferred_tasks.results]
    assert enqueued == [
        (send_reset_link.func, ["ada@example.com", "testserver", False]),
        (send_reset_link.func, ["nobody@example.com", "testserver", False]),
    ]


def test_the_task_sends_the_link_only_to_an_account(deferred_tasks):
    UserFactory(username="ada@example.com", email="ada@example.com")

    send_reset_link.call("nobody@example.com", "ingest.example.com", True)
    assert mail.outbox == []
    send_reset_link.call("ada@example.com", "ingest.example.com", True)

    (sent,) = mail.outbox
    assert sent.to == ["ada@example.com"]
    assert "https://ingest.example.com/reset/" in sent.body
