"""Adding and removing a person's calendar (CalDAV) and mailbox (IMAP + SMTP): what the API and the console call.

Adding checks first, as an MCP server is checked (connections/checks.py: one of the account's and the process's
check slots, ChecksBusy when none is free, MCP_CHECK_TIMEOUT_SECONDS for the whole check): the address (public
unless MCP_ALLOW_PRIVATE_ADDRESSES), TLS (unless MAIL_CALENDAR_ALLOW_PLAINTEXT), then a real log-in; nothing is
stored unless all of that worked. The password is stored encrypted (connections/crypto.py, the key MCP servers' API
keys use and `rotatemcpkeys` rotates) and never shown again. One calendar and one mailbox per person: the tools
then need no account argument.
"""

import logging
from collections.abc import Callable
from contextlib import suppress
from typing import Any

from django.conf import settings
from django.contrib.auth.models import User
from django.db import IntegrityError, transaction

from accounts import audit
from accounts.models import AuditKind
from connections import calendars, crypto, mailboxes
from connections.checks import check_slot
from connections.models import CalendarAccount, MailAccount, Security
from connections.network import ServiceError, check_host, plaintext_allowed

logger = logging.getLogger(__name__)

MAX_USERNAME = 255
MAX_PASSWORD = 1024


class AccountRefused(Exception):
    """The calendar or mailbox cannot be added; the text says why. ``checked``: the form was fine but the server
    could not be used; ``authentication``: the server refused the username or password; ``exists``: the person
    already has one."""

    def __init__(
        self, message: str, *, checked: bool = False, authentication: bool = False, exists: bool = False
    ) -> None:
        super().__init__(message)
        self.checked = checked
        self.authentication = authentication
        self.exists = exists


def _text(value: object, field: str, limit: int, example: str) -> str:
    if not isinstance(value, str) or not value.strip():
        raise AccountRefused(f'"{field}" must be a non-blank string, e.g. {example}.')
    value = value.strip()
    if len(value) > limit or any(not ch.isprintable() for ch in value):
        raise AccountRefused(f'"{field}" must be printable text of at most {limit} characters.')
    return value


def _password(value: object) -> str:
    if not isinstance(value, str) or not value:
        raise AccountRefused('"password" is required: the account\'s app password.')
    if len(value) > MAX_PASSWORD or any(not ch.isprintable() for ch in value):
        raise AccountRefused(f'"password" must be printable text of at most {MAX_PASSWORD} characters.')
    return value


def _port(value: object, field: str) -> int:
    port = 0
    if isinstance(value, (int, str)) and not isinstance(value, bool):
        with suppress(ValueError):
            port = int(value)
    if not 1 <= port <= 65535:
        raise AccountRefused(f'"{field}" must be a port number from 1 to 65535.')
    return port


def _security(value: object, field: str) -> str:
    if value not in Security.values:
        raise AccountRefused(f'"{field}" must be one of {", ".join(Security.values)}.')
    if value == Security.NONE and not plaintext_allowed():
        raise AccountRefused(
            f'"{field}" is none: without TLS the app password would cross the network unencrypted; choose ssl or '
            "starttls (this server refuses unencrypted mail servers: MAIL_CALENDAR_ALLOW_PLAINTEXT is off)."
        )
    return str(value)


def _host(value: object, field: str) -> str:
    try:
        return check_host(_text(value, field, 253, '"imap.example.com"'), f'"{field}"')
    except ServiceError as refused:
        raise AccountRefused(str(refused)) from None


def _checked[Server, Found](owner: User, check: Callable[[Server, float], Found], server: Server) -> Found:
    """Log in to the person's server once, in one of the bounded check slots, before anything is stored."""
    try:
        with check_slot(owner.pk):
            return check(server, float(settings.MCP_CHECK_TIMEOUT_SECONDS))
    except ServiceError as failed:
        raise AccountRefused(str(failed), checked=True, authentication=failed.authentication) from None


def add_calendar(
    owner: User, server_url: object, username: object, password: object, *, by: str = audit.COMMAND
) -> CalendarAccount:
    if CalendarAccount.objects.filter(owner=owner).exists():
        raise AccountRefused("You already have a calendar connected; remove it first.", exists=True)
    try:
        url = calendars.check_url(server_url)
    except ServiceError as refused:
        raise AccountRefused(str(refused)) from None
    server = calendars.CalendarServer(
        url=url,
        username=_text(username, "username", MAX_USERNAME, '"you@example.com"'),
        password=_password(password),
    )
    calendar_url, calendar_name = _checked(owner, calendars.check, server)
    try:
        with transaction.atomic():
            account = CalendarAccount.objects.create(
                owner=owner,
                server_url=url,
                username=server.username,
                password_encrypted=crypto.encrypt(server.password),
                calendar_url=calendar_url[:2000],
                calendar_name=calendar_name[:100],
            )
            audit.record(owner, AuditKind.CONNECTION_ADDED, _described(account), by=by)
    except IntegrityError:  # added meanwhile by another request
        raise AccountRefused("You already have a calendar connected; remove it first.", exists=True) from None
    logger.info("calendar %s added for user %s", account.public_id, owner.pk)
    return account


def add_mailbox(owner: User, fields: dict[str, Any], *, by: str = audit.COMMAND) -> MailAccount:
    """fields: address, username (defaults to the address), password, imapHost, imapPort, imapSecurity, smtpHost,
    smtpPort, smtpSecurity (the API's names)."""
    if MailAccount.objects.filter(owner=owner).exists():
        raise AccountRefused("You already have a mailbox connected; remove it first.", exists=True)
    address = _text(fields.get("address"), "address", 254, '"you@example.com"')
    try:
        mailboxes.recipients(address)
    except ServiceError:
        raise AccountRefused('"address" must be an email address, e.g. "you@example.com".') from None
    username = fields.get("username") or address
    server = mailboxes.MailServer(
        address=address,
        username=_text(username, "username", MAX_USERNAME, '"you@example.com"'),
        password=_password(fields.get("password")),
        imap_host=_host(fields.get("imapHost"), "imapHost"),
        imap_port=_port(fields.get("imapPort"), "imapPort"),
        imap_security=_security(fields.get("imapSecurity"), "imapSecurity"),
        smtp_host=_host(fields.get("smtpHost"), "smtpHost"),
        smtp_port=_port(fields.get("smtpPort"), "smtpPort"),
        smtp_security=_security(fields.get("smtpSecurity"), "smtpSecurity"),
    )
    drafts = _checked(owner, mailboxes.check, server)
    try:
        with transaction.atomic():
            account = MailAccount.objects.create(
                owner=owner,
                address=server.address,
                username=server.username,
                password_encrypted=crypto.encrypt(server.password),
                drafts_folder=drafts[:255],
                **mailboxes.hosts_of(server),
            )
            audit.record(owner, AuditKind.CONNECTION_ADDED, _described(account), by=by)
    except IntegrityError:
        raise AccountRefused("You already have a mailbox connected; remove it first.", exists=True) from None
    logger.info("mailbox %s added for user %s", account.public_id, owner.pk)
    return account


def remove(account: CalendarAccount | MailAccount, *, by: str = audit.COMMAND) -> None:
    with transaction.atomic():
        account.delete()
        audit.record(account.owner_id, AuditKind.CONNECTION_REMOVED, _described(account), by=by)
    logger.info("%s %s removed", type(account).__name__, account.public_id)


def _described(account: CalendarAccount | MailAccount) -> str:
    if isinstance(account, CalendarAccount):
        return f"calendar “{account.calendar_name}” of {account.username} at {account.server_url}"
    return f"mailbox {account.address}"


def calendar_server(account: CalendarAccount) -> calendars.CalendarServer:
    """The account as the calendar client takes it; UnreadableSecret when the password cannot be decrypted."""
    return calendars.CalendarServer(
        url=account.server_url,
        username=account.username,
        password=crypto.decrypt(account.password_encrypted),
        calendar_url=account.calendar_url,
    )


def mail_server(account: MailAccount) -> mailboxes.MailServer:
    return mailboxes.MailServer(
        address=account.address,
        username=account.username,
        password=crypto.decrypt(account.password_encrypted),
        **mailboxes.hosts_of(account),
    )
