"""What the assistant did while answering a message: each tool call (an ``Action``) with its arguments, result and
time, shown to the person under the reply, to staff in the admin, and in the receipt for keys that may read
replies; and the one-time tokens a long-running tool posts its follow-ups with."""

from django.db import models
from django.utils import timezone


class ToolKind(models.TextChoices):
    BUILT_IN = "built_in", "Built-in"
    MCP = "mcp", "MCP connection"


class ActionState(models.TextChoices):
    """Where a tool call stands in the delivery's ledger (assistant/tools/ledger.py). More states may come between
    ``running``'s predecessors (a call awaiting a person's approval) without changing the others' meaning."""

    RUNNING = "running", "Running"  # begun; an attempt that finds it so after a takeover cannot know if it acted
    DONE = "done", "Done"  # finished, its result recorded: never run again for this delivery
    INTERRUPTED = "interrupted", "Interrupted"  # begun by an attempt that was lost before it recorded a result
    # A side-effecting call for a key's or a trigger's message (assistant/approval/requests.py): not run; the person was
    # asked. Approved, it runs in the delivery of the approval's message (as that delivery's call, in its ledger).
    AWAITING_APPROVAL = "awaiting_approval", "Awaiting approval"
    APPROVED = "approved", "Approved"
    DENIED = "denied", "Denied"
    EXPIRED = "expired", "Approval expired"


class Action(models.Model):
    """One tool call of a delivery: the ledger entry that makes it act at most once (assistant/tools/ledger.py).
    Its stable id is (delivery, call_index)."""

    delivery = models.ForeignKey("conversations.Delivery", on_delete=models.CASCADE, related_name="actions")
    attempt = models.PositiveIntegerField(default=1)
    round = models.PositiveIntegerField(default=1, help_text="Which round of tool calls of the attempt.")
    tool_call_id = models.CharField(max_length=100, blank=True, help_text="The model's id for the call.")
    # The n-th tool call of the delivery (0, 1, ...): with the delivery, the call's stable id across attempts. NULL
    # only for calls recorded before the ledger.
    call_index = models.PositiveIntegerField(null=True, blank=True)
    state = models.CharField(max_length=24, choices=ActionState.choices, default=ActionState.DONE)
    kind = models.CharField(max_length=16, choices=ToolKind.choices)
    tool = models.CharField(max_length=255, help_text="The tool's name as the server or the assistant knows it.")
    connection = models.ForeignKey(
        "connections.Connection", null=True, blank=True, on_delete=models.SET_NULL, related_name="actions"
    )
    connection_name = models.CharField(max_length=100, blank=True)
    arguments = models.JSONField(default=dict, blank=True)
    result = models.TextField(blank=True)
    is_error = models.BooleanField(default=False)
    started_at = models.DateTimeField(default=timezone.now)
    finished_at = models.DateTimeField(null=True, blank=True)
    follow_ups = models.PositiveIntegerField(default=0, help_text="Follow-ups the tool posted back so far.")
    # For a call that waits for approval: who asked (an API key or a webhook trigger, by name), until when the
    # person may answer, and their answer.
    requested_by = models.CharField(max_length=300, blank=True)
    approval_expires_at = models.DateTimeField(null=True, blank=True)
    decided_at = models.DateTimeField(null=True, blank=True)
    # The assistant's message in the thread that asks the person (written once, even if the call is replayed).
    approval_message = models.ForeignKey(
        "conversations.Message", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    last_follow_up_at = models.DateTimeField(null=True, blank=True)
    # Its result carried words from outside the person (a mail, an MCP server's answer): the delivery's reply is
    # then not the person's own words for a later attempt that reads the thread (assistant/origins.py).
    read_outside = models.BooleanField(default=False)
    # The code the person may answer with from a phone ("YES K7QZ4MX2"): a handle no other open request of theirs has,
    # then a secret (assistant/approval/codes.py); empty for a call that never asked. It is shown in the thread's
    # request too.
    approval_code = models.CharField(max_length=8, blank=True)

    class Meta:
        ordering = ["started_at", "id"]
        constraints = [
            models.UniqueConstraint(fields=["delivery", "call_index"], name="assistant_action_one_per_call_index")
        ]
        indexes = [
            # A phone's answer finds its request by code: only the calls that asked have one.
            models.Index(fields=["approval_code"], name="assistant_action_code", condition=~models.Q(approval_code=""))
        ]

    def __str__(self) -> str:
        return f"{self.label} ({'error' if self.is_error else 'ok'})"

    @property
    def call_id(self) -> str:
        """The stable id of the call: the same for every attempt of the delivery that makes it."""
        return f"{self.delivery_id}:{self.call_index}"

    @property
    def label(self) -> str:
        return f"{self.connection_name} · {self.tool}" if self.connection_name else self.tool

    @property
    def duration_ms(self) -> int | None:
        if self.finished_at is None:
            return None
        return int((self.finished_at - self.started_at).total_seconds() * 1000)

    def as_json(self) -> dict[str, object]:
        return {
            "tool": self.tool,
            "connection": self.connection_name or None,
            "arguments": self.arguments,
            "result": self.result,
            "isError": self.is_error,
            "startedAt": self.started_at,
            "finishedAt": self.finished_at,
            "followUps": self.follow_ups,
        }


class FollowUpToken(models.Model):
    """A bearer token for one follow-up of a tool call (X-Poke-Callback-Token). Only its SHA-256 digest is stored;
    it is spent by the follow-up it authorises, which receives the next one (nextToken) while more are allowed."""

    action = models.ForeignKey(Action, on_delete=models.CASCADE, related_name="follow_up_tokens")
    digest = models.CharField(max_length=64, unique=True)
    created_at = models.DateTimeField(default=timezone.now)
    used_at = models.DateTimeField(null=True, blank=True)

    def __str__(self) -> str:
        return f"Follow-up token of action {self.action_id}"
