"""console/signed_in.py: a view that takes an AuthenticatedRequest hands request.user to the services as a User, so
it must never run for someone signed out. Every such view in the URLconf sends a signed-out visitor to the log-in
page, whatever the method."""

import inspect
import typing

import pytest
from django.shortcuts import resolve_url
from django.urls import URLPattern, URLResolver, get_resolver

from console.signed_in import AuthenticatedRequest


def _patterns(resolver: URLResolver, prefix: str = "") -> typing.Iterator[tuple[str, URLPattern]]:
    for entry in resolver.url_patterns:
        if isinstance(entry, URLResolver):
            yield from _patterns(entry, prefix + str(entry.pattern))
        else:
            yield prefix + str(entry.pattern), entry


def _innermost(view: typing.Any) -> typing.Any:
    while hasattr(view, "__wrapped__"):
        view = view.__wrapped__
    return view


def _takes_a_signed_in_request(view: typing.Any) -> bool:
    function = _innermost(view)
    first = next(iter(inspect.signature(function).parameters), None)
    return first is not None and typing.get_type_hints(function).get(first) is AuthenticatedRequest


def _example_path(route: str) -> str:
    """The route with each converter filled in: an int, a slug or a string, a UUID."""
    path = route
    for converter, example in (("int", "1"), ("uuid", "00000000-0000-0000-0000-000000000001")):
        while f"<{converter}:" in path:
            start = path.index(f"<{converter}:")
            path = path[:start] + example + path[path.index(">", start) + 1 :]
    while "<" in path:
        start = path.index("<")
        path = path[:start] + "x" + path[path.index(">", start) + 1 :]
    return "/" + path.lstrip("^").rstrip("$")


SIGNED_IN_VIEWS = sorted(
    (route, entry.callback)
    for route, entry in _patterns(get_resolver())
    if not route.startswith("admin/") and _takes_a_signed_in_request(entry.callback)
)


def test_the_console_has_views_that_take_a_signed_in_request():
    assert len(SIGNED_IN_VIEWS) > 40


@pytest.mark.parametrize("method", ["get", "post"])
@pytest.mark.parametrize("route", [route for route, _ in SIGNED_IN_VIEWS])
def test_a_signed_out_visitor_is_sent_to_log_in(client, route, method):
    answer = getattr(client, method)(_example_path(route))
    assert answer.status_code == 302, f"{route}: {answer.status_code}"
    assert answer["Location"].startswith(resolve_url("accounts:login") + "?next="), route
