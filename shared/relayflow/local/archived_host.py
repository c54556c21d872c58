"""``python -m relayflow.local.archived_host APP``: answer one step request (JSON on stdin)
with the app module found in the current folder, an archived build of it (see
:mod:`relayflow.local.code_archive`); prints ``{"status", "body"}``."""

from __future__ import annotations

import json
import sys

from relayflow.cli.app_loader import load_app
from relayflow.worker import handle_step_request


def main(argv: list[str]) -> int:
    """Load the app named by ``argv[0]``, answer the request on stdin, print the answer."""
    load_app(argv[0])
    status, body = handle_step_request(sys.stdin.buffer.read())
    json.dump({"status": status, "body": body}, sys.stdout)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
