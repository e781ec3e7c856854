from django.conf import settings
from django.http import HttpRequest

# Which top-level section of the console a page belongs to, for the navigation's aria-current.
_SECTIONS = {
    "accounts:settings": "settings",
    "accounts:password_change": "settings",
    "keys:advanced": "settings",
    "keys:new-legacy": "settings",
    "channels:settings": "settings",
    "channels:confirm": "settings",
    "channels:telegram": "settings",
    "channels:unlink": "settings",
    "channels:local_phone": "local_phone",
    "audit:log": "settings",
    "approvals:detail": "conversations",
}


def console_section(request: HttpRequest) -> dict[str, str | bool]:
    match = request.resolver_match
    if match is None:
        return {"section": ""}
    return {"section": _SECTIONS.get(match.view_name, match.namespace), "local_phone": settings.DEBUG}
