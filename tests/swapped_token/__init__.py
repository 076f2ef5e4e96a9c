"""A project's own access token model (``OAUTH2_PROVIDER_ACCESS_TOKEN_MODEL``) whose default manager leaves out
soft-revoked tokens, for ``tests/test_token_loading.py`` (settings: ``tests.settings_swapped_token``)."""
