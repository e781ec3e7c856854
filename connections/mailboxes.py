"""A person's mailbox: IMAP (imapclient) to search, read and keep drafts, SMTP (smtplib) to send.

Every exchange is one short session (connect, TLS, log in, the work, log out) inside a deadline the caller gives.
What is read is bounded: a search asks the server to search (IMAP SEARCH) and fetches the headers of the newest
few matches only; reading a message fetches its structure, then at most ``READ_BYTES`` of one text part, never the
whole message (a 20 MB attachment stays on the server). Failures come back as ``ServiceError`` with a sentence; the
password never appears in one.
"""

import base64
import binascii
import imaplib
import quopri
import re
import smtplib
import socket
import ssl
import time
import unicodedata
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from datetime import date, datetime
from email.header import decode_header, make_header
from email.message import EmailMessage
from email.utils import format_datetime, getaddresses, make_msgid
from typing import Any

from django.conf import settings
from imapclient import IMAPClient, imap4, tls
from imapclient import exceptions as imap_errors
from imapclient.imapclient import DRAFTS

from connections.network import ServiceError, connect, tls_context
from ops.bounded import Bound, BoundedFile, TooLarge

READ_BYTES = 64 * 1024  # of the one text part mail_read fetches
HTML_READ_BYTES = 256 * 1024  # HTML says the same in more bytes
MAX_RESULTS = 20
MAX_RECIPIENTS = 20
MAX_SUBJECT = 300
MAX_BODY = 10_000
SECURITY_CHOICES = ("ssl", "starttls", "none")


@dataclass(frozen=True)
class MailServer:
    address: str  # the person's own address: From of drafts and sent mail
    username: str
    password: str
    imap_host: str
    imap_port: int
    imap_security: str  # ssl (TLS from the first byte), starttls, or none
    smtp_host: str
    smtp_port: int
    smtp_security: str
    # An OAuth 2.0 access token (Google, Microsoft): both servers are then logged in to with SASL XOAUTH2 as
    # ``username``, and ``password`` is empty.
    oauth_token: str = field(default="", repr=False)

    def __repr__(self) -> str:  # never the password or the token, wherever a server ends up printed
        return f"MailServer({self.username!r} at {self.imap_host}:{self.imap_port}, {self.smtp_host}:{self.smtp_port})"


_HOSTS = ("imap_host", "imap_port", "imap_security", "smtp_host", "smtp_port", "smtp_security")


def hosts_of(source: Any) -> dict[str, Any]:
    """The IMAP and SMTP servers of a MailServer or a MailAccount (which name them alike), for making the other."""
    return {name: getattr(source, name) for name in _HOSTS}


def xoauth2(user: str, token: str) -> str:
    """The SASL XOAUTH2 initial client response (Google's and Microsoft's IMAP and SMTP take it), before base64."""
    return f"user={user}\x01auth=Bearer {token}\x01\x01"


MAX_LITERAL_BYTES = 4 * 1024 * 1024  # one string the server sends; what we fetch is at most HTML_READ_BYTES
_TOO_LARGE = "The IMAP server sent {size:,} bytes where at most {limit:,} may be read; nothing was read."


class _BoundedLiterals(imaplib.IMAP4):
    """imaplib reads a literal ({n} bytes) whole, whatever n the server announces: a server that answers a partial
    FETCH with 20 MB would be read into memory. Over MAX_LITERAL_BYTES the session ends instead. Every line and
    literal read is counted against the session's bound: imaplib keeps each untagged line until the command ends,
    so a server sending them without end would otherwise fill memory."""

    _bound: Bound

    def read(self, size: int) -> bytes:
        if size > MAX_LITERAL_BYTES:
            raise self.abort(_TOO_LARGE.format(size=size, limit=MAX_LITERAL_BYTES))
        data = super().read(size)
        self._bound.spend(len(data))
        return data

    def readline(self) -> bytes:
        line = super().readline()
        self._bound.spend(len(line))
        return line


class _GuardedIMAP4(_BoundedLiterals, imap4.IMAP4WithTimeout):
    def __init__(self, host: str, port: int, timeout: float | None, bound: Bound) -> None:
        self._bound = bound  # before the base class connects and reads the greeting
        imap4.IMAP4WithTimeout.__init__(self, host, port, timeout)

    def _create_socket(self, timeout: float | None = None) -> socket.socket:
        return connect(self.host, self.port, timeout or self._timeout or 10, "IMAP", self._bound)


class _GuardedIMAP4TLS(_BoundedLiterals, tls.IMAP4_TLS):
    def __init__(self, host: str, port: int, context: ssl.SSLContext, timeout: float | None, bound: Bound) -> None:
        self._bound = bound
        tls.IMAP4_TLS.__init__(self, host, port, context, timeout)

    def _create_socket(self, timeout: float | None = None) -> socket.socket:
        sock = connect(self.host, self.port, timeout or self._timeout or 10, "IMAP", self._bound)
        return tls.wrap_socket(sock, self.ssl_context, self.host)


class _Client(IMAPClient):
    """IMAPClient whose socket goes through connections.network (checked address, timeout, the session's bound)."""

    def __init__(self, bound: Bound, *args: Any, **kwargs: Any) -> None:
        self._bound = bound  # IMAPClient's constructor connects
        super().__init__(*args, **kwargs)

    def _create_IMAP4(self) -> imaplib.IMAP4:
        timeout = getattr(self._timeout, "connect", None)
        if self.ssl:
            return _GuardedIMAP4TLS(self.host, self.port, self.ssl_context, timeout, self._bound)
        return _GuardedIMAP4(self.host, self.port, timeout, self._bound)


class _GuardedSMTP(smtplib.SMTP):
    """smtplib keeps every line of a reply until its last: a server that continues one ("250-...") without end would
    fill memory. Replies are read through the session's bound."""

    def __init__(self, bound: Bound, *args: Any, **kwargs: Any) -> None:
        self._bound = bound  # smtplib's constructor connects and reads the greeting
        try:
            super().__init__(*args, **kwargs)
        except BaseException:
            self.close()  # smtplib leaves the socket open when the greeting fails
            raise

    def _get_socket(self, host: str, port: int, timeout: float) -> socket.socket:
        return connect(host, port, timeout, "SMTP", self._bound)

    def getreply(self) -> tuple[int, bytes]:
        if self.file is None and self.sock is not None:  # smtplib makes it here, and again after STARTTLS
            self.file = BoundedFile(self.sock.makefile("rb"), self._bound)
        return super().getreply()


class _GuardedSMTPSSL(smtplib.SMTP_SSL, _GuardedSMTP):
    """SMTP_SSL wraps what _GuardedSMTP._get_socket opened (the MRO puts ours under SMTP_SSL's)."""

    def __init__(self, bound: Bound, *args: Any, **kwargs: Any) -> None:
        self._bound = bound
        try:
            smtplib.SMTP_SSL.__init__(self, *args, **kwargs)
        except BaseException:
            self.close()
            raise


def _short(text: object, limit: int = 200) -> str:
    if isinstance(text, bytes):
        text = text.decode("utf-8", errors="replace")
    flat = " ".join("".join(ch if ch.isprintable() else " " for ch in str(text)).split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def _failure(error: BaseException, protocol: str, host: str, bound: Bound, *, oauth: bool = False) -> ServiceError:
    """The sentence for what went wrong talking to the server (``oauth``: it was logged in to with a token)."""
    if isinstance(error, ServiceError):
        return error
    exceeded = bound.explain(error)
    if isinstance(exceeded, TooLarge):
        return ServiceError(str(exceeded))
    if exceeded is not None or isinstance(error, (TimeoutError, socket.timeout)):
        return ServiceError(f"The {protocol} server {host} did not answer in time.")
    if isinstance(error, (imap_errors.LoginError, smtplib.SMTPAuthenticationError)) and oauth:
        return ServiceError(f"The {protocol} server refused the sign-in token.", authentication=True)
    if isinstance(error, (imap_errors.LoginError, smtplib.SMTPAuthenticationError)):
        return ServiceError(
            f"The {protocol} server refused the username or password (use an app password if your provider "
            "asks for one).",
            authentication=True,
        )
    return _refusal(error, protocol, host)


def _refusal(error: BaseException, protocol: str, host: str) -> ServiceError:
    """_failure's sentence for what the server or the connection refused."""
    if isinstance(error, ssl.SSLCertVerificationError):
        return ServiceError(f"The {protocol} server's TLS certificate could not be verified ({error.verify_message}).")
    if isinstance(error, ssl.SSLError):
        return ServiceError(
            f"TLS with the {protocol} server {host} failed: check the port and the security choice (implicit TLS is "
            "usually port 993 for IMAP and 465 for SMTP; STARTTLS 143 and 587)."
        )
    if isinstance(error, imap_errors.CapabilityError) or (
        isinstance(error, smtplib.SMTPNotSupportedError) and "STARTTLS" in str(error).upper()
    ):
        return ServiceError(
            f"The {protocol} server does not offer STARTTLS, so the password would travel unencrypted; choose "
            "implicit TLS (SSL) on its TLS port."
        )
    if isinstance(error, smtplib.SMTPNotSupportedError):
        return ServiceError(f"The {protocol} server does not accept a log-in (no AUTH).")
    too_large = re.search(r"The IMAP server sent .*? nothing was read\.", str(error))
    if isinstance(error, imaplib.IMAP4.abort) and too_large:  # imaplib re-raises it as a new abort, text kept
        return ServiceError(too_large.group(0))
    if isinstance(error, (smtplib.SMTPServerDisconnected, imaplib.IMAP4.abort, ConnectionError, EOFError)):
        return ServiceError(f"The {protocol} server {host} closed the connection.")
    if isinstance(error, smtplib.SMTPResponseException):
        return ServiceError(f"The SMTP server refused: {error.smtp_code} {_short(error.smtp_error)}")
    if isinstance(error, smtplib.SMTPRecipientsRefused):
        return ServiceError("The SMTP server refused every recipient.")
    if isinstance(error, (imaplib.IMAP4.error, imap_errors.IMAPClientError)):
        return ServiceError(f"The IMAP server refused the request: {_short(error)}")
    if isinstance(error, OSError):
        return ServiceError(f"The connection to the {protocol} server {host} failed ({type(error).__name__}).")
    raise error


def _bound(protocol: str, host: str, seconds: float) -> Bound:
    """One session's bound: MAIL_CALENDAR_MAX_ANSWER_BYTES from the server in all, the socket shut at the deadline."""
    return Bound(f"The {protocol} server {host}", max_bytes=settings.MAIL_CALENDAR_MAX_ANSWER_BYTES, seconds=seconds)


def _over(bound: Bound) -> bool:
    """Whether the session passed its bound: then it is cut, not logged out (which would read on)."""
    return bound.exceeded is not None or bound.expired


@contextmanager
def imap_session(server: MailServer, seconds: float) -> Iterator[IMAPClient]:
    """A logged-in IMAP session that ends by the deadline (``seconds`` from now)."""
    with _bound("IMAP", server.imap_host, seconds) as bound:
        client: IMAPClient | None = None
        try:
            client = _Client(
                bound,
                server.imap_host,
                port=server.imap_port,
                ssl=server.imap_security == "ssl",
                ssl_context=tls_context(),
                timeout=max(seconds, 0.1),
            )
            if server.imap_security == "starttls":
                client.starttls(tls_context())
            if server.oauth_token:
                client.oauth2_login(server.username, server.oauth_token)
            else:
                client.login(server.username, server.password)
            yield client
        except Exception as error:
            raise _failure(error, "IMAP", server.imap_host, bound, oauth=bool(server.oauth_token)) from None
        finally:
            if client is not None:
                with suppress(Exception):  # the session is over either way
                    client.shutdown() if _over(bound) else client.logout()


@contextmanager
def smtp_session(server: MailServer, seconds: float) -> Iterator[smtplib.SMTP]:
    with _bound("SMTP", server.smtp_host, seconds) as bound:
        smtp: smtplib.SMTP | None = None
        try:
            timeout = max(seconds, 0.1)
            if server.smtp_security == "ssl":
                smtp = _GuardedSMTPSSL(
                    bound, server.smtp_host, server.smtp_port, timeout=timeout, context=tls_context()
                )
            else:
                smtp = _GuardedSMTP(bound, server.smtp_host, server.smtp_port, timeout=timeout)
            smtp.ehlo()
            if server.smtp_security == "starttls":
                smtp.starttls(context=tls_context())
                smtp.ehlo()
            if server.oauth_token:
                _smtp_xoauth2(smtp, server.username, server.oauth_token)
            else:
                smtp.login(server.username, server.password)
            yield smtp
        except Exception as error:
            raise _failure(error, "SMTP", server.smtp_host, bound, oauth=bool(server.oauth_token)) from None
        finally:
            if smtp is not None:
                with suppress(Exception):
                    smtp.close() if _over(bound) else smtp.quit()


def _smtp_xoauth2(smtp: smtplib.SMTP, user: str, token: str) -> None:
    """AUTH XOAUTH2 with the initial response. A refused token gets a 334 carrying the server's error (JSON); the
    client answers it with an empty line and the server then says 535, which smtplib raises as
    SMTPAuthenticationError."""
    if not smtp.has_extn("auth"):
        raise smtplib.SMTPNotSupportedError("SMTP AUTH extension not supported by server.")
    smtp.auth("XOAUTH2", lambda challenge=None: xoauth2(user, token) if challenge is None else "")


def check(server: MailServer, seconds: float) -> str:
    """Log in to both servers, both within ``seconds``; the name of the drafts folder. ServiceError when either
    cannot be used."""
    deadline = time.monotonic() + seconds
    with imap_session(server, seconds) as client:
        client.select_folder("INBOX", readonly=True)
        drafts = _drafts_folder(client, create=False)
    left = deadline - time.monotonic()
    if left <= 0.1:
        raise ServiceError("The IMAP server took the whole time allowed; the SMTP server could not be checked.")
    with smtp_session(server, left) as smtp:
        smtp.noop()
    return drafts


def _drafts_folder(client: IMAPClient, *, create: bool) -> str:
    found = client.find_special_folder(DRAFTS)
    if found:
        return str(found)
    for name in ("Drafts", "INBOX.Drafts", "INBOX/Drafts"):
        if client.folder_exists(name):
            return name
    if create:
        client.create_folder("Drafts")
    return "Drafts"


# Search and read --------------------------------------------------------------------------------------------------


def _header(value: Any) -> str:
    if value is None:
        return ""
    raw = value.decode("utf-8", errors="replace") if isinstance(value, bytes) else str(value)
    try:
        return _short(str(make_header(decode_header(raw))), 300)
    except (ValueError, LookupError, UnicodeError):
        return _short(raw, 300)


def _addresses(found: Any) -> str:
    people = []
    for address in found or ():
        if getattr(address, "host", None) is None:
            continue  # the start or end of a group
        mailbox = _header(address.mailbox) + "@" + _header(address.host)
        name = _header(address.name)
        people.append(f"{name} <{mailbox}>" if name else mailbox)
    return ", ".join(people)


def _imap_text(value: str) -> str | bytes:
    """A search argument as imapclient sends it: ASCII as is, anything else as UTF-8 bytes (with CHARSET)."""
    return value if value.isascii() else value.encode()


def search(
    server: MailServer,
    *,
    sender: str = "",
    text: str = "",
    since: date | None = None,
    unseen: bool = False,
    limit: int = MAX_RESULTS,
    seconds: float,
) -> tuple[list[dict[str, Any]], int]:
    """The headers of the newest ``limit`` messages of the inbox that match, newest first, and how many matched."""
    criteria: list[Any] = []
    if unseen:
        criteria.append("UNSEEN")
    if sender:
        criteria += ["FROM", _imap_text(sender)]
    if text:
        criteria += ["TEXT", _imap_text(text)]
    if since is not None:
        criteria += ["SINCE", since]
    charset = None if all(isinstance(item, (str, date)) for item in criteria) else "UTF-8"
    with imap_session(server, seconds) as client:
        client.select_folder("INBOX", readonly=True)
        uids = sorted(client.search(criteria or ["ALL"], charset=charset))
        newest = list(reversed(uids[-limit:]))
        fetched = client.fetch(newest, ["ENVELOPE", "FLAGS", "RFC822.SIZE"]) if newest else {}
    found = []
    for uid in newest:
        data = fetched.get(uid) or {}
        envelope = data.get(b"ENVELOPE")
        flags = data.get(b"FLAGS") or ()
        found.append(
            {
                "id": str(uid),
                "from": _addresses(getattr(envelope, "from_", None)),
                "to": _addresses(getattr(envelope, "to", None)),
                "subject": _header(getattr(envelope, "subject", None)),
                "date": envelope.date.isoformat(timespec="minutes")
                if envelope is not None and isinstance(envelope.date, datetime)
                else None,
                "unread": b"\\Seen" not in flags,
                "size": data.get(b"RFC822.SIZE"),
            }
        )
    return found, len(uids)


@dataclass(frozen=True)
class _Part:
    number: str
    kind: str  # "text/plain"
    charset: str
    encoding: str
    size: int
    filename: str
    attachment: bool


def _text(value: Any) -> str:
    return value.decode("ascii", errors="replace") if isinstance(value, bytes) else str(value or "")


def _params(value: Any) -> dict[str, str]:
    items = list(value) if isinstance(value, (tuple, list)) else []
    return {_text(items[i]).lower(): _header(items[i + 1]) for i in range(0, len(items) - 1, 2)}


def _disposition(extension: tuple[Any, ...]) -> tuple[str, dict[str, str]]:
    """The Content-Disposition among a part's extension data, wherever the part's type puts it."""
    for item in extension:
        if isinstance(item, tuple) and item and isinstance(item[0], bytes):
            kind = item[0].decode("ascii", errors="replace").lower()
            if kind in ("attachment", "inline"):
                return kind, _params(item[1]) if len(item) > 1 else {}
    return "", {}


def _parts(structure: Any, prefix: str = "") -> Iterator[_Part]:
    if structure.is_multipart:
        for index, child in enumerate(structure[0], start=1):
            yield from _parts(child, f"{prefix}{index}.")
        return
    kind = f"{_text(structure[0]).lower()}/{_text(structure[1]).lower()}"
    params = _params(structure[2])
    disposition, disposition_params = _disposition(tuple(structure[7:]))
    filename = disposition_params.get("filename") or params.get("name", "")
    size = structure[6] if isinstance(structure[6], int) else 0
    yield _Part(
        number=(prefix.rstrip(".") or "1"),
        kind=kind,
        charset=params.get("charset", "utf-8"),
        encoding=_text(structure[5]).lower(),
        size=size,
        filename=filename,
        attachment=disposition == "attachment" or bool(filename and not kind.startswith("text/")),
    )


def _decoded(raw: bytes, part: _Part) -> str:
    if part.encoding == "base64":
        compact = re.sub(rb"[^A-Za-z0-9+/]", b"", raw)
        compact = compact[: len(compact) - len(compact) % 4]  # the fetch may stop mid-quantum
        try:
            raw = base64.b64decode(compact)
        except binascii.Error:
            raw = b""
    elif part.encoding == "quoted-printable":
        raw = quopri.decodestring(raw)
    try:
        return raw.decode(part.charset or "utf-8", errors="replace")
    except LookupError:
        return raw.decode("utf-8", errors="replace")


def html_to_text(html: str) -> str:
    """The readable text of an HTML mail: scripts, styles and the head dropped, blocks on their own lines."""
    import lxml.etree
    import lxml.html  # imported when first needed: a second's import under load for every process otherwise

    try:
        root = lxml.html.fromstring(html)
    except (ValueError, lxml.etree.ParserError):
        return ""
    for element in root.xpath("//script|//style|//head|//title|//noscript"):
        element.drop_tree()
    for element in root.xpath("//br|//p|//div|//li|//tr|//h1|//h2|//h3|//h4|//h5|//h6|//blockquote|//table"):
        element.tail = "\n" + (element.tail or "")
    lines = (" ".join(line.split()) for line in root.text_content().splitlines())
    return re.sub(r"\n{3,}", "\n\n", "\n".join(lines)).strip()


@dataclass(frozen=True)
class Message:
    uid: str
    sender: str
    to: str
    subject: str
    date: str
    text: str
    truncated: bool
    converted_from_html: bool
    attachments: list[dict[str, Any]]


def read(server: MailServer, uid: int, *, max_characters: int, seconds: float) -> Message:
    """One inbox message: headers, one text part (bounded), the attachments it lists (not fetched)."""
    with imap_session(server, seconds) as client:
        client.select_folder("INBOX", readonly=True)
        meta = client.fetch([uid], ["ENVELOPE", "BODYSTRUCTURE"]).get(uid)
        if not meta or b"BODYSTRUCTURE" not in meta:
            raise ServiceError(f"There is no message {uid} in the inbox; mail_search gives the ids.")
        parts = list(_parts(meta[b"BODYSTRUCTURE"]))
        body = [part for part in parts if not part.attachment and part.kind in ("text/plain", "text/html")]
        chosen = next((p for p in body if p.kind == "text/plain"), None) or next(iter(body), None)
        raw = _fetch_text(client, uid, chosen) if chosen is not None else b""
    envelope = meta.get(b"ENVELOPE")
    text = _decoded(raw, chosen).replace("\r\n", "\n") if chosen is not None else ""
    from_html = chosen is not None and chosen.kind == "text/html"
    if from_html:
        text = html_to_text(text)
    cut = chosen is not None and (chosen.size > len(raw) or len(text) > max_characters)
    return Message(
        uid=str(uid),
        sender=_addresses(getattr(envelope, "from_", None)),
        to=_addresses(getattr(envelope, "to", None)),
        subject=_header(getattr(envelope, "subject", None)),
        date=_sent_at(envelope),
        text=text[:max_characters],
        truncated=cut,
        converted_from_html=from_html,
        attachments=[
            {"name": part.filename or "(unnamed)", "type": part.kind, "size": part.size}
            for part in parts
            if part.attachment
        ][:50],
    )


def _fetch_text(client: IMAPClient, uid: int, chosen: _Part) -> bytes:
    """The start of the message's text part, at most what its kind allows."""
    limit = READ_BYTES if chosen.kind == "text/plain" else HTML_READ_BYTES
    key = f"BODY[{chosen.number}]<0>".encode()
    fetched = client.fetch([uid], [f"BODY.PEEK[{chosen.number}]<0.{limit}>"]).get(uid) or {}
    raw = fetched.get(key) or next((v for k, v in fetched.items() if k.startswith(b"BODY[")), b"") or b""
    return bytes(raw[:limit])  # whatever the server sent


def _sent_at(envelope: Any) -> str:
    date = getattr(envelope, "date", None)
    return date.isoformat(timespec="minutes") if isinstance(date, datetime) else ""


# Drafts and sending -----------------------------------------------------------------------------------------------


def _one_line(value: str) -> bool:
    """No character that ends a line or controls the terminal: CR and LF, and what Python's email package also
    splits header lines on (VT, FF, U+0085, U+2028, U+2029, the file separators), NUL and the other control
    characters (a tab is white space in a header, and stays)."""
    return all(ch == "\t" or unicodedata.category(ch) not in _NOT_IN_A_LINE for ch in value)


_NOT_IN_A_LINE = ("Cc", "Zl", "Zp")


def recipients(value: object) -> list[str]:
    """The addresses of a To line the model wrote ("a@x.org, Sam <sam@y.com>"), or ServiceError."""
    if not isinstance(value, str) or not value.strip():
        raise ServiceError('"to" must name at least one address, e.g. "sam@example.com".')
    if not _one_line(value):
        raise ServiceError('"to" must be on one line.')
    found = [address for _name, address in getaddresses([value]) if address]
    if not found or any(a.count("@") != 1 or a.startswith("@") or a.endswith("@") for a in found):
        raise ServiceError(f'"to" has an address that is not one: {_short(value, 100)}')
    if len(found) > MAX_RECIPIENTS:
        raise ServiceError(f"At most {MAX_RECIPIENTS} recipients.")
    return found


def compose(server: MailServer, to: object, subject: object, body: object) -> EmailMessage:
    addresses = recipients(to)
    if not isinstance(subject, str) or len(subject) > MAX_SUBJECT or not _one_line(subject):
        raise ServiceError(f'"subject" must be one line of at most {MAX_SUBJECT} characters.')
    if not isinstance(body, str) or len(body) > MAX_BODY or "\x00" in body:
        raise ServiceError(f'"body" must be text of at most {MAX_BODY} characters.')
    message = EmailMessage()
    message["From"] = server.address
    message["To"] = ", ".join(addresses)
    message["Subject"] = subject
    message["Date"] = format_datetime(datetime.now().astimezone())
    message["Message-ID"] = make_msgid(domain=server.address.rsplit("@", 1)[-1] or None)
    message.set_content(body)
    return message


def save_draft(server: MailServer, message: EmailMessage, *, seconds: float) -> str:
    """APPEND the message to the drafts folder (flagged \\Draft); the folder's name."""
    with imap_session(server, seconds) as client:
        folder = _drafts_folder(client, create=True)
        client.append(folder, message.as_bytes(), flags=[b"\\Draft", b"\\Seen"])
    return folder


def send(server: MailServer, message: EmailMessage, *, seconds: float) -> None:
    with smtp_session(server, seconds) as smtp:
        smtp.send_message(message)
