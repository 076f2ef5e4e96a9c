"""The benchmarks as a Django app of the benchmark settings: applies the ablation's switches once apps are ready."""

from __future__ import annotations

from django.apps import AppConfig


class BenchmarksConfig(AppConfig):
    name = "benchmarks"
    label = "mcp_benchmarks"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from benchmarks.ablation import apply_from_env

        apply_from_env()
