"""The sentences of a build-or-buy answer against an "at most" API bill (a row with no cached-input price, its cache
reads billed as ordinary input: ``api_cost.CacheReadBounds``): the verdict with both ends of the bill, the break-even's
"at least" and the robustness line's lead (``decision_notes`` puts them in its lines)."""

from __future__ import annotations

from typing import Any

from kvledger.ledgers.amounts import usd_text
from kvledger.ledgers.api_cost import bill_is_upper_bound

__all__ = ["verdict_words", "break_even_bound_words", "cached_price_words"]


def verdict_words(d: Any) -> str:
    """The verdict and the API's bill: ``self-host — $264,000/month``; an "at most" API bill (no cached-input price:
    cache reads at input price) says so, and against a self-host verdict its lower end (cache reads free) too: the
    verdict stands where self-hosting beats it, else it holds unless the API's cached-input price is below the
    break-even one (``Decision.cached_price_break_even``)."""
    bill = usd_text(d.primary.bill.total_usd)
    if not bill_is_upper_bound(d.primary.bill):
        return f"{'the API' if d.verdict == 'API' else 'self-host'} — {bill}/month"
    if d.verdict == "API":
        return f"the API, at most {bill}/month"
    low, x = usd_text(d.api_lower_usd), d.cached_price_break_even
    if x is None:
        return f"self-host — at most {bill}/month (at least {low} even with cache reads free: the verdict stands)"
    return (f"self-host, unless the API's cached-input price is below ${x:,.4g}/Mtok — at most {bill}/month "
            f"({low} with cache reads free)")


def break_even_bound_words(bv: dict[str, Any]) -> str:
    """The break-even's caveat where the API bill it is found against is only an upper bound
    (``bv["api_is_upper_bound"]``: cache reads at input price): a cheaper real API moves it up, so it is at least the
    volume said; "" otherwise."""
    if not bv.get("api_is_upper_bound") or bv.get("requests_per_month") is None:
        return ""
    return ("; at least: the API is priced with its cache reads as ordinary input (no cached-input price listed), an "
            "upper bound, and a lower API price moves the break-even up")


def cached_price_words(d: Any) -> str:
    """The robustness line's lead where a self-host verdict is against an "at most" API bill (no cached-input price
    listed): conditional on the API's real cached-input price, or standing against its lower end (cache reads free),
    which the flip points and the band's ends are then found against (``decision._api_to_beat``); "" otherwise."""
    if d.api_lower_usd is None or d.verdict != "self-host":
        return ""
    x = d.cached_price_break_even
    if x is not None:
        return (f"CONDITIONAL on the API's cached-input price (none listed): self-host is cheaper unless it is below "
                f"${x:,.4g}/Mtok ({usd_text(d.api_lower_usd)}/month with cache reads free); at the bill priced, ")
    return (f"self-host beats the API even with its cache reads free ({usd_text(d.api_lower_usd)}/month), the bill "
            "the flips below are found against; ")
