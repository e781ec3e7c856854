from collections.abc import Iterable
from typing import Any

from rest_framework.negotiation import DefaultContentNegotiation
from rest_framework.parsers import BaseParser
from rest_framework.renderers import BaseRenderer
from rest_framework.request import Request

from ingestion.exceptions import UnsupportedMediaType


class JsonOnly(DefaultContentNegotiation):
    """The API speaks JSON only, so it answers JSON whatever the Accept header or a ?format= asks for: a browser
    extension or a monitoring hook with its own Accept gets its message through, rather than a 406 with no stable
    code (or, for ?format=, a 404 saying the endpoint does not exist)."""

    def select_renderer(
        self, request: Request, renderers: Iterable[BaseRenderer], format_suffix: str | None = None
    ) -> tuple[BaseRenderer, Any]:
        renderer = next(iter(renderers))
        return renderer, renderer.media_type

    def select_parser(self, request: Request, parsers: Iterable[BaseParser]) -> BaseParser | None:
        """A parser only when the body names its media type exactly (application/json, or text/plain where the view
        takes it), not a wildcard such as */* (which DRF lets match), and not compressed (a gzip body would
        otherwise be read as malformed JSON)."""
        coding = request.META.get("HTTP_CONTENT_ENCODING", "").strip().lower()
        if coding not in ("", "identity"):
            raise UnsupportedMediaType(
                f"Content-Encoding {coding[:40]!r} is not supported. Send the JSON body uncompressed, without a "
                "Content-Encoding header."
            )
        parsers = list(parsers)
        media_type = request.content_type.split(";")[0].strip().lower()
        if media_type not in {parser.media_type for parser in parsers}:
            return None  # DRF answers 415 unsupported_media_type
        return super().select_parser(request, parsers)
