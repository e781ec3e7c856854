"""An action the assistant asked approval for (assistant/approval/requests.py): what, for whom, asked by which key or
trigger; Approve or Deny (POST, with its CSRF token). The thread shows the same buttons on the asking message."""

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_http_methods

from assistant.approval import requests
from assistant.approval import text as approval_text
from channels import approvals as phones
from console.signed_in import AuthenticatedRequest
from ingestion import approvals


@login_required
@require_http_methods(["GET", "POST"])
def approval(request: AuthenticatedRequest, pk: int) -> HttpResponse:
    action = approvals.pending_of(request.user, pk)
    if action is None:
        raise Http404
    if request.method == "POST":
        decision = request.POST.get("decision")
        if decision not in ("approve", "deny"):
            messages.error(request, "Choose Approve or Deny.")
            return redirect("approvals:detail", pk=pk)
        answer = approvals.answer(request.user, action, approve=decision == "approve")
        decided = answer in (approvals.Answer.APPROVED, approvals.Answer.DENIED)
        if decided:  # its message on Telegram says so
            phones.mark_answered.enqueue(action.pk, answer.value, "in the console")
        (messages.success if decided else messages.info)(request, approvals.SAID[answer])
        return redirect("conversations:thread")
    what = approval_text.what_happens(action, requests.zone_of(action)).split("\n")
    asker = approval_text.asked_by(action.requested_by)
    context = {"action": action, "what": what[0], "arguments": what[1:], "asker": asker}
    return render(request, "approvals/detail.html", context)
