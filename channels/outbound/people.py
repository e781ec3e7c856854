"""A person's own choices about their phone: their quiet hours."""

from datetime import time

from django.contrib.auth.models import User

from channels.models import QuietHours


def quiet_hours_of(person: User) -> QuietHours | None:
    return QuietHours.objects.filter(person=person).first()


def set_quiet_hours(person: User, starts: time | None, ends: time | None) -> QuietHours | None:
    """Set (or, with no times, remove) the person's quiet hours. Texts already waiting keep their due time until the
    worker reads the new hours before sending."""
    if starts is None or ends is None:
        QuietHours.objects.filter(person=person).delete()
        return None
    hours, _ = QuietHours.objects.update_or_create(person=person, defaults={"starts": starts, "ends": ends})
    return hours
