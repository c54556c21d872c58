"""The costs page's price table is the package's: every field, with its default."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from relayflow.costs import PriceTable

PAGE = Path(__file__).resolve().parents[2] / "docs" / "operations" / "costs.md"
ROW = re.compile(r"^\| `(\w+)` \| ([0-9.]+) \| ")


def test_the_price_table_on_the_page_is_the_default_one() -> None:
    shown = {
        match.group(1): float(match.group(2))
        for line in PAGE.read_text(encoding="utf-8").splitlines()
        if (match := ROW.match(line))
    }
    defaults = PriceTable().model_dump(by_alias=True)

    assert shown.keys() == defaults.keys()
    for field, price in defaults.items():
        assert shown[field] == pytest.approx(price, rel=1e-9), field
