"""The clocks' former home; they live in :mod:`relayflow.clock` (this path keeps working)."""

from relayflow.clock import SystemClock, VirtualClock, utc_now, wall_ms, wall_s

__all__ = ["SystemClock", "VirtualClock", "utc_now", "wall_ms", "wall_s"]
