"""The demo's handbook: Markdown files shipped in ``handbook/``, paged like an object store's listing API.

:class:`DirectoryPager` stands for the external system a repository wraps: it answers batches of file entries and
an opaque continuation token of its own (bytes: a version, the listing's generation, the last name returned). It
refuses a token of another generation, as a store refuses a continuation token once the listing has changed: the
repository then answers the client's cursor as invalid and the client lists again.
"""

from __future__ import annotations

import bisect
import datetime
import hashlib
from dataclasses import dataclass
from pathlib import Path

HANDBOOK_DIR = Path(__file__).resolve().parent / "handbook"

_VERSION = b"\x01"


class ExpiredToken(Exception):
    """The pager does not accept this continuation token (another generation of the listing, or not its own)."""


@dataclass(frozen=True)
class FileEntry:
    name: str
    size: int
    modified: datetime.datetime


class DirectoryPager:
    """Pages the ``*.md`` files of ``root`` in name order, at most ``batch_size`` a batch."""

    def __init__(self, root: Path = HANDBOOK_DIR, batch_size: int = 5) -> None:
        self.root = root
        self.batch_size = batch_size

    def names(self) -> list[str]:
        return sorted(path.name for path in self.root.glob("*.md") if path.is_file())

    def generation(self, names: list[str]) -> bytes:
        """8 bytes that change whenever a file is added, removed or modified."""
        digest = hashlib.sha256()
        for name in names:
            stat = (self.root / name).stat()
            digest.update(f"{name}\x00{stat.st_mtime_ns}\x00{stat.st_size}\x00".encode())
        return digest.digest()[:8]

    def page(self, token: bytes | None, max_results: int) -> tuple[list[FileEntry], bytes | None]:
        """One batch after ``token`` (``None``: the first) and the token of the next (``None``: no more)."""
        names = self.names()
        generation = self.generation(names)
        start = 0
        if token is not None:
            if not (isinstance(token, bytes) and token[:1] == _VERSION and token[1:9] == generation):
                raise ExpiredToken("the listing changed since this token was issued")
            start = bisect.bisect_right(names, token[9:].decode("utf-8", "replace"))
        batch = names[start : start + max(1, min(max_results, self.batch_size))]
        entries = [self.entry(name) for name in batch]
        more = start + len(batch) < len(names)
        return entries, (_VERSION + generation + batch[-1].encode()) if more and batch else None

    def entry(self, name: str) -> FileEntry:
        stat = (self.root / name).stat()
        return FileEntry(name, stat.st_size, datetime.datetime.fromtimestamp(stat.st_mtime, tz=datetime.UTC))

    def read(self, name: str) -> bytes | None:
        """The content of the file ``name`` when the listing holds it (never a path outside ``root``)."""
        if name not in self.names():
            return None
        return (self.root / name).read_bytes()
