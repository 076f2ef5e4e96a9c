"""Benchmarks for django-mcp-resources (``make benchmarks``); not part of the test suite."""
