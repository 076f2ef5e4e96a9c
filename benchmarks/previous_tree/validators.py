"""A validator class that changes nothing: the previous tree then validates tokens with django-oauth-toolkit."""

from __future__ import annotations

from oauth2_provider.oauth2_validators import OAuth2Validator


class PlainValidator(OAuth2Validator):
    pass
