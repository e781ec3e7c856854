import factory
from django.contrib.auth import get_user_model
from django.utils import timezone

from conversations.models import Delivery, DeliveryStatus, Endpoint, Message, Role, Source
from conversations.services import conversation_of
from keys.models import Generation
from keys.scopes import BEFORE_SCOPES
from keys.services import create_key


class UserFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = get_user_model()
        django_get_or_create = ["username"]

    email = factory.Sequence(lambda n: f"person{n}@example.com")
    username = factory.SelfAttribute("email")
    password = factory.django.Password("correct horse battery staple")


def make_key(
    owner=None,
    name: str = "ci job",
    generation: Generation = Generation.V2,
    *,
    may_read_replies=False,
    scopes=None,
    tools_need_approval=False,
):
    """A key and its plaintext, created the way the product creates them. Unless ``scopes`` says otherwise, it may
    do what every V2 key could before keys had scopes (all but replies:read, which ``may_read_replies`` adds), so
    that a test of one endpoint is not a test of scopes; tests/test_scopes.py is that. Likewise its messages' tools
    run without the owner's approval unless ``tools_need_approval`` (tests/test_approvals.py)."""
    return create_key(
        owner or UserFactory(),
        name,
        generation,
        scopes=BEFORE_SCOPES if scopes is None else scopes,
        may_read_replies=may_read_replies,
        tools_need_approval=tools_need_approval,
    )


def attempt_when_due(delivery_id: int) -> str:
    """The delivery's next attempt, as if its retry's time had come (the tests do not wait for the backoff), as the
    immediate backend's task runs it; the delivery's status after."""
    from delivery.engine import deliver_here

    Delivery.objects.filter(pk=delivery_id).update(next_attempt_at=None)
    deliver_here()
    return Delivery.objects.get(pk=delivery_id).status


def delivery_under_way(user, *, text: str = "hi", key=None, trigger=None, source: str | None = None) -> Delivery:
    """A message of ``user``'s whose delivery's first attempt is under way, as the engine leaves it while the
    assistant calls tools (build the toolbox with assistant.tools.toolbox.toolbox_for). Its source, unless given:
    the key's (api), the trigger's, or else typed by the person in the app."""
    if source is None:
        source = Source.API if key is not None else Source.WEBHOOK_TRIGGER if trigger is not None else Source.APP
    conversation = conversation_of(user)
    message = Message.objects.create(
        conversation=conversation, role=Role.USER, source=source, text=text, api_key=key, trigger=trigger
    )
    return Delivery.objects.create(
        message=message,
        conversation=conversation,
        api_key=key,
        endpoint=Endpoint.CURRENT,
        status=DeliveryStatus.PROCESSING,
        attempts=1,
        started_at=timezone.now(),
    )
