"""Resource metadata clients use: ``annotations`` (``audience``, ``priority``, ``lastModified``), ``icons``, ``size``.

The shapes are those of the MCP schema: ``Annotations { audience?: ("user" | "assistant")[]; priority?: number
(0 to 1); lastModified?: string (ISO 8601) }``, ``Icon { src: string (an https: or data: URI); mimeType?: string;
sizes?: string[]; theme?: "light" | "dark" }`` and ``size`` (the raw content's bytes). Values are checked where they
are declared (``register_resource``, the admin), so a typo fails at registration, not in a client.
"""

from __future__ import annotations

import datetime
from collections.abc import Mapping, Sequence
from typing import Any

ROLES = ("user", "assistant")
ICON_THEMES = ("light", "dark")
ANNOTATION_KEYS = ("audience", "priority", "lastModified")
ICON_KEYS = ("src", "mimeType", "sizes", "theme")


def last_modified(value: datetime.datetime | datetime.date | str) -> str:
    """``value`` as the ISO 8601 text of ``annotations.lastModified``, in UTC (``2025-01-12T15:00:58Z``).

    A naive datetime counts as UTC, a date as its midnight in UTC; a string must already be ISO 8601 with a time
    zone (``Z`` or an offset), and is returned as given.
    """
    if isinstance(value, str):
        try:
            parsed = datetime.datetime.fromisoformat(value.replace("Z", "+00:00"))
        except ValueError:
            parsed = None
        if parsed is None or parsed.tzinfo is None or "T" not in value:
            raise ValueError(f"lastModified must be an ISO 8601 date and time with a time zone; got {value!r:.100}")
        return value
    if not isinstance(value, datetime.datetime):
        if not isinstance(value, datetime.date):
            raise ValueError(f"lastModified must be a datetime or an ISO 8601 string; got {type(value).__name__}")
        value = datetime.datetime(value.year, value.month, value.day)
    if value.tzinfo is None:
        value = value.replace(tzinfo=datetime.UTC)
    return value.astimezone(datetime.UTC).isoformat().replace("+00:00", "Z")


def check_annotations(value: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """Checked ``annotations`` (``lastModified`` given as a datetime becomes its ISO text); raises ``ValueError``."""
    if value is None:
        return None
    if not isinstance(value, Mapping):
        raise ValueError("annotations must be a mapping")
    unknown = set(value) - set(ANNOTATION_KEYS)
    if unknown:
        raise ValueError(f"annotations may hold {', '.join(ANNOTATION_KEYS)}; not {', '.join(sorted(unknown))}")
    checked: dict[str, Any] = {}
    if "audience" in value:
        audience = value["audience"]
        if isinstance(audience, str) or not isinstance(audience, Sequence) or not set(audience) <= set(ROLES):
            raise ValueError("annotations['audience'] must be a list of 'user' and 'assistant'")
        checked["audience"] = list(dict.fromkeys(audience))
    if "priority" in value:
        priority = value["priority"]
        if isinstance(priority, bool) or not isinstance(priority, int | float) or not 0 <= priority <= 1:
            raise ValueError("annotations['priority'] must be a number from 0 to 1")
        checked["priority"] = priority
    if "lastModified" in value:
        checked["lastModified"] = last_modified(value["lastModified"])
    return checked or None


def check_icons(value: Sequence[Mapping[str, Any]] | None) -> list[dict[str, Any]] | None:
    """Checked ``icons``: each a mapping with an ``https:`` or ``data:`` ``src``; raises ``ValueError``."""
    if value is None:
        return None
    if isinstance(value, str | Mapping) or not isinstance(value, Sequence):
        raise ValueError("icons must be a list of mappings")
    checked = []
    for icon in value:
        if not isinstance(icon, Mapping):
            raise ValueError("each icon must be a mapping")
        unknown = set(icon) - set(ICON_KEYS)
        if unknown:
            raise ValueError(f"an icon may hold {', '.join(ICON_KEYS)}; not {', '.join(sorted(unknown))}")
        src = icon.get("src")
        if not isinstance(src, str) or not (src.startswith("https://") or src.startswith("data:")):
            raise ValueError("an icon's src must be an https: URL or a data: URI")
        if "mimeType" in icon and not isinstance(icon["mimeType"], str):
            raise ValueError("an icon's mimeType must be a string")
        sizes = icon.get("sizes")
        if sizes is not None and (isinstance(sizes, str) or not all(isinstance(s, str) for s in sizes)):
            raise ValueError("an icon's sizes must be a list of strings, such as ['48x48']")
        if "theme" in icon and icon["theme"] not in ICON_THEMES:
            raise ValueError("an icon's theme must be 'light' or 'dark'")
        checked.append(dict(icon) if sizes is None else {**icon, "sizes": list(sizes)})
    return checked or None


def check_size(value: Any) -> int | None:
    """A checked ``size`` (bytes of the raw content): ``None`` or an integer of at least 0."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"size must be a number of bytes (an integer of at least 0); got {value!r:.100}")
    return value
