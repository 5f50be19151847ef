"""The API side of the cost ledger: list prices turned into what the user's traffic mix actually pays.

Per million input tokens, a share ``h`` are prompt-cache reads (``cached_input`` price), a
share ``w`` cache writes (``cache_write`` price where the provider bills writes, Anthropic
and OpenAI GPT-5.6; otherwise ordinary input), the rest ordinary input. A share ``b`` of
requests goes through the batch API at ``(1 − batch_discount)`` of every price (documented
to stack with cache pricing at Anthropic; assumed to stack elsewhere, and said so).
Effective prices: input = [(1−h−w)·p_in + h·p_cached + w·p_write]·(1 − b·d),
output = p_out·(1 − b·d). Sources: the price row (``catalog/prices.py``); docs/cost.md §6.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from kvledger.catalog.prices import ApiPrice
from kvledger.errors import InputError
from kvledger.ledgers.items import Ledger, LineItem
from kvledger.ranges import check_options

__all__ = ["ApiMix", "api_ledger", "api_price_per_mtok", "discounts_words", "mix_problem", "mix_words", "tie_order",
           "per_request_rows", "quantized_row_note"]

_CONFIDENCE_RANK = {"high": 0, "medium": 1, "low": 2}  # a row's stated confidence; unstated after low


def tie_order(price: ApiPrice) -> tuple[int, str]:
    """What orders API rows of exactly the same price: the higher-confidence row first (high, medium, low, unstated),
    then the row's key (a stable order). Sort key after the price: ``(usd, *tie_order(price))``."""
    return _CONFIDENCE_RANK.get(price.confidence, len(_CONFIDENCE_RANK)), price.key


@dataclass(frozen=True, slots=True)
class ApiMix:
    """The user's traffic mix on the API side (fractions in [0, 1]).

    Attributes:
        batch_share: share of requests sent through the batch API.
        cache_hit_rate: share of input tokens served as prompt-cache reads.
        cache_write_rate: share of input tokens written to the prompt cache.
    """

    batch_share: float = 0.0
    cache_hit_rate: float = 0.0
    cache_write_rate: float = 0.0

    def check(self, price: ApiPrice) -> list[str]:
        """Validate against ``price``; returns notes on assumptions made.

        Raises:
            InputError: a fraction outside [0, 1], hit + write rates above 1, a batch share for a row
                with no batch API, or a cache-hit rate for a row with no cached price listed.
        """
        values = asdict(self)
        check_options("cost", values, {n: n for n in values})  # each a fraction in [0, 1] (kvledger.ranges)
        if self.cache_hit_rate + self.cache_write_rate > 1.0 + 1e-12:
            raise InputError(f"cache_hit_rate + cache_write_rate = {self.cache_hit_rate + self.cache_write_rate} "
                             f"exceeds 1")
        notes = []
        if self.batch_share > 0 and price.batch_discount is None:
            raise InputError(f"{price.key} has no batch API in the price table (blank batch_discount); set the batch "
                             f"share to 0")
        if self.cache_hit_rate > 0 and price.cached_input_usd_per_mtok is None:
            raise InputError(f"{price.key} lists no cached-input price (blank means not found, not 'no discount'); "
                             "set the cache-hit rate to 0 or check the provider's page")
        if self.cache_write_rate > 0 and price.cache_write_usd_per_mtok is None:
            notes.append(f"{price.key} bills no separate cache writes: written tokens priced as ordinary input")
        if (
            self.batch_share > 0
            and (self.cache_hit_rate > 0 or self.cache_write_rate > 0)
            and price.provider != "Anthropic"
        ):
            notes.append("batch discount assumed to stack with cache pricing (documented for Anthropic only)")
        return notes


def _prices(price: ApiPrice) -> dict[str, float]:
    cache_read, cache_write = price.cached_input_usd_per_mtok, price.cache_write_usd_per_mtok
    return {"input": price.input_usd_per_mtok,
            "cache read": cache_read if cache_read is not None else price.input_usd_per_mtok,
            "cache write": cache_write if cache_write is not None else price.input_usd_per_mtok,
            "output": price.output_usd_per_mtok}


def api_ledger(price: ApiPrice, mix: ApiMix, input_mtok: float, output_mtok: float, name: str, per: str) -> Ledger:
    """Itemised API bill for ``input_mtok`` and ``output_mtok`` million tokens under ``mix``.

    Items: {ordinary input, cache reads, cache writes, output} × {on-demand, batch API}; each
    with quantity in Mtok, unit price in USD/Mtok, the row's source and as-of date.
    """
    mix.check(price)
    p = _prices(price)
    d = price.batch_discount or 0.0
    h, w, b = mix.cache_hit_rate, mix.cache_write_rate, mix.batch_share
    shares = {"input": input_mtok * (1 - h - w), "cache read": input_mtok * h, "cache write": input_mtok * w,
              "output": output_mtok}
    ledger = Ledger(name, per)
    src = f"{price.key} list price ({price.confidence} confidence); {price.source}"
    for kind, mtok in shares.items():
        if mtok <= 0:
            continue
        label = {"input": "input tokens", "cache read": "cached input tokens (cache reads)",
                 "cache write": "cache-write input tokens", "output": "output tokens"}[kind]
        ledger.add(LineItem(f"{label}, on-demand", "Mtok", mtok * (1 - b), p[kind], src, price.as_of))
        if b > 0:
            ledger.add(LineItem(f"{label}, batch API ({d:.0%} off)", "Mtok", mtok * b, p[kind] * (1 - d), src,
                                price.as_of))
    return ledger


def discounts_words(ledger: Ledger, price: ApiPrice | None = None) -> str:
    """How an ``api_ledger`` bill was priced, from its own items: "after the batch and cache discounts", "after the
    batch discount", "after the cache discount" (cache reads), or "at list price" (no batch share or cache rate given).
    Cache writes are no discount: with ``price`` (the bill's row) a write priced above input is said as the row's
    cache-write premium, otherwise as writes billed as ordinary input (``mix_words``)."""
    names = [it.name for it in ledger.items]
    return mix_words(any("batch API" in n for n in names), any(n.startswith("cached input") for n in names),
                     any(n.startswith("cache-write") for n in names), price)


def mix_words(batch: bool, reads: bool, writes: bool, price: ApiPrice | None) -> str:
    """The words of ``discounts_words`` for a bill with batch items, cache reads and cache writes as flagged: the batch
    and cache-read discounts lower it; cache writes raise it where ``price`` bills them above input (Anthropic's 1.25×:
    the cache-write premium, with both prices) and leave it at input price otherwise."""
    kinds = [k for k, on in (("batch", batch), ("cache", reads)) if on]
    if not kinds and not writes:
        return "at list price (no batch share or prompt-cache rate given)"
    text = (f"after the {' and '.join(kinds)} discount{'s' if len(kinds) > 1 else ''}" if kinds else "at list price")
    if not writes:
        return text
    if price is None:
        return f"{text}, with cache writes"
    w = price.cache_write_usd_per_mtok
    if w is not None and w > price.input_usd_per_mtok:
        return (f"{text}, plus the cache-write premium (${w:g} per Mtok written vs ${price.input_usd_per_mtok:g} "
                f"input)")
    return f"{text}; cache writes billed as ordinary input"


def api_price_per_mtok(price: ApiPrice, mix: ApiMix) -> dict[str, Any]:
    """Effective USD per 1M input and per 1M output tokens under ``mix`` (the ledgers' totals)."""
    return {"input": api_ledger(price, mix, 1.0, 0.0, "API input", "USD per 1M input tokens").total_usd,
            "output": api_ledger(price, mix, 0.0, 1.0, "API output", "USD per 1M output tokens").total_usd}

def per_request_rows(rows: list, mix: ApiMix, tokens: tuple[float, float, str]) -> list[dict[str, Any]]:
    """``cost --json``'s ``api_options``: each (row, same_model, named) with its USD per request of ``tokens`` (input,
    output per request: ``volume.tokens_per_request``) under ``mix``, cheapest first as the text lists them (a monthly
    bill is that price × the same requests; ties: ``tie_order``), rows the mix cannot price (None) last."""
    out = []
    for r, same, named in rows:
        p = api_price_per_mtok(r, mix) if not mix_problem(mix, r) else None
        usd = (tokens[0] * p["input"] + tokens[1] * p["output"]) / 1e6 if p is not None else None
        out.append(((usd is None, usd or 0.0, *tie_order(r)), {"key": r.key, "same_model": same, "named": named,
                                                                "confidence": r.confidence or "unstated",
                                                                "usd_per_request": usd}))
    return [d for _, d in sorted(out, key=lambda x: x[0])]


def mix_problem(mix: ApiMix, price: ApiPrice) -> str | None:
    """Why ``mix`` cannot price ``price`` (None when it can)."""
    try:
        mix.check(price)
    except InputError as err:
        return str(err)
    return None


def quantized_row_note(price: ApiPrice) -> str | None:
    """A note when the API row serves an FP8-quantized variant — its model name says "FP8" or "Turbo" (Together's and
    DeepInfra's Turbo endpoints serve FP8 weights, as the catalog's DeepInfra row notes), or its notes say FP8 — since
    the self-hosted side is priced at the weights the plan loads (the model's own dtype unless --quantization): the
    two bills are then not of the same numerics. None otherwise."""
    text = f"{price.model} {price.notes or ''}".lower()
    if "fp8" not in text and "turbo" not in price.model.lower():
        return None
    return (f"  note: {price.key} serves an FP8-quantized variant (its name or the catalog's notes say so), while the "
            "self-hosted side is priced at the weights its plan loads (the model's own dtype unless --quantization "
            "fp8): compare quality separately, or price self-hosting at FP8 too")
