"""Password reset by email: Django's own views, offered only where an SMTP server is configured, and limited per
client address so that nobody can fill a stranger's inbox from one place.

The answer must not tell whether an address has an account, in its words (the same page either way) or in its time:
looking the address up and sending the email took 53 ms for a real account against 8 ms for an unknown one. So the
request only enqueues ``send_reset_link`` with the address typed in, the same work for every address, and the task
(the worker, with TASK_BACKEND=database) finds the account and sends the email."""

from collections.abc import Iterator
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth import views as auth_views
from django.contrib.auth.forms import PasswordResetForm
from django.http import HttpRequest, HttpResponse, HttpResponseBase, HttpResponseRedirect
from django.shortcuts import render
from django.tasks import task
from django.urls import reverse_lazy

from ops.limits import AttemptLimit, blocked_page

# Every reset request is counted (not only failures): each one sends an email to whoever owns the address typed in.
RESET_REQUESTS = AttemptLimit("password-resets", "PASSWORD_RESET_RATE_LIMIT", blocks_when_reached=True)


EMAIL_TEMPLATE = "accounts/password_reset_email.txt"
SUBJECT_TEMPLATE = "accounts/password_reset_subject.txt"


class ResetForAnyActiveAccountForm(PasswordResetForm):
    """Django's form, but it also answers an account that never had a password: the one `createapikey` makes for
    an address (the Quick start's), which would otherwise have no way into the console. Inactive accounts still get
    nothing."""

    def get_users(self, email: str) -> Iterator[Any]:
        email = email.casefold()
        for user in get_user_model()._default_manager.filter(email__iexact=email, is_active=True):
            if user.email.casefold() == email:
                yield user


@task
def send_reset_link(email: str, domain: str, use_https: bool) -> None:
    """Email a reset link to the account with this address, if there is one (Django's PasswordResetForm.save)."""
    form = ResetForAnyActiveAccountForm({"email": email})
    if form.is_valid():
        form.save(
            domain_override=domain,
            use_https=use_https,
            email_template_name=EMAIL_TEMPLATE,
            subject_template_name=SUBJECT_TEMPLATE,
        )


class PasswordResetView(auth_views.PasswordResetView):
    template_name = "accounts/password_reset.html"
    email_template_name = EMAIL_TEMPLATE
    subject_template_name = SUBJECT_TEMPLATE
    success_url = reverse_lazy("accounts:password_reset_sent")

    def form_valid(self, form: PasswordResetForm) -> HttpResponse:
        # Not form.save() here: that looks the account up and sends its email only when it exists (see the module).
        send_reset_link.enqueue(form.cleaned_data["email"], self.request.get_host(), self.request.is_secure())
        return HttpResponseRedirect(self.get_success_url())

    def dispatch(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponseBase:
        if not settings.PASSWORD_RESET_BY_EMAIL:
            return render(request, "accounts/password_reset_unavailable.html")
        if request.method == "POST":
            wait = RESET_REQUESTS.blocked_for(request)
            if wait > 0:
                return blocked_page(request, "accounts/password_reset_limited.html", wait, "password_reset")
            RESET_REQUESTS.count(request)
        return super().dispatch(request, *args, **kwargs)


class PasswordResetSentView(auth_views.PasswordResetDoneView):
    template_name = "accounts/password_reset_sent.html"


class PasswordResetConfirmView(auth_views.PasswordResetConfirmView):
    template_name = "accounts/password_reset_confirm.html"
    success_url = reverse_lazy("accounts:password_reset_complete")


class PasswordResetCompleteView(auth_views.PasswordResetCompleteView):
    template_name = "accounts/password_reset_complete.html"
