"""How ``kvledger cost`` prints its report for people: the capacity and its basis, the four per-token ledgers,
break-even, sources and verdict."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from kvledger.ledgers.amounts import pct_text, unit_noun
from kvledger.ledgers.factor_rows import peak_cap_text
from kvledger.ledgers.items import dated
from kvledger.report.decision_view import print_answer, print_bills
from kvledger.report.slo_text import slo_block
from kvledger.report.step_cost_view import print_step_cost_warnings

if TYPE_CHECKING:
    from kvledger.analyses.serving.sim_capacity import SimCapacity
    from kvledger.analyses.serving.sim_ledgers import SimulatedRun
    from kvledger.ledgers.capacity_basis import CapacityBasis
    from kvledger.ledgers.cost_summary import CostReport

__all__ = ["print_cost_report"]


def _num(x: float) -> str:
    a = abs(x)
    if a == 0:
        return "0"
    if a >= 100:
        return f"{x:,.0f}"
    if a >= 1:
        return f"{x:,.2f}"
    return f"{x:.4g}"


def _price(x: float) -> str:
    """A unit price as stored, to at most 5 decimals and at least cents ($10.97906, $2.95, $20,000), so quantity × the
    price shown gives the amount shown (a price rounded to cents did not: 5,840 × 10.98 ≠ 64,117.71)."""
    if abs(x) >= 100:
        return f"{x:,.0f}" if x == int(x) else f"{x:,.2f}"
    text = f"{x:,.5f}".rstrip("0")
    return text + "0" * max(0, 2 - len(text.split(".")[1]))


def _ledger_table(ledger: Any, sources: list[str], decimals: int = 4) -> Any:
    """Narrow table: item, quantity and unit, unit price, amount (``decimals`` places: 4 for a cost per 1M tokens,
    cents for a monthly bill), and a [n] reference into ``sources``."""
    from kvledger.report.tables import LedgerTable as Table

    t = Table(title=f"{ledger.name} ({ledger.per})", title_justify="left")
    for col in ("item", "quantity", "× unit price $", "= amount $", "src"):
        t.add_column(col, justify="left" if col == "item" else "right", overflow="fold")
    for i in ledger.items:
        ref = dated(i.source, i.as_of) + (f"; {i.note}" if i.note else "")
        if ref not in sources:
            sources.append(ref)
        t.add_row(i.name, f"{_num(i.quantity)} {i.unit}", _price(i.unit_price_usd), f"{i.amount_usd:,.{decimals}f}",
                  f"[{sources.index(ref) + 1}]")
    t.add_row("total (sum of the items)", "", "", f"{ledger.total_usd:,.{decimals}f}", "")
    return t


def _print_capacity(con: Any, rep: Any, sim: Any, basis: CapacityBasis, n_sources: int) -> None:
    from rich.markup import escape

    cap = rep.capacity
    if sim is not None:
        lay = getattr(sim.setup.cost, "layout_text", lambda tp: f"TP {tp}")(sim.setup.tp)  # DP ranks in lock-step
        pp = f" × PP {n}" if (n := getattr(sim.setup.cost, "pp", 1)) > 1 else ""  # vLLM's pipeline stages
        con.print(f"one deployment unit = {_n(sim.replicas, 'replica')} × {lay}{pp} = "
                  f"{_n(sim.num_gpus, 'GPU')}; "
                  f"workload {escape(sim.setup.workload_info['trace'])} (sources [1]–[{n_sources}] below)")
    where = ("simulated per deployment unit [1]" if sim is not None else "measured per replica")
    con.print(f"{where}: {cap['goodput_req_per_s']:.3f} good req/s, {cap['good_input_tok_per_s']:,.1f} good input "
              f"tok/s, "
              f"{cap['good_output_tok_per_s']:,.1f} good output tok/s; mean {cap['mean_input_tokens']:,.1f} in / "
              f"{cap['mean_output_tokens']:,.1f} out tokens per good request")
    con.print(escape(basis.text))
    if cap.get("at_volume_load"):
        con.print(escape(at_load_line(cap, sim.replicas if sim is not None else 1)))
    if basis.probes:
        con.print(f"  probes (req/s → share of requests within the SLO): {escape(basis.probes)}")
    from kvledger.analyses.serving.notes import CAPACITY_WARNINGS
    from kvledger.analyses.serving.work_bounds import BOUND_NOTE_START

    for note in basis.notes or []:  # the capacity warnings (not steady, unrepresentative sample; sized on the bound)
        con.print(f"  [bold]warning[/]: {escape(note)}" if note.startswith((*CAPACITY_WARNINGS, BOUND_NOTE_START)) else
                  f"  note: {escape(note)}")
    load = basis.load_check
    if basis.warning:
        con.print(f"[bold red]WARNING:[/] [bold]{escape(basis.warning)}[/]")
    elif load is not None:
        label = {"not_flagged": "not flagged as under- or over-loaded", "cannot_tell": "cannot tell whether the run "
            "was under-loaded"}
        con.print(f"load check: {label.get(load.status, load.status)} — {escape(load.reason)}")
    con.print(f"GPU time split: prefill {cap['prefill_share']:.3f} / decode {1 - cap['prefill_share']:.3f} — "
              f"{escape(cap['prefill_share_method'])}")


def factor_words(value: str) -> str:
    """A deciding factor's value in words: the option names are snake_case (``not_required`` → ``not required``)."""
    return value.replace("_", " ")


def _n(count: int, noun: str) -> str:
    """``1 replica``, ``2 replicas``, ``1,209 requests``."""
    return f"{count:,} {noun}{'' if count == 1 else 's'}"


def _units(count: int, sim: Any) -> str:
    """What the ledger counts as a replica: with ``--replicas N`` a deployment unit of N engine replicas."""
    if sim is None or sim.replicas == 1:
        return _n(count, "replica")
    return f"{_n(count, 'deployment unit')} ({_n(count * sim.replicas, 'replica')}, {_n(count * sim.num_gpus, 'GPU')})"


def _whose_break_even(replicas: int, sim: Any) -> str:
    """Whose break-even utilization it is: one replica's, carrying the whole people line (no volume given), or the
    replicas a volume needs, sharing it (``breakeven.break_even_utilization``)."""
    if replicas == 1:
        return f"of one {_units(1, sim).removeprefix('1 ')}, carrying the whole people line"
    return f"of the {_units(replicas, sim)}, sharing the people line"  # the formula says they are the volume's


def _not_reachable(bu: dict, bv: dict, sim: Any) -> str:
    """'' when u* ≤ 100%; else that it is out of reach for these replicas and, when a break-even volume exists, that
    more replicas share the people line there (so the two lines do not contradict each other). A capacity only bounded
    below: u* is at most this, and the capacity multiplier at which the assumed utilization reaches it."""
    lower = _lower_bound_clause(bu)
    if bu["required_utilization"] <= 1.0:  # reachable, or out of reach only of the peak's mean (peak_cap_text)
        return lower + peak_cap_text(bu)
    text = f"{lower} — above 100%: not reachable" + (" at the capacity priced" if lower else "")
    if bv.get("requests_per_month") is None:
        return text
    these = f"one {_units(1, sim).removeprefix('1 ')}" if bu["replicas"] == 1 else "these replicas"
    return (f"{text} by {these}; at a higher volume the people cost is shared over more replicas (the break-even "
            "volume below)")


def _lower_bound_clause(bu: dict) -> str:
    """'' unless the capacity priced is only a lower bound (``breakeven.break_even_utilization``'s
    ``capacity_lower_bound``); then that u* is at most this, and where it names one, the capacity multiplier at which
    the assumed utilization reaches it."""
    if not bu.get("capacity_lower_bound"):
        return ""
    k = bu.get("capacity_multiplier")
    return (" (at most: the capacity priced is only a lower bound"
            + ("" if k is None else f"; the assumed utilization reaches it were the capacity {k:.2f}× the one priced")
            + ")")


def _print_tail(con: Any, rep: Any, sim: Any = None) -> None:
    from rich.markup import escape

    st, m = rep.sticker, rep.sticker["multiplier_output"]  # None: no GPU time charged to output tokens
    con.print(f"sticker (throughput-priced) self-host cost: ${st['usd_per_mtok_input']:.4f}/M input, "
              f"${st['usd_per_mtok_output']:.4f}/M output; "
              + ("no effective-cost multiplier (no GPU time charged to output tokens)" if m is None else
                 f"goodput-priced ÷ sticker = {m:.2f}× (effective-cost multiplier)"))
    bu, bv = rep.break_even_utilization, rep.break_even_volume
    con.print(f"\n[bold]break-even utilization {escape(_whose_break_even(bu['replicas'], sim))}[/]: "
              f"{pct_text(bu['required_utilization'])} = {escape(bu['formula'])}" + _not_reachable(bu, bv, sim))
    if bv.get("requests_per_month") is not None:
        con.print(f"[bold]break-even volume[/]: {bv['requests_per_month']:,.0f} offered requests/month "
                  f"({bv['input_tokens_per_month']:,.0f} input + "
                  f"{bv['output_tokens_per_month']:,.0f} output tokens"
                  f"{escape(', ' + bv['mix'] if bv.get('mix') else '')}) with "
                  f"{_units(bv['replicas_at_break_even'], sim)} — "
                  f"{escape(bv['reason'])}")
        first = bv.get("first_cheaper_requests_per_month")
        if first is not None and first < bv["requests_per_month"] * (1 - 1e-9):
            con.print(f"  self-hosting is first cheaper at {first:,.0f} offered requests/month "
                      f"({pct_text(bv['first_cheaper_utilization'])} utilization of "
                      f"{_units(bv['first_cheaper_replicas'], sim)}), then on and off up to the break-even volume")
    else:
        con.print(f"[bold]break-even volume[/]: none — {escape(bv['reason'])}")


def print_cost_report(rep: CostReport, basis: CapacityBasis, sim: SimulatedRun | None = None,
                      capacity: SimCapacity | None = None) -> None:
    """Print ``rep`` (a CostReport) with its capacity basis; ``sim`` / ``capacity`` for a simulated run and its
    search."""
    from rich.console import Console
    from rich.markup import escape

    con = Console(highlight=False, emoji=False)
    sources: list[str] = sim.source_lines() if sim is not None else []
    if capacity is not None:
        sources.append(capacity.text())
    print_step_cost_warnings(sim)  # before the answer: the step cost is used where its fit says nothing
    print_answer(con, rep)
    con.print()
    title = (
        f"simulated {sim.setup.model_name} on {sim.num_gpus}× {sim.setup.gpu_name}"
        if sim is not None
        else Path(rep.source).name
    )
    first, _, definitions = slo_block(rep.slo).partition("\n")
    con.print(
        f"[bold]{escape(title)}[/] under SLO {escape(first)}"
        + (" (goodput is an estimate)" if rep.capacity["estimate"] else "")
    )
    if definitions:
        con.print(escape(definitions))
    _print_capacity(con, rep, sim, basis, len(sources))
    compared = rep.verdict is not None  # None: no API row serves the model (ledgers.self_host_only)
    for name in ("self_host_input", "self_host_output", "api_input", "api_output")[:4 if compared else 2]:
        con.print(_ledger_table(getattr(rep, name), sources))
    if compared:
        _print_tail(con, rep, sim)
    print_bills(con, rep, _ledger_table, sources)
    con.print("\n[bold]sources of the line items[/]")
    for k, src in enumerate(sources, start=1):
        con.print(f"  [{k}] {escape(src)}")
    if rep.factors:
        con.print("\n[bold]deciding factors[/]")
    for f in rep.factors:
        con.print(f"  {f['factor']}: {escape(factor_words(f['value']))} — {escape(f['effect'])}")
    if compared:
        con.print(f"\n[bold]verdict on cost[/] (as at the top): {escape(rep.verdict)}")
    else:
        con.print(f"\n[bold]no verdict on cost[/]: {escape(rep.verdict_reason)}")
    if basis.error_band:
        con.print(f"[bold]error band[/]: {escape(basis.error_band.text)}")
    _capacity_warning(con, basis)
    for n in rep.notes:
        con.print(f"  - {escape(n)}")


def _capacity_warning(con: Any, basis: CapacityBasis) -> None:
    """The closing warning on a capacity basis that carries one (fell behind, over- or under-loaded, one batch)."""
    if not basis.warning:
        return
    status = basis.load_check.status if basis.load_check is not None else None
    if status == "fell_behind":
        con.print("[bold red]WARNING:[/] [bold]the server fell behind the run's offered load (see above): "
                  "capacity within the SLO is at most its served rate and may lie above or below the goodput "
                  "priced, so the self-hosted costs and the break-even may be off either way[/]")
    elif status == "cannot_tell":  # the one warning without a verdict: a burst run as one batch
        con.print("[bold red]WARNING:[/] [bold]the run is one batch, a burst the engine ran at once (see above): "
                  "capacity may be higher than priced, so the self-hosted costs and the break-even may be "
                  "pessimistic for self-hosting[/]")
    else:
        how = "over-loaded (past its SLO capacity)" if status == "over_loaded" else "under-loaded"
        con.print(f"[bold red]WARNING:[/] [bold]the run looks {how} (see above): capacity is likely higher than "
                  "priced, so the self-hosted costs and the break-even are pessimistic for self-hosting[/]")


def at_load_line(cap: dict[str, Any], per_unit: int = 1) -> str:
    """What the per-token ledgers and the volume's good requests are priced on where a run at the volume's load was
    simulated (``capacity.at_volume_load``), beside the good share at the rate sized on; ``per_unit``: engine replicas
    in the unit sized (``--replicas N``: the rate is a deployment unit's)."""
    a, r = cap["at_volume_load"], unit_noun(per_unit)
    seed = "" if a["seed"] is None else f" and seed ({a['seed']})"
    low = a.get("simulated_rate_req_per_s")
    at = (f"{a['rate_req_per_s']:,.4g} req/s per {r} (the volume's mean rate ÷ {r}s)" if low is None else
          f"{low:,.4g} req/s per {r}, the lowest rate whose {a['num_requests']:,} arrivals fit the simulator's "
          f"clock, for the volume's {a['rate_req_per_s']:,.4g} req/s per {r} (too slow to simulate; that far "
          "apart, each request meets an idle replica at either rate, so the share within the SLO is the same; "
          "tok/s at the volume's rate)")
    return (f"at the volume's load: a run of the same workload{seed} at {at}: {a['num_good']:,} of "
            f"{a['num_requests']:,} requests within the SLO "
            f"({a['attainment']:.1%}), {a['good_input_tok_per_s']:,.1f} good input and "
            f"{a['good_output_tok_per_s']:,.1f} good output tok/s per {r}; the per-token ledgers and the volume's "
            f"good requests are priced on it, not on the good share at the {cap['sizing_req_per_s']:,.4g} req/s sized "
            f"on ({_full_load_share(cap)}, a {r}'s share at full load); the volume's tokens split by the "
            "workload's mean "
            f"{cap['workload_input_tokens_mean']:,.0f} in / {cap['workload_output_tokens_mean']:,.0f} out per request")


def _full_load_share(cap: dict[str, Any]) -> str:
    """The good share at the rate sized on: the share of that run's requests within the SLO (its attainment), else
    goodput ÷ the rate (a measured file's, which counts the run's drain tail as failed requests)."""
    a = cap.get("attainment_at_sizing_rate")
    return f"{a:.3f}" if a is not None else f"{cap['goodput_req_per_s'] / cap['sizing_req_per_s']:.3f}"
