from typing import Any

from django.conf import settings
from django.contrib import messages
from django.contrib.auth import login, logout
from django.contrib.auth.decorators import login_required
from django.contrib.auth.forms import PasswordChangeForm
from django.contrib.auth.views import LoginView as DjangoLoginView
from django.contrib.auth.views import PasswordChangeView
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse_lazy
from django.views.decorators.debug import sensitive_post_parameters
from django.views.decorators.http import require_http_methods

from accounts import phones, services
from accounts.models import Channel as ProfileChannel
from accounts.validators import time_zone_names
from channels import linking
from channels.adapters import configured, telegram
from channels.adapters.base import Channel
from console import erasure, signup_confirmation
from console.forms.accounts import TELEGRAM, TIME_ZONE_LIST, ContactForm, DeleteAccountForm, SignUpForm
from console.signed_in import AuthenticatedRequest
from ops.limits import AttemptLimit, blocked_page

# Sign-ups per client address (SIGNUP_RATE_LIMIT): the one that reaches the limit pauses sign-ups from the address
# until the window ends, so one place cannot make accounts (and keys, and password hashes) without end.
SIGNUPS = AttemptLimit("signups", "SIGNUP_RATE_LIMIT", blocks_when_reached=True)


def browser_regions(request: HttpRequest) -> list[str]:
    """The browser's hint for reading a phone number typed without its country code."""
    return phones.regions_from_accept_language(request.headers.get("Accept-Language", ""))


class LoginView(DjangoLoginView):
    """Django's log-in view, whose page links to the password reset where it is offered (console/password_reset.py)."""

    def get_context_data(self, **kwargs: Any) -> dict[str, Any]:
        return {**super().get_context_data(**kwargs), "password_reset_by_email": settings.PASSWORD_RESET_BY_EMAIL}


def _signed_up(request: HttpRequest, *, channel: str, **details: Any) -> HttpResponse:
    """Create the account (services.EmailTaken when the address has one), sign the person in, and welcome them: one
    who chose Telegram gets their chat's one-time link at once (their profile keeps the spec's channel, SMS)."""
    wants_telegram = channel == TELEGRAM
    user = services.sign_up(**details, channel=ProfileChannel.SMS if wants_telegram else channel)
    login(request, user, backend="django.contrib.auth.backends.ModelBackend")
    if wants_telegram and Channel.TELEGRAM in configured():
        try:
            token = linking.new_telegram_token(user)
        except linking.LinkRefused:
            pass  # Settings → Channels offers another link
        else:
            messages.success(request, "Welcome! Link your Telegram chat, then create your first API key.")
            context = {"link": telegram.deep_link(token), "code_lifetime": linking.code_lifetime()}
            return render(request, "channels/telegram.html", context)
    messages.success(request, "Welcome! Create your first API key to start sending messages.")
    return redirect("keys:list")


def landing(request: HttpRequest) -> HttpResponse:
    """What the service does, for visitors; signed-in people go straight to their keys."""
    if request.user.is_authenticated:
        return redirect("keys:list")
    return render(request, "landing.html")


@sensitive_post_parameters("password1", "password2")
@require_http_methods(["GET", "POST"])
def signup(request: HttpRequest) -> HttpResponse:
    if request.user.is_authenticated:
        return redirect("keys:list")
    if request.method == "POST" and (wait := SIGNUPS.blocked_for(request)) > 0:
        return blocked_page(request, "accounts/signup_limited.html", wait, "signup")
    form = SignUpForm(
        request.POST or None, phone_regions=browser_regions(request), telegram=Channel.TELEGRAM in configured()
    )
    if request.method == "POST" and form.is_valid():
        SIGNUPS.count(request)  # a valid form costs a password hash, whatever happens next
        details = {name: form.cleaned_data[name] for name in ("email", "phone_number", "channel")}
        details["password"] = form.cleaned_data["password1"]
        if settings.SIGNUP_EMAIL_CONFIRMATION:
            signup_confirmation.start(**details, domain=request.get_host(), use_https=request.is_secure())
            return redirect("accounts:signup_sent")
        try:
            return _signed_up(request, **details)
        except services.EmailTaken:
            form.add_error("email", "An account with this email already exists. Log in instead.")
    return render(request, "accounts/signup.html", {"form": form})


@login_required
@require_http_methods(["GET", "POST"])
def contact_settings(request: AuthenticatedRequest) -> HttpResponse:
    profile = services.profile_of(request.user)
    initial = {"phone_number": profile.phone_number, "channel": profile.channel, "time_zone": profile.time_zone}
    form = ContactForm(request.POST or None, initial=initial, phone_regions=browser_regions(request))
    if request.method == "POST" and form.is_valid():
        services.update_contact(
            request.user,
            phone_number=form.cleaned_data["phone_number"],
            channel=form.cleaned_data["channel"],
            time_zone=form.cleaned_data["time_zone"] or None,  # blank: keep the one set
        )
        messages.success(request, "Saved. Your assistant will reach you there.")
        return redirect("accounts:settings")
    zones = {"time_zone_list": TIME_ZONE_LIST, "time_zone_names": sorted(time_zone_names())}
    return render(request, "accounts/settings.html", {"form": form, **zones})


@login_required
@require_http_methods(["GET", "POST"])
def delete_history(request: AuthenticatedRequest) -> HttpResponse:
    """Asks first (GET); deletes the person's messages on POST (console/erasure.py)."""
    if request.method == "POST":
        deleted = erasure.delete_history(request.user)
        if deleted is None:  # left to the worker
            messages.success(request, "Your history is being deleted; a long one takes a few minutes.")
        else:
            messages.success(request, f"Deleted {deleted} message{'s' if deleted != 1 else ''} from your history.")
        return redirect("accounts:settings")
    return render(request, "accounts/delete_history.html")


@sensitive_post_parameters("password")
@login_required
@require_http_methods(["GET", "POST"])
def delete_account(request: AuthenticatedRequest) -> HttpResponse:
    """Asks for the password (GET, or a wrong one); deletes the account on POST (console/erasure.py), logged out."""
    form = DeleteAccountForm(request.user, request.POST or None)
    if request.method == "POST" and form.is_valid():
        person = request.user
        logout(request)
        if erasure.delete_account(person):
            messages.success(request, "Your account and everything in it are deleted.")
        else:  # closed; the worker deletes it
            messages.success(request, "Your account is closed; it and everything in it are being deleted.")
        return redirect("landing")
    return render(request, "accounts/delete_account.html", {"form": form})


class ConsolePasswordChangeView(PasswordChangeView):
    template_name = "accounts/password_change.html"
    success_url = reverse_lazy("accounts:settings")

    def form_valid(self, form: PasswordChangeForm) -> HttpResponse:
        messages.success(self.request, "Your password was changed.")
        return super().form_valid(form)


def signup_sent(request: HttpRequest) -> HttpResponse:
    return render(request, "accounts/signup_sent.html")


@require_http_methods(["GET", "POST"])
def signup_confirm(request: HttpRequest) -> HttpResponse:
    """The email's link: GET asks (a mail scanner fetching the link creates nothing), POST creates the account."""
    if request.method == "GET":
        token = request.GET.get("token", "")
        context = {"pending": signup_confirmation.pending_of(token), "token": token}
        return render(request, "accounts/signup_confirm.html", context)
    pending = signup_confirmation.consume(request.POST.get("token", ""))
    if pending is None:
        return render(request, "accounts/signup_confirm.html", {"pending": None}, status=410)
    try:
        return _signed_up(request, **pending, password_is_hashed=True)
    except services.EmailTaken:
        reason = "This address has an account already."
        return render(request, "accounts/signup_confirm.html", {"pending": None, "reason": reason}, status=409)
