"""The words of an approval request (assistant/approval/text.py, docs/explanation/approval.md#what-the-request-shows):
who asked reads as a sentence for every origin and everything that can have been read; a server's tool is named by
itself and its connection first; arguments and recipients are never cut where an address would hide; control and
direction characters are shown, not obeyed, on pages and in names (ops/visible.py)."""

import sys
import unicodedata
from zoneinfo import ZoneInfo

import pytest

from assistant.approval.rule import Origin
from assistant.approval.text import (
    APPROVAL,
    FOLLOW_UP,
    THREAD,
    asked_by,
    in_words,
    requester,
    tool_read,
)
from assistant.models import Action, ActionState
from connections.models import Connection
from conversations.models import Source
from ops.visible import KEPT, RANGES, hidden_characters, visible
from tests.factories import UserFactory, delivery_under_way, make_key
from tests.test_approvals import REMIND
from tests.test_tool_ledger import call

UTC = ZoneInfo("UTC")
KEY = "API key “ci” (psk_…ab12)"
TRIGGER = "the webhook trigger “A deploy fails” (whk_…cd34)"

# Who sent the message: the origin, what the toolbox knows of the asker, and how the request names them.
WHO = {
    "the person": (Origin.PERSON, "", "your own message"),
    "a key": (Origin.KEY, KEY, KEY),
    "a trigger": (Origin.TRIGGER, TRIGGER, TRIGGER),
    "a key since deleted": (Origin.KEY, "", "an automation that no longer exists"),
}
# What brought words from outside the person in before the call, as the toolbox notes it, and how it reads.
READ = {
    "nothing": ("", ""),
    "a built-in tool's result": (tool_read("mail_read"), "what the tool mail_read returned"),
    "an MCP tool's result": (tool_read("lookup", "Bank"), "what the tool lookup of Bank returned"),
    "a follow-up": (FOLLOW_UP, "a tool's follow-up"),
    "an approval": (APPROVAL, "a request you approved"),
    "the thread": (THREAD, "the messages of others in your thread"),
}


@pytest.mark.parametrize("read", list(READ))
@pytest.mark.parametrize("who", list(WHO))
def test_who_asked_reads_as_a_sentence(who, read):
    origin, asker, named = WHO[who]
    noted, said = READ[read]
    phrase = requester(origin, asker, noted)
    expected = f"{named}, after reading {said}" if said else named
    assert phrase == expected
    assert f"Asked by {asked_by(phrase)}." == f"Asked by {expected}."
    assert "the tool the" not in phrase and "tool a " not in phrase and "tool what" not in phrase


@pytest.mark.django_db
def test_the_thread_read_by_a_model_is_said_as_such():
    """The line the review quoted ("after reading what the tool the messages of others in your thread returned")."""
    from assistant.conversation import build_request
    from assistant.tools.toolbox import toolbox_for_request

    owner = UserFactory()
    key, _ = make_key(owner, "ci")
    delivery_under_way(owner, text="CALL:schedule_reminder:{}", key=key)
    now = delivery_under_way(owner, text="thanks", source=Source.SMS)
    box = toolbox_for_request(build_request(now.message, 1), reads_thread=True)
    call(box, "schedule_reminder", REMIND)

    action = Action.objects.get(state=ActionState.AWAITING_APPROVAL)
    assert action.requested_by == "your own message, after reading the messages of others in your thread"
    assert "\nAsked by your own message, after reading the messages of others in your thread.\n" in (
        action.approval_message.text
    )


def test_a_servers_tool_is_named_by_itself_and_its_connection_first():
    said = in_words("wire_funds", {"iban": "GB00", "amount": 9000}, UTC, connection="Bank", title="View statement")
    assert said == "Run wire_funds on Bank (the server calls it “View statement”) with:\niban: GB00\namount: 9000"
    assert in_words("ping", {}, UTC, connection="Bank") == "Run ping on Bank (no arguments)."


def test_a_long_argument_is_cut_only_with_the_addresses_it_holds():
    value = "x" * 400 + " send to mallory@evil.example and see https://evil.example/a?b=c"
    said = in_words("note", {"text": value}, UTC, connection="Bank").split("\n")[1]
    assert said.startswith("text: " + "x" * 299 + "…")
    assert "whole in the console; addresses in it: mallory@evil.example, https://evil.example/a?b=c)" in said
    short = in_words("note", {"to": "a@b.example", "list": ["one", "two"], "yes": True}, UTC, connection="C")
    assert short.split("\n")[1:] == ["to: a@b.example", "list: one, two", "yes: yes"]


def test_mail_shows_every_recipients_address_whole_then_its_name():
    name = "N" * 150
    mail = {"to": f'"{name}" <mallory@evil.example>, bob@example.com', "subject": "Hi", "body": "a\n\nb\nc\nd\ne"}
    said = in_words("mail_send", mail, UTC).split("\n")
    assert said[0] == f"Send an email to mallory@evil.example (“{'N' * 39}…”), bob@example.com, subject “Hi”."
    assert said[1:] == ["It begins:", "“a”", "“b”", "“c”", "… and 2 more lines (the whole mail in the console)"]
    assert in_words("mail_draft", {"to": "x", "subject": "S"}, UTC) == "Save a draft email to x, subject “S”."


def test_control_and_direction_characters_are_shown_in_every_part_of_a_request():
    said = in_words("schedule_reminder", {"text": "pay\u202e bob", "when": "x"}, UTC)
    assert "pay[U+202E] bob" in said and "\u202e" not in said
    said = in_words("t\u2066", {"k\u200b": "v\x07"}, UTC, connection="B\u202e", title="T\u202d")
    assert said == "Run t[U+2066] on B[U+202E] (the server calls it “T[U+202D]”) with:\nk[U+200B]: v[U+0007]"
    assert asked_by("API key “x\u202e”") == "API key “x[U+202E]”"


def test_visible_text_knows_every_control_and_format_character_of_this_python():
    listed = {point for low, high in RANGES for point in range(low, high + 1)}
    wanted = {
        point
        for point in range(sys.maxunicode + 1)
        if (unicodedata.category(chr(point)) in ("Cc", "Cf") or chr(point) in "\u2028\u2029") and chr(point) not in KEPT
    }
    assert wanted <= listed  # a newer Unicode may add some: add their ranges to ops/visible.py
    assert visible("emoji 👩\u200d💻, line\nbreak\ttab") == "emoji 👩\u200d💻, line\nbreak\ttab"
    assert hidden_characters("a\u202eb\u202ec\u2066") == ["U+202E", "U+2066"]


@pytest.mark.django_db
def test_pages_and_the_admin_show_direction_characters_and_json_keeps_its_bytes(client, admin_client):
    owner = UserFactory()
    key, plaintext = make_key(owner, "ci")
    type(key).objects.filter(pk=key.pk).update(name="gift\u202egnp.exe")
    listing = admin_client.get("/admin/keys/apikey/").content.decode()
    assert "gift[U+202E]gnp.exe" in listing and "\u202e" not in listing
    client.force_login(owner)
    page = client.get("/keys/").content.decode()
    assert "gift[U+202E]gnp.exe" in page and "\u202e" not in page
    Connection.objects.create(owner=owner, name="Bank\u202e", server_url="https://mcp.example.com/mcp")
    answer = client.get("/api/v1/mcp/connections", headers={"Authorization": f"Bearer {plaintext}"})
    assert answer.json()["connections"][0]["name"] == "Bank\u202e"  # an API answer is the contract: as stored


@pytest.mark.django_db
def test_staff_cannot_rename_a_key_with_direction_characters(admin_client):
    key, _ = make_key(UserFactory(), "ci")
    page = admin_client.post(f"/admin/keys/apikey/{key.pk}/change/", {"name": "ci\u202eexe"})
    assert page.status_code == 200 and "U+202E" in page.content.decode()
    key.refresh_from_db()
    assert key.name == "ci"
