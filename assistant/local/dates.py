"""Dates and times as people say them, read without a library: spoken numbers ("six thirty am", "half past six",
"the thirteenth", "a quarter to nine"), a day ("today", "tomorrow", "next friday", "the 5th", "december 3",
"3rd of december") and a clock ("17:00", "5pm", "noon", "0500 hrs"), in any order, or a span from now ("in half an
hour", "in 2 hours and 15 minutes"). It reads in microseconds what dateparser reads in milliseconds, and reads
spoken forms dateparser misreads ("this afternoon at five", "at noon on the 13th"); times.py falls back on
dateparser for what it does not know. bench/understanding.py counts how often that happens.

``read`` answers as dateparser does: the moment and its precision ("time" when a clock time was said, "day" when
only a day), or None when the phrase is not one it knows. A bare hour ("at 9") is already resolved by times.py."""

import re
from datetime import datetime, timedelta

_UNITS = {
    "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8, "nine": 9, "ten": 10,
    "eleven": 11, "twelve": 12, "thirteen": 13, "fourteen": 14, "fifteen": 15, "sixteen": 16, "seventeen": 17,
    "eighteen": 18, "nineteen": 19,
}  # fmt: skip
_TENS = {"twenty": 20, "thirty": 30, "forty": 40, "fifty": 50}
_ORDINALS = {
    "first": 1, "second": 2, "third": 3, "fourth": 4, "fifth": 5, "sixth": 6, "seventh": 7, "eighth": 8, "ninth": 9,
    "tenth": 10, "eleventh": 11, "twelfth": 12, "thirteenth": 13, "fourteenth": 14, "fifteenth": 15, "sixteenth": 16,
    "seventeenth": 17, "eighteenth": 18, "nineteenth": 19, "twentieth": 20, "thirtieth": 30,
}  # fmt: skip
_TENS_ORDINAL = re.compile(r"\b(twenty|thirty)[- ](first|second|third|fourth|fifth|sixth|seventh|eighth|ninth)\b")
_COMPOUND = re.compile(r"\b(twenty|thirty|forty|fifty)[- ](one|two|three|four|five|six|seven|eight|nine)\b")
_WORD = re.compile(r"\b(?:" + "|".join([*_UNITS, *_TENS, *_ORDINALS]) + r")\b")
_MONTHS = {
    "jan": 1, "feb": 2, "mar": 3, "apr": 4, "may": 5, "jun": 6, "jul": 7, "aug": 8, "sep": 9, "oct": 10, "nov": 11,
    "dec": 12,
}  # fmt: skip
_WEEKDAYS = {"mon": 0, "tue": 1, "wed": 2, "thu": 3, "fri": 4, "sat": 5, "sun": 6}


def digits(phrase: str) -> str:
    """Spoken numbers as digits, and spoken clock times as clock times: "six thirty am" → "6:30 am", "half past six"
    → "6:30", "a quarter to nine" → "8:45", "the thirteenth" → "the 13th", "0500 hrs" → "05:00"."""
    phrase = _TENS_ORDINAL.sub(lambda m: f"{_TENS[m[1]] + _ORDINALS[m[2]]}th", phrase)
    phrase = _COMPOUND.sub(lambda m: str(_TENS[m[1]] + _UNITS[m[2]]), phrase)
    phrase = _WORD.sub(_number, phrase)
    phrase = re.sub(r"\b(?:a )?half past (\d{1,2})\b", r"\1:30", phrase)
    phrase = re.sub(r"\b(?:a )?quarter past (\d{1,2})\b", r"\1:15", phrase)
    phrase = re.sub(r"\b(?:a )?quarter (?:to|of) (\d{1,2})\b", lambda m: f"{(int(m[1]) - 1) % 24 or 12}:45", phrase)
    phrase = re.sub(r"\b(\d{1,2}) (?:o )?([0-5]\d)\b(?!\s*(?:minutes?|mins?|hours?|hrs?|days?|weeks?|months?|years?))",
                    r"\1:\2", phrase)  # fmt: skip
    phrase = re.sub(r"\b([01]\d|2[0-3])([0-5]\d) ?(?:hrs|hours|h)\b", r"\1:\2", phrase)
    phrase = re.sub(r"\b(\d{1,2})(?::(\d\d))? ?([ap])\.? ?m\b\.?", lambda m: f"{m[1]}:{m[2] or '00'}{m[3]}m", phrase)
    return phrase


def _number(match: re.Match[str]) -> str:
    word = match[0]
    if word in _ORDINALS:
        return f"{_ORDINALS[word]}th"
    return str(_UNITS.get(word) or _TENS[word])


# --- reading -----------------------------------------------------------------------------------------------------

_SPAN = re.compile(r"^(?:in|after|within) (.+?)(?: from now)?$|^(.+?) from now$")
_AMOUNT = re.compile(r"(\d{1,4}|an?|half an?) (minutes?|mins?|hours?|hrs?|days?|weeks?)")
_CLOCK = re.compile(r"\b(\d{1,2})(?::(\d\d))?([ap]m)\b|\b(\d{1,2}):(\d\d)\b|\b(noon|midday|midnight)\b")
_DAY_PARTS = r"(?:in the |this |at )?(?:morning|afternoon|evening|night)"
_FILLER = re.compile(rf"\b(?:at|on|by|for|of|the|to|{_DAY_PARTS})\b|,")


def read(phrase: str, now: datetime) -> tuple[datetime, str] | None:
    """(moment, "time" or "day") for a phrase of a day and a clock, or a span from now; None: not one it knows."""
    phrase = phrase.strip()
    span = _SPAN.match(phrase)
    if span is not None:
        return _after(span[1] or span[2], now)
    clock = _CLOCK.search(phrase)
    at = _clock(clock) if clock is not None else None
    rest = phrase if clock is None else phrase[: clock.start()] + " " + phrase[clock.end() :]
    day = _day(_FILLER.sub(" ", rest).split(), now)
    if day is None or (at is None and day is _NO_DAY):
        return None
    if at is None:
        return day, "day"
    if day is _NO_DAY:
        moment = now.replace(hour=at[0], minute=at[1], second=0, microsecond=0)
        return (moment if moment > now else moment + timedelta(days=1)), "time"
    return day.replace(hour=at[0], minute=at[1]), "time"


def _after(amount: str, now: datetime) -> tuple[datetime, str] | None:
    total, unit_seen = timedelta(), ""
    rest = _AMOUNT.sub(" ", amount)
    if rest.replace("and", "").strip(" ,"):
        return None
    for count, unit in _AMOUNT.findall(amount):
        number = 0.5 if count.startswith("half") else 1 if count in ("a", "an") else int(count)
        unit_seen = unit[0]
        total += {"m": timedelta(minutes=number), "h": timedelta(hours=number), "d": timedelta(days=number)}.get(
            unit[0], timedelta(weeks=number)
        )
    if not unit_seen:
        return None
    return now + total, ("time" if unit_seen in "mh" else "day")


def _clock(match: re.Match[str]) -> tuple[int, int] | None:
    if match[6]:
        return (0, 0) if match[6] == "midnight" else (12, 0)
    if match[3]:
        hour, minute = int(match[1]), int(match[2] or 0)
        if not 1 <= hour <= 12:
            return None
        return (hour % 12 + (12 if match[3] == "pm" else 0), minute) if minute < 60 else None
    hour, minute = int(match[4]), int(match[5])
    return (hour, minute) if hour < 24 and minute < 60 else None


_NO_DAY = datetime.min  # the phrase names no day: the clock's next occurrence


def _day(words: list[str], now: datetime) -> datetime | None:
    """The day the remaining words name (midnight), _NO_DAY when they name none, None when they are not a day."""
    midnight = now.replace(hour=0, minute=0, second=0, microsecond=0)
    said = " ".join(words)
    if not said:
        return _NO_DAY
    relative = {"today": 0, "tonight": 0, "tomorrow": 1, "day after tomorrow": 2}.get(said)
    if relative is not None:
        return midnight + timedelta(days=relative)
    weekday = re.fullmatch(r"(?:this |next |coming |this coming )?([a-z]{3})[a-z]*", said)
    if weekday is not None and weekday[1] in _WEEKDAYS and _is_weekday(said.split()[-1]):
        ahead = (_WEEKDAYS[weekday[1]] - now.weekday()) % 7 or 7
        return midnight + timedelta(days=ahead)
    return _calendar_day(said, midnight)


def _is_weekday(word: str) -> bool:
    return bool(re.fullmatch(r"(?:mon|tues?|wed(?:nes)?|thu(?:rs?)?|fri|sat(?:ur)?|sun)(?:day)?", word))


def _calendar_day(said: str, midnight: datetime) -> datetime | None:
    """ "5th", "december 3", "3rd december", "dec 3": this month's or this year's, else the next one's."""
    found = re.fullmatch(r"(\d{1,2})(?:st|nd|rd|th)?(?: ([a-z]{3})[a-z]*)?|([a-z]{3})[a-z]* (\d{1,2})(?:st|nd|rd|th)?",
                         said)  # fmt: skip
    if found is None:
        return None
    number, month_name = (int(found[1]), found[2]) if found[1] else (int(found[4]), found[3])
    if month_name is not None and month_name not in _MONTHS:
        return None
    if month_name is None:
        if not (found[1] and re.search(r"(?:st|nd|rd|th)$", said)):
            return None  # "5" alone is no day
        return _next_month_day(midnight, number)
    return _next_date(midnight, _MONTHS[month_name], number)


def _next_month_day(midnight: datetime, number: int) -> datetime | None:
    for months_ahead in range(3):
        month_index = midnight.month - 1 + months_ahead
        year, month = midnight.year + month_index // 12, month_index % 12 + 1
        try:
            candidate = midnight.replace(year=year, month=month, day=number)
        except ValueError:
            continue
        if candidate >= midnight:
            return candidate
    return None


def _next_date(midnight: datetime, month: int, number: int) -> datetime | None:
    for year in (midnight.year, midnight.year + 1):
        try:
            candidate = midnight.replace(year=year, month=month, day=number)
        except ValueError:
            return None
        if candidate >= midnight:
            return candidate
    return None
