"""``manage.py load_demo_data``: users alice and bob with their documents, notes and bookmarks, and a few static
resources."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandParser
from django.db import transaction
from django.utils import timezone

from mcp_resources.models import StaticResource
from testproject.library.models import Bookmark, Document, Note

BOOKMARK_TOPICS = (
    "django",
    "django-oauth-toolkit",
    "django-rest-framework",
    "channels",
    "model-context-protocol",
    "postgresql",
    "python",
    "redis",
)

# A 1x1 transparent PNG.
PNG = bytes.fromhex(
    "89504e470d0a1a0a0000000d4948445200000001000000010806000000"
    "1f15c4890000000d49444154789c6360000002000154a24f5d0000000049454e44ae426082"
)


class Command(BaseCommand):
    help = "Create the demo users (alice, bob), their documents, notes and bookmarks, and the demo static resources."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--alice", type=int, default=120, help="Documents for alice.")
        parser.add_argument("--bob", type=int, default=60, help="Documents for bob.")
        parser.add_argument("--notes", type=int, default=10, help="Notes for each user.")
        parser.add_argument("--bookmarks", type=int, default=len(BOOKMARK_TOPICS), help="Bookmarks for each user.")

    @transaction.atomic
    def handle(self, *args: Any, **options: Any) -> None:
        user_model = get_user_model()
        start = timezone.now() - timedelta(days=365)
        for username, count in (("alice", options["alice"]), ("bob", options["bob"])):
            user, created = user_model.objects.get_or_create(username=username)
            if created:
                user.set_password(username)
                user.save()
            if not Document.objects.filter(owner=user).exists():
                Document.objects.bulk_create(
                    Document(
                        owner=user,
                        title=f"{username.title()}'s document {i + 1}",
                        body=f"This is document {i + 1} of {username}.",
                        created=start + timedelta(hours=i),
                    )
                    for i in range(count)
                )
            if not Note.objects.filter(owner=user).exists():
                Note.objects.bulk_create(
                    Note(owner=user, title=f"Note {i + 1:02d}", text=f"A note of {username}.")
                    for i in range(options["notes"])
                )
            if not Bookmark.objects.filter(owner=user).exists():
                Bookmark.objects.bulk_create(bookmark(user, i) for i in range(options["bookmarks"]))
        StaticResource.objects.update_or_create(
            uri="learn://about",
            defaults={
                "name": "about",
                "title": "About this demo",
                "mime_type": "text/markdown",
                "text": "# django-mcp-resources demo\n\nSign in as alice or bob to list your documents.\n",
            },
        )
        StaticResource.objects.update_or_create(
            uri="learn://logo.png",
            defaults={"name": "logo.png", "title": "Logo", "mime_type": "image/png", "binary": PNG, "text": ""},
        )
        self.stdout.write(self.style.SUCCESS("Demo data loaded: users alice and bob (passwords = usernames)."))


def bookmark(user: Any, index: int) -> Bookmark:
    """The ``index``-th demo bookmark of ``user``: slugs are unique, so each starts with the user's name."""
    topic = BOOKMARK_TOPICS[index % len(BOOKMARK_TOPICS)]
    suffix = f"-{index // len(BOOKMARK_TOPICS) + 1}" if index >= len(BOOKMARK_TOPICS) else ""
    return Bookmark(
        owner=user,
        slug=f"{user.username}-{topic}{suffix}",
        title=f"{topic.replace('-', ' ').title()}{suffix}",
        url=f"https://example.com/{topic}",
    )
