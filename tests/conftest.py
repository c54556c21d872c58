"""Session-wide hooks: the reliability totals are printed by the process that reports
(under xdist the controller never loads ``tests/reliability/conftest.py``)."""

import sys
from pathlib import Path

# The reliability helpers import each other by module name, as pytest's rootdir-relative
# import mode lets test folders do; the hooks must see the very same tally module.
sys.path.insert(0, str(Path(__file__).parent / "reliability"))

from reliability_summary import (
    pytest_sessionfinish,
    pytest_terminal_summary,
    pytest_testnodedown,
)

__all__ = ["pytest_sessionfinish", "pytest_terminal_summary", "pytest_testnodedown"]
