"""The built-in assistant's understanding: intents.py (a message read sentence by sentence, each offered to the
readers of one topic: reminders.py, alarms.py, events.py, mail.py, webhooks.py, about.py), scheduling.py (a drafted
reminder or event once its time is read), meaning.py (the Intent types), phrases.py (where a time phrase is),
times.py and dates.py (reading times), replies.py (its words). assistant/backends/local.py runs it."""
