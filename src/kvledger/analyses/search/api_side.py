"""The API side of a search: the API row it compares the winner with (``--api``, else the cheapest catalog row serving
the same model for the workload's mean request), its price after the batch and cache mix, and the same traffic's
monthly bill; with ``--api``, a note when a cheaper catalog row serves the same model. The search prices GPU rental
alone (power and hosting are in the rental price); ``with_people`` adds the comparison on the bill ``kvledger cost``
draws by default: the rental plus its default people line (``host_bill.default_people_cost``), once a month for the
whole deployment as cost charges it."""

from __future__ import annotations

from typing import Any

__all__ = ["api_side", "with_people"]


def api_side(spec: Any, feasible: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The API the search compares with (``_api_row``), priced after the mix, and the same traffic's monthly bill at
    the workload's means (``usd_per_month``); None when there is no API row."""
    from kvledger.analyses.search.evaluate import load_rate_req_per_s
    from kvledger.analyses.search.load import monthly_tokens_priced
    from kvledger.ledgers.api_cost import ApiMix, api_ledger, api_price_per_mtok, cache_read_bounds, is_upper_bound

    mix = ApiMix(spec.batch_share, spec.cache_hit_rate, spec.cache_write_rate)
    price, how = _api_row(spec, mix, feasible)
    if price is None:
        return None
    notes = mix.check(price) + ([how] if how else []) + _row_notes(spec, price)
    per = api_price_per_mtok(price, mix)
    out = {"key": price.key, "as_of": price.as_of, "usd_per_mtok_input": per["input"],
           "usd_per_mtok_output": per["output"],
           "mix": {"batch_share": mix.batch_share, "cache_hit_rate": mix.cache_hit_rate,
                   "cache_write_rate": mix.cache_write_rate}, "usd_per_month": None, "notes": notes,
           "usd_per_month_is_upper_bound": is_upper_bound(mix, price),  # cache reads at input price: "at most"
           "source": f"api_prices.csv {price.key} ({price.confidence} confidence); {price.source}",
           "same_model": not any(" is not the same model " in n for n in notes)}  # as cost's note says it
    if feasible:
        wl = feasible[0]["workload"]
        notes += _prefix_note(spec, mix, price, wl["prompt_tokens_mean"])
        rate = load_rate_req_per_s(spec, wl["prompt_tokens_mean"], wl["output_tokens_mean"])
        if rate is not None:
            tin, tout = monthly_tokens_priced(spec, rate, wl["prompt_tokens_mean"], wl["output_tokens_mean"])
            led = api_ledger(price, mix, tin / 1e6, tout / 1e6, "API bill per month", "USD per month")
            out.update({"usd_per_month": led.total_usd, "monthly_input_tokens": tin, "monthly_output_tokens": tout,
                        "ledger": led.to_dict()})
            b = cache_read_bounds(price, mix, tin / 1e6, tout / 1e6)  # an "at most" bill: its lower end and slope
            if b is not None:
                out.update({"usd_per_month_lower_bound": b.lower_usd, "cache_read_mtok_per_month": b.reads_mtok})
    return out


def _prefix_note(spec: Any, mix: Any, price: Any, prompt_mean: float) -> list[str]:
    """Where the searched workload starts its prompts with a shared prefix (``--shared-prefix-tokens N``), which every
    candidate's prefix cache reuses, and the API is priced uncached (no ``--cache-hit-rate``) on a row that discounts
    cached input: the share the prefix is of the mean prompt, N ÷ the mean (at most: a prompt shorter than N shares
    none), and the flag that prices it, as ``cost --simulate`` says of the run it prices (``mix_notes``)."""
    n, cached = getattr(spec, "shared_prefix_tokens", None), price.cached_input_usd_per_mtok
    if (not n or mix.cache_hit_rate > 0 or mix.cache_write_rate > 0 or cached is None
            or cached >= price.input_usd_per_mtok or prompt_mean <= 0):
        return []
    share = min(1.0, n / prompt_mean)
    return [f"the candidates reuse the {n:,}-token shared prefix (--shared-prefix-tokens) from their prefix cache, "
            f"while {price.key} is priced with every input token uncached (no --cache-hit-rate) though it bills cached "
            f"input at ${cached:g} against ${price.input_usd_per_mtok:g} per Mtok: the prefix is up to {share:.1%} of "
            f"the mean prompt ({n:,} ÷ {prompt_mean:,.0f} tokens; less where prompts are shorter than it), and "
            f"--cache-hit-rate {share:.2f} prices the API's prompt caching on it, where its provider caches the prefix"]


def _row_notes(spec: Any, price: Any) -> list[str]:
    """What ``cost`` says of the same row: that a named row serves another model than the one searched
    (``same_model_rows``: not among the rows serving it), and that an FP8 row is set against the self-hosted weights
    (``quantized_row_note``, with the search's --quantization and engine)."""
    from kvledger.catalog.api_match import same_model_rows
    from kvledger.ledgers.api_cost import historical_row_note, quantized_row_note

    out = []
    same = [r.key for r in same_model_rows(spec.model)]
    if price.key not in {r.key for r in same_model_rows(spec.model, with_historical=True)}:
        out.append(f"{price.key} is not the same model as {spec.model}: compare quality separately"
                   + (f" (rows serving it: {', '.join(same)})" if same else " (no catalog row serves this model)"))
    fp8 = quantized_row_note(price, getattr(spec, "quantization", None), getattr(spec, "engine", None))
    old = historical_row_note(price)
    return out + [n.strip().removeprefix("note: ") for n in (fp8, old) if n]


def _api_row(spec: Any, mix: Any, feasible: list[dict[str, Any]]) -> tuple[Any, str]:
    """(the API row to compare with, how it was chosen): ``--api``, else the cheapest catalog row serving the same
    model for the volume's input and output tokens where both are given (as ``cost`` ranks its rows), else for the
    workload's mean request, after the batch and cache mix (rows the mix cannot price skipped; on a tie
    the higher-confidence row, ``api_cost.tie_order``); (None, "") when there is none."""
    from kvledger.catalog.api_match import find_api_price, same_model_rows
    from kvledger.errors import InputError
    from kvledger.ledgers.api_cost import api_price_per_mtok, tie_order

    wl = feasible[0]["workload"] if feasible else {"prompt_tokens_mean": 1.0, "output_tokens_mean": 1.0}
    split = spec.monthly_input_tokens is not None and spec.monthly_output_tokens is not None
    # the tokens each row is priced on: the volume's own split where given (as cost ranks rows), else the mean request
    w_in, w_out = ((spec.monthly_input_tokens, spec.monthly_output_tokens) if split
                   else (wl["prompt_tokens_mean"], wl["output_tokens_mean"]))
    what = "the volume's input and output tokens" if split else "the workload's mean request"

    def per_request(r: Any) -> float:  # the tokens above after the mix, USD × 10⁶
        per = api_price_per_mtok(r, mix)
        return w_in * per["input"] + w_out * per["output"]

    priced = []
    for r in same_model_rows(spec.model):
        try:
            mix.check(r)
        except InputError:
            continue
        priced.append((per_request(r), *tie_order(r), r))  # a tie: the higher-confidence row
    if spec.api is not None:
        named = find_api_price(spec.api)
        try:
            mine = per_request(named)
        except InputError:  # the mix cannot price it: api_side says so
            return named, ""
        cheaper = [(x, r) for x, _, k, r in sorted(priced) if k != named.key and x < mine * (1 - 1e-9)]
        if not cheaper:
            return named, ""
        x, r = cheaper[0]
        return named, (f"the comparison is with --api {named.key} as named; a cheaper catalog row serves "
                       f"{spec.model}: {r.key} ({r.confidence or 'unstated'} confidence), {x / mine:.0%} of the named "
                       f"row's price for {what} after the mix (with it, the API side costs that share; search without "
                       "--api compares with it)")
    if not priced:
        return None, ""
    row = min(priced)[-1]
    keys = ", ".join(k for _, _, k, _ in sorted(priced))
    return row, (f"the cheapest of {len(priced)} catalog row(s) serving {spec.model} for {what} after the mix "
                 f"({keys}); {row.confidence or 'unstated'} confidence; --api names another")


def with_people(api: dict[str, Any], winner: dict[str, Any] | None) -> None:
    """Adds to ``api`` (``api_side``'s, with ``within_band`` where the search has a band) which side is cheaper on GPU
    rental alone (``cheaper_gpu_rental_alone``) and on rental plus ``kvledger cost``'s default people line
    (``people``: USD per month, engineer-months and their price, the team capability and the source;
    ``winner_self_host_usd_per_month``: the rental plus it, cost's ``self_host_usd_per_month``;
    ``cheaper_with_people``; ``within_band["with_people"]``: the band's ends with it); nothing without a monthly bill
    on both sides. Against an "at most" API bill (no cached-input price listed) a self-hosted bill between its two ends
    is "conditional" (``bands.cheaper_side``), with the cached-input price below which the API is cheaper
    (``unless_cached_input_usd_per_mtok_below``)."""
    from kvledger.analyses.search.bands import api_bounds, api_within_band, cheaper_side
    from kvledger.ledgers.host_bill import DEFAULT_TEAM_CAPABILITY, default_people_cost

    s = (winner or {}).get("sizing")
    if api.get("usd_per_month") is None or not s:
        return
    pc = default_people_cost()
    people = pc.engineer_months_per_month * pc.engineer_usd_per_month  # breakeven.people_usd_per_month's product
    bounds = api_bounds(api)  # an "at most" API bill: a self-host side between its ends is "conditional"

    def side(usd: float) -> str:
        return cheaper_side(api["usd_per_month"], bounds, usd)

    if bounds is not None:  # the cached-input price (USD/Mtok) below which the API is cheaper; None: none needed
        api["unless_cached_input_usd_per_mtok_below"] = {
            "gpu_rental_alone": bounds.cached_price_below(s["rental_usd_per_month"]),
            "with_people": bounds.cached_price_below(s["rental_usd_per_month"] + people)}
    api.update({"cheaper_gpu_rental_alone": side(s["rental_usd_per_month"]),
                "people": {"usd_per_month": people, "engineer_months_per_month": pc.engineer_months_per_month,
                           "engineer_usd_per_month": pc.engineer_usd_per_month,
                           "team_capability": DEFAULT_TEAM_CAPABILITY, "source": pc.source},
                "winner_self_host_usd_per_month": s["rental_usd_per_month"] + people,
                "cheaper_with_people": side(s["rental_usd_per_month"] + people)})
    if api.get("within_band") is not None:
        api["within_band"]["with_people"] = api_within_band(winner, api["usd_per_month"], people, bounds)
