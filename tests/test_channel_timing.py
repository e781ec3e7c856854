"""When and where a message to a phone goes: quiet hours in the person's time zone, WhatsApp's 24-hour window."""

from datetime import UTC, datetime, time, timedelta

from channels.outbound.quiet import quiet_until
from channels.outbound.window import Route, choose_route, free_text_allowed

NIGHT = (time(22, 0), time(7, 0))


def at(text: str) -> datetime:
    return datetime.fromisoformat(text).astimezone(UTC)


def test_inside_a_night_that_crosses_midnight_the_send_waits_for_its_end_in_the_persons_zone():
    assert quiet_until(at("2026-11-25T23:30:00+01:00"), "Europe/Paris", *NIGHT) == at("2026-11-26T07:00:00+01:00")
    assert quiet_until(at("2026-11-26T05:59:00+01:00"), "Europe/Paris", *NIGHT) == at("2026-11-26T07:00:00+01:00")


def test_outside_quiet_hours_or_without_them_nothing_waits():
    assert quiet_until(at("2026-11-25T12:00:00+01:00"), "Europe/Paris", *NIGHT) is None
    assert quiet_until(at("2026-11-25T07:00:00+01:00"), "Europe/Paris", *NIGHT) is None
    assert quiet_until(at("2026-11-25T23:30:00+01:00"), "Europe/Paris", None, None) is None
    assert quiet_until(at("2026-11-25T23:30:00+01:00"), "Europe/Paris", time(9), time(9)) is None


def test_the_same_instant_is_quiet_for_one_person_and_not_for_another():
    now = at("2026-11-25T22:30:00+00:00")
    assert quiet_until(now, "Europe/London", *NIGHT) is not None
    assert quiet_until(now, "America/New_York", *NIGHT) is None  # 17:30 there


def test_a_span_within_one_day():
    lunch = (time(12, 0), time(13, 30))
    assert quiet_until(at("2026-11-25T12:10:00-05:00"), "America/New_York", *lunch) == at("2026-11-25T13:30:00-05:00")
    assert quiet_until(at("2026-11-25T13:30:00-05:00"), "America/New_York", *lunch) is None


def test_the_night_the_clocks_go_forward_ends_at_the_wall_clock_time():
    # Europe/Paris, 2026-03-29: 02:00 becomes 03:00. Quiet 01:00 to 02:30 (which does not exist that night).
    end = quiet_until(at("2026-03-29T01:30:00+01:00"), "Europe/Paris", time(1), time(2, 30))
    assert end == at("2026-03-29T03:30:00+02:00")


def test_an_unknown_zone_is_read_as_utc():
    assert quiet_until(at("2026-11-25T23:00:00+00:00"), "Mars/Olympus", *NIGHT) == at("2026-11-26T07:00:00+00:00")


NOW = at("2026-11-25T12:00:00+00:00")
SMS = Route("sms", "+14155551234", None)
WHATSAPP_RECENT = Route("whatsapp", "+14155551234", NOW - timedelta(hours=2))
WHATSAPP_OLD = Route("whatsapp", "+14155551234", NOW - timedelta(hours=25))
TELEGRAM = Route("telegram", "4242", NOW - timedelta(days=3))


def test_whatsapp_free_text_only_within_24_hours_of_the_persons_last_message():
    assert free_text_allowed(WHATSAPP_RECENT, NOW)
    assert not free_text_allowed(WHATSAPP_OLD, NOW)
    assert not free_text_allowed(Route("whatsapp", "+1", None), NOW)
    assert free_text_allowed(TELEGRAM, NOW) and free_text_allowed(SMS, NOW)


def test_the_channel_last_written_from_wins_while_it_allows_free_text():
    assert choose_route([SMS, WHATSAPP_RECENT, TELEGRAM], "sms", NOW) == WHATSAPP_RECENT
    assert choose_route([SMS, TELEGRAM], "sms", NOW) == TELEGRAM


def test_a_closed_window_falls_back_to_the_preferred_channel():
    assert choose_route([SMS, WHATSAPP_OLD], "sms", NOW) == SMS


def test_only_a_closed_whatsapp_window_is_still_chosen_to_be_held_or_templated():
    assert choose_route([WHATSAPP_OLD], "whatsapp", NOW) == WHATSAPP_OLD


def test_nothing_linked_means_the_thread_only():
    assert choose_route([], "sms", NOW) is None
