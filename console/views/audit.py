"""Settings → Audit log: what changed who or what may act for the person (accounts/audit.py), newest first."""

from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.http import HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET

from accounts.models import AuditEvent
from console.signed_in import AuthenticatedRequest
from keys.services import note_expiries

PER_PAGE = 50


@login_required
@require_GET
def audit_log(request: AuthenticatedRequest) -> HttpResponse:
    assert request.user.pk is not None  # login_required
    note_expiries(request.user.pk)  # keys that expired unnoticed (no request since) are listed too
    events = AuditEvent.objects.filter(account_id=request.user.pk)
    page = Paginator(events, PER_PAGE).get_page(request.GET.get("page"))
    return render(request, "audit/log.html", {"page": page})
