"""Connections, continued: Google and Microsoft mail and calendar signed in to with OAuth (connections/oauth/mail.py).
"Connect" sends the browser to the provider; the callback finishes the sign-in (or says plainly why nothing was
connected); "Disconnect" removes the mailbox, the calendar and the tokens, revoking them where the provider can."""

from typing import Any
from urllib.parse import urlsplit

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_GET, require_http_methods

from connections.models import GrantKind, OAuthGrant
from connections.oauth import mail as oauth_mail
from connections.oauth.providers import CALENDAR, MAIL, configured, describe, provider
from console.signed_in import AuthenticatedRequest
from console.views.posted import form_action

_KINDS = (GrantKind.GOOGLE, GrantKind.MICROSOFT)
MICROSOFT_CALENDAR = (
    "The calendar is your default Outlook calendar, reached through Microsoft Graph; adding it later asks Microsoft "
    "for access to it alone."
)


def _kind(kind: str) -> str:
    if kind not in _KINDS or provider(kind) is None:
        raise Http404("No such provider here.")
    return kind


def page_context(request: AuthenticatedRequest) -> dict[str, Any]:
    """The Google and Microsoft cards of the Connections page (connections/_oauth_mail.html)."""
    cards = []
    for found in configured():
        grant = oauth_mail.grant_of(request.user.pk, found.kind)
        have = oauth_mail.capabilities_of(grant) if grant is not None else []
        cards.append(
            {
                "kind": found.kind,
                "name": found.name,
                "grant": grant,
                "address": oauth_mail.address_of_grant(grant) if grant is not None else "",
                "have": describe(have),
                "have_list": have,
                "missing": [c for c in found.capabilities if c not in have],
                "offered": found.capabilities,
                "revokes": bool(found.revocation_url),
                "note": MICROSOFT_CALENDAR if found.kind == GrantKind.MICROSOFT else "",
            }
        )
    return {"oauth_providers": cards, "capability_labels": {MAIL: "Mail", CALENDAR: "Calendar"}}


@login_required
@form_action("connections:list")
def start(request: AuthenticatedRequest, kind: str) -> HttpResponse:
    kind = _kind(kind)
    try:
        url = oauth_mail.start(request.session, request.user, kind, request.POST.getlist("capability"))
    except oauth_mail.SignInRefused as refused:
        messages.error(request, str(refused))
        return redirect("connections:list")
    # A page that moves on by itself, not a redirect: the console's Content Security Policy lets forms submit only
    # to us (form-action 'self'), and browsers apply that to the redirects that follow a submission too.
    context = {"authorization_url": url, "host": urlsplit(url).netloc}
    return render(request, "connections/sign_in_redirect.html", context)


@login_required
@require_GET
def callback(request: AuthenticatedRequest, kind: str) -> HttpResponse:
    kind = _kind(kind)
    query = {key: request.GET.get(key, "") for key in ("state", "code", "error") if key in request.GET}
    try:
        connected = oauth_mail.finish(request.session, request.user, kind, query)
    except oauth_mail.SignInRefused as refused:
        messages.error(request, str(refused))
        return redirect("connections:list")
    if connected.added:
        messages.success(
            request, f"Connected your {connected.provider} {describe(connected.added)} ({connected.address})."
        )
    else:
        messages.success(request, f"Signed in again with {connected.provider} as {connected.address}.")
    if connected.declined:  # Google lets the person untick a permission on its consent page
        messages.warning(
            request,
            f"You did not allow {describe(connected.declined)} at {connected.provider}, so it is not connected; "
            "choose Add on the card to ask again.",
        )
    return redirect("connections:list")


@login_required
@require_http_methods(["GET", "POST"])
def disconnect(request: AuthenticatedRequest, kind: str) -> HttpResponse:
    kind = _kind(kind)
    grant: OAuthGrant | None = oauth_mail.grant_of(request.user.pk, kind)
    if grant is None:
        raise Http404("Nothing to disconnect.")
    name = grant.get_kind_display()
    if request.method == "POST":
        if oauth_mail.disconnect(grant):  # revoked at the provider
            messages.success(request, f"Disconnected {name}: removed here, and the sign-in revoked at {name}.")
        else:
            done = f"Disconnected {name}: removed here, and our copy of the sign-in deleted."
            messages.success(request, f"{done} {_withdraw_hint(kind)}")
        return redirect("connections:list")
    context = {
        "grant": grant,
        "name": name,
        "kind": kind,
        "address": oauth_mail.address_of_grant(grant),
        "revokes": bool(grant.revocation_endpoint),
        "hint": _withdraw_hint(kind),
    }
    return render(request, "connections/oauth_mail_disconnect.html", context)


def _withdraw_hint(kind: str) -> str:
    if kind == GrantKind.MICROSOFT:
        return (
            "Microsoft offers apps no way to revoke a sign-in: to withdraw this app's access as well, remove it at "
            "https://myapps.microsoft.com (work or school account) or https://account.live.com/consent/Manage "
            "(personal account)."
        )
    return "To withdraw this app's access as well, remove it at https://myaccount.google.com/permissions."
