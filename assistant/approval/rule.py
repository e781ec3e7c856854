"""The one decision: whether a tool call runs, waits for the person's answer, or is refused
(docs/explanation/approval.md has it as a table). Everything that weighs on it comes in as ``Circumstances``, so the
decision itself reads no database and can be checked case by case (tests/test_approval_rule.py)."""

import enum
from dataclasses import dataclass


class Origin(enum.Enum):
    """Who sent the message the assistant is answering, as far back as it goes (a follow-up or an approval keeps the
    origin of the message whose call led to it)."""

    PERSON = "person"  # typed in the console or sent from a phone linked to the account
    KEY = "key"  # an API key's message
    TRIGGER = "trigger"  # a webhook trigger's firing


class Effect(enum.Enum):
    """What a tool does, by our own account or by its server's."""

    READS = "reads"  # one of ours that changes nothing
    CLAIMS_TO_READ = "claims to read"  # an MCP server's readOnlyHint (believed as far as the person trusts it)
    ACTS = "acts"  # changes something (or unknown), or the person marked it so
    SENDS = "sends"  # leaves the person's account for good (a mail): every one is the person's own yes


class Verdict(enum.Enum):
    RUN = "run"
    ASK = "ask"  # recorded as awaiting approval; the person is asked in the thread and on their phone
    REFUSE = "refuse"  # not run and not asked: the key's owner did not let its messages use the tool


@dataclass(frozen=True)
class Circumstances:
    """What the decision weighs for one call.

    ``origin``: who sent the words. ``read_outside``: words from outside the person reached the model before the
    call (a tool's result, a follow-up, another's message in the thread it reads). ``key_asks``: the key's "Ask me
    before a tool changes anything" (a trigger and the person have none: True). ``allowed``: the key's tool policy
    lets its messages use this tool. ``effect``: the tool's. ``trusted``: the person trusts the server's read-only
    claims (Connections page). ``approved``: the person approved this very call (only the hand-off of their answer
    says so, never the model)."""

    origin: Origin
    read_outside: bool
    effect: Effect
    key_asks: bool = True
    allowed: bool = True
    trusted: bool = False
    approved: bool = False

    @property
    def from_outside(self) -> bool:
        return self.origin is not Origin.PERSON or self.read_outside


def surely_reads(effect: Effect, trusted: bool) -> bool:
    """Whether a call changes nothing as far as the person relies on it: ours that read, or a trusted server's claim."""
    return effect is Effect.READS or (effect is Effect.CLAIMS_TO_READ and trusted)


def decide(now: Circumstances) -> Verdict:
    """The verdict for one call. A tool the key's owner withheld is refused; what the person approved runs; a mail
    always asks; a tool that reads runs, and one whose server only says it reads runs for the person's own words or
    when they trust that server; content from outside always asks (a key's "don't ask" waives who sent the message,
    never what a mail or a tool's server wrote); otherwise the person's own words run, a key's ask unless waived, a
    trigger's always ask."""
    if not now.allowed:
        return Verdict.REFUSE
    if now.approved:
        return Verdict.RUN
    if now.effect is Effect.SENDS:
        return Verdict.ASK
    if _believed_to_read(now):
        return Verdict.RUN
    if now.read_outside or now.origin is Origin.TRIGGER:
        return Verdict.ASK
    if now.origin is Origin.KEY and now.key_asks:
        return Verdict.ASK
    return Verdict.RUN


def _believed_to_read(now: Circumstances) -> bool:
    """Ours that read, a trusted server's claim, or any server's claim for the person's own words alone."""
    claim_taken = now.effect is Effect.CLAIMS_TO_READ and not now.from_outside
    return surely_reads(now.effect, now.trusted) or claim_taken
