from typing import Any

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.db.models import F, QuerySet
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.utils.cache import add_never_cache_headers
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from accounts import audit
from assistant.tools.toolbox import offered_tools
from console import activity, examples, nonces
from console.forms.keys import NewKeyForm, NewV2KeyForm, RenameForm, RollForm, ScopesForm, ToolPolicyForm
from console.signed_in import AuthenticatedRequest
from conversations.models import Endpoint
from ingestion.hotpath.recording import record_user_message
from keys import services
from keys.models import ApiKey, Generation
from keys.scopes import Scope

RECENT_DELIVERIES = 20

ALREADY_CREATED = (
    "No new key was created: this form had already been used. A key's secret is shown only once — if you did not "
    "copy it, revoke that key and add a new one."
)


def _owned_key(request: AuthenticatedRequest, pk: int) -> ApiKey:
    # Someone else's key is "not found", never "forbidden": its existence is not ours to confirm.
    return get_object_or_404(ApiKey, pk=pk, owner_id=request.user.pk)


def _keys_of(request: AuthenticatedRequest, generation: Generation | None = None) -> QuerySet[ApiKey]:
    """The user's keys, active ones first (newest first), then revoked ones (most recently revoked first)."""
    keys = ApiKey.objects.filter(owner_id=request.user.pk)
    if generation is not None:
        keys = keys.filter(generation=generation)
    return keys.order_by(F("revoked_at").desc(nulls_first=True), "-created_at")


def _form_class(generation: Generation) -> type[NewKeyForm]:
    return NewV2KeyForm if generation == Generation.V2 else NewKeyForm


def _fresh_form(request: AuthenticatedRequest, generation: Generation, *, autofocus: bool = False) -> NewKeyForm:
    return _form_class(generation)(initial={"nonce": nonces.issue(request.user.pk)}, autofocus=autofocus)


def _list_url_of(generation: str) -> str:
    return reverse("keys:advanced") if generation == Generation.V1 else reverse("keys:list")


def _refused_form(request: AuthenticatedRequest, form: NewKeyForm, generation: Generation, reason: str) -> HttpResponse:
    """The form again, saying why no key was created, with a fresh one-time token (the old one is spent)."""
    refused = _form_class(generation)(
        {**form.cleaned_data, "nonce": nonces.issue(request.user.pk)},
        autofocus=generation == Generation.V2,
    )
    refused.is_valid()
    refused.add_error(None, reason)
    if generation == Generation.V1:
        return render(request, "keys/advanced.html", {"keys": _keys_of(request, Generation.V1), "form": refused})
    return render(request, "keys/new.html", {"form": refused})


def _create_and_show_once(request: AuthenticatedRequest, form: NewKeyForm, generation: Generation) -> HttpResponse:
    """Create the key and answer this very POST with its secret: no redirect, session or URL ever holds it."""
    if not nonces.consume(request.user.pk, form.cleaned_data["nonce"]):
        messages.warning(request, ALREADY_CREATED)
        return redirect(_list_url_of(generation), permanent=False)
    try:
        key, plaintext = services.create_key(
            request.user,
            form.cleaned_data["name"],
            generation,
            scopes=form.chosen_scopes() if isinstance(form, NewV2KeyForm) else None,
            expires_at=form.expires_at() if isinstance(form, NewV2KeyForm) else None,
            test_mode=isinstance(form, NewV2KeyForm) and form.cleaned_data["test_mode"],
            by=audit.CONSOLE,
        )
    except services.KeyLimitReached as full:
        return _refused_form(request, form, generation, str(full))
    return _show_secret_once(request, key, plaintext)


def _show_secret_once(request: HttpRequest, key: ApiKey, plaintext: str, rolled: ApiKey | None = None) -> HttpResponse:
    context = {
        "key": key,
        "plaintext": plaintext,
        "examples": examples.for_new_key(request.build_absolute_uri("/").rstrip("/"), plaintext, key.generation),
        "back_url": _list_url_of(key.generation),
        "rolled": rolled,
    }
    response = render(request, "keys/created.html", context)
    add_never_cache_headers(response)  # Cache-Control: no-store, so no cache or Back button can show it again
    return response


@login_required
@require_GET
def key_list(request: AuthenticatedRequest) -> HttpResponse:
    return render(request, "keys/list.html", {"keys": _keys_of(request)})


@login_required
@never_cache
@require_http_methods(["GET", "POST"])
def new_key(request: AuthenticatedRequest) -> HttpResponse:
    form: NewKeyForm
    if request.method == "POST":
        form = NewV2KeyForm(request.POST, autofocus=True)
        if form.is_valid():
            return _create_and_show_once(request, form, Generation.V2)
    else:
        form = _fresh_form(request, Generation.V2, autofocus=True)
    return render(request, "keys/new.html", {"form": form})


@login_required
@require_GET
def key_detail(request: AuthenticatedRequest, pk: int) -> HttpResponse:
    key = _owned_key(request, pk)
    deliveries = activity.requests_of(key).select_related("message").order_by("-created_at", "-id")
    series = activity.requests_per_day(key)
    context = {
        "key": key,
        "deliveries": deliveries[:RECENT_DELIVERIES],
        "series": series,
        "chart": activity.bar_chart(series),
        "back_url": _list_url_of(key.generation),
        "scopes_form": ScopesForm(initial={"scopes": sorted(key.scope_set)}),
        "scopes": [scope for scope in Scope if key.has_scope(scope)],
        "rename_form": RenameForm(initial={"name": key.name}),
        "tools_form": _tools_form(key),
        "is_expired": key.is_expired(),
        "usable": not key.is_revoked and not key.is_expired(),
    }
    return render(request, "keys/detail.html", context)


# A key's tool policy: the form's fields, the key's columns and services.set_tool_policy's arguments, in this order.
TOOL_POLICY = ("tool_access", "allowed_tools", "tools_need_approval")


def _tools_form(key: ApiKey, data: Any = None) -> ToolPolicyForm:
    initial = {name: getattr(key, name) for name in TOOL_POLICY}
    return ToolPolicyForm(data, initial=initial, tools=offered_tools(key.owner))


@login_required
@require_POST
def tool_policy(request: AuthenticatedRequest, pk: int) -> HttpResponse:
    key = _owned_key(request, pk)
    form = _tools_form(key, request.POST)
    if key.is_revoked or key.generation != Generation.V2:
        return redirect("keys:detail", pk=key.pk)
    if form.is_valid():
        services.set_tool_policy(key, *(form.cleaned_data[name] for name in TOOL_POLICY), by=audit.CONSOLE)
        messages.success(request, f"Saved what the assistant may do for “{key.name}”'s messages.")
    else:
        messages.error(request, "Nothing was changed: choose what the key's messages may use.")
    return redirect("keys:detail", pk=key.pk)


@login_required
@require_POST
def rename(request: AuthenticatedRequest, pk: int) -> HttpResponse:
    key = _owned_key(request, pk)
    form = RenameForm(request.POST)
    if key.is_revoked:
        messages.info(request, "A revoked key keeps its name.")
    elif not form.is_valid():
        messages.error(request, "Nothing was changed: " + " ".join(str(error) for error in form.errors.get("name", [])))
    elif services.rename_key(key, form.cleaned_data["name"], by=audit.CONSOLE):
        messages.success(request, f"Renamed to “{key.name}”.")
    return redirect("keys:detail", pk=key.pk)


@login_required
@never_cache
@require_http_methods(["GET", "POST"])
def roll(request: AuthenticatedRequest, pk: int) -> HttpResponse:
    """GET asks (and for how long the old secret should keep working); POST makes the new secret and shows it once."""
    key = _owned_key(request, pk)
    form = RollForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        try:
            new, plaintext = services.roll_key(key, form.overlap(), by=audit.CONSOLE)
        except services.RollRefused as refused:
            messages.error(request, str(refused))
            return redirect("keys:detail", pk=key.pk)
        return _show_secret_once(request, new, plaintext, rolled=key)
    return render(request, "keys/roll.html", {"key": key, "form": form})


TEST_MESSAGE = "Test message from the console, sent with the key “{name}”. No action is needed."


@login_required
@require_POST
def send_test_message(request: AuthenticatedRequest, pk: int) -> HttpResponse:
    """Record a message in the thread as if this key had sent it (the API's endpoint, its receipt and the key's
    page show it), so its owner sees the whole way a message goes."""
    key = _owned_key(request, pk)
    if key.generation != Generation.V2 or key.is_revoked or key.is_expired():
        messages.error(request, "Only an active V2 key can send a test message.")
    elif not key.has_scope(Scope.MESSAGES_SEND):
        messages.error(request, "This key may not send messages (it lacks messages:send): nothing was sent.")
    else:
        message = record_user_message(
            user=key.owner, endpoint=Endpoint.CURRENT, text=TEST_MESSAGE.format(name=key.name), api_key=key
        )
        messages.success(request, f"Test message sent with “{key.name}”: here is what became of it.")
        return redirect("conversations:message", message.public_id)
    return redirect("keys:detail", pk=key.pk)


@login_required
@require_POST
def key_scopes(request: AuthenticatedRequest, pk: int) -> HttpResponse:
    """The key page's form: what a V2 key may do, from its next request on."""
    key = _owned_key(request, pk)
    if key.is_revoked or key.generation != Generation.V2:
        return redirect("keys:detail", pk=key.pk)
    form = ScopesForm(request.POST)
    if not form.is_valid():
        messages.error(request, "Nothing was changed: choose at least one thing the key may do.")
    elif services.set_scopes(key, form.chosen_scopes(), by=audit.CONSOLE):
        messages.success(request, f"“{key.name}” may now: {', '.join(s.value for s in Scope if key.has_scope(s))}.")
    else:
        messages.info(request, f"“{key.name}” already had exactly these scopes.")
    return redirect("keys:detail", pk=key.pk)


@login_required
@require_http_methods(["GET", "POST"])
def revoke(request: AuthenticatedRequest, pk: int) -> HttpResponse:
    """GET asks for confirmation; POST (with its CSRF token) revokes."""
    key = _owned_key(request, pk)
    if request.method == "POST":
        if services.revoke_key(key, by=audit.CONSOLE):
            messages.success(request, f"Revoked “{key.name}”. Requests with it are refused from now on.")
        else:
            messages.info(request, f"“{key.name}” was already revoked.")
        return redirect(_list_url_of(key.generation))
    return render(request, "keys/revoke.html", {"key": key, "back_url": _list_url_of(key.generation)})


@login_required
@never_cache
@require_GET
def advanced(request: AuthenticatedRequest) -> HttpResponse:
    """Settings → Advanced: the deprecated V1 keys of the legacy webhook."""
    context = {"keys": _keys_of(request, Generation.V1), "form": _fresh_form(request, Generation.V1)}
    return render(request, "keys/advanced.html", context)


@login_required
@never_cache
@require_POST
def new_legacy_key(request: AuthenticatedRequest) -> HttpResponse:
    form = NewKeyForm(request.POST)
    if form.is_valid():
        return _create_and_show_once(request, form, Generation.V1)
    return render(request, "keys/advanced.html", {"keys": _keys_of(request, Generation.V1), "form": form})
