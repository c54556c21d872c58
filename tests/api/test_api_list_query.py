"""Filters of ``GET /api/runs`` given empty are refused as the OpenAPI document says."""

from __future__ import annotations

import pytest
from api_harness import Api, api, env, workflows  # noqa: F401


@pytest.mark.parametrize("name", ["tag", "workflowId", "cursor"])
def test_an_empty_filter_is_a_400_not_no_filter(api: Api, name: str) -> None:  # noqa: F811
    answer = api.get("/api/runs", query={name: ""})
    assert answer.status == 400
    assert answer.body["error"] in {"invalid_query", "invalid_request", "validation_error"}
