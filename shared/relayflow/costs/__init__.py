"""What a run costs: the AWS work it caused (``RunUsage``) priced by a ``PriceTable``."""

from relayflow.costs.prices import PriceTable, RunCost, cost_of
from relayflow.costs.usage import RunUsage

__all__ = ["PriceTable", "RunCost", "RunUsage", "cost_of"]
