"""The comparison point for listing throughput: Django REST framework's ``ListAPIView`` with
``CursorPagination`` over the same model, scoping, ordering and page size as the demo's ``documents`` template,
authenticated with the same django-oauth-toolkit bearer tokens and the same scope."""

from __future__ import annotations

from typing import Any

from django.db.models import QuerySet
from oauth2_provider.contrib.rest_framework import OAuth2Authentication, TokenHasScope
from rest_framework import generics, serializers
from rest_framework.pagination import CursorPagination

from mcp_resources.conf import mcp_settings
from testproject.library.models import Document


class DocumentPagination(CursorPagination):
    ordering = ("created", "id")

    def get_page_size(self, request: Any) -> int:
        return mcp_settings.page_size


class DocumentSerializer(serializers.Serializer):
    uri = serializers.SerializerMethodField()
    name = serializers.CharField(source="title")
    mimeType = serializers.SerializerMethodField()

    def get_uri(self, obj: Document) -> str:
        return f"learn://documents/{obj.pk}"

    def get_mimeType(self, obj: Document) -> str:
        return "text/plain"


class DocumentList(generics.ListAPIView):
    authentication_classes = [OAuth2Authentication]
    permission_classes = [TokenHasScope]
    required_scopes = ["documents:read"]
    serializer_class = DocumentSerializer
    pagination_class = DocumentPagination

    def get_queryset(self) -> QuerySet[Document]:
        return Document.objects.filter(owner_id=self.request.user.pk, deleted_at__isnull=True)
