"""``python -m relayflow.cli``: the ``relayflow`` command."""

import sys

from relayflow.cli import main

sys.exit(main())
