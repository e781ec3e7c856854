"""Webhooks: a person's webhook triggers. Made here or through the API (the SDK's create_webhook); the token (and
signing secret) shown once, on the page that answers the creating POST, exactly like a new key's secret."""

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.db.models import F
from django.http import HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.utils.cache import add_never_cache_headers
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET, require_http_methods

from accounts import audit
from console import examples, nonces, trigger_log
from console.forms.triggers import NewTriggerForm
from console.signed_in import AuthenticatedRequest
from triggers import services
from triggers.models import WebhookTrigger

ALREADY_CREATED = (
    "No new webhook was created: this form had already been used. A token is shown only once — if you did not copy "
    "it, revoke that webhook and make a new one."
)


@login_required
@require_GET
def trigger_list(request: AuthenticatedRequest) -> HttpResponse:
    triggers = WebhookTrigger.objects.filter(owner_id=request.user.pk).order_by(
        F("revoked_at").desc(nulls_first=True), "-created_at"
    )
    return render(request, "triggers/list.html", {"triggers": triggers})


@login_required
@never_cache
@require_http_methods(["GET", "POST"])
def new_trigger(request: AuthenticatedRequest) -> HttpResponse:
    if request.method == "POST":
        form = NewTriggerForm(request.POST)
        if form.is_valid():
            return _create_and_show_once(request, form)
    else:
        form = NewTriggerForm(initial={"nonce": nonces.issue(request.user.pk)})
    return render(request, "triggers/new.html", {"form": form})


def _create_and_show_once(request: AuthenticatedRequest, form: NewTriggerForm) -> HttpResponse:
    if not nonces.consume(request.user.pk, form.cleaned_data["nonce"]):
        messages.warning(request, ALREADY_CREATED)
        return redirect("triggers:list")
    try:
        trigger, token, secret = services.create_trigger(
            request.user,
            form.cleaned_data["condition"],
            form.cleaned_data["action"],
            signed=form.cleaned_data["signed"],
        )
    except services.TriggerLimitReached as error:
        messages.warning(request, str(error))
        return redirect("triggers:list")
    url = request.build_absolute_uri(reverse("webhook-trigger", args=[trigger.public_id]))
    context = {
        "trigger": trigger,
        "token": token,
        "signing_secret": secret,
        "webhook_url": url,
        "examples": examples.for_new_trigger(url, token, secret),
        "back_url": reverse("triggers:list"),
    }
    response = render(request, "triggers/created.html", context)
    add_never_cache_headers(response)
    return response


@login_required
@require_GET
def firing_log(request: AuthenticatedRequest, pk: int) -> HttpResponse:
    """A webhook's delivery log: only its owner's (anyone else gets the 404 an unknown webhook gets)."""
    trigger = get_object_or_404(WebhookTrigger, pk=pk, owner_id=request.user.pk)
    context = {
        "trigger": trigger,
        "lines": trigger_log.lines_of(trigger),
        "kept": trigger_log.LOG_LENGTH_KEPT,
        "refusals_kept": trigger_log.REFUSALS_KEPT,
    }
    return render(request, "triggers/log.html", context)


@login_required
@require_http_methods(["GET", "POST"])
def revoke(request: AuthenticatedRequest, pk: int) -> HttpResponse:
    trigger = get_object_or_404(WebhookTrigger, pk=pk, owner_id=request.user.pk)
    if request.method == "POST":
        if services.revoke_trigger(trigger, by=audit.CONSOLE):
            messages.success(request, f"Revoked “{trigger.condition}”. Requests to it are refused from now on.")
        else:
            messages.info(request, f"“{trigger.condition}” was already revoked.")
        return redirect("triggers:list")
    return render(request, "triggers/revoke.html", {"trigger": trigger})
