"""``python -m relayflow.settings [--write-docs PAGE]``: print or rewrite the settings table."""

from relayflow.config import main

raise SystemExit(main())
