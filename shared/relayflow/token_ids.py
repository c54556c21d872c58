"""Token ids that locate their run: ``rft1.<run id, base64url>.<id within the run>``.

relayflow generates such ids for the tokens it names itself (``ctx.wait_for_token()`` without
``token_id=``, every ``ctx.wait_for_callback``), so ``complete_token(token_id, value)`` and
``POST /api/tokens/{tokenId}`` need no run id. The waits keep the reference's local id
(``token:tok_<n>``), so journals and reference hosts are unaffected. An id an author chose
stays run-scoped; ids starting with :data:`PREFIX` are reserved for generated ones.
"""

from __future__ import annotations

import base64
import binascii
import re

#: The reserved prefix of run-locating token ids (``v1`` of the format).
PREFIX = "rft1."
_RUN_PART = re.compile(r"[A-Za-z0-9_-]+")


def run_token_id(run_id: str, local_id: str) -> str:
    """The run-locating id of the token ``local_id`` of run ``run_id``."""
    encoded = base64.urlsafe_b64encode(run_id.encode("utf-8")).decode("ascii").rstrip("=")
    return f"{PREFIX}{encoded}.{local_id}"


def is_reserved(token_id: str) -> bool:
    """True when ``token_id`` uses the generated format (authors may not choose it)."""
    return token_id.startswith(PREFIX)


def locate(token_id: str) -> tuple[str, str] | None:
    """``(run id, local token id)`` of a run-locating id; None for any other id."""
    if not is_reserved(token_id):
        return None
    run_part, dot, local_id = token_id[len(PREFIX) :].partition(".")
    if not dot or not local_id or not _RUN_PART.fullmatch(run_part):
        return None
    try:
        run_id = base64.urlsafe_b64decode(run_part + "=" * (-len(run_part) % 4)).decode("utf-8")
    except (binascii.Error, ValueError):
        return None
    return (run_id, local_id) if run_id else None
