"""The demo's URLs plus the DRF comparison view at ``/bench/drf/documents``."""

from __future__ import annotations

from django.urls import path

from benchmarks.drf_views import DocumentList
from testproject.urls import urlpatterns as demo_urlpatterns

urlpatterns = [*demo_urlpatterns, path("bench/drf/documents", DocumentList.as_view())]
