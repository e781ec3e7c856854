from collections.abc import Iterable
from typing import Any

from rest_framework.negotiation import DefaultContentNegotiation
from rest_framework.renderers import BaseRenderer
from rest_framework.request import Request


class JsonOnly(DefaultContentNegotiation):
    """The API speaks JSON only, so it answers JSON whatever the Accept header or a ?format= asks for: a browser
    extension or a monitoring hook with its own Accept gets its message through, rather than a 406 with no stable
    code (or, for ?format=, a 404 saying the endpoint does not exist)."""

    def select_renderer(
        self, request: Request, renderers: Iterable[BaseRenderer], format_suffix: str | None = None
    ) -> tuple[BaseRenderer, Any]:
        renderer = next(iter(renderers))
        return renderer, renderer.media_type
