"""Connections: the person's MCP servers, their tools and last sync; add (connects first), sync, remove; whether the
person trusts a server's read-only claims, and which tools they mark as acting (assistant/approval/rule.py:
read-only is their call, not the server's). The same page shows the calendar and the mailbox (console/views/mailcal.py).

A server that signs in with OAuth (docs/howto/mcp-connections.md): adding it sends the browser to the server's
sign-in page; ``oauth_callback`` is where it comes back. Each sign-in's state digest is kept in the session, so a
callback counts only in the browser session that started it (and, connections/oauth/mcp.py, only once)."""

from urllib.parse import urlsplit

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.debug import sensitive_post_parameters
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from accounts import audit
from connections import services
from connections.checks import ChecksBusy
from connections.models import Connection, is_connection_id
from console.forms.connections import ConnectionForm
from console.signed_in import AuthenticatedRequest
from console.views.mailcal import page_context
from ops import public_url

SESSION_KEY = "oauth_sign_ins"
MAX_SIGN_INS_IN_SESSION = 5


def callback_url() -> str:
    """The redirect URI we register and send: fixed by PUBLIC_BASE_URL, not by the Host of the request."""
    return public_url.base_url() + reverse("connections:oauth-callback")


def client_metadata_url() -> str:
    return public_url.base_url() + reverse("connections:oauth-client")


@require_GET
def oauth_client(request: HttpRequest) -> HttpResponse:
    """Our OAuth Client ID Metadata Document, public: an authorization server that takes such documents fetches it
    to learn our redirect URI (the MCP authorization specification prefers this to registering)."""
    return JsonResponse(services.oauth_mcp.client_metadata(client_metadata_url(), callback_url()))


def _to_sign_in(request: HttpRequest, started: services.oauth_mcp.Started) -> HttpResponse:
    """Remember the sign-in in this browser session, and send the browser to the server's sign-in page."""
    kept = [d for d in request.session.get(SESSION_KEY, []) if isinstance(d, str)][-(MAX_SIGN_INS_IN_SESSION - 1) :]
    request.session[SESSION_KEY] = [*kept, started.state_digest]
    # A page that moves on by itself rather than a redirect: the console's Content Security Policy allows forms to
    # submit only to us (form-action 'self'), which browsers also apply to the redirects that follow a submission.
    context = {"authorization_url": started.authorization_url, "host": urlsplit(started.authorization_url).netloc}
    return render(request, "connections/sign_in_redirect.html", context)


def _owned(request: AuthenticatedRequest, public_id: str) -> Connection:
    found = (
        Connection.objects.filter(public_id=public_id, owner_id=request.user.pk).first()
        if is_connection_id(public_id)
        else None
    )
    if found is None:
        raise Http404("No such connection.")
    return found


@sensitive_post_parameters("api_key", "oauth_client_secret")
@login_required
@require_http_methods(["GET", "POST"])
def connection_list(request: AuthenticatedRequest) -> HttpResponse:
    form = ConnectionForm(request.POST or None)
    if request.method == "GET" or not form.is_valid():
        return _page(request, form, 200 if request.method == "GET" else 400)
    try:
        connection = services.add_connection(
            request.user,
            form.cleaned_data["name"],
            form.cleaned_data["server_url"],
            form.cleaned_data["api_key"] or None,
            by=audit.CONSOLE,
        )
    except services.ConnectionRefused as refused:
        if refused.oauth:
            return _start_sign_in(request, form) or _page(request, form, 400)
        form.add_error(None, str(refused))
        return _page(request, form, 400)
    except ChecksBusy as busy:
        form.add_error(None, str(busy))
        response = _page(request, form, 503 if busy.whole_process else 429)
        response["Retry-After"] = str(busy.wait)
        return response
    messages.success(request, f"Connected to {connection.name}: {connection.tools.count()} tools.")
    return redirect("connections:list")


def _page(request: AuthenticatedRequest, form: ConnectionForm, status: int) -> HttpResponse:
    connections = (
        Connection.objects.filter(owner_id=request.user.pk).select_related("oauth_grant").prefetch_related("tools")
    )
    context = {"connections": connections, "form": form, "callback_url": callback_url(), **page_context(request)}
    return render(request, "connections/list.html", context, status=status)


def _start_sign_in(request: AuthenticatedRequest, form: ConnectionForm) -> HttpResponse | None:
    """The redirect to the server's sign-in page, or None with the reason added to the form."""
    try:
        started = services.start_sign_in(
            request.user,
            form.cleaned_data["name"],
            form.cleaned_data["server_url"],
            callback_url(),
            form.cleaned_data["oauth_client_id"],
            form.cleaned_data["oauth_client_secret"],
            client_metadata_url(),
        )
    except (services.ConnectionRefused, ChecksBusy) as refused:
        form.add_error(None, str(refused))
        return None
    return _to_sign_in(request, started)


@login_required
@require_POST
def sign_in_again(request: AuthenticatedRequest, public_id: str) -> HttpResponse:
    connection = _owned(request, public_id)
    try:
        started = services.start_sign_in_again(connection, callback_url())
    except (services.ConnectionRefused, ChecksBusy) as refused:
        messages.error(request, f"Could not start the sign-in to {connection.name}: {refused}")
        return redirect("connections:list")
    return _to_sign_in(request, started)


@login_required
@require_http_methods(["GET"])
def oauth_callback(request: AuthenticatedRequest) -> HttpResponse:
    """Where the server's sign-in page sends the browser back: ?code=…&state=… or ?error=…&state=…."""
    params = {key: request.GET.get(key, "") for key in ("code", "error", "error_description") if key in request.GET}
    if "iss" in request.GET:
        params["iss"] = request.GET["iss"]
    digests = [d for d in request.session.get(SESSION_KEY, []) if isinstance(d, str)]
    try:
        connection = services.finish_sign_in(
            request.user,
            request.GET.get("state", ""),
            params,
            digests,
            by=audit.CONSOLE,
        )
    except (services.ConnectionRefused, ChecksBusy) as refused:
        # The digest stays in the session (at most MAX_SIGN_INS_IN_SESSION are kept): the sign-in itself is gone,
        # so a second use of the link is refused as a reuse.
        return render(request, "connections/sign_in_failed.html", {"reason": str(refused)}, status=400)
    messages.success(request, f"Signed in to {connection.name}: {connection.tools.count()} tools.")
    return redirect("connections:list")


@login_required
@require_POST
def sync(request: AuthenticatedRequest, public_id: str) -> HttpResponse:
    connection = _owned(request, public_id)
    try:
        services.sync_tools(connection)
    except (services.ConnectionRefused, ChecksBusy) as refused:
        messages.error(request, f"Could not sync {connection.name}: {refused}")
    else:
        messages.success(request, f"Synced {connection.name}: {connection.tools.count()} tools.")
    return redirect("connections:list")


@login_required
@require_http_methods(["GET", "POST"])
def remove(request: AuthenticatedRequest, public_id: str) -> HttpResponse:
    connection = _owned(request, public_id)
    if request.method == "POST":
        services.remove_connection(connection, by=audit.CONSOLE)
        messages.success(request, f"Removed {connection.name}; the assistant no longer has its tools.")
        return redirect("connections:list")
    return render(request, "connections/remove.html", {"connection": connection})


@login_required
@require_POST
def trust(request: AuthenticatedRequest, public_id: str) -> HttpResponse:
    connection = _owned(request, public_id)
    trusted = request.POST.get("trusted") == "1"
    services.set_trusted(connection, trusted, by=audit.CONSOLE)
    if trusted:
        messages.success(
            request,
            f"You trust {connection.name}: the tools it says only read run for your keys' and webhooks' messages "
            "without asking you.",
        )
    else:
        messages.success(
            request,
            f"You no longer trust {connection.name}: for your keys' and webhooks' messages, every one of its tools "
            "waits for your approval, whatever it says of itself.",
        )
    return redirect("connections:list")


@login_required
@require_POST
def mark_tool(request: AuthenticatedRequest, public_id: str) -> HttpResponse:
    connection = _owned(request, public_id)
    name, acting = request.POST.get("tool", ""), request.POST.get("acting") == "1"
    if not services.mark_acting(connection, name, acting, by=audit.CONSOLE):
        messages.error(request, f"{connection.name} has no tool named {name[:100]!r}; sync its tools first.")
    elif acting:
        messages.success(request, f"{name} is treated as acting: it waits for your approval where anything else does.")
    else:
        messages.success(request, f"{name} is treated as the server describes it again.")
    return redirect("connections:list")
