"""Fixtures of the API tests (defined in api_harness)."""

from api_harness import api, env, workflows

__all__ = ["api", "env", "workflows"]
