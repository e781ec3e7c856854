"""Connections: the person's MCP servers, their tools and last sync; add (connects first), sync, remove. The same page
shows the calendar and the mailbox (console/views/mailcal.py)."""

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.debug import sensitive_post_parameters
from django.views.decorators.http import require_http_methods, require_POST

from accounts import audit
from connections import services
from connections.checks import ChecksBusy
from connections.models import Connection, is_connection_id
from console.forms.connections import ConnectionForm
from console.views.mailcal import page_context


def _owned(request: HttpRequest, public_id: str) -> Connection:
    found = (
        Connection.objects.filter(public_id=public_id, owner_id=request.user.pk).first()
        if is_connection_id(public_id)
        else None
    )
    if found is None:
        raise Http404("No such connection.")
    return found


@sensitive_post_parameters("api_key")
@login_required
@require_http_methods(["GET", "POST"])
def connection_list(request: HttpRequest) -> HttpResponse:
    form = ConnectionForm(request.POST or None)
    status, retry_after = 400, None
    if request.method == "POST" and form.is_valid():
        try:
            connection = services.add_connection(
                request.user,  # type: ignore[arg-type]
                form.cleaned_data["name"],
                form.cleaned_data["server_url"],
                form.cleaned_data["api_key"] or None,
                by=audit.CONSOLE,
            )
        except services.ConnectionRefused as refused:
            form.add_error(None, str(refused))
        except ChecksBusy as busy:
            form.add_error(None, str(busy))
            status, retry_after = (503 if busy.whole_process else 429), busy.wait
        else:
            messages.success(request, f"Connected to {connection.name}: {connection.tools.count()} tools.")
            return redirect("connections:list")
    connections = Connection.objects.filter(owner_id=request.user.pk).prefetch_related("tools")
    if request.method == "GET":
        status = 200
    context = {"connections": connections, "form": form, **page_context(request)}
    response = render(request, "connections/list.html", context, status=status)
    if retry_after is not None:
        response["Retry-After"] = str(retry_after)
    return response


@login_required
@require_POST
def sync(request: HttpRequest, public_id: str) -> HttpResponse:
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
def remove(request: HttpRequest, public_id: str) -> HttpResponse:
    connection = _owned(request, public_id)
    if request.method == "POST":
        services.remove_connection(connection, by=audit.CONSOLE)
        messages.success(request, f"Removed {connection.name}; the assistant no longer has its tools.")
        return redirect("connections:list")
    return render(request, "connections/remove.html", {"connection": connection})
