"""Phone numbers typed any way ("(415) 555-0134", "415 555 0134", "001 415 555 0134", "+44 20 7946 0958") to the
E.164 form the profile stores. A number without its country code is read as a number of the first region in which
it is valid: the browser's (its Accept-Language, where that names one), then PHONE_DEFAULT_REGION."""

import re
from collections.abc import Iterable

import phonenumbers
from django.core.exceptions import ValidationError

# "00" starts an international number in most of the world (the ITU's recommended prefix); read it as "+" whatever
# the region, so that "001 415 555 0134" is the same number from a US browser as from a German one.
_INTERNATIONAL_00 = re.compile(r"^\s*00")


def example(region: str) -> str:
    """A made-up number of the region as people there write it, e.g. "(201) 555-0123" for US."""
    number = phonenumbers.example_number(region)
    return phonenumbers.format_number(number, phonenumbers.PhoneNumberFormat.NATIONAL) if number else ""


def to_e164(typed: str, regions: Iterable[str]) -> str:
    """The number in E.164 form; ValidationError, saying how to write it, when no reading of it is a valid number."""
    text = _INTERNATIONAL_00.sub("+", typed.strip())
    tried = [None] if text.startswith("+") else list(dict.fromkeys(regions))
    parsed_any = False
    for region in tried:
        try:
            parsed = phonenumbers.parse(text, region)
        except phonenumbers.NumberParseException:
            continue
        parsed_any = True
        if phonenumbers.is_valid_number(parsed):
            return phonenumbers.format_number(parsed, phonenumbers.PhoneNumberFormat.E164)
    if not parsed_any:
        raise ValidationError(
            "Enter a phone number, for example +1 415 555 0134, or as you would dial it at home.",
            code="invalid_phone",
        )
    where = f" in {tried[0]}" if tried and tried[0] else ""
    raise ValidationError(
        "%(value)s is not a valid phone number%(where)s. Check the digits, or start with + and the country code "
        "(for example +44 20 7946 0958).",
        code="invalid_phone",
        params={"value": typed.strip(), "where": where},
    )


def regions_from_accept_language(header: str) -> list[str]:
    """The regions an Accept-Language header names, most preferred first: "en-GB,en;q=0.8,de-CH;q=0.5" gives
    ["GB", "CH"]. Only regions phonenumbers knows; anything malformed is skipped."""
    ranked: list[tuple[float, int, str]] = []
    for position, item in enumerate(header.split(",")[:20]):  # a header of hundreds of entries is not a browser's
        tag, _, parameters = item.strip().partition(";")
        match = re.fullmatch(r"\s*q\s*=\s*([01](?:\.\d{0,3})?)\s*", parameters) if parameters else None
        if parameters and match is None:
            continue
        quality = float(match[1]) if match else 1.0
        subtags = tag.strip().split("-")
        region = next((part.upper() for part in subtags[1:] if re.fullmatch(r"[A-Za-z]{2}", part)), None)
        if quality > 0 and region in phonenumbers.SUPPORTED_REGIONS:
            ranked.append((-quality, position, region))
    return list(dict.fromkeys(region for _, _, region in sorted(ranked)))
