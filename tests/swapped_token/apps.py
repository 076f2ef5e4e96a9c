from __future__ import annotations

from django.apps import AppConfig


class SwappedTokenConfig(AppConfig):
    name = "tests.swapped_token"
    label = "swapped_token"
    default_auto_field = "django.db.models.BigAutoField"
