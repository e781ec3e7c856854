"""Reminders: what the assistant scheduled for the person (next time in their time zone, rule), cancel."""

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_GET

from accounts.services import profile_of
from console.signed_in import AuthenticatedRequest
from console.views.posted import form_action
from reminders import services
from reminders.models import Reminder, ReminderStatus


@login_required
@require_GET
def reminder_list(request: AuthenticatedRequest) -> HttpResponse:
    mine = Reminder.objects.filter(owner_id=request.user.pk)
    return render(
        request,
        "reminders/list.html",
        {
            "scheduled": mine.filter(status=ReminderStatus.SCHEDULED).order_by("next_due_at"),
            "past": mine.exclude(status=ReminderStatus.SCHEDULED).order_by("-created_at")[:50],
            "time_zone": profile_of(request.user).time_zone,
        },
    )


@login_required
@form_action("reminders:list")
def cancel(request: AuthenticatedRequest, public_id: str) -> HttpResponse:
    try:
        reminder = services.cancel_reminder(request.user, public_id)
    except services.ReminderRefused as refused:
        messages.error(request, str(refused))
    else:
        messages.success(request, f"Cancelled “{reminder.text}”.")
    return redirect("reminders:list")
