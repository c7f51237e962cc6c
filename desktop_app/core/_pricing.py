"""Token prices per model family, to turn a step's usage into a cost estimate (USD)."""

from __future__ import annotations

import logging
from dataclasses import dataclass

log = logging.getLogger(__name__)

# Multipliers on the input price, as the API bills them (5-minute ephemeral cache).
CACHE_WRITE_MULTIPLIER = 1.25
CACHE_READ_MULTIPLIER = 0.10


@dataclass(slots=True, frozen=True)
class Price:
    """Dollars per million tokens."""

    input: float
    output: float

    @property
    def cache_write(self) -> float:
        return self.input * CACHE_WRITE_MULTIPLIER

    @property
    def cache_read(self) -> float:
        return self.input * CACHE_READ_MULTIPLIER


# Longest prefix wins, so a specific version overrides its family's default.
PRICES: dict[str, Price] = {
    "claude-opus-4-0": Price(15.0, 75.0),
    "claude-opus-4-1": Price(15.0, 75.0),
    "claude-opus-4-2": Price(15.0, 75.0),  # claude-opus-4-20250514
    "claude-3-opus": Price(15.0, 75.0),
    "claude-opus": Price(5.0, 25.0),  # opus 4.5 and later
    "claude-sonnet": Price(3.0, 15.0),
    "claude-3-5-sonnet": Price(3.0, 15.0),
    "claude-3-7-sonnet": Price(3.0, 15.0),
    "claude-haiku": Price(1.0, 5.0),  # haiku 4.5 and later
    "claude-3-5-haiku": Price(0.80, 4.0),
    "claude-3-haiku": Price(0.25, 1.25),
}

_warned: set[str] = set()


def price_for(model: str) -> Price | None:
    """The price of `model`, matched by the longest known prefix; None when it is unknown."""
    name = model.lower().removeprefix("anthropic/")
    best = ""
    for prefix in PRICES:
        if name.startswith(prefix) and len(prefix) > len(best):
            best = prefix
    if best:
        return PRICES[best]
    # Unknown version of a known family (e.g. a new "claude-x-sonnet-..." spelling).
    for family in ("opus", "sonnet", "haiku"):
        if family in name:
            return PRICES[f"claude-{family}"]
    return None


def estimate_cost(
    model: str,
    *,
    input_tokens: int = 0,
    output_tokens: int = 0,
    cache_creation_input_tokens: int = 0,
    cache_read_input_tokens: int = 0,
) -> float:
    """Dollars for one request's usage; 0.0 (with a one-time warning) for a model without a price."""
    price = price_for(model)
    if price is None:
        if model not in _warned:
            _warned.add(model)
            log.warning("no price known for model %r: cost shown as 0", model)
        return 0.0
    total = (
        input_tokens * price.input
        + output_tokens * price.output
        + cache_creation_input_tokens * price.cache_write
        + cache_read_input_tokens * price.cache_read
    )
    return total / 1_000_000
