"""The previous tree's own benchmark settings (its demo on the benchmark database), with the switches of
``MCP_BENCH_REMOVED_OFF`` that are settings: ``token-lookup`` and ``prepared-statements``."""

from __future__ import annotations

from previous_tree import switched_off

from benchmarks.settings import *  # noqa: F403 - the previous tree's benchmarks package
from benchmarks.settings import MCP_RESOURCES as _MCP_RESOURCES
from benchmarks.settings import OAUTH2_PROVIDER as _OAUTH2_PROVIDER

# A benchmark seals its cursor once, before rounds that can last longer than the default 15 minutes.
MCP_RESOURCES = {**_MCP_RESOURCES, "CURSOR_TTL_SECONDS": 6 * 3600}
OAUTH2_PROVIDER = dict(_OAUTH2_PROVIDER)

if "token-lookup" in switched_off():
    # Any validator class but django-oauth-toolkit's own makes tokenlookup.fast_path_available() false.
    OAUTH2_PROVIDER["OAUTH2_VALIDATOR_CLASS"] = "previous_tree.validators.PlainValidator"
if "prepared-statements" in switched_off():
    MCP_RESOURCES["PREPARED_STATEMENTS"] = False
