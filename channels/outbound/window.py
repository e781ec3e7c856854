"""Which channel a message goes out on, and whether it may be sent as free text there now.

WhatsApp lets a business send free text only within 24 hours of the person's last message to it (the "customer
service window"); outside it only a template the operator had approved by Meta may go out. SMS, iMessage and
Telegram have no such window (a Telegram bot may write to whoever started it).
"""

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

WHATSAPP_WINDOW = timedelta(hours=24)
WINDOWED_CHANNELS = frozenset({"whatsapp"})


@dataclass(frozen=True)
class Route:
    channel: str
    address: str
    last_inbound_at: datetime | None


def free_text_allowed(route: Route, now: datetime) -> bool:
    """Whether free text may go to this address now."""
    if route.channel not in WINDOWED_CHANNELS:
        return True
    return route.last_inbound_at is not None and now - route.last_inbound_at < WHATSAPP_WINDOW


def choose_route(linked: Sequence[Route], preferred_channel: str, now: datetime) -> Route | None:
    """Where a message to the person goes (docs/design.md#channels): the address they last wrote from, while its channel
    allows free text; else the address of their preferred channel (the profile's); else the address they wrote from
    most recently, else the one linked last (it will be held or sent as a template when its window is closed). None
    when nothing is linked: the message stays in the thread only."""
    if not linked:
        return None
    written = [route for route in linked if route.last_inbound_at is not None]
    latest = max(written, key=lambda route: route.last_inbound_at or now) if written else None
    if latest is not None and free_text_allowed(latest, now):
        return latest
    preferred = [route for route in linked if route.channel == preferred_channel]
    for route in preferred:
        if free_text_allowed(route, now):
            return route
    allowed = [route for route in linked if free_text_allowed(route, now)]
    if allowed:
        return allowed[-1]
    return latest or linked[-1]
