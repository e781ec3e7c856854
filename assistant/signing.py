"""Standard Webhooks signatures (https://www.standardwebhooks.com), both ways: our requests to the assistant
runtime and its callbacks to us are signed with the same ``whsec_`` secret.

    webhook-id:        a stable id of the message (the same on every retry, so receivers can deduplicate)
    webhook-timestamp: Unix seconds
    webhook-signature: "v1," + base64(HMAC-SHA256(secret, f"{id}.{timestamp}.{body}")), several space-separated

The signature itself is the reference library's (``standardwebhooks.Webhook.sign``), so what we send is what our
users' verifiers compute. Its ``verify`` is not used, because it does not fit what the callback endpoint answers:
its tolerance is a fixed five minutes (ours is ASSISTANT_CALLBACK_TOLERANCE_SECONDS), a stale timestamp and a wrong
signature raise the same exception (we answer ``timestamp_out_of_tolerance`` apart, docs/howto/assistant-backend.md),
malformed headers escape as ValueError or binascii.Error (a signature without a comma, one that is not base64: a 500
unless caught), it takes "1e9" or "1795346431.5" as a timestamp and reads the clock itself. So the checks around the
signature stay here, as does the secret's (the library also takes a secret without ``whsec_``, or a short one).
"""

import base64
import binascii
import hmac
from collections.abc import Mapping
from datetime import UTC, datetime

from standardwebhooks import Webhook

SECRET_PREFIX = "whsec_"


class SignatureError(Exception):
    """The headers are missing, malformed, or the signature does not match."""


class TimestampError(SignatureError):
    """The signature may be right, but the timestamp is outside the tolerance: a replay or a badly set clock."""


def secret_bytes(secret: str) -> bytes:
    """The HMAC key: the base64 after the ``whsec_`` prefix."""
    if not secret.startswith(SECRET_PREFIX):
        raise ValueError(f"A Standard Webhooks secret starts with {SECRET_PREFIX}")
    try:
        key = base64.b64decode(secret.removeprefix(SECRET_PREFIX), validate=True)
    except binascii.Error:
        raise ValueError("The part after whsec_ is not valid base64") from None
    if len(key) < 24:
        raise ValueError("The secret is too short: use at least 24 random bytes (192 bits)")
    return key


def signature(key: bytes, webhook_id: str, timestamp: int, body: bytes) -> str:
    """The ``v1,`` signature of a body; SignatureError when the body is not UTF-8 (the library signs text, as every
    Standard Webhooks signer does, so no signer could have signed such a body)."""
    try:
        text = body.decode()
    except UnicodeDecodeError:
        raise SignatureError("The body is not UTF-8 text, so no Standard Webhooks signature can match it.") from None
    return Webhook(key).sign(webhook_id, datetime.fromtimestamp(timestamp, UTC), text)


def sign(key: bytes, webhook_id: str, timestamp: int, body: bytes) -> dict[str, str]:
    """The three headers that go with a signed body."""
    return {
        "webhook-id": webhook_id,
        "webhook-timestamp": str(timestamp),
        "webhook-signature": signature(key, webhook_id, timestamp, body),
    }


def verify(key: bytes, headers: Mapping[str, str], body: bytes, now: int, tolerance: int) -> str:
    """Check a signed request and return its webhook-id; raise SignatureError or TimestampError."""
    webhook_id = headers.get("webhook-id", "")
    raw_timestamp = headers.get("webhook-timestamp", "")
    presented = headers.get("webhook-signature", "")
    if not (webhook_id and raw_timestamp and presented):
        raise SignatureError("Sign the request with the webhook-id, webhook-timestamp and webhook-signature headers.")
    if len(webhook_id) > 255:
        raise SignatureError("The webhook-id header is longer than 255 characters.")
    # Unix seconds have 10 digits; a longer run of digits is no timestamp (and past 4300, int() refuses it).
    if not raw_timestamp.isascii() or not raw_timestamp.isdigit() or len(raw_timestamp) > 15:
        raise SignatureError("The webhook-timestamp header must be Unix seconds.")
    timestamp = int(raw_timestamp)
    if abs(now - timestamp) > tolerance:
        raise TimestampError(
            f"The webhook-timestamp is more than {tolerance} seconds away from our clock; "
            "sign each request when you send it."
        )
    expected = signature(key, webhook_id, timestamp, body).encode()
    # Several signatures may be sent (for example during a secret rotation): any one that matches will do.
    for candidate in presented.split(" "):
        if hmac.compare_digest(candidate.encode(), expected):
            return webhook_id
    raise SignatureError("The webhook-signature does not match the body; sign it with the shared whsec_ secret.")
