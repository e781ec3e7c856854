"""/device: where a person finishes `poke login` (RFC 8628's verification page). They type the code the CLI printed
(or open the page with ?code=), see what is asking (client, address, time) and approve or deny. Approval issues a
V2 key named after the device and date, which the CLI collects once and which is listed (and revocable) on API
Keys. Wrong codes count per client address (DEVICE_CODE_FAILURE_RATE_LIMIT): guessing a code is the attack."""

from django.conf import settings
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_http_methods

from console.signed_in import AuthenticatedRequest
from devices import services
from devices.models import DeviceAuthorization
from keys.scopes import CLI, Scope
from keys.services import has_room_for_a_key
from ops.limits import AttemptLimit, blocked_page

WRONG_CODES = AttemptLimit("device-code-failures", "DEVICE_CODE_FAILURE_RATE_LIMIT", blocks_when_reached=True)
NOT_WAITING = (
    "No log-in is waiting with this code. Check it against the one your terminal shows; codes last 10 minutes and "
    "work once, so run `poke login` again if it has expired."
)


def _find(request: HttpRequest, typed: str) -> DeviceAuthorization | HttpResponse:
    """The pending request for a typed code, or the page that refuses: the address is blocked, or no log-in waits
    with this code (a miss is counted)."""
    wait = WRONG_CODES.blocked_for(request)
    if wait <= 0:
        found = services.pending_by_user_code(typed)
        if found is not None:
            return found
        wait = WRONG_CODES.count(request)
    if wait > 0:
        return blocked_page(request, "devices/blocked.html", wait, "device_code")
    return render(request, "devices/enter.html", {"code": typed, "error": NOT_WAITING}, status=404)


@login_required
@never_cache
@require_http_methods(["GET", "POST"])
def device(request: AuthenticatedRequest) -> HttpResponse:
    if request.method == "POST":
        return _decide(request)
    typed = request.GET.get("code", "").strip()[:40]
    if not typed:
        return render(request, "devices/enter.html", {"code": ""})
    found = _find(request, typed)
    if isinstance(found, HttpResponse):
        return found
    return render(request, "devices/confirm.html", {"authorization": found, "scopes": _cli_scopes()})


def _decide(request: AuthenticatedRequest) -> HttpResponse:
    typed = request.POST.get("code", "").strip()[:40]
    decision = request.POST.get("decision")
    if decision not in ("approve", "deny"):
        return render(request, "devices/enter.html", {"code": typed, "error": "Choose Approve or Deny."}, status=400)
    found = _find(request, typed)
    if isinstance(found, HttpResponse):
        return found
    user = request.user
    assert user.is_authenticated
    if decision == "approve" and not has_room_for_a_key(user):
        full = (
            f"This account already has {settings.MAX_ACTIVE_KEYS_PER_ACCOUNT} active API keys, the most it may hold: "
            "revoke one under API Keys, then approve."
        )
        context = {"authorization": found, "error": full, "scopes": _cli_scopes()}
        return render(request, "devices/confirm.html", context, status=409)
    decided = services.approve(found, user) if decision == "approve" else services.deny(found, user)
    if not decided:  # approved or denied in another tab a moment ago, or it expired just now
        return render(request, "devices/enter.html", {"code": typed, "error": NOT_WAITING}, status=409)
    return render(request, "devices/done.html", {"authorization": found, "approved": decision == "approve"})


def _cli_scopes() -> list[Scope]:
    """What the key a CLI log-in creates may do (keys/scopes.py CLI), in the order scopes are listed everywhere."""
    return [scope for scope in Scope if scope in CLI]
