import json
import math
import sys
from collections.abc import Mapping
from typing import IO, Any

from django.conf import settings
from rest_framework.parsers import BaseParser

from ingestion.exceptions import ApiError, InvalidBody, InvalidJson, PayloadTooLarge, UnsupportedMediaType
from ops.http import declared_length


def _refuse_constant(name: str) -> float:
    raise InvalidJson(f"The body is not valid JSON: {name} is not a JSON number.")


def _finite_float(text: str) -> float:
    value = float(text)
    if math.isinf(value):
        raise InvalidBody(f"The number {text[:40]} is too large to store.")
    return value


def _object_without_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    # Parsers disagree on which of two same-named members wins (RFC 8259 leaves it open; I-JSON forbids them), so
    # a body that says two things at once is refused rather than read one way here and another way downstream.
    body = dict(pairs)
    if len(body) != len(pairs):
        name = _first_repeated_name(pairs)
        raise InvalidJson(f"The body is not valid JSON: the member {json.dumps(name)[:80]} appears more than once.")
    return body


def _first_repeated_name(pairs: list[tuple[str, Any]]) -> str:
    seen: set[str] = set()
    for name, _ in pairs:
        if name in seen:
            return name
        seen.add(name)
    return ""


def _too_large() -> PayloadTooLarge:
    limit = settings.INGEST_MAX_BODY_BYTES
    return PayloadTooLarge(
        f"The body is larger than the limit of {limit} bytes. Send a shorter message or split it into several."
    )


def _read_within_limit(stream: IO[bytes], parser_context: Mapping[str, Any] | None) -> bytes:
    """The body, read no further than INGEST_MAX_BODY_BYTES; one that declares or has more is refused."""
    limit = settings.INGEST_MAX_BODY_BYTES
    length = declared_length((parser_context or {}).get("request"))
    if length is not None and length > limit:
        raise _too_large()  # refuse before reading a byte of it
    raw = stream.read(limit + 1)
    if len(raw) > limit:
        raise _too_large()
    return raw


class StrictJSONParser(BaseParser):
    """JSON bodies as RFC 8259 has them (UTF-8, no NaN or Infinity), read no further than the size limit."""

    media_type = "application/json"

    def parse(
        self, stream: IO[bytes], media_type: str | None = None, parser_context: Mapping[str, Any] | None = None
    ) -> Any:
        declared = _declared_charset(media_type or "")
        if declared not in ("", "utf-8", "utf8"):
            raise UnsupportedMediaType(f"JSON bodies must be UTF-8, but the Content-Type declares charset={declared}.")
        text = _utf8_text(stream, parser_context, InvalidJson)
        try:
            return json.loads(
                text,
                parse_constant=_refuse_constant,
                parse_float=_finite_float,
                object_pairs_hook=_object_without_duplicates,
            )
        except json.JSONDecodeError as error:
            # Some of Python's messages end in "at" already ("Unterminated string starting at").
            where = "" if error.msg.endswith(" at") else " at"
            raise InvalidJson(
                f"The body is not valid JSON: {error.msg}{where} line {error.lineno}, column {error.colno}."
            ) from None
        except RecursionError:
            raise InvalidBody("The body is nested too deeply.") from None
        except ValueError:  # an integer with more digits than Python converts (its text names an interpreter knob)
            raise InvalidBody(
                f"The body has a number longer than {sys.get_int_max_str_digits()} digits. Send long numbers as "
                "strings."
            ) from None


def _utf8_text(stream: IO[bytes], parser_context: Mapping[str, Any] | None, refusal: type[ApiError]) -> str:
    """The body, read within the size limit and decoded; ``refusal`` when it is not UTF-8."""
    raw = _read_within_limit(stream, parser_context)
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as error:
        raise refusal(f"The body is not valid UTF-8 (byte {error.start}).") from None


def _declared_charset(media_type: str) -> str:
    for parameter in media_type.split(";")[1:]:
        name, _, value = parameter.partition("=")
        if name.strip().lower() == "charset":
            return value.strip().strip('"').lower()
    return ""


class PlainTextParser(BaseParser):
    """A text/plain body is the message itself (``curl -d "Backup finished" -H 'Content-Type: text/plain'``): read
    under the same size limit as JSON, UTF-8 (US-ASCII is a subset), and handed on as the JSON body
    ``{"message": <text>}`` would be, so the endpoint's rules and the assistant's context are the same for both.
    One line break at the end (a file sent with --data-binary, an ``echo``) is not part of the message, nor a byte
    order mark at the start (Notepad and PowerShell write one): a file of nothing else is blank."""

    media_type = "text/plain"

    def parse(
        self, stream: IO[bytes], media_type: str | None = None, parser_context: Mapping[str, Any] | None = None
    ) -> Any:
        declared = _declared_charset(media_type or "")
        if declared not in ("", "utf-8", "utf8", "us-ascii"):
            raise UnsupportedMediaType(f"Text bodies must be UTF-8, but the Content-Type declares charset={declared}.")
        text = (
            _utf8_text(stream, parser_context, InvalidBody).removeprefix("\ufeff").removesuffix("\n").removesuffix("\r")
        )
        if not text.strip():
            raise InvalidBody("The body is blank; write the instruction for the assistant, for example: Backup done.")
        return {"message": text}
