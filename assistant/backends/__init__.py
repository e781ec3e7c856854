"""Assistant backends: each is a function from an AssistantRequest to an Outcome (or a DeliveryFailure)."""

from collections.abc import Callable

from assistant.conversation import AssistantRequest
from assistant.outcomes import Outcome

Backend = Callable[[AssistantRequest], Outcome]


def backend_named(name: str) -> Backend:
    from assistant.backends import local, openai, webhook

    backends: dict[str, Backend] = {"local": local.deliver, "webhook": webhook.deliver, "openai": openai.deliver}
    return backends[name]
