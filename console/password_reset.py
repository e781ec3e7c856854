"""Password reset by email: Django's own views, offered only where an SMTP server is configured, and limited per
client address so that nobody can fill a stranger's inbox from one place."""

from typing import Any

from django.conf import settings
from django.contrib.auth import views as auth_views
from django.http import HttpRequest, HttpResponseBase
from django.shortcuts import render
from django.urls import reverse_lazy

from ops import metrics
from ops.limits import AttemptLimit

# Every reset request is counted (not only failures): each one sends an email to whoever owns the address typed in.
RESET_REQUESTS = AttemptLimit("password-resets", "PASSWORD_RESET_RATE_LIMIT", blocks_when_reached=True)


class PasswordResetView(auth_views.PasswordResetView):
    template_name = "accounts/password_reset.html"
    email_template_name = "accounts/password_reset_email.txt"
    subject_template_name = "accounts/password_reset_subject.txt"
    success_url = reverse_lazy("accounts:password_reset_sent")

    def dispatch(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponseBase:
        if not settings.PASSWORD_RESET_BY_EMAIL:
            return render(request, "accounts/password_reset_unavailable.html")
        if request.method == "POST":
            wait = RESET_REQUESTS.blocked_for(request)
            if wait > 0:
                metrics.rate_limited("password_reset")
                response = render(request, "accounts/password_reset_limited.html", status=429)
                response["Retry-After"] = str(wait)
                return response
            RESET_REQUESTS.count(request)
        return super().dispatch(request, *args, **kwargs)


class PasswordResetSentView(auth_views.PasswordResetDoneView):
    template_name = "accounts/password_reset_sent.html"


class PasswordResetConfirmView(auth_views.PasswordResetConfirmView):
    template_name = "accounts/password_reset_confirm.html"
    success_url = reverse_lazy("accounts:password_reset_complete")


class PasswordResetCompleteView(auth_views.PasswordResetCompleteView):
    template_name = "accounts/password_reset_complete.html"
