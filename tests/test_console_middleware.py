"""console/middleware.py: the console's login and flash-message middleware leave /api/v1/ alone and work as
Django's own everywhere else."""

import pytest
from django.contrib.sessions.middleware import SessionMiddleware
from django.http import HttpResponse
from django.test import RequestFactory

from console.middleware import AuthenticationMiddleware, MessageMiddleware

pytestmark = pytest.mark.django_db


def what_the_view_sees(path: str) -> dict[str, bool]:
    seen: dict[str, bool] = {}

    def view(request):
        seen.update(user=hasattr(request, "user"), messages=hasattr(request, "_messages"))
        return HttpResponse("ok")

    # In settings order: sessions, then login, then messages.
    handler = SessionMiddleware(AuthenticationMiddleware(MessageMiddleware(view)))
    response = handler(RequestFactory().post(path))
    assert response.status_code == 200
    return seen


@pytest.mark.parametrize(
    "path", ["/api/v1/inbound/api-message", "/api/v1/inbound-sms/webhook", "/api/v1/inbound/messages/msg_x"]
)
def test_an_api_request_gets_no_session_user_and_no_message_store(path):
    assert what_the_view_sees(path) == {"user": False, "messages": False}


@pytest.mark.parametrize("path", ["/", "/keys/", "/api/docs/", "/api/schema/", "/admin/"])
def test_every_other_request_gets_both_as_with_djangos_own_classes(path):
    assert what_the_view_sees(path) == {"user": True, "messages": True}
