"""The built-in assistant's understanding: intents.py (the grammar of requests), phrases.py (where a time phrase is),
times.py (dateparser and rrule), replies.py (its words). The backend that runs it is assistant/backends/local.py."""
