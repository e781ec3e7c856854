"""The built-in assistant understands requests, not keywords: a corpus of phrasings, each labelled with the intent it
asks for (assistant/local/intents.py INTENTS) or with None for a sentence that is no request to it, most of those
mentioning an intent's words ("The webhook for orders is broken"). The test prints precision and recall per intent
and fails when any intent's precision falls under 0.95 (a sentence that merely mentions a request's words must not
act) or its recall under 0.80. docs/explanation/local-assistant.md shows the table."""

from collections import Counter
from datetime import datetime

from assistant.local.intents import INTENTS, intent_name, understand

NOW = datetime(2026, 11, 25, 10, 0)  # local, naive: a Wednesday
TOOLS = {
    "schedule_reminder",
    "list_reminders",
    "cancel_reminder",
    "list_webhook_triggers",
    "calendar_list_events",
    "calendar_create_event",
    "mail_search",
    "mail_send",
}
MIN_PRECISION = 0.95
MIN_RECALL = 0.80
SENTENCE = "The quarterly report shows revenue up four percent on the year, with churn flat. "
LONG = ("Summarize this: " + SENTENCE * 11)[:885]

CORPUS: list[tuple[str, str | None]] = [
    # schedule_reminder
    ("Remind me to stretch at 3pm", "schedule_reminder"),
    ("remind me to call mom tomorrow at noon", "schedule_reminder"),
    ("Please remind me to water the plants at 6pm", "schedule_reminder"),
    ("can you remind me in 20 minutes to check the oven", "schedule_reminder"),
    ("In an hour, remind me to take the pizza out", "schedule_reminder"),
    ("set a reminder for 3pm to stretch", "schedule_reminder"),
    ("set a reminder: team standup every weekday at 9:15", "schedule_reminder"),
    ("create a reminder to pay rent on the 1st of every month at 9am", "schedule_reminder"),
    ("remind me every Monday at 8am to take out the bins", "schedule_reminder"),
    ("remind me to drink water every 2 hours", "schedule_reminder"),
    ("wake me up at 7", "schedule_reminder"),
    ("remind me to stretch", "schedule_reminder"),  # asked when
    ("remind me to stretch at 3", "schedule_reminder"),  # asked am or pm
    ("Reminder: submit the timesheet on Friday at 4pm", "schedule_reminder"),
    ("reminder to call the bank tomorrow at 10am", "schedule_reminder"),
    ("Hey, could you remind me about the dentist tomorrow at 9:30am?", "schedule_reminder"),
    ("remind me to stretch today at 9am", "schedule_reminder"),  # refused: it has passed
    ("remind me to stretch every 5 minutes", "schedule_reminder"),  # refused: too often
    ("new reminder: renew the passport on Dec 3 at 10am", "schedule_reminder"),
    ("could you set a reminder to call the vet at 4pm", "schedule_reminder"),
    ("remind me on mondays and wednesdays at 6pm to go running", "schedule_reminder"),
    # list_reminders
    ("What reminders do I have?", "list_reminders"),
    ("which reminders are set", "list_reminders"),
    ("show my reminders", "list_reminders"),
    ("list all my reminders", "list_reminders"),
    ("show me my upcoming reminders", "list_reminders"),
    ("do I have any reminders today", "list_reminders"),
    ("are there any reminders scheduled", "list_reminders"),
    ("reminders", "list_reminders"),
    ("my reminders", "list_reminders"),
    ("what are my reminders", "list_reminders"),
    ("what's on my reminder list", "list_reminders"),
    ("check my reminders please", "list_reminders"),
    ("tell me my reminders for tomorrow", "list_reminders"),
    ("please list my reminders", "list_reminders"),
    # cancel_reminder
    ("cancel the stretch reminder", "cancel_reminder"),
    ("cancel my reminder to stretch", "cancel_reminder"),
    ("delete the reminder about the dentist", "cancel_reminder"),
    ("remove my water plants reminder", "cancel_reminder"),
    ("turn off the bins reminder", "cancel_reminder"),
    ("cancel all my reminders", "cancel_reminder"),
    ("stop reminding me to drink water", "cancel_reminder"),
    ("don't remind me about the standup anymore", "cancel_reminder"),
    ("delete reminder rem_Ab12Cd34Ef56Gh78", "cancel_reminder"),
    ("get rid of the rent reminder", "cancel_reminder"),
    ("I don't need the passport reminder", "cancel_reminder"),
    ("I want to cancel the dentist reminder", "cancel_reminder"),
    ("forget the stretch reminder", "cancel_reminder"),
    ("please cancel the reminder to call the bank", "cancel_reminder"),
    # list_webhook_triggers
    ("list my webhooks", "list_webhook_triggers"),
    ("show my webhook triggers", "list_webhook_triggers"),
    ("what webhooks do I have", "list_webhook_triggers"),
    ("which triggers are set up", "list_webhook_triggers"),
    ("show me all my webhooks", "list_webhook_triggers"),
    ("do I have any webhooks", "list_webhook_triggers"),
    ("how many webhooks do I have", "list_webhook_triggers"),
    ("my webhooks", "list_webhook_triggers"),
    ("webhooks", "list_webhook_triggers"),
    ("what are my triggers", "list_webhook_triggers"),
    ("check my webhooks please", "list_webhook_triggers"),
    ("list the active webhook triggers", "list_webhook_triggers"),
    # change_webhooks
    ("delete my webhook", "change_webhooks"),
    ("create a webhook for orders", "change_webhooks"),
    ("add a new webhook trigger", "change_webhooks"),
    ("remove the orders webhook", "change_webhooks"),
    ("rename my deploy webhook", "change_webhooks"),
    ("set up a webhook", "change_webhooks"),
    ("disable the backup webhook", "change_webhooks"),
    ("revoke all my webhooks", "change_webhooks"),
    # calendar_list_events
    ("what's on my calendar today", "calendar_list_events"),
    ("What's on my calendar tomorrow?", "calendar_list_events"),
    ("what is on my agenda this week", "calendar_list_events"),
    ("What do I have on Friday", "calendar_list_events"),
    ("what do I have tomorrow", "calendar_list_events"),
    ("what meetings do I have today", "calendar_list_events"),
    ("show my calendar", "calendar_list_events"),
    ("show me my meetings for tomorrow", "calendar_list_events"),
    ("am I free tomorrow", "calendar_list_events"),
    ("am I busy on Friday", "calendar_list_events"),
    ("do I have any meetings today", "calendar_list_events"),
    ("anything on my calendar next week", "calendar_list_events"),
    ("what does my day look like", "calendar_list_events"),
    ("check my schedule for Thursday", "calendar_list_events"),
    ("my calendar tomorrow", "calendar_list_events"),
    ("what's happening tomorrow", "calendar_list_events"),
    ("list my appointments this week", "calendar_list_events"),
    ("which events are on my calendar on Monday", "calendar_list_events"),
    ("what's on the agenda for tomorrow", "calendar_list_events"),
    # calendar_create_event
    ("add lunch with Sam on Friday at 1pm", "calendar_create_event"),
    ("add a meeting with Bob tomorrow at 3pm for 30 minutes", "calendar_create_event"),
    ("Put dentist on my calendar tomorrow at 9:30", "calendar_create_event"),
    ("schedule a call with Ana on Monday at 11am", "calendar_create_event"),
    ("book the retro for Friday at 2pm", "calendar_create_event"),
    ("create an event called board review on Dec 3 at 10am", "calendar_create_event"),
    ("add yoga to my calendar every Tuesday at 7pm", "calendar_create_event"),
    ("plan the release party next Friday at 5pm", "calendar_create_event"),
    ("block 2 hours for deep work tomorrow at 9am on my calendar", "calendar_create_event"),
    ("add lunch with Sam on Friday", "calendar_create_event"),  # asked what time
    ("set up a meeting with the design team tomorrow at 4pm", "calendar_create_event"),
    ("add dinner with Lea to my calendar", "calendar_create_event"),  # asked when
    # change_events
    ("delete the dentist appointment", "change_events"),
    ("cancel my meeting with Bob", "change_events"),
    ("move the standup meeting to 10am", "change_events"),
    ("reschedule tomorrow's call", "change_events"),
    ("remove the lunch event", "change_events"),
    ("postpone the board meeting", "change_events"),
    # mail_search
    ("show my unread mail", "mail_search"),
    ("any new emails?", "mail_search"),
    ("check my email", "mail_search"),
    ("do I have any new mail", "mail_search"),
    ("read my latest emails", "mail_search"),
    ("what's in my inbox", "mail_search"),
    ("anything new in my inbox", "mail_search"),
    ("my inbox", "mail_search"),
    ("unread emails", "mail_search"),
    ("has anyone emailed me today", "mail_search"),
    ("check my mail please", "mail_search"),
    ("list my new messages", "mail_search"),
    ("show my inbox", "mail_search"),
    ("is there anything in my inbox", "mail_search"),
    ("how many unread emails do I have", "mail_search"),
    # mail_send
    ("Email bob@example.com that I'm running late", "mail_send"),
    ("email sam@example.com: the report is ready", "mail_send"),
    ("send an email to ana@example.org saying the deploy is done", "mail_send"),
    ("write to lea@example.com that I'll be there at 6", "mail_send"),
    ("send bob@example.com a quick email that lunch is moved to 1pm", "mail_send"),
    ("mail ops@example.com about the outage: the database is back", "mail_send"),
    ("please email jo@example.com saying thanks for today", "mail_send"),
    ("drop a line to kim@example.com that the keys are at reception", "mail_send"),
    ("tell max@example.com by email that the invoice is paid", "mail_send"),
    ("send an email to Bob", "mail_send"),  # asked for the address
    ("email Bob that I'm late", "mail_send"),  # asked for the address
    ("email bob@example.com", "mail_send"),  # asked what to say
    # other_mail
    ("forward my mail to bob@example.com", "other_mail"),
    ("reply to the last email", "other_mail"),
    ("answer the email from Sam", "other_mail"),
    ("archive all my emails", "other_mail"),
    ("mark my unread emails as read", "other_mail"),
    ("draft an email", "other_mail"),
    # summarize
    ("Summarize this: the meeting moved to Friday and the budget was cut by ten percent", "summarize"),
    ("summarise the thread for me", "summarize"),
    ("tl;dr please", "summarize"),
    ("translate this into French: good morning", "summarize"),
    ("give me a summary of the incident report", "summarize"),
    ("rewrite this more politely: send it now", "summarize"),
    (LONG, "summarize"),  # 885 characters
    # help
    ("help", "help"),
    ("What can you do?", "help"),
    ("what can I ask you", "help"),
    ("how does this work", "help"),
    ("who are you", "help"),
    # --- no request to the built-in assistant, though most mention an intent's words -------------------------------
    ("Hello from the legacy webhook", None),
    ("The webhook for orders is broken", None),
    ("webhook delivery failed for order 1234", None),
    ("Our triggers fired twice last night", None),
    ("The nightly backup webhook fired at 02:00", None),
    ("I love how webhooks work here", None),
    ("Trigger warning: long post ahead", None),
    ("a webhook is just an HTTP callback", None),
    ("the reminder didn't fire yesterday", None),
    ("reminders are great", None),
    ("Reminder that the office is closed tomorrow", None),
    ("I set a reminder for 3pm already", None),
    ("show me how reminders work", None),
    ("thanks for the reminder", None),
    ("clear my head before the reminder fires", None),
    ("remind me what the webhook address is", None),
    ("my calendar is a mess", None),
    ("what is a calendar", None),
    ("what's the best calendar app", None),
    ("show me the events of the deploy", None),
    ("I have a meeting at 3pm", None),
    ("the meeting with Bob went well", None),
    ("events are streamed to the log", None),
    ("what do I have to do to fix the build", None),
    ("I added lunch with Sam on Friday at 1pm", None),
    ("The release is scheduled for Friday at 3pm", None),
    ("put the washing on at 3pm", None),
    ("Add milk", None),
    ("Book a table for two", None),
    ("I cleaned my inbox yesterday", None),
    ("the new emails template is broken", None),
    ("check the mail server logs", None),
    ("email is down again", None),
    ("I sent the email to Bob yesterday", None),
    ("Bob emailed me about the invoice", None),
    ("can't send mail from the app", None),
    ("the unread count is wrong", None),
    ("mail delivery failed: returning message to sender", None),
    ("the summary of the incident is attached", None),
    ("I need help with the deploy script", None),
    ("help desk ticket 4521 was closed", None),
    ("deploy finished in 42s", None),
    ("Build #1234 passed on main", None),
    ("what is the weather", None),
    ("hello", None),
    ("thanks!", None),
    ("ok", None),
    ("CPU at 95% on db-01", None),
    ("Disk usage warning: /var is 91% full", None),
    ("New order #5521 from Jane Doe", None),
    ("The cron job that cancels stale reminders ran", None),
    ("Deleting the old webhook fixed it", None),
    ("Your calendar invite was accepted by Sam", None),
    ("Meeting notes: we agreed to cancel the Friday meeting", None),
    ("Please note the agenda for tomorrow is attached", None),
    ("the inbox zero challenge starts Monday", None),
    ("When the nightly backup fails, text me", None),
    ('{"event": "deploy", "status": "ok"}', None),
    ('[{"id": 1}, {"id": 2}]', None),
    ("Stripe webhook: payment_intent.succeeded for $42.00", None),
    ("GitHub: new issue opened by octocat: webhooks return 500", None),
    ("alert: reminders service latency above 2s", None),
    ("FYI the calendar sync is slow today", None),
    ("is the mail server up", None),
    ("your trial ends tomorrow", None),
    ("set up the new laptop", None),
    ("schedule", None),
    ("calendar", None),
    ("email", None),
    ("Reminder: your invoice is due", None),
    ("Calendar: event updated", None),
    ("Re: webhook retries", None),
    ("schedule changes for the holidays", None),
    ("Cancelled: weekly sync", None),
    ("Email from bob@example.com: lunch?", None),
    ("Mail from the landlord about the rent", None),
    ("forget it, the reminder is fine", None),
    ("I want to know why the webhook failed", None),
    ("how many emails did the campaign send", None),
    ("cancel", None),
]


def _table() -> list[tuple[str, int, int, int, float, float]]:
    """(intent, true positives, predicted, actual, precision, recall) per intent."""
    predicted: Counter[str] = Counter()
    actual: Counter[str] = Counter()
    right: Counter[str] = Counter()
    for text, expected in CORPUS:
        found = intent_name(understand(text, NOW, TOOLS))
        if found is not None:
            predicted[found] += 1
        if expected is not None:
            actual[expected] += 1
        if found is not None and found == expected:
            right[found] += 1
    rows = []
    for name in INTENTS:
        precision = right[name] / predicted[name] if predicted[name] else 1.0
        recall = right[name] / actual[name] if actual[name] else 1.0
        rows.append((name, right[name], predicted[name], actual[name], precision, recall))
    return rows


def test_the_corpus_is_large_and_covers_every_intent():
    assert len(CORPUS) >= 200
    labelled = Counter(expected for _, expected in CORPUS)
    assert all(labelled[name] >= 5 for name in INTENTS), labelled
    assert labelled[None] >= 60
    assert len(LONG) == 885


def test_precision_and_recall_per_intent(capsys):
    rows = _table()
    with capsys.disabled():
        print(f"\n{'intent':<24}{'precision':>10}{'recall':>8}{'phrasings':>11}")
        for name, _right, _predicted, actual, precision, recall in rows:
            print(f"{name:<24}{precision:>10.2f}{recall:>8.2f}{actual:>11}")
    mistakes = [
        (text, expected, intent_name(understand(text, NOW, TOOLS)))
        for text, expected in CORPUS
        if intent_name(understand(text, NOW, TOOLS)) != expected
    ]
    low = [row for row in rows if row[4] < MIN_PRECISION or row[5] < MIN_RECALL]
    assert not low, (low, mistakes)
