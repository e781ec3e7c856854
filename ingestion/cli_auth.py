"""`poke login` (RFC 8628, the device authorization grant), as the poke CLI calls it (docs/reference/cli-login.md):

- ``POST /api/v1/cli-auth/code`` (no authentication, no body): a device code for the CLI to poll with and a short
  user code for the person, who enters it on ``/device`` (console) and approves or denies.
- ``GET /api/v1/cli-auth/poll/{deviceCode}``: ``pending`` until then; ``authenticated`` with the token (a new V2 key)
  on the first poll after approval, exactly once; ``expired`` after 10 minutes; ``invalid`` for an unknown, used
  or denied code. The CLI stops on ``authenticated``, ``expired`` and ``invalid`` and keeps polling on anything
  else, whatever the HTTP status, so a denial is reported as ``invalid`` (with the code ``access_denied``).

Both are limited per client address (CLI_AUTH_CODE_RATE_LIMIT, CLI_AUTH_POLL_RATE_LIMIT). The device code is in
the poll's path, so logs write that path as its route (ops/redaction.py).
"""

from typing import Any

from django.conf import settings
from django.urls import reverse
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from devices import services
from ingestion import openapi
from ingestion.exceptions import RateLimited, error_response
from ingestion.negotiation import JsonOnly
from ops import metrics
from ops.client_ip import client_ip, client_network
from ops.limits import count_hit, describe_rate, remember_usage

CODE_POLICY = "cli-auth-code"
POLL_POLICY = "cli-auth-poll"


def _limit(request: Request, policy: str, rate: str, what: str) -> None:
    counted = count_hit(request, policy, rate, client_network(request))
    if counted is None:
        return
    usage, over = counted
    remember_usage(request, usage)
    if over:
        wait = max(1, usage.reset)
        metrics.rate_limited(policy)
        raise RateLimited(f"Too many {what} from your address (the limit is {describe_rate(rate)}). "
                          f"Retry in {wait} seconds.", wait)  # fmt: skip


class _Unauthenticated(APIView):
    authentication_classes: list[Any] = []
    throttle_classes: list[Any] = []
    content_negotiation_class = JsonOnly


class DeviceCodeView(_Unauthenticated):
    http_method_names = ["post", "options"]

    @openapi.device_code_endpoint
    def post(self, request: Request) -> Response:
        # The CLI sends no body, and none is read.
        _limit(request, CODE_POLICY, settings.CLI_AUTH_CODE_RATE_LIMIT, "log-in codes requested")
        authorization, device_code = services.start(request.META.get("HTTP_USER_AGENT", ""), client_ip(request))
        verification = request.build_absolute_uri(reverse("devices:approve"))
        response = Response(
            {
                "success": True,
                "deviceCode": device_code,
                "userCode": authorization.display_code,
                "verificationUri": verification,
                "verificationUriComplete": f"{verification}?code={authorization.display_code}",
                "expiresIn": int(services.LIFETIME.total_seconds()),
                "interval": services.POLL_INTERVAL_SECONDS,
            }
        )
        response["Cache-Control"] = "no-store"
        return response


_REFUSED = {
    # what a poll found: (HTTP status, the CLI's status, code, message)
    "unknown": (404, "invalid", "invalid_device_code",
                "No log-in request has this device code. Run `poke login` again."),
    "used": (400, "invalid", "device_code_used",
             "This log-in request has already handed out its token. Run `poke login` again to log in anew."),
    "denied": (400, "invalid", "access_denied", "The log-in was denied in the browser. Run `poke login` again."),
    "full": (409, "invalid", "key_limit_reached",
             "The account already holds as many API keys as it may. Revoke one in the console (API Keys), then "
             "run `poke login` again."),
    "slow_down": (400, "slow_down", "slow_down",
                  f"Polling too fast: wait {services.POLL_INTERVAL_SECONDS} seconds between polls (RFC 8628)."),
    "expired": (400, "expired", "expired_token",
                "The log-in request expired before it was approved (10 minutes). Run `poke login` again."),
}  # fmt: skip


class DevicePollView(_Unauthenticated):
    # No HEAD: Django would answer it with the GET, which hands out the token once; a HEAD's answer has no body, so
    # the token would be spent unseen.
    http_method_names = ["get", "options"]

    @openapi.device_poll_endpoint
    def get(self, request: Request, device_code: str) -> Response:
        try:
            _limit(request, POLL_POLICY, settings.CLI_AUTH_POLL_RATE_LIMIT, "log-in polls")
        except RateLimited as limited:
            response = error_response(429, "rate_limited", str(limited.detail), {"Retry-After": str(limited.wait)})
            response.data["status"] = "slow_down"
            return response
        found = services.poll(device_code)
        if found.status == "pending":
            return Response(
                {
                    "success": True,
                    "status": "pending",
                    "message": "Waiting for the log-in to be approved in the browser.",
                    "interval": services.POLL_INTERVAL_SECONDS,
                }
            )
        if found.status == "authenticated":
            response = Response(
                {"success": True, "status": "authenticated", "token": found.token, "message": "Logged in."}
            )
            response["Cache-Control"] = "no-store"
            return response
        status, cli_status, code, message = _REFUSED[found.status]
        response = error_response(status, code, message)
        response.data["status"] = cli_status
        if found.status == "slow_down":
            response.data["interval"] = services.POLL_INTERVAL_SECONDS
        return response
