"""The runner instructions' former module; they live in :mod:`relayflow.sdk.instructions`
(``Effect`` is now ``Instruction``)."""

from relayflow._aliases import renamed
from relayflow.sdk.instructions import Batch, BatchControl, Body, Branch, Call, Op, Pause

__all__ = ["Batch", "BatchControl", "Body", "Branch", "Call", "Op", "Pause"]

#: Names this module had before they were renamed (they warn, then resolve).
__getattr__ = renamed(__name__, {"Effect": ("relayflow.sdk.instructions", "Instruction")})
