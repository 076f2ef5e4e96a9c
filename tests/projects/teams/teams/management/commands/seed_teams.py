"""``manage.py seed_teams``: three users, two organisations, projects with and without members, tickets and binary
attachments. Prints what it made as JSON (the tests read it)."""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand
from django.utils import timezone

from teams.models import Attachment, Organisation, Project, Ticket

# A binary payload that survives no text decoding: every byte value, and a NUL-led tail.
PAYLOAD = bytes(range(256)) + b"\x00\xff\xfe binary tail"


class Command(BaseCommand):
    help = "Seed users ann, ben and cat (passwords as their names), organisations, projects, tickets, attachments."

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("--tickets", type=int, default=3, help="tickets in the shared project (default 3)")

    def handle(self, *args: Any, tickets: int, **options: Any) -> None:
        users = {name: get_user_model().objects.create_user(name, password=name) for name in ("ann", "ben", "cat")}
        acme = Organisation.objects.create(slug="acme", name="Acme")
        acme.members.add(users["ann"], users["ben"])
        globex = Organisation.objects.create(slug="globex", name="Globex")
        globex.members.add(users["cat"])
        rocket = Project.objects.create(organisation=acme, name="rocket")
        rocket.members.add(users["ann"], users["ben"])
        secret = Project.objects.create(organisation=acme, name="secret")
        secret.members.add(users["ann"])
        portal = Project.objects.create(organisation=globex, name="portal")
        portal.members.add(users["cat"])
        orphan = Project.objects.create(organisation=globex, name="orphan")  # no members: nobody sees it
        start = timezone.now() - timedelta(days=1)
        made: dict[str, Any] = {"projects": {}, "tickets": {}, "attachments": {}}
        for project, count in ((rocket, tickets), (secret, 2), (portal, 2), (orphan, 1)):
            made["projects"][project.name] = project.pk
            rows = Ticket.objects.bulk_create(
                Ticket(
                    project=project,
                    title=f"{project.name} #{i}",
                    body=f"Ticket {i} of {project.name}.",
                    created=start + timedelta(seconds=i),
                )
                for i in range(count)
            )
            made["tickets"][project.name] = [row.pk for row in rows]
            attachment = Attachment.objects.create(
                ticket=rows[0], filename=f"{project.name}.bin", content_type="application/octet-stream", data=PAYLOAD
            )
            made["attachments"][project.name] = attachment.pk
        self.stdout.write(json.dumps(made))
