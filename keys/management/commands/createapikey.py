from typing import Any

from django.conf import settings
from django.contrib.auth.tokens import default_token_generator
from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.core.validators import validate_email
from django.db import transaction
from django.utils.encoding import force_bytes
from django.utils.http import urlsafe_base64_encode

from accounts.models import Channel
from accounts.services import get_or_create_user, update_contact
from keys.models import Generation
from keys.scopes import CONSOLE_DEFAULT, Scope, UnknownScope, parse
from keys.services import KeyLimitReached, create_key, key_name_field


def set_password_link(user: Any) -> str:
    """The console's own reset link (Django's token: one use, PASSWORD_RESET_TIMEOUT) at PUBLIC_BASE_URL. The path
    is console/urls.py's password_reset_confirm, written out: identity does not resolve the console's URLs
    (tests/test_commands.py opens the link, so a moved route fails there)."""
    uidb64 = urlsafe_base64_encode(force_bytes(user.pk))
    return f"{settings.PUBLIC_BASE_URL}/reset/{uidb64}/{default_token_generator.make_token(user)}/"


class Command(BaseCommand):
    help = (
        "Create an API key for the user with EMAIL (creating the user if needed) and print the key as the last line. "
        "The key is shown only this once. For an account without a password, also print a one-time link (at "
        "PUBLIC_BASE_URL) that sets one, for the web console."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--email", required=True, help="Owner's email; the user is created if it does not exist.")
        parser.add_argument("--name", required=True, help="A label for the key, such as the automation it is for.")
        parser.add_argument("--generation", choices=["v1", "v2"], default="v2", help="v2 (default) or legacy v1.")
        parser.add_argument(
            "--scopes",
            help=(
                "What a V2 key may do, comma-separated, from: "
                f"{', '.join(Scope.values)} (default: {','.join(s.value for s in Scope if s in CONSOLE_DEFAULT)})."
            ),
        )
        parser.add_argument(
            "--may-read-replies",
            action="store_true",
            help="Adds replies:read: receipts read with this key carry the assistant's reply (off by default).",
        )
        parser.add_argument(
            "--test",
            action="store_true",
            help="A test key: its messages are answered apart from the thread; no tool acts, nothing is texted.",
        )
        parser.add_argument("--phone", help="Set the owner's phone number (E.164, for example +14155551234).")
        parser.add_argument("--channel", choices=Channel.values, help="Set the owner's preferred channel.")

    def handle(self, *args: Any, **options: Any) -> None:
        email = options["email"].strip()
        try:
            validate_email(email)
        except ValidationError:
            raise CommandError(f"{email!r} is not a valid email address.") from None
        try:
            name = key_name_field().clean(options["name"])
        except ValidationError as error:
            raise CommandError(f"--name: {' '.join(error.messages)}") from None
        scopes = None
        if options["scopes"] is not None:
            if options["generation"] == "v1":
                raise CommandError("--scopes is for V2 keys: a V1 key does what V1 keys always did.")
            try:
                scopes = parse(options["scopes"].split(","))
            except UnknownScope as error:
                raise CommandError(f"--scopes: {error}") from None
            if not scopes:
                raise CommandError("--scopes: name at least one scope.")
        with transaction.atomic():
            user, created = get_or_create_user(email)
            if options["phone"] is not None or options["channel"] is not None:
                try:
                    update_contact(user, phone_number=options["phone"], channel=options["channel"])
                except ValidationError as error:
                    raise CommandError("; ".join(error.messages)) from None
            try:
                key, plaintext = create_key(
                    user,
                    name,
                    Generation(options["generation"]),
                    scopes=scopes,
                    may_read_replies=options["may_read_replies"],
                    test_mode=options["test"],
                )
            except KeyLimitReached as full:
                raise CommandError(str(full)) from None
        self.stdout.write(f"{'Created' if created else 'Found'} user {email}.")
        if not user.has_usable_password():
            # On standard error: the Quick start keeps the key (the last line of standard output) with $(… | tail).
            self.stderr.write(
                "It has no password yet. To use the web console, open this link and choose one (it works once, "
                'within an hour; later, use "Forgot your password?" on the log-in page):'
            )
            self.stderr.write(f"  {set_password_link(user)}")
        self.stdout.write(
            f"Created {'test ' * key.test_mode}{key.generation.upper()} key {key.name!r} ({key.hint}) with scopes "
            f"{key.scopes.replace(' ', ',')}. Store it now; it is not shown again:"
        )
        self.stdout.write(plaintext)
