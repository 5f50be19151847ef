"""The API side of the cost ledger: list prices turned into what the user's traffic mix actually pays.

Per million input tokens, a share ``h`` are prompt-cache reads (``cached_input`` price), a
share ``w`` cache writes (``cache_write`` price where the provider bills writes, Anthropic
and OpenAI GPT-5.6; otherwise ordinary input), the rest ordinary input. A share ``b`` of
requests goes through the batch API at ``(1 − batch_discount)`` of every price (documented
to stack with cache pricing at Anthropic; assumed to stack elsewhere, and said so). A row with no batch API (a blank
batch discount) bills its batch share at the on-demand rate: the buyer sends those requests on demand; a row with no
cached-input price listed bills cache reads as ordinary input (no cache discount assumed: its bill is then an upper
bound, said as "at most").
Effective prices: input = [(1−h−w)·p_in + h·p_cached + w·p_write]·(1 − b·d),
output = p_out·(1 − b·d). Sources: the price row (``catalog/prices.py``); docs/cost.md §6.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, replace
from typing import Any

from kvledger.catalog.prices import ApiPrice
from kvledger.errors import InputError
from kvledger.ledgers.items import Ledger, LineItem
from kvledger.ranges import check_options

__all__ = ["ApiMix", "api_ledger", "api_price_per_mtok", "discounts_words", "mix_problem", "mix_words", "tie_order",
           "per_request_rows", "quantized_row_note", "historical_row_note", "api_row_notes", "is_upper_bound",
           "bill_is_upper_bound", "NO_BATCH_API", "NO_CACHED_PRICE", "CacheReadBounds", "cache_read_bounds",
           "usd_per_request"]

NO_BATCH_API = "batch share at on-demand: no batch API"  # in an item's name: the row has no batch API
NO_CACHED_PRICE = "cache reads at input price: no cached-input price"  # in an item's name: no cached-input price listed

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

        A batch share on a row with no batch API is priced at the on-demand rate, and a cache-hit rate on a row with
        no cached-input price as ordinary input (an upper bound on its bill); each is said in a note.

        Raises:
            InputError: a fraction outside [0, 1], or hit + write rates above 1.
        """
        values = asdict(self)
        check_options("cost", values, {n: n for n in values})  # each a fraction in [0, 1] (kvledger.ranges)
        if self.cache_hit_rate + self.cache_write_rate > 1.0 + 1e-12:
            hit, write = self.cache_hit_rate, self.cache_write_rate
            raise InputError(f"--cache-hit-rate {hit:g} + --cache-write-rate {write:g} = {hit + write:g} exceeds 1: "
                             "both are shares of the same input tokens (read from the prompt cache, written to it); "
                             "lower one so they sum to 1 or less")
        notes = []
        if self.batch_share > 0 and price.batch_discount is None:
            notes.append(f"{price.key} has no batch API in the price table (blank batch discount): its "
                         f"{self.batch_share:.0%} batch share is priced at its on-demand rate")
        if self.cache_hit_rate > 0 and price.cached_input_usd_per_mtok is None:
            notes.append(f"{price.key} lists no cached-input price (blank means not found, not 'no discount'): its "
                         f"{self.cache_hit_rate:.0%} cache reads are priced as ordinary input, so its bill is an upper "
                         "bound (at most)")
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
    no_batch = b > 0 and price.batch_discount is None  # the batch share goes on demand, at the on-demand rate
    no_cached = h > 0 and price.cached_input_usd_per_mtok is None  # cache reads billed as ordinary input
    shares = {"input": input_mtok * (1 - w - (0 if no_cached else h)), "cache read": 0 if no_cached else input_mtok * h,
              "cache write": input_mtok * w, "output": output_mtok}
    b = 0.0 if no_batch else b
    ledger = Ledger(name, per)
    src = f"api_prices.csv {price.key} list price ({price.confidence} confidence); {price.source}"
    for kind, mtok in shares.items():
        if mtok <= 0:
            continue
        label = {"input": "input tokens", "cache read": "cached input tokens (cache reads)",
                 "cache write": "cache-write input tokens", "output": "output tokens"}[kind]
        why = [*([NO_CACHED_PRICE] if no_cached and kind == "input" else []), *([NO_BATCH_API] if no_batch else [])]
        label += f" ({'; '.join(why)})" if why else ""
        ledger.add(LineItem(f"{label}, on-demand", "Mtok", mtok * (1 - b), p[kind], src, price.as_of))
        if b > 0:
            ledger.add(LineItem(f"{label}, batch API ({d:.0%} off)", "Mtok", mtok * b, p[kind] * (1 - d), src,
                                price.as_of))
    return ledger


def discounts_words(ledger: Ledger, price: ApiPrice | None = None) -> str:
    """How an ``api_ledger`` bill was priced, from its own items: "after the batch and cache discounts", "after the
    batch discount", "after the cache discount" (cache reads), or "at list price" (no batch share or cache rate given).
    Cache writes are no discount: with ``price`` (the bill's row) a write priced above input is said as the row's
    cache-write premium, otherwise as writes billed as ordinary input (``mix_words``). A row with no batch API or no
    cached-input price says so (``mix_words``' ``no_batch_api`` and ``no_cached_price``)."""
    names = [it.name for it in ledger.items]
    return mix_words(any("batch API (" in n for n in names), any(n.startswith("cached input") for n in names),
                     any(n.startswith("cache-write") for n in names), price,
                     no_batch_api=any(NO_BATCH_API in n for n in names),
                     no_cached_price=any(NO_CACHED_PRICE in n for n in names))


def bill_is_upper_bound(ledger: Ledger) -> bool:
    """Whether an ``api_ledger`` bill is only an upper bound, from its own items: cache reads billed as ordinary input
    on a row with no cached-input price listed (``is_upper_bound``)."""
    return any(NO_CACHED_PRICE in it.name for it in ledger.items)


def is_upper_bound(mix: ApiMix, price: ApiPrice) -> bool:
    """Whether ``price``'s bill under ``mix`` is only an upper bound: a cache-hit rate on a row with no cached-input
    price listed, whose cache reads are billed as ordinary input (the real price may be lower)."""
    return mix.cache_hit_rate > 0 and price.cached_input_usd_per_mtok is None


def mix_words(batch: bool, reads: bool, writes: bool, price: ApiPrice | None, *, no_batch_api: bool = False,
              no_cached_price: bool = False) -> str:
    """The words of ``discounts_words`` for a bill with batch items, cache reads and cache writes as flagged: the batch
    and cache-read discounts lower it; cache writes raise it where ``price`` bills them above input (Anthropic's 1.25×:
    the cache-write premium, with both prices) and leave it at input price otherwise. ``no_batch_api``: a batch share
    billed on demand (the row has no batch API); ``no_cached_price``: cache reads billed as ordinary input (no
    cached-input price listed: an upper bound); each said after the rest. A row whose cached-input price is its input
    price (Groq's Qwen3-32B: no prompt-cache discount there) gives cache reads no discount, and says so."""
    c = price.cached_input_usd_per_mtok if price is not None else None
    no_saving = reads and c is not None and c >= price.input_usd_per_mtok
    text = _discount_words(batch, reads and not no_saving, writes, price,
                           quiet=no_batch_api or no_cached_price or no_saving)
    if no_saving:
        text += f"; its cached-input price is its input price (${c:g} per Mtok), so cache reads save nothing"
    if no_batch_api:
        text += "; no batch API, so the batch share is priced at the on-demand rate"
    if no_cached_price:
        text += "; no cached-input price listed, so cache reads are priced as ordinary input (an upper bound)"
    return text


def _discount_words(batch: bool, reads: bool, writes: bool, price: ApiPrice | None, *, quiet: bool) -> str:
    """``mix_words`` before its no-batch-API and no-cached-price clauses (``quiet``: one follows, so a bill with no
    discount is not said to have been given no batch share or cache rate)."""
    kinds = [k for k, on in (("batch", batch), ("cache", reads)) if on]
    if not kinds and not writes:
        return "at list price" if quiet else "at list price (no batch share or prompt-cache rate given)"
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


@dataclass(frozen=True, slots=True)
class CacheReadBounds:
    """Both ends of an "at most" bill (cache reads at input price on a row with no cached-input price) and its linear
    form in the unknown cached-input price x, USD per Mtok: bill(x) = lower_usd + reads_mtok × x, where reads_mtok is
    h × input Mtok × (1 − b·d) (the cache reads after any batch discount: the module docstring's input price with
    p_cached = x). x = the input price gives ``upper_usd`` (the bill ``api_ledger`` writes), x = 0 ``lower_usd``.

    Attributes:
        lower_usd: the bill with cache reads free (USD).
        upper_usd: the bill with cache reads at the input price (USD).
        reads_mtok: the bill's slope in x (Mtok of cache reads, batch-discounted).
    """

    lower_usd: float
    upper_usd: float
    reads_mtok: float

    def cached_price_below(self, usd: float) -> float | None:
        """The cached-input price x (USD/Mtok) below which the bill is under ``usd``: x = (usd − lower) ÷ reads_mtok;
        None where no price x ≥ 0 makes it so (``usd`` at or below the lower bound)."""
        if usd <= self.lower_usd or self.reads_mtok <= 0:
            return None
        return (usd - self.lower_usd) / self.reads_mtok


def cache_read_bounds(price: ApiPrice, mix: ApiMix, input_mtok: float, output_mtok: float) -> CacheReadBounds | None:
    """The two ends of ``price``'s bill under ``mix`` where it is only an upper bound (``is_upper_bound``), both
    priced by ``api_ledger`` (the lower with the row's cached-input price set to $0); None where the bill is exact."""
    if not is_upper_bound(mix, price):
        return None
    upper = api_ledger(price, mix, input_mtok, output_mtok, "upper", "USD").total_usd
    lower = api_ledger(replace(price, cached_input_usd_per_mtok=0.0), mix, input_mtok, output_mtok, "lower",
                       "USD").total_usd
    p_in = price.input_usd_per_mtok
    return CacheReadBounds(lower, upper, (upper - lower) / p_in if p_in > 0 else 0.0)


def api_price_per_mtok(price: ApiPrice, mix: ApiMix) -> dict[str, Any]:
    """Effective USD per 1M input and per 1M output tokens under ``mix`` (the ledgers' totals)."""
    return {"input": api_ledger(price, mix, 1.0, 0.0, "API input", "USD per 1M input tokens").total_usd,
            "output": api_ledger(price, mix, 0.0, 1.0, "API output", "USD per 1M output tokens").total_usd}

def usd_per_request(price: ApiPrice, mix: ApiMix, tokens: tuple[float, ...]) -> float:
    """USD per request of ``tokens`` (input, output per request: ``volume.tokens_per_request``) on ``price`` under
    ``mix``: (input × effective input price + output × effective output price) ÷ 10⁶."""
    p = api_price_per_mtok(price, mix)
    return (tokens[0] * p["input"] + tokens[1] * p["output"]) / 1e6


def per_request_rows(rows: list, mix: ApiMix, tokens: tuple[float, float, str]) -> list[dict[str, Any]]:
    """``cost --json``'s ``api_options``: each (row, same_model, named) with its USD per request of ``tokens`` (input,
    output per request: ``volume.tokens_per_request``) under ``mix``, cheapest first as the text lists them (a monthly
    bill is that price × the same requests; ties: ``tie_order``), rows the mix cannot price (None) last."""
    out = []
    for r, same, named in rows:
        usd = usd_per_request(r, mix, tokens) if not mix_problem(mix, r) else None
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


def quantized_row_note(price: ApiPrice, self_host_quantization: str | None = None,
                       engine: str | None = None) -> str | None:
    """A note when the API row serves an FP8-quantized variant — its model name says "FP8" or "Turbo" (Together's and
    DeepInfra's Turbo endpoints serve FP8 weights, as the catalog's DeepInfra row notes), or its notes say FP8 — since
    the self-hosted side is priced at the weights the plan loads (the model's own dtype unless --quantization): the
    two bills are then not of the same numerics. With ``self_host_quantization`` "fp8" both sides are FP8 and the note
    says so; ``engine`` "sglang", which refuses that flag, is asked for an FP8 checkpoint. None when not FP8."""
    text = f"{price.model} {price.notes or ''}".lower()
    if "fp8" not in text and "turbo" not in price.model.lower():
        return None
    if (self_host_quantization or "").lower() == "fp8":
        return (f"  note: {price.key} serves an FP8-quantized variant (its name or the catalog's notes say so), and "
                "the self-hosted side is priced at FP8 weights too (--quantization fp8): the two bills are of the same "
                "weight precision; compare quality separately where the two FP8 recipes differ")
    head = (f"  note: {price.key} serves an FP8-quantized variant (its name or the catalog's notes say so), while the "
            "self-hosted side is priced at the weights its plan loads")
    if engine == "sglang":
        return (f"{head} (the checkpoint's own: SGLang's online quantization is not modelled): compare quality "
                "separately, or price self-hosting an FP8 checkpoint of the model too")
    return (f"{head} (the model's own dtype unless --quantization fp8): compare quality separately, or price "
            "self-hosting at FP8 too")


def historical_row_note(price: ApiPrice) -> str | None:
    """A note when the named API row is a historical list price (``ApiPrice.historical``): no longer offered, so it is
    never the default comparison (``api_match.same_model_rows``) and, named, prices an API one cannot buy today."""
    if not price.historical:
        return None
    return (f"  note: {price.key} is a historical list price (as of {price.as_of}; the catalog's notes: no longer "
            "offered), left out of the default comparison: today's bill for this model is a current row's")


def api_row_notes(price: ApiPrice, self_host_quantization: str | None = None, engine: str | None = None) -> list[str]:
    """The notes ``cost`` prints under its answer for its API row: ``quantized_row_note``'s (in ``engine``'s words)
    and ``historical_row_note``'s."""
    return [n for n in (quantized_row_note(price, self_host_quantization, engine), historical_row_note(price)) if n]
