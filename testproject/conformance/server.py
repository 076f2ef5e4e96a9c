"""The conformance profile's server: :class:`~mcp_resources.MCPServer` and one fixture of the suite.

The suite's ``completion-complete`` scenario completes an argument of the prompt ``test_prompt_with_arguments``
(``ref/prompt``), the only reference it sends, and accepts any ``completion`` object ("completion support can be
minimal or return empty arrays"). This server has no prompts, and ``MCPServer.complete_prompt`` answers every
prompt reference ``-32602``, as the spec names for an unknown prompt; the profile knows this one fixture name and
completes nothing for it, as the ``test://`` resources are fixtures of the other scenarios.
"""

from __future__ import annotations

from typing import Any

from mcp_resources.listing.completion import CompletionRequest
from mcp_resources.server import CallContext, MCPServer

FIXTURE_PROMPT = "test_prompt_with_arguments"


class ConformanceServer(MCPServer):
    def complete_prompt(self, wanted: CompletionRequest, ctx: CallContext) -> dict[str, Any]:
        if wanted.prompt == FIXTURE_PROMPT:
            return {"values": [], "total": 0, "hasMore": False}
        return super().complete_prompt(wanted, ctx)


conformance_server = ConformanceServer()
