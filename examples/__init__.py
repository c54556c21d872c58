"""Example workflows: importing this package registers every workflow and event filter.

``relayflow dev`` hosts them by default; the end-to-end tests drive them over HTTP.
"""

from examples import approval, event_triggered, fan_out, order_saga

__all__ = ["approval", "event_triggered", "fan_out", "order_saga"]
