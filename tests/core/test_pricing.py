"""The price table: cost of a step by model family, cached tokens included."""

import pytest

from desktop_app.core._pricing import estimate_cost, price_for


def test_prices_by_family() -> None:
    assert price_for("claude-opus-4-1-20250805").input == 15.0
    assert price_for("claude-opus-4-6").input == 5.0
    assert price_for("claude-haiku-4-5").output == 5.0
    assert price_for("claude-3-5-haiku-latest").input == 0.8
    assert price_for("claude-sonnet-5").output == 15.0
    assert price_for("gpt-4") is None
    assert estimate_cost("gpt-4", input_tokens=10) == 0.0
    assert estimate_cost("claude-haiku-4-5", input_tokens=1_000_000, cache_read_input_tokens=1_000_000) == (
        pytest.approx(1.0 + 0.1))
