from __future__ import annotations

from django.apps import AppConfig


class AgreementConfig(AppConfig):
    name = "testproject.agreement"
    label = "agreement"
    default_auto_field = "django.db.models.BigAutoField"
    verbose_name = "Agreement (test models)"
