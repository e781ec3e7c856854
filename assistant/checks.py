"""System checks for the hand-off settings: a misconfiguration is reported at start-up, not at the first message."""

from typing import Any

from django.conf import settings
from django.core import checks


@checks.register()
def check_assistant_backend(app_configs: Any = None, **kwargs: Any) -> list[checks.CheckMessage]:
    problems: list[checks.CheckMessage] = []
    if settings.ASSISTANT_BACKEND == "webhook":
        if not settings.ASSISTANT_WEBHOOK_URL.startswith(("http://", "https://")):
            problems.append(
                checks.Error(
                    "ASSISTANT_BACKEND is webhook but ASSISTANT_WEBHOOK_URL is not an http(s) URL.",
                    hint="Set ASSISTANT_WEBHOOK_URL to the assistant runtime's endpoint.",
                    id="assistant.E001",
                )
            )
        if not settings.ASSISTANT_WEBHOOK_KEY:
            problems.append(
                checks.Error(
                    "ASSISTANT_BACKEND is webhook but ASSISTANT_WEBHOOK_SECRET is not set.",
                    hint="Set it to whsec_ followed by base64 of at least 24 random bytes, shared with the runtime.",
                    id="assistant.E002",
                )
            )
    if settings.ASSISTANT_BACKEND == "openai":
        if not settings.OPENAI_BASE_URL.startswith(("http://", "https://")):
            problems.append(checks.Error("OPENAI_BASE_URL is not an http(s) URL.", id="assistant.E003"))
        if not settings.OPENAI_MODEL:
            problems.append(
                checks.Error("ASSISTANT_BACKEND is openai but OPENAI_MODEL is not set.", id="assistant.E004")
            )
    return problems


@checks.register(checks.Tags.compatibility, deploy=True)
def check_task_backend_for_production(app_configs: Any = None, **kwargs: Any) -> list[checks.CheckMessage]:
    if settings.TASK_BACKEND != "immediate":
        return []
    return [
        checks.Warning(
            "TASK_BACKEND is immediate: every accepted request waits for the assistant, and failed attempts are "
            "only retried by `manage.py retrydeliveries --due`.",
            hint="Set TASK_BACKEND=database and run `manage.py worker` (the Procfile's worker process).",
            id="assistant.W001",
        )
    ]


@checks.register(checks.Tags.compatibility, deploy=True)
def check_public_base_url(app_configs: Any = None, **kwargs: Any) -> list[checks.CheckMessage]:
    """Tools are told to post their follow-ups to PUBLIC_BASE_URL: in production nothing else can say where we are."""
    if settings.PUBLIC_BASE_URL_FROM_ENV and str(settings.PUBLIC_BASE_URL).startswith(("http://", "https://")):
        return []
    return [
        checks.Error(
            "PUBLIC_BASE_URL is not set to this server's public http(s) address.",
            hint="Set PUBLIC_BASE_URL, e.g. https://ingest.example.com: tools post their follow-ups there.",
            id="assistant.E005",
        )
    ]
