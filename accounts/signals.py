from typing import Any

from django.conf import settings
from django.db.models.signals import post_save
from django.dispatch import receiver

from accounts.models import Profile


@receiver(post_save, sender=settings.AUTH_USER_MODEL)
def give_every_user_a_profile(sender: Any, instance: Any, created: bool, **kwargs: Any) -> None:
    # Users come from sign-up, the admin, createsuperuser and createapikey; all of them need a profile.
    if created:
        Profile.objects.get_or_create(user=instance)
