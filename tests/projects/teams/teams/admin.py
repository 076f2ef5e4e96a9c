from __future__ import annotations

from django.contrib import admin

from teams.models import Attachment, Organisation, Project, Ticket

admin.site.register([Organisation, Project, Ticket, Attachment])
