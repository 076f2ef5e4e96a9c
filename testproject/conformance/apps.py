from __future__ import annotations

from django.apps import AppConfig


class ConformanceConfig(AppConfig):
    name = "testproject.conformance"
    label = "conformance"
