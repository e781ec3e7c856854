"""The person's calendar and mailbox, beside the MCP connections, with a V2 key
(docs/howto/connect-calendar-mailbox.md):

GET    /api/v1/connections/calendar   the connected calendar, or null (never the password)
POST   /api/v1/connections/calendar   {serverUrl, username, password} → log in, find the calendar, store
DELETE /api/v1/connections/calendar   remove it
GET    /api/v1/connections/mailbox    the connected mailbox, or null
POST   /api/v1/connections/mailbox    {address, username?, password, imapHost, imapPort, imapSecurity,
                                       smtpHost, smtpPort, smtpSecurity} → log in to both, store
DELETE /api/v1/connections/mailbox    remove it
"""

from typing import Any

from rest_framework import status
from rest_framework.request import Request
from rest_framework.response import Response

from accounts import audit
from connections import mailcal
from connections.checks import ChecksBusy
from connections.models import CalendarAccount, MailAccount
from connections.oauth import mail as oauth_mail
from ingestion import openapi
from ingestion.authentication import key_of
from ingestion.exceptions import (
    ApiError,
    ConnectionExists,
    InvalidBody,
    MailCalendarLoginRefused,
    MailCalendarUnusable,
    NotFound,
)
from ingestion.mcp import _busy, _McpView


def calendar_json(account: CalendarAccount) -> dict[str, Any]:
    return {
        "id": account.public_id,
        "serverUrl": account.server_url,
        "username": account.username,
        "calendarName": account.calendar_name,
        "calendarUrl": account.calendar_url,
        "createdAt": account.created_at,
    }


def mailbox_json(account: MailAccount) -> dict[str, Any]:
    return {
        "id": account.public_id,
        "address": account.address,
        "username": account.username,
        "imapHost": account.imap_host,
        "imapPort": account.imap_port,
        "imapSecurity": account.imap_security,
        "smtpHost": account.smtp_host,
        "smtpPort": account.smtp_port,
        "smtpSecurity": account.smtp_security,
        "draftsFolder": account.drafts_folder,
        "createdAt": account.created_at,
    }


def _refused(refused: mailcal.AccountRefused) -> ApiError:
    if refused.exists:
        return ConnectionExists(str(refused))
    if refused.authentication:
        return MailCalendarLoginRefused(str(refused))
    if refused.checked:
        return MailCalendarUnusable(str(refused))
    return InvalidBody(str(refused))


def _body(request: Request, example: str) -> dict[str, Any]:
    if not isinstance(request.data, dict):
        raise InvalidBody(f"Send a JSON object: {example}.")
    return request.data


def _by(request: Request) -> str:
    key = key_of(request)
    return audit.by_key(key.name, key.hint)


class _AccountView[Account: (CalendarAccount, MailAccount)](_McpView):
    """The person's one calendar or one mailbox: read it, connect it (we log in first), remove it."""

    http_method_names = ["get", "head", "post", "delete", "options"]
    kind: str  # "calendar" or "mailbox": the answer's member, and the word its messages use
    model: type[Account]
    example: str  # a body to show in the error for a body that is not a JSON object

    def as_json(self, account: Account) -> dict[str, Any]:
        raise NotImplementedError

    def add(self, request: Request, body: dict[str, Any]) -> Account:
        raise NotImplementedError

    def connected(self, account: Account) -> str:
        raise NotImplementedError

    def account(self, request: Request) -> Account | None:
        return self.model.objects.filter(owner_id=self.owner_id(request)).first()

    def get(self, request: Request) -> Response:
        account = self.account(request)
        return Response({"success": True, self.kind: self.as_json(account) if account else None})

    def post(self, request: Request) -> Response:
        body = _body(request, self.example)
        try:
            account = self.add(request, body)
        except mailcal.AccountRefused as refused:
            raise _refused(refused) from None
        except ChecksBusy as busy:
            raise _busy(busy) from None
        return Response(
            {"success": True, "message": self.connected(account), **self.as_json(account)},
            status=status.HTTP_201_CREATED,
        )

    def delete(self, request: Request) -> Response:
        account = self.account(request)
        if account is None:
            raise NotFound(f"No {self.kind} is connected.")
        if account.oauth_grant_id is not None:  # signed in with Google or Microsoft: its sign-in goes (and is revoked)
            oauth_mail.remove_account(account, by=_by(request))  # when nothing else uses it
        else:
            mailcal.remove(account, by=_by(request))
        return Response({"success": True, "message": f"The {self.kind} was removed."})


@openapi.calendar_endpoints
class CalendarView(_AccountView[CalendarAccount]):
    kind = "calendar"
    model = CalendarAccount
    example = '{"serverUrl": "https://caldav.example.com/", "username": "...", "password": "..."}'

    def as_json(self, account: CalendarAccount) -> dict[str, Any]:
        return calendar_json(account)

    def add(self, request: Request, body: dict[str, Any]) -> CalendarAccount:
        return mailcal.add_calendar(
            key_of(request).owner, body.get("serverUrl"), body.get("username"), body.get("password"), by=_by(request)
        )

    def connected(self, account: CalendarAccount) -> str:
        return f"Connected the calendar {account.calendar_name}."


@openapi.mailbox_endpoints
class MailboxView(_AccountView[MailAccount]):
    kind = "mailbox"
    model = MailAccount
    example = (
        '{"address": "you@example.com", "password": "...", "imapHost": "imap.example.com", "imapPort": 993, '
        '"imapSecurity": "ssl", "smtpHost": "smtp.example.com", "smtpPort": 465, "smtpSecurity": "ssl"}'
    )

    def as_json(self, account: MailAccount) -> dict[str, Any]:
        return mailbox_json(account)

    def add(self, request: Request, body: dict[str, Any]) -> MailAccount:
        return mailcal.add_mailbox(key_of(request).owner, body, by=_by(request))

    def connected(self, account: MailAccount) -> str:
        return f"Connected the mailbox {account.address}."
