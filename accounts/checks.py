"""System checks for the accounts' settings: a misconfiguration is reported at start-up, not in the first reply."""

from typing import Any

from babel import Locale, UnknownLocaleError
from django.conf import settings
from django.core import checks


@checks.register()
def check_person_locale(app_configs: Any = None, **kwargs: Any) -> list[checks.CheckMessage]:
    """PERSON_LOCALE names the CLDR locale of the dates people read (accounts/words.py)."""
    try:
        Locale.parse(settings.PERSON_LOCALE)
    except (UnknownLocaleError, ValueError, TypeError):
        return [
            checks.Error(
                f"PERSON_LOCALE {settings.PERSON_LOCALE!r} is not a locale Babel knows.",
                hint="Use a CLDR locale such as en_GB (the default) or en_US.",
                id="accounts.E001",
            )
        ]
    return []
