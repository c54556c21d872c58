"""The CLI says what to do when it cannot talk to the API: one line on stderr, no traceback."""

from __future__ import annotations

import io
import socket

import pytest
from cli_fake_api import FakeApi

from relayflow.cli import main
from relayflow.cli.client import ApiClient, ApiRequestError, api_base_url
from relayflow.cli.values import UsageError


def _run(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    status = main(list(argv), stdout=out, stderr=err)
    return status, out.getvalue(), err.getvalue()


def _closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def test_no_api_listening_says_to_start_relayflow_dev() -> None:
    url = f"http://127.0.0.1:{_closed_port()}"
    status, out, err = _run("--url", url, "runs", "list")
    assert status == 1 and out == ""
    assert err == (
        f"relayflow: no relayflow API at {url}: is `relayflow dev` running? (set RELAYFLOW_URL)\n"
    )


def test_a_write_to_no_api_is_retried_then_says_the_same() -> None:
    url = f"http://127.0.0.1:{_closed_port()}"
    delays: list[float] = []
    with pytest.raises(ApiRequestError) as caught:
        ApiClient(url=url, sleep=delays.append).signal("run-1", "go")
    assert delays == [1.0, 2.0]
    assert caught.value.status == 0 and caught.value.code == "unreachable"
    assert caught.value.message == (
        f"no relayflow API at {url}: is `relayflow dev` running? (set RELAYFLOW_URL)"
    )


def test_a_missing_token_says_where_the_token_comes_from(fake_api: FakeApi) -> None:
    fake_api.on(
        "GET",
        "/api/runs",
        (401, {"error": "unauthorized", "message": "missing Authorization header"}),
    )
    status, _, err = _run("--url", fake_api.url, "runs", "list")
    assert status == 1
    assert err.count("\n") == 1
    assert err.startswith("error (401): unauthorized: missing Authorization header; ")
    assert "--token or RELAYFLOW_TOKEN" in err
    assert "`relayflow dev` prints its token" in err and ".relayflow/dev.json" in err


def test_a_refused_token_gets_the_same_hint(fake_api: FakeApi) -> None:
    fake_api.on("GET", "/api/runs", (401, {"error": "unauthorized", "message": "unknown token"}))
    status, _, err = _run("--url", fake_api.url, "--token", "stale", "runs", "list")
    assert status == 1 and "RELAYFLOW_TOKEN" in err


def test_a_url_without_a_scheme_is_completed(fake_api: FakeApi) -> None:
    fake_api.on("GET", "/api/runs", (200, {"runs": [], "nextCursor": None}))
    address = fake_api.url.removeprefix("http://")
    status, _, err = _run("--url", address, "--token", "t", "runs", "list")
    assert (status, err) == (0, "")
    assert len(fake_api.requests) == 1


@pytest.mark.parametrize(
    ("given", "used"),
    [
        ("localhost:8000", "http://localhost:8000"),
        ("127.0.0.1:8787/", "http://127.0.0.1:8787"),
        ("[::1]:8787", "http://[::1]:8787"),
        (
            "abc.execute-api.eu-west-1.amazonaws.com",
            "https://abc.execute-api.eu-west-1.amazonaws.com",
        ),
        ("HTTPS://api.example.com/prod", "HTTPS://api.example.com/prod"),
        ("http://127.0.0.1:8787", "http://127.0.0.1:8787"),
    ],
)
def test_api_base_url_completes_the_scheme(given: str, used: str) -> None:
    assert api_base_url(given) == used


@pytest.mark.parametrize("given", ["ftp://example.com", "file:///tmp/x", "", "http://"])
def test_an_unusable_url_is_refused_with_a_hint(given: str) -> None:
    with pytest.raises(UsageError, match="RELAYFLOW_URL"):
        api_base_url(given)


def test_an_unusable_url_exits_2_with_one_line() -> None:
    status, _, err = _run("--url", "ftp://example.com", "runs", "list")
    assert status == 2
    assert err.count("\n") == 1
    assert err.startswith("relayflow: error: ") and "http://" in err
