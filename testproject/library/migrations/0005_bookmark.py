"""Bookmarks, and their owner's slug index in byte order.

The index is ``(owner_id, slug COLLATE "C")`` on PostgreSQL, where the listing's keyset and the completion of
``{slug}`` compare slugs under ``COLLATE "C"``: an index in the database's own collation could serve neither as an
index range. SQLite has no ``"C"`` collation: its default, ``BINARY``, already compares bytes, so the index there is
``(owner_id, slug)``. Model ``Meta.indexes`` cannot say "COLLATE on PostgreSQL only", hence ``RunPython``.
"""

import django.db.models.deletion
import django.utils.timezone
from django.conf import settings
from django.db import migrations, models
from django.db.models import F
from django.db.models.functions import Collate

INDEX_NAME = "library_bookmark_owner_slug"


def owner_slug_index(vendor: str) -> models.Index:
    if vendor == "postgresql":
        return models.Index(F("owner"), Collate(F("slug"), "C"), name=INDEX_NAME)
    return models.Index(fields=["owner", "slug"], name=INDEX_NAME)


def add_index(apps, schema_editor):
    bookmark = apps.get_model("library", "Bookmark")
    schema_editor.add_index(bookmark, owner_slug_index(schema_editor.connection.vendor))


def remove_index(apps, schema_editor):
    bookmark = apps.get_model("library", "Bookmark")
    schema_editor.remove_index(bookmark, owner_slug_index(schema_editor.connection.vendor))


class Migration(migrations.Migration):

    dependencies = [
        ("library", "0004_shared_projects"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.CreateModel(
            name="Bookmark",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                ("slug", models.SlugField(max_length=100, unique=True)),
                ("title", models.CharField(max_length=200)),
                ("url", models.URLField()),
                ("created", models.DateTimeField(default=django.utils.timezone.now)),
                (
                    "owner",
                    models.ForeignKey(
                        db_index=False,
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="bookmarks",
                        to=settings.AUTH_USER_MODEL,
                    ),
                ),
            ],
        ),
        migrations.RunPython(add_index, remove_index),
    ]
