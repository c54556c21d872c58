"""The client's error answer is ``ApiRequestError``; ``ApiError`` there is a deprecated alias."""

from __future__ import annotations

import pytest

import relayflow.cli
from relayflow.api.errors import ApiError as ServerApiError
from relayflow.cli import client


@pytest.mark.parametrize("module", [client, relayflow.cli], ids=["client", "cli"])
def test_the_old_client_name_warns_and_is_the_renamed_class(module: object) -> None:
    with pytest.warns(DeprecationWarning, match="ApiRequestError"):
        alias = module.ApiError  # type: ignore[attr-defined]
    assert alias is client.ApiRequestError
    assert alias is not ServerApiError


def test_the_client_and_server_errors_have_distinct_names() -> None:
    assert client.ApiRequestError.__name__ != ServerApiError.__name__
    with pytest.raises(AttributeError):
        _ = client.NoSuchName  # type: ignore[attr-defined]
