from __future__ import annotations

from django.contrib import admin

from testproject.library.models import Document


@admin.register(Document)
class DocumentAdmin(admin.ModelAdmin):  # type: ignore[type-arg,unused-ignore]
    list_display = ["title", "owner", "created"]
    list_filter = ["owner"]
