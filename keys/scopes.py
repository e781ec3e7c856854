"""What a key may do (docs/design.md#scopes-and-approval). A key carries a set of scopes, stored as their names
separated by spaces, as OAuth 2.0 writes a token's scope (RFC 6749 §3.3); every endpoint that takes a key declares
the one scope each of its methods needs (ingestion/scopes.py), and a key without it is refused with 403
``insufficient_scope``."""

from collections.abc import Iterable

from django.db import models


class Scope(models.TextChoices):
    MESSAGES_SEND = "messages:send", "Send messages to your assistant"
    RECEIPTS_READ = "receipts:read", "Read what became of the messages it sent"
    REPLIES_READ = "replies:read", "Read the assistant's replies (and actions) in those receipts"
    WEBHOOKS_MANAGE = "webhooks:manage", "Create webhook triggers"
    CONNECTIONS_MANAGE = "connections:manage", "Add, sync and remove MCP connections (tool servers)"
    PROFILE_READ = "profile:read", "Read your name and email"


# A new key made in the console, or with createapikey without --scopes.
CONSOLE_DEFAULT = frozenset({Scope.MESSAGES_SEND, Scope.RECEIPTS_READ})
# What the official CLI calls (`poke login`, `whoami`, `mcp add`, and webhooks through the SDK): its log-in grants
# these, and /device says so before the person approves.
CLI = frozenset({Scope.MESSAGES_SEND, Scope.WEBHOOKS_MANAGE, Scope.CONNECTIONS_MANAGE, Scope.PROFILE_READ})
# A V1 (legacy) key does what it always did: send on the legacy endpoint, read its receipts, say whose it is.
LEGACY_V1 = frozenset({Scope.MESSAGES_SEND, Scope.RECEIPTS_READ, Scope.PROFILE_READ})
# What every V2 key could do before scopes existed (replies:read only where "may read replies" was on): the
# migration gives existing keys exactly this, so nothing that worked stops working.
BEFORE_SCOPES = frozenset(Scope) - {Scope.REPLIES_READ}

# What an endpoint refused for a lack of each scope was trying to do, for the 403's sentence.
ACTION_OF = {
    Scope.MESSAGES_SEND: "send messages",
    Scope.RECEIPTS_READ: "read receipts",
    Scope.REPLIES_READ: "read replies",
    Scope.WEBHOOKS_MANAGE: "create webhook triggers",
    Scope.CONNECTIONS_MANAGE: "manage MCP connections",
    Scope.PROFILE_READ: "read the profile",
}


class UnknownScope(ValueError):
    pass


def parse(names: Iterable[str]) -> frozenset[Scope]:
    """Scopes from their names (a typed list, a form); UnknownScope names the first that is not one."""
    scopes = set()
    for name in names:
        name = name.strip()
        if not name:
            continue
        if name not in Scope.values:
            raise UnknownScope(f"{name!r} is not a scope; the scopes are {', '.join(Scope.values)}.")
        scopes.add(Scope(name))
    return frozenset(scopes)


def stored(scopes: Iterable[Scope]) -> str:
    """The column's text: names in the order of ``Scope``, separated by spaces."""
    chosen = set(scopes)
    return " ".join(scope.value for scope in Scope if scope in chosen)


def loaded(text: str) -> frozenset[Scope]:
    return frozenset(Scope(name) for name in text.split() if name in Scope.values)
