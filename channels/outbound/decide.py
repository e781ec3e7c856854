"""What to do with a claimed send, decided without the database: send it, send the WhatsApp template, wait for
quiet hours to end, or hold it."""

from dataclasses import dataclass
from datetime import datetime

from channels.outbound.queue import Claim
from channels.outbound.quiet import quiet_until
from channels.outbound.window import Route, free_text_allowed

WINDOW_CLOSED = (
    "Not sent: WhatsApp allows free text only within 24 hours of the person's last message, and no approved "
    "template is configured (TWILIO_WHATSAPP_TEMPLATE_SID or WHATSAPP_CLOUD_TEMPLATE_NAME). It is sent when they "
    "next write on WhatsApp."
)
NOT_CONFIGURED = "Not sent: the channel is no longer configured on this server."


@dataclass(frozen=True)
class Send:
    as_template: bool = False


@dataclass(frozen=True)
class Wait:
    until: datetime


@dataclass(frozen=True)
class Hold:
    reason: str


Decision = Send | Wait | Hold


def decide(claim: Claim, now: datetime, configured: set[str], template_channels: set[str]) -> Decision:
    """``configured``: the channels with an adapter; ``template_channels``: those able to send the approved
    template now."""
    until = quiet_until(now, claim.time_zone, claim.quiet_starts, claim.quiet_ends)
    if until is not None:
        return Wait(until)
    if claim.channel not in configured:
        return Hold(NOT_CONFIGURED)
    if not free_text_allowed(Route(claim.channel, claim.address, claim.last_inbound_at), now):
        return Send(as_template=True) if claim.channel in template_channels else Hold(WINDOW_CLOSED)
    return Send()
