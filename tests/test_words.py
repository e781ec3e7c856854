"""accounts/words.py: times and repetitions as a person reads them, never as an RRULE or an ISO timestamp."""

from datetime import date, datetime
from zoneinfo import ZoneInfo

import pytest
from hypothesis import given
from hypothesis import strategies as st

from accounts import words

MONDAY_9 = datetime(2026, 11, 30, 9, 0)  # local, naive: a Monday


@pytest.mark.parametrize(
    ("rule", "said"),
    [
        ("FREQ=WEEKLY;BYDAY=MO", "every Monday at 09:00"),
        ("RRULE:FREQ=WEEKLY;BYDAY=MO", "every Monday at 09:00"),
        ("FREQ=WEEKLY;BYDAY=MO,TU,WE,TH,FR", "every weekday at 09:00"),
        ("FREQ=WEEKLY;BYDAY=SA,SU", "every Saturday and Sunday at 09:00"),
        ("FREQ=WEEKLY;BYDAY=MO,WE,FR", "every Monday, Wednesday and Friday at 09:00"),
        ("FREQ=WEEKLY;BYDAY=MO,TU,WE,TH,SA,SU", "every day except Friday at 09:00"),
        ("FREQ=WEEKLY;BYDAY=MO,TU,WE,TH,FR,SA,SU", "every day at 09:00"),
        ("FREQ=WEEKLY", "every Monday at 09:00"),  # the day of the first occurrence, as RFC 5545 says
        ("FREQ=WEEKLY;INTERVAL=2;BYDAY=TU", "every other Tuesday at 09:00"),
        ("FREQ=WEEKLY;INTERVAL=3;BYDAY=TU", "every 3 weeks on Tuesday at 09:00"),
        ("FREQ=DAILY", "every day at 09:00"),
        ("FREQ=DAILY;INTERVAL=2", "every other day at 09:00"),
        ("FREQ=DAILY;BYHOUR=9,17;BYMINUTE=0", "every day at 09:00 and 17:00"),
        ("FREQ=DAILY;BYDAY=MO,TU,WE,TH,FR;BYHOUR=7;BYMINUTE=30", "every weekday at 07:30"),
        ("FREQ=HOURLY", "every hour on the hour"),
        ("FREQ=HOURLY;INTERVAL=2;BYMINUTE=15", "every other hour at 15 minutes past"),
        ("FREQ=MONTHLY;BYMONTHDAY=3", "every month on the 3rd at 09:00"),
        ("FREQ=MONTHLY;BYMONTHDAY=-1", "every month on the last day at 09:00"),
        ("FREQ=MONTHLY;BYDAY=-1FR", "every month on the last Friday at 09:00"),
        ("FREQ=MONTHLY", "every month on the 30th at 09:00"),
        ("FREQ=YEARLY", "every year on 30 Nov at 09:00"),
        ("FREQ=YEARLY;BYMONTH=3;BYMONTHDAY=3", "every year on 3 Mar at 09:00"),
        ("FREQ=YEARLY;BYMONTH=11;BYDAY=4TH", "every year on the fourth Thursday of November at 09:00"),
        ("FREQ=DAILY;COUNT=5", "every day at 09:00, 5 times"),
        ("FREQ=DAILY;UNTIL=20261231T235959", "every day at 09:00, until Thu 31 Dec"),
    ],
)
def test_a_rule_is_said_in_words(rule: str, said: str) -> None:
    assert words.repetition(rule, MONDAY_9, now=MONDAY_9) == said


@pytest.mark.parametrize(
    "rule",
    ["FREQ=YEARLY;BYWEEKNO=20", "FREQ=MONTHLY;BYSETPOS=-1;BYDAY=MO,TU", "garbage", "", "FREQ=SECONDLY", "X=1\nY=2"],
)
def test_a_rule_the_tables_cannot_say_is_never_shown_raw(rule: str) -> None:
    assert words.repetition(rule, MONDAY_9) == words.UNSAID


@given(st.text(max_size=80))
def test_no_text_makes_the_wording_fail_or_echo_a_rule(rule: str) -> None:
    said = words.repetition(rule, MONDAY_9)
    assert "FREQ" not in said and "BY" not in said


def test_a_moment_is_a_day_and_a_time_in_the_persons_zone() -> None:
    assert words.moment(MONDAY_9, now=MONDAY_9) == "Mon 30 Nov, 09:00"
    aware = datetime(2026, 11, 30, 9, 0, tzinfo=ZoneInfo("UTC"))
    assert words.moment(aware, "Europe/Paris", now=aware) == "Mon 30 Nov, 10:00"
    assert words.moment(aware, ZoneInfo("America/New_York"), now=aware) == "Mon 30 Nov, 04:00"


def test_another_years_moment_says_its_year() -> None:
    assert words.moment(datetime(2027, 1, 4, 9, 0), now=MONDAY_9).endswith("2027, 09:00")
    assert "2026" not in words.moment(datetime(2026, 12, 4, 9, 0), now=MONDAY_9)


def test_a_sentence_says_today_and_tomorrow() -> None:
    assert words.spoken(datetime(2026, 11, 30, 15, 0), now=MONDAY_9) == "today at 15:00"
    assert words.spoken(datetime(2026, 12, 1, 8, 5), now=MONDAY_9) == "tomorrow at 08:05"
    assert words.spoken(datetime(2026, 12, 5, 15, 0), now=MONDAY_9) == "on Sat 5 Dec at 15:00"


def test_an_events_span() -> None:
    assert words.span(datetime(2026, 12, 4, 13), datetime(2026, 12, 4, 14), now=MONDAY_9) == "Fri 4 Dec, 13:00–14:00"
    assert (
        words.span(datetime(2026, 12, 4, 22), datetime(2026, 12, 5, 1), now=MONDAY_9)
        == "Fri 4 Dec, 22:00 – Sat 5 Dec, 01:00"
    )
    assert (
        words.span(date(2026, 12, 4), date(2026, 12, 5), now=MONDAY_9) == "Fri 4 Dec"
    )  # an all-day event: the end is exclusive
    assert words.span(date(2026, 12, 4), date(2026, 12, 7), now=MONDAY_9) == "Fri 4 Dec – Sun 6 Dec"


def test_a_schedule_says_its_repetition_and_its_next_time() -> None:
    due = datetime(2026, 11, 30, 8, 0, tzinfo=ZoneInfo("UTC"))
    assert words.schedule(due, zone="Europe/Paris", now=due) == "Mon 30 Nov, 09:00"
    said = words.schedule(due, "FREQ=WEEKLY;BYDAY=MO", zone="Europe/Paris", now=due)
    assert said == "every Monday at 09:00 (next: Mon 30 Nov, 09:00)"


def test_the_locale_setting_changes_the_formats(settings) -> None:
    settings.PERSON_LOCALE = "en_US"
    assert words.moment(MONDAY_9, now=MONDAY_9) == "Mon, Nov 30, 9:00 AM"
    assert words.repetition("FREQ=WEEKLY;BYDAY=MO", MONDAY_9) == "every Monday at 9:00 AM"


def test_another_years_span_says_its_year() -> None:
    assert words.span(date(2027, 1, 4), date(2027, 1, 6), now=MONDAY_9) == "Mon, 4 Jan – Tue, 5 Jan 2027"
    assert words.span(datetime(2027, 1, 4, 9), datetime(2027, 1, 4, 10), now=MONDAY_9) == "Mon, 4 Jan 2027, 09:00–10:00"


def test_an_unknown_locale_is_reported_at_start_up(settings) -> None:
    from accounts.checks import check_person_locale

    assert check_person_locale() == []
    settings.PERSON_LOCALE = "xx_NOPE"
    [error] = check_person_locale()
    assert error.id == "accounts.E001" and "xx_NOPE" in error.msg


@given(
    st.sampled_from(["HOURLY", "DAILY", "WEEKLY", "MONTHLY", "YEARLY"]),
    st.integers(min_value=1, max_value=12),
    st.sets(st.sampled_from(["MO", "TU", "WE", "TH", "FR", "SA", "SU"]), max_size=7),
    st.one_of(st.none(), st.integers(min_value=1, max_value=20)),
)
def test_every_ordinary_rule_is_said_in_words(frequency: str, interval: int, weekdays: set[str], count) -> None:
    rule = f"FREQ={frequency};INTERVAL={interval}"
    if weekdays and frequency != "YEARLY":
        rule += ";BYDAY=" + ",".join(sorted(weekdays))
    if count is not None:
        rule += f";COUNT={count}"
    said = words.repetition(rule, MONDAY_9, now=MONDAY_9)
    assert said != words.UNSAID and said.startswith("every"), rule
    assert "FREQ" not in said and "=" not in said and ";" not in said
