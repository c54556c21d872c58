"""What a run costs: the AWS work it caused (``RunUsage``) priced by a ``PriceTable``."""

from relayflow.costs.meter import UsageMeter
from relayflow.costs.prices import PriceTable, RunCost, cost_of, parse_price_table
from relayflow.costs.usage import RunUsage

__all__ = ["PriceTable", "RunCost", "RunUsage", "UsageMeter", "cost_of", "parse_price_table"]
