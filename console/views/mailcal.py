"""Connections, continued: the person's calendar (CalDAV) and mailbox (IMAP + SMTP). Connect (logs in first),
remove (asks first). The password is never shown back: not in the page, not in a re-rendered form."""

from typing import Any

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.debug import sensitive_post_parameters
from django.views.decorators.http import require_http_methods

from connections import mailcal
from connections.checks import ChecksBusy
from connections.models import CalendarAccount, Connection, MailAccount
from connections.oauth import mail as connections_oauth_mail
from console.forms.connections import ConnectionForm
from console.forms.mailcal import CalendarForm, MailboxForm
from console.signed_in import AuthenticatedRequest
from console.views import oauth_mail
from console.views.posted import form_action


def page_context(
    request: AuthenticatedRequest, calendar_form: CalendarForm | None = None, mailbox_form: MailboxForm | None = None
) -> dict[str, Any]:
    """What the Connections page shows of the calendar and the mailbox (connections/list.html)."""
    return {
        "calendar": CalendarAccount.objects.filter(owner_id=request.user.pk).first(),
        "mailbox": MailAccount.objects.filter(owner_id=request.user.pk).first(),
        "calendar_form": calendar_form or CalendarForm(),
        "mailbox_form": mailbox_form or MailboxForm(),
        **oauth_mail.page_context(request),
    }


def _page_with_errors(request: AuthenticatedRequest, status: int, **forms: Any) -> HttpResponse:
    connections = Connection.objects.filter(owner_id=request.user.pk).prefetch_related("tools")
    context = {"connections": connections, "form": ConnectionForm(), **page_context(request, **forms)}
    return render(request, "connections/list.html", context, status=status)


def _refusal_status(error: Exception) -> int:
    if isinstance(error, ChecksBusy):
        return 503 if error.whole_process else 429
    return 409 if isinstance(error, mailcal.AccountRefused) and error.exists else 400


def _connect(request: AuthenticatedRequest, form: CalendarForm | MailboxForm) -> HttpResponse:
    if form.is_valid():
        try:
            done = form.connect(request.user)
        except (mailcal.AccountRefused, ChecksBusy) as refused:
            form.add_error(None, str(refused))
            return _page_with_errors(request, _refusal_status(refused), **{form.context_name: form})
        messages.success(request, done)
        return redirect("connections:list")
    return _page_with_errors(request, 400, **{form.context_name: form})


@sensitive_post_parameters("password")
@login_required
@form_action("connections:list", anchor="calendar-title")
def add_calendar(request: AuthenticatedRequest) -> HttpResponse:
    return _connect(request, CalendarForm(request.POST))


@sensitive_post_parameters("password")
@login_required
@form_action("connections:list", anchor="mailbox-title")
def add_mailbox(request: AuthenticatedRequest) -> HttpResponse:
    return _connect(request, MailboxForm(request.POST))


@login_required
@require_http_methods(["GET", "POST"])
def remove(request: AuthenticatedRequest, kind: str) -> HttpResponse:
    account: CalendarAccount | MailAccount | None = None
    if kind == "calendar":
        account = CalendarAccount.objects.filter(owner_id=request.user.pk).first()
    elif kind == "mailbox":
        account = MailAccount.objects.filter(owner_id=request.user.pk).first()
    if account is None:
        raise Http404("Nothing to remove.")
    if request.method == "POST":
        if account.oauth_grant_id is not None:  # signed in with Google or Microsoft
            connections_oauth_mail.remove_account(account)
            messages.success(request, f"Removed your {kind}; the assistant no longer uses it.")
            return redirect("connections:list")
        mailcal.remove(account)
        messages.success(request, f"Removed your {kind}; its password is deleted and the assistant no longer uses it.")
        return redirect("connections:list")
    return render(request, "connections/remove_account.html", {"account": account, "kind": kind})
