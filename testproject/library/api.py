"""The demo's REST API: the signed-in user's bookmarks, a REST framework viewset at ``/api/bookmarks/``.

The same viewset is served as MCP resources (``learn://bookmarks/{slug}``, declared with
:func:`mcp_resources.drf.from_viewset` in ``mcp_resources.py``): one queryset, one serializer, one lookup and one
set of permissions for both. The REST API authenticates with django-oauth-toolkit's bearer tokens (bound, like the
MCP endpoint's, to their resource: ``http://<host>/api/``); the MCP endpoint authenticates its own callers.
"""

from __future__ import annotations

from django.db.models import QuerySet
from oauth2_provider.contrib.rest_framework import OAuth2Authentication, TokenHasScope
from rest_framework import permissions, serializers, viewsets
from rest_framework.routers import DefaultRouter

from testproject.library.models import Bookmark


class BookmarkSerializer(serializers.ModelSerializer[Bookmark]):
    class Meta:
        model = Bookmark
        fields = ["id", "slug", "title", "url", "created"]


class BookmarkViewSet(viewsets.ReadOnlyModelViewSet[Bookmark]):
    """The caller's bookmarks, looked up by slug; a token with the ``documents:read`` scope is required."""

    authentication_classes = [OAuth2Authentication]
    permission_classes = [permissions.IsAuthenticated, TokenHasScope]
    required_scopes = ["documents:read"]
    serializer_class = BookmarkSerializer
    lookup_field = "slug"

    def get_queryset(self) -> QuerySet[Bookmark]:
        return Bookmark.objects.filter(owner_id=self.request.user.pk).order_by("slug")


router = DefaultRouter()
router.register("bookmarks", BookmarkViewSet, basename="bookmark")
