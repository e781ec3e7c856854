import zoneinfo
from functools import cache

import phonenumbers
from django.core.exceptions import ValidationError


def validate_e164(value: str) -> None:
    """Accept only a valid phone number already written in E.164 (+ and digits, country code first)."""
    try:
        parsed = phonenumbers.parse(value, None)
    except phonenumbers.NumberParseException:
        raise ValidationError(
            "Enter the phone number in international format, for example +14155551234.", code="invalid_phone"
        ) from None
    if not phonenumbers.is_valid_number(parsed):
        raise ValidationError("%(value)s is not a valid phone number.", code="invalid_phone", params={"value": value})
    if phonenumbers.format_number(parsed, phonenumbers.PhoneNumberFormat.E164) != value:
        raise ValidationError(
            "Write the number in E.164 form without spaces or dashes, for example +14155551234.",
            code="invalid_phone",
        )


@cache
def time_zone_names() -> frozenset[str]:
    return frozenset(zoneinfo.available_timezones())


@cache
def _time_zones_by_folded_name() -> dict[str, str]:
    return {name.casefold(): name for name in time_zone_names()}


def canonical_time_zone(value: str) -> str:
    """The IANA name as the database writes it for a name typed in any case (europe/paris: Europe/Paris); anything
    else unchanged, for validate_time_zone to refuse. No two IANA names differ only in case."""
    return _time_zones_by_folded_name().get(value.strip().casefold(), value)


def validate_time_zone(value: str) -> None:
    """An IANA time zone name this server knows, such as Europe/Paris or America/New_York."""
    if value not in time_zone_names():
        raise ValidationError(
            "%(value)s is not a time zone name; use one such as Europe/Paris or America/New_York.",
            code="invalid_time_zone",
            params={"value": value[:64]},
        )
