"""What doctor says about a start-up comparison beyond its capacity checks: the ledger's own memory plan off the log by
more than it is validated to (``memory_miss``), a log that stops before its capacity lines (``memory_only``), and why no
row could be compared (``skipped_why``)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from kvledger.analyses.doctor.context import DoctorContext
from kvledger.analyses.doctor.types import ComparisonRow
from kvledger.units import GiB

__all__ = ["MEMORY_TOLERANCE", "computed_requested", "forecast_versions", "memory_forecast", "memory_miss",
           "memory_only", "memory_verdicts", "other_release", "same_rules", "skipped_why", "kv_range", "kv_judgement"]

#: how far the ledger's available KV memory may miss the log's before doctor says so where the plan gives no range for
#: its figure (``kv_range``): the 2% its memory plan is validated to on real start-ups (docs/validation.md §1.2)
MEMORY_TOLERANCE = 0.02
#: half the last printed digit of vLLM's "Available KV cache memory: X GiB" (2 decimals, gpu_worker.py)
_PRINT_HALF = 0.005
_NOT_TERMS = ("available KV memory", "non-KV total", "requested = total × utilization", "device total")


def kv_range(ctx: DoctorContext | None, ledger_bytes: float | None) -> tuple[tuple[float, float] | None, str]:
    """The plan's own range for its available KV memory (``MemoryPlan.ranges``: the device total's and each term's
    low/high, ``accounting/kv_range.py``), the range ``kvledger plan`` prints beside the figure, and why there is none
    (``(None, why)``): no plan, ends that print alike, or a row whose ledger figure is not the plan's (with pipeline
    parallelism, a stage's other than the binding one: the plan ranges the binding stage only)."""
    m = ctx.model_plan.memory if ctx is not None and ctx.model_plan is not None else None
    rng = m.ranges.get("available_kv_bytes") if m is not None else None
    if rng is None:
        return None, "the plan gives no range for it"
    if ledger_bytes is None or abs(ledger_bytes - m.available_kv_bytes) > 0.5:
        return None, ("the plan ranges its binding pipeline stage only, and the log's figure is another stage's "
                      f"({ledger_bytes / GiB:.2f} GiB in the ledger)" if ledger_bytes is not None else
                      "no ledger figure")
    if round(rng[0] / GiB, 2) == round(rng[1] / GiB, 2):
        return None, "the plan's range has no width at 2 decimals"
    return (float(rng[0]), float(rng[1])), ""


def kv_judgement(kv: ComparisonRow, ctx: DoctorContext | None) -> tuple[bool, str]:
    """(whether the ledger's available KV memory matches the log's, the criterion in words): the log's printed figure
    (±0.005 GiB, its last digit) against the plan's own range (``kv_range``), outside it a miss by the distance to its
    nearer end; only where the plan gives no range, ``MEMORY_TOLERANCE`` of the log's figure, said so."""
    rng, why = kv_range(ctx, kv.ledger_value)
    if rng is None:
        ok = abs(kv.difference) <= MEMORY_TOLERANCE * kv.log_value
        return ok, (f"{'within' if ok else 'outside'} the {MEMORY_TOLERANCE:.0%} the memory plan is validated to, "
                    f"used as no range applies: {why}")
    lo, hi = rng
    v, half = kv.log_value, _PRINT_HALF * GiB
    down, up = (f"{(kv.ledger_value - lo) / kv.ledger_value:.2%}", f"{(hi - kv.ledger_value) / kv.ledger_value:.2%}")
    pct = f"±{up}" if up == down else f"−{down} … +{up}"
    span = f"the plan's range {lo / GiB:.2f}–{hi / GiB:.2f} GiB ({pct}, from its terms' and the device's ranges)"
    if v + half < lo or v - half > hi:
        gap, side = (lo - v, "below") if v < lo else (v - hi, "above")
        return False, (f"the log's figure lies {gap / GiB:.2f} GiB {side} {span}, so a miss"
                       + (f" though within the {MEMORY_TOLERANCE:.0%} used only where no range applies"
                          if abs(kv.difference) <= MEMORY_TOLERANCE * v else ""))
    return True, f"inside {span}"


def other_release(ctx: DoctorContext) -> tuple[str, str] | None:
    """(the release --engine-version named, the release the log printed) where they differ; None otherwise."""
    from kvledger.accounting.vllm_rules import parse_version, version_tuple

    log, given = ctx.log, ctx.settings.get("engine_version")
    if not given or not str(ctx.sources.get("engine_version", "")).startswith("--engine-version"):
        return None
    if not log.version or not log.version_source.startswith("printed"):
        return None
    return None if parse_version(given) == version_tuple(log.version) else (given, log.version)


def same_rules(ctx: DoctorContext) -> bool:
    """Whether --engine-version's release and the log's own size this start-up alike: ``model_plan`` and
    ``own_release_plan`` (the log's rules) give the same memory terms, pool and stages (0.19.1's rules on a 0.19.0
    log). A difference is then the ledger's miss, not a forecast."""
    a, b = ctx.model_plan, ctx.own_release_plan
    if a is None or b is None:
        return False
    x, y = a.memory, b.memory
    return ([(d.name, d.bytes) for d in x.deductions], x.requested_bytes, x.available_kv_bytes, x.num_gpu_blocks,
            x.stages) == ([(d.name, d.bytes) for d in y.deductions], y.requested_bytes, y.available_kv_bytes,
                          y.num_gpu_blocks, y.stages)


def forecast_versions(ctx: DoctorContext) -> tuple[str, str] | None:
    """(the release --engine-version named, the release the log printed) where they differ and their rules size this
    start-up differently: the ledger is then a forecast of another release on this start-up, not a check of it; None
    otherwise (the same release, or rules that give the same figures: ``same_rules``)."""
    other = other_release(ctx)
    return None if other is None or same_rules(ctx) else other


def memory_miss(rows: list[ComparisonRow], gpu_known: bool, ctx: DoctorContext | None = None,
                own: str | None = None) -> str | None:
    """The ledger's own available KV memory against the log's where it misses (``kv_judgement``: outside the plan's
    range, or ``MEMORY_TOLERANCE`` where it gives none): the miss, the term that differs most and, when that is
    non-torch memory planned for a generic GPU (no --gpu and none the log names), that it was; None where it matches.
    With ``ctx`` naming another release than the log printed, rules that size this start-up alike (``same_rules``)
    make it a check, said so; ``own``: the log's own release, where ``rows`` and ``ctx`` are the ledger under its
    rules beside another release's forecast (``memory_verdicts``)."""
    kv = next((r for r in rows if r.term == "available KV memory" and r.difference is not None), None)
    if kv is None or not kv.log_value:
        return None
    ok, criterion = kv_judgement(kv, ctx)
    if ok:
        return None
    terms = [r for r in rows if r.unit == "B" and r.difference is not None and r.term not in _NOT_TERMS]
    # a non-KV term the ledger puts lower than the log leaves as much more for KV: a term explains the miss when its
    # difference, of the opposite sign, is at least half of it
    why = [r for r in terms if -r.difference / kv.difference >= 0.5]
    worst = max(why, key=lambda r: abs(r.difference), default=None)
    most = ("" if worst is None else
            f"; most of it {worst.term}, {worst.ledger_value / GiB:.2f} GiB in the ledger against the log's "
            f"{worst.log_value / GiB:.2f} GiB")
    dev = next((r for r in rows if r.term == "device total" and r.log_value and r.ledger_value), None)
    if dev is not None and abs(dev.ledger_value - dev.log_value) > 0.05 * dev.log_value:  # not 2-decimal rounding
        most = (f"; first of all the device: the log's total is {dev.log_value / GiB:.2f} GiB, the planned GPU's "
                f"{dev.ledger_value / GiB:.2f} GiB — not the device that ran (another card than --gpu names, or a "
                f"slice or variant of it)" + most)
    other = other_release(ctx) if ctx is not None and own is None else None
    under = (f" under the log's own release's rules ({own}; the forecast below applies another)" if own else
             f" ({other[0]}'s rules size this start-up as {other[1]}'s do: the same figures, so a check of the log, "
             "not a forecast)" if other else "")
    return (f"the ledger's own memory plan{under} gives {kv.ledger_value / GiB:.2f} GiB of KV memory against the log's "
            f"{kv.log_value / GiB:.2f} GiB ({kv.difference / GiB:+.2f} GiB, {kv.difference / kv.log_value:+.1%}; "
            f"{criterion}){most}"
            + ("" if gpu_known or worst is None or worst.term != "non-torch memory" else
               ": no --gpu and the log names no GPU, so this term was planned for a generic GPU (pass --gpu)"))


def computed_requested(st) -> str:
    """Where the log's requested memory is computed, not printed (``StartupFacts`` cites no line for it): from which
    lines."""
    if st.requested_memory_bytes is None or "requested_memory_bytes" in st.lines:
        return ""
    return (f"; the log's figure is computed from its device total (line {st.lines.get('total_gpu_memory_bytes')}) × "
            f"gpu_memory_utilization (line {st.lines.get('gpu_memory_utilization')}), not printed")


def memory_only(rows: list[ComparisonRow]) -> str | None:
    """When the log stops before its capacity lines but memory terms were compared: what was compared (None when no
    memory term was)."""
    compared = [r for r in rows if r.unit == "B" and r.difference is not None]
    if not compared:
        return None
    shown = [r for r in compared if r.term == "available KV memory"] or compared[:3]
    figures = "; ".join(f"{r.term}: log {r.log_value / GiB:.2f} GiB "
                        f"({f'line {r.log_line}' if r.log_line else 'computed from the log, not printed'}), ledger "
                        f"{r.ledger_value / GiB:.2f} GiB ({r.difference / GiB:+.2f} GiB)" for r in shown)
    blocks = next((r for r in rows if r.unit == "blocks" and r.log_value is not None), None)
    lead = ("the log prints no block count, KV cache size or concurrency, so" if blocks is None else
            f"the log prints its block count ({blocks.log_value:,.0f}, line {blocks.log_line}) but not the KV memory "
            "it was sized from, so no capacity figure can be checked from the log's own budget"
            + ("" if blocks.ledger_value is None else
               f" (the ledger's own memory model gives {blocks.ledger_value:,.0f} blocks, "
               f"{blocks.ledger_value - blocks.log_value:+,.0f})") + ", and")
    return f"{lead} only its memory terms were compared ({len(compared)} of them; --verbose lists each): {figures}"


def skipped_why(ctx: DoctorContext) -> str:
    """Why no start-up row could be compared with the ledger, and what to pass: the model and GPU sources say both."""
    why = [src for known, src in ((ctx.model, ctx.model_source), (ctx.gpu, ctx.gpu_source)) if known is None]
    return "; ".join(why) or "the ledger has no figure for these settings (--verbose: the notes say why)"


def memory_verdicts(rows: list[ComparisonRow], ctx: DoctorContext,
                    rows_of: Callable[[DoctorContext], list[ComparisonRow]] | None = None) -> tuple[str | None, ...]:
    """(``memory_miss``, ``memory_forecast``, the match's criterion in words where the ledger's own available KV memory
    matches the log's and no forecast is made, else None) for a start-up's rows. Under another release's rules (a
    forecast), the miss is the ledger under the log's own rules (``rows_of``: the memory rows of a context), so a real
    miss shows whatever release --engine-version names."""
    forecast = forecast_versions(ctx)
    if forecast is None:
        miss = memory_miss(rows, gpu_known=ctx.gpu_known, ctx=ctx)
        kv = next((r for r in rows if r.term == "available KV memory" and r.difference is not None), None)
        return miss, None, (kv_judgement(kv, ctx)[1] if miss is None and kv is not None and kv.log_value else None)
    miss = None
    if rows_of is not None and ctx.own_release_plan is not None:
        own = replace(ctx, model_plan=ctx.own_release_plan,
                      settings={**ctx.settings, "engine_version": ctx.log.rules_version})
        miss = memory_miss(rows_of(own), gpu_known=ctx.gpu_known, ctx=own, own=ctx.log.rules_version)
    return miss, memory_forecast(rows, ctx, missed=miss is not None), None


def memory_forecast(rows: list[ComparisonRow], ctx: DoctorContext, missed: bool = False) -> str | None:
    """Where --engine-version names another release than the log printed (``forecast_versions``): that release's
    available KV memory on this start-up against the log's (``_forecast``); None otherwise or without both figures.
    ``missed``: the ledger misses the log under its own release's rules as well (``memory_miss`` says so)."""
    forecast = forecast_versions(ctx)
    kv = next((r for r in rows if r.term == "available KV memory" and r.difference is not None), None)
    return None if forecast is None or kv is None or not kv.log_value else _forecast(rows, kv, *forecast, missed)


def _forecast(rows: list[ComparisonRow], kv: ComparisonRow, given: str, logged: str, missed: bool) -> str:
    """``memory_miss`` where the ledger applies ``given``'s rules to a ``logged`` start-up: a forecast, each term that
    moved by more than 0.05 GiB named with both releases' figures."""
    moved = [r for r in rows if r.unit == "B" and r.difference is not None and r.term not in _NOT_TERMS
             and abs(r.difference) > 0.05 * GiB]
    terms = "; ".join(f"{r.term} {r.ledger_value / GiB:.2f} GiB under {given} against {r.log_value / GiB:.2f} GiB "
                      f"logged" for r in sorted(moved, key=lambda r: -abs(r.difference))[:3])
    lead, holds = (("forecast, and the ledger misses this log under its own release's rules too (above):", "") if missed
                   else ("forecast, not a mismatch:", ", and the ledger matches the log under its own release's "
                                                      "rules"))
    return (f"{lead} {given}'s rules on this start-up give {kv.ledger_value / GiB:.2f} GiB of KV "
            f"memory against the {logged} log's {kv.log_value / GiB:.2f} GiB ({kv.difference / GiB:+.2f} GiB, "
            f"{kv.difference / kv.log_value:+.1%}); the log's figures are {logged}'s own{holds}"
            + (f" (moved: {terms})" if terms else ""))
