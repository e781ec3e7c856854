"""Assistant backends: each is a function from an AssistantRequest to an Outcome (or a DeliveryFailure)."""

from collections.abc import Callable

from assistant.conversation import AssistantRequest
from assistant.outcomes import Outcome

Backend = Callable[[AssistantRequest], Outcome]


def backend_named(name: str) -> Backend:
    from assistant.backends import approved, local, openai, webhook

    backends: dict[str, Backend] = {"local": local.deliver, "webhook": webhook.deliver, "openai": openai.deliver}
    # A person's approval is carried out before any backend sees its message (assistant/approval/requests.py).
    return approved.carrying_out_approvals(backends[name])
