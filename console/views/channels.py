"""Settings → Channels: the numbers and chats a person linked, linking another (a code sent on that channel, or a
Telegram deep link), unlinking. The rules are in channels/linking.py."""

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_http_methods

from accounts.services import profile_of
from channels import linking
from channels.adapters import configured, telegram
from channels.adapters.base import PHONE_CHANNELS, Channel
from channels.models import ChannelKind
from channels.notify import send_notice
from channels.outbound.people import quiet_hours_of, set_quiet_hours
from console.forms.channels import CodeForm, PhoneLinkForm, QuietHoursForm
from console.signed_in import AuthenticatedRequest
from console.views.accounts import browser_regions
from console.views.posted import form_action


def _page(
    request: AuthenticatedRequest,
    form: PhoneLinkForm,
    code_form: CodeForm | None = None,
    status: int = 200,
    quiet_form: QuietHoursForm | None = None,
) -> HttpResponse:
    user = request.user
    offered = configured()
    pending = linking.pending_phone_code(user)
    hours = quiet_hours_of(user)
    initial = {"starts": hours.starts, "ends": hours.ends} if hours else {}
    return render(
        request,
        "channels/settings.html",
        {
            "linked": user.linked_addresses.order_by("channel", "linked_at"),
            "offers_phone": any(c in PHONE_CHANNELS for c in offered),
            "offers_telegram": Channel.TELEGRAM in offered,
            "offered": [ChannelKind(c).label for c in offered],
            "form": form,
            "pending": pending,
            "code_lifetime": linking.code_lifetime(),
            "pending_channel": ChannelKind(pending.channel).label if pending else "",
            "code_form": code_form or CodeForm(),
            "quiet_form": quiet_form or QuietHoursForm(initial=initial),
            "quiet_hours": hours,
            "time_zone": profile_of(user).time_zone,
        },
        status=status,
    )


@login_required
@never_cache
@require_http_methods(["GET", "POST"])
def channel_list(request: AuthenticatedRequest) -> HttpResponse:
    """The page; its form asks for a code for a number (POST), sends it, and shows where to type it."""
    form = PhoneLinkForm(request.POST or None, phone_regions=browser_regions(request))
    if request.method != "POST":
        return _page(request, form)
    if not form.is_valid():
        return _page(request, form, status=400)
    channel, number = form.cleaned_data["channel"], form.cleaned_data["phone_number"]
    try:
        row, code = linking.new_phone_code(request.user, channel, number)
    except linking.LinkRefused as refusal:
        form.add_error(None, str(refusal))
        return _page(request, form, status=429 if "Wait" in str(refusal) else 400)
    problem = send_notice(
        channel,
        number,
        f"Your code to link this number to your assistant: {code}. It expires in {linking.code_lifetime()}.",
    )
    if problem:
        linking.void(row)
        form.add_error(None, f"The code could not be sent ({problem}). Check the number, or try again later.")
        return _page(request, form, status=502)
    messages.success(request, f"We sent a code to {number} by {ChannelKind(channel).label}. Type it below.")
    return redirect("channels:settings")


@login_required
@form_action("channels:settings")
def confirm_code(request: AuthenticatedRequest) -> HttpResponse:
    code_form = CodeForm(request.POST)
    form = PhoneLinkForm(phone_regions=browser_regions(request))
    if not code_form.is_valid():
        return _page(request, form, code_form, status=400)
    result = linking.confirm_phone_code(request.user, code_form.cleaned_data["code"])
    if result.outcome == "linked":
        messages.success(request, "Linked. What you send from that number now reaches your assistant.")
        return redirect("channels:settings")
    code_form.add_error("code", result.text)
    return _page(request, form, code_form, status=400)


@login_required
@never_cache
@form_action("channels:settings")
def telegram_link(request: AuthenticatedRequest) -> HttpResponse:
    """A one-time t.me link, shown once (only its digest is kept)."""
    if Channel.TELEGRAM not in configured():
        messages.error(request, "Telegram is not offered on this server.")
        return redirect("channels:settings")
    try:
        token = linking.new_telegram_token(request.user)
    except linking.LinkRefused as refusal:
        messages.error(request, str(refusal))
        return redirect("channels:settings")
    context = {"link": telegram.deep_link(token), "code_lifetime": linking.code_lifetime()}
    return render(request, "channels/telegram.html", context)


@login_required
@form_action("channels:settings")
def unlink(request: AuthenticatedRequest, linked_id: int) -> HttpResponse:
    if linking.unlink(request.user, linked_id):
        messages.success(request, "Unlinked. Messages from there no longer reach your assistant.")
    return redirect("channels:settings")


@login_required
@form_action("channels:settings", anchor="quiet-hours")
def quiet_hours(request: AuthenticatedRequest) -> HttpResponse:
    """Set or clear the person's quiet hours (in their profile's time zone)."""
    form = QuietHoursForm(request.POST)
    if not form.is_valid():
        return _page(request, PhoneLinkForm(phone_regions=browser_regions(request)), quiet_form=form, status=400)
    hours = set_quiet_hours(request.user, form.cleaned_data["starts"], form.cleaned_data["ends"])
    if hours is None:
        messages.success(request, "No quiet hours: texts go to your phone at any time.")
    else:
        messages.success(
            request, f"Quiet hours set: nothing is sent to your phone from {hours.starts:%H:%M} to {hours.ends:%H:%M}."
        )
    return redirect("channels:settings")
