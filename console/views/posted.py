"""Form actions: URLs that take a POST from a form on another page. A GET of one (a bookmarked or pasted link, a
reload after the browser forgot the form) is sent to the page that holds the form instead of a blank 405."""

from collections.abc import Callable
from functools import wraps
from typing import Any

from django.http import HttpRequest, HttpResponse, HttpResponseNotAllowed
from django.shortcuts import redirect
from django.urls import reverse


def form_action(page: str, anchor: str = "") -> Callable[[Callable[..., HttpResponse]], Callable[..., HttpResponse]]:
    """POST runs the view; GET and HEAD redirect to `page` (a URL name) at `#anchor`; any other method is a 405."""

    def decorate(view: Callable[..., HttpResponse]) -> Callable[..., HttpResponse]:
        @wraps(view)
        def only_posted(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
            if request.method == "POST":
                return view(request, *args, **kwargs)
            if request.method in ("GET", "HEAD"):
                return redirect(reverse(page) + (f"#{anchor}" if anchor else ""))
            return HttpResponseNotAllowed(["POST"])

        return only_posted

    return decorate
