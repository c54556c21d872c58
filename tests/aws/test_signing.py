"""Step requests are signed over the exact body; verification names what is wrong."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json

import pytest

from relayflow.dispatch.signing import (
    RELAYFLOW_SIGNATURE_HEADER,
    VOYANT_SIGNATURE_HEADER,
    RequestSigner,
    sign_relayflow,
    sign_voyant,
    verify_relayflow,
    verify_voyant,
)
from relayflow.errors import SignatureError, ValidationError

SECRET = "topsecret"
BODY = b'{"protocolVersion":1,"runId":"r1","note":"caf\xc3\xa9"}'
NOW = 1_700_000_000


def test_relayflow_signature_is_hex_hmac_of_timestamp_dot_body() -> None:
    expected = hmac.new(SECRET.encode(), f"{NOW}.".encode() + BODY, hashlib.sha256).hexdigest()
    assert sign_relayflow(BODY, SECRET, timestamp=NOW) == f"t={NOW},v1={expected}"


def test_voyant_signature_is_standard_base64_of_the_body_hmac() -> None:
    expected = base64.b64encode(hmac.new(SECRET.encode(), BODY, hashlib.sha256).digest()).decode()
    value = sign_voyant(BODY, SECRET)
    assert value == expected
    assert len(value) == 44


def test_str_and_bytes_bodies_sign_alike() -> None:
    assert sign_voyant(BODY.decode(), SECRET) == sign_voyant(BODY, SECRET)


@pytest.mark.parametrize("age", [0, 299, 300, -300])
def test_relayflow_signature_within_the_window_verifies(age: int) -> None:
    header = sign_relayflow(BODY, SECRET, timestamp=NOW - age)
    verify_relayflow({"X-Relayflow-Signature": header}, BODY, SECRET, now=NOW)


@pytest.mark.parametrize(
    ("headers", "message"),
    [
        ({}, "missing x-relayflow-signature header"),
        ({RELAYFLOW_SIGNATURE_HEADER: ""}, "missing x-relayflow-signature header"),
        ({RELAYFLOW_SIGNATURE_HEADER: "garbage"}, "malformed x-relayflow-signature header"),
        ({RELAYFLOW_SIGNATURE_HEADER: f"t={NOW}"}, "malformed x-relayflow-signature header"),
        ({RELAYFLOW_SIGNATURE_HEADER: f"t=soon,v1={'a' * 64}"}, "malformed"),
        ({RELAYFLOW_SIGNATURE_HEADER: f"t={NOW},v1=xyz"}, "malformed"),
        ({RELAYFLOW_SIGNATURE_HEADER: f"t={NOW - 301},v1={'a' * 64}"}, "stale"),
        ({RELAYFLOW_SIGNATURE_HEADER: f"t={NOW + 301},v1={'a' * 64}"}, "stale"),
        (
            {RELAYFLOW_SIGNATURE_HEADER: f"t={NOW},v1={'a' * 64}"},
            "x-relayflow-signature signature does not match request body",
        ),
    ],
)
def test_relayflow_verification_failures_say_why(headers: dict[str, str], message: str) -> None:
    with pytest.raises(SignatureError, match=message) as caught:
        verify_relayflow(headers, BODY, SECRET, now=NOW)
    assert caught.value.code == "unauthorized"


@pytest.mark.parametrize(
    "timestamp_fields",
    [
        f"t=0{NOW}",  # a leading zero: "t=01700000000" would sign another message than it reads
        f"t=+{NOW}",
        f"t={NOW},t={NOW}",  # one timestamp, not a choice of two
        f"t={NOW},t={NOW + 1}",
        f"t={NOW}.0",
        "t=" + "\u0661" * 10,  # digits, but not ASCII ones
        "t=",
    ],
)
def test_relayflow_timestamp_is_parsed_strictly(timestamp_fields: str) -> None:
    good = sign_relayflow(BODY, SECRET, timestamp=NOW).split(",")[1]
    header = {RELAYFLOW_SIGNATURE_HEADER: f"{timestamp_fields},{good}"}
    with pytest.raises(SignatureError, match="malformed x-relayflow-signature header"):
        verify_relayflow(header, BODY, SECRET, now=NOW)


def test_relayflow_timestamp_zero_is_a_timestamp() -> None:
    header = {RELAYFLOW_SIGNATURE_HEADER: sign_relayflow(BODY, SECRET, timestamp=0)}
    verify_relayflow(header, BODY, SECRET, now=0)


def test_relayflow_signature_of_another_body_or_secret_is_refused() -> None:
    header = {RELAYFLOW_SIGNATURE_HEADER: sign_relayflow(BODY, SECRET, timestamp=NOW)}
    with pytest.raises(SignatureError, match="does not match"):
        verify_relayflow(header, BODY + b" ", SECRET, now=NOW)
    with pytest.raises(SignatureError, match="does not match"):
        verify_relayflow(header, BODY, "other", now=NOW)


def test_relayflow_timestamp_is_part_of_the_signature() -> None:
    value = sign_relayflow(BODY, SECRET, timestamp=NOW)
    forged = value.replace(f"t={NOW}", f"t={NOW + 1}")
    with pytest.raises(SignatureError, match="does not match"):
        verify_relayflow({RELAYFLOW_SIGNATURE_HEADER: forged}, BODY, SECRET, now=NOW)


def test_any_of_several_v1_values_or_secrets_may_match() -> None:
    good = sign_relayflow(BODY, "new", timestamp=NOW).split("v1=")[1]
    header = {RELAYFLOW_SIGNATURE_HEADER: f"t={NOW},v1={'0' * 64},v1={good},v0=ignored"}
    verify_relayflow(header, BODY, ["old", "new"], now=NOW)


@pytest.mark.parametrize(
    ("headers", "message"),
    [
        ({}, "missing x-voyant-dispatch-auth header"),
        ({VOYANT_SIGNATURE_HEADER: "!!not base64!!"}, "malformed x-voyant-dispatch-auth header"),
        (
            {VOYANT_SIGNATURE_HEADER: base64.b64encode(b"x" * 32).decode()},
            "x-voyant-dispatch-auth signature does not match request body",
        ),
    ],
)
def test_voyant_verification_uses_the_reference_messages(
    headers: dict[str, str], message: str
) -> None:
    with pytest.raises(SignatureError, match=message):
        verify_voyant(headers, BODY, SECRET)


def test_voyant_signature_verifies_whatever_the_header_case() -> None:
    verify_voyant({"X-Voyant-Dispatch-Auth": sign_voyant(BODY, SECRET)}, BODY, SECRET)


@pytest.mark.parametrize("mode", ["relayflow", "voyant"])
def test_request_signer_round_trips_and_accepts_previous_secrets(mode: str) -> None:
    old = RequestSigner("old", mode=mode, clock=lambda: NOW)  # type: ignore[arg-type]
    headers = old.headers(BODY)
    assert set(headers) == {old.header_name}
    rotated = RequestSigner(
        "new",
        mode=mode,  # type: ignore[arg-type]
        previous_secrets=("old",),
        clock=lambda: NOW + 10,
    )
    rotated.verify(headers, BODY)
    with pytest.raises(SignatureError):
        RequestSigner("new", mode=mode, clock=lambda: NOW).verify(headers, BODY)  # type: ignore[arg-type]


def test_request_signer_refuses_stale_requests_on_its_clock() -> None:
    signer_at = RequestSigner(SECRET, clock=lambda: NOW)
    headers = signer_at.headers(BODY)
    later = RequestSigner(SECRET, clock=lambda: NOW + 301)
    with pytest.raises(SignatureError, match="stale"):
        later.verify(headers, BODY)


@pytest.mark.parametrize("secret", ["", None])
def test_empty_secrets_are_refused(secret: str | None) -> None:
    with pytest.raises(ValidationError, match="non-empty"):
        RequestSigner(secret)  # type: ignore[arg-type]
    with pytest.raises(ValidationError):
        sign_voyant(BODY, secret)  # type: ignore[arg-type]


def test_unknown_mode_is_refused() -> None:
    with pytest.raises(ValidationError, match="signing mode"):
        RequestSigner(SECRET, mode="md5")  # type: ignore[arg-type]


@pytest.mark.parametrize("mode", ["relayflow", "voyant"])
def test_a_signed_request_is_refused_once_its_deadline_has_passed(mode: str) -> None:
    now_s = 1_700_000_000
    body = json.dumps({"runId": "r1", "deadline": now_s * 1000 + 30_000}).encode()
    signed = RequestSigner("k", mode=mode, clock=lambda: now_s)  # type: ignore[arg-type]
    headers = signed.headers(body)
    RequestSigner("k", mode=mode, clock=lambda: now_s + 29).verify(headers, body)  # type: ignore[arg-type]
    late = RequestSigner("k", mode=mode, clock=lambda: now_s + 31)  # type: ignore[arg-type]
    with pytest.raises(SignatureError, match="deadline passed"):
        late.verify(headers, body)


def test_a_relayflow_signature_is_never_accepted_after_five_minutes() -> None:
    now_s = 1_700_000_000
    # Even with a deadline far ahead, the timestamp window ends the replay.
    body = json.dumps({"runId": "r1", "deadline": (now_s + 3_600) * 1000}).encode()
    headers = RequestSigner("k", clock=lambda: now_s).headers(body)
    RequestSigner("k", clock=lambda: now_s + 300).verify(headers, body)
    with pytest.raises(SignatureError, match="stale"):
        RequestSigner("k", clock=lambda: now_s + 301).verify(headers, body)
