"""What doctor says about a start-up comparison beyond its capacity checks: the ledger's own memory plan off the log by
more than it is validated to (``memory_miss``), a log that stops before its capacity lines (``memory_only``), and why no
row could be compared (``skipped_why``)."""

from __future__ import annotations

from kvledger.analyses.doctor.context import DoctorContext
from kvledger.analyses.doctor.types import ComparisonRow
from kvledger.units import GiB

__all__ = ["MEMORY_TOLERANCE", "computed_requested", "forecast_versions", "memory_forecast", "memory_miss",
           "memory_only", "memory_verdicts", "skipped_why"]

#: how far the ledger's available KV memory may miss the log's before doctor says so: the 2% its memory plan is
#: validated to on real start-ups (docs/validation.md §1.2)
MEMORY_TOLERANCE = 0.02
_NOT_TERMS = ("available KV memory", "non-KV total", "requested = total × utilization", "device total")


def forecast_versions(ctx: DoctorContext) -> tuple[str, str] | None:
    """(the release --engine-version named, the release the log printed) where they differ: the ledger is then a
    forecast of another release on this start-up, not a check of it; None otherwise."""
    from kvledger.accounting.vllm_rules import parse_version, version_tuple

    log, given = ctx.log, ctx.settings.get("engine_version")
    if not given or not str(ctx.sources.get("engine_version", "")).startswith("--engine-version"):
        return None
    if not log.version or not log.version_source.startswith("printed"):
        return None
    return None if parse_version(given) == version_tuple(log.version) else (given, log.version)


def memory_miss(rows: list[ComparisonRow], gpu_known: bool, ctx: DoctorContext | None = None) -> str | None:
    """The ledger's own available KV memory against the log's where it misses by more than ``MEMORY_TOLERANCE``: the
    miss, the term that differs most and, when that is non-torch memory planned for a generic GPU (no --gpu and none
    the log names), that it was; None within it. None too with ``ctx`` naming another release than the log printed
    (``forecast_versions``): the ledger then applies another release than the log's, and the difference, any size, is
    that release's forecast (``memory_forecast``), not a miss."""
    kv = next((r for r in rows if r.term == "available KV memory" and r.difference is not None), None)
    if ctx is not None and forecast_versions(ctx) is not None:
        return None
    if kv is None or not kv.log_value or abs(kv.difference) <= MEMORY_TOLERANCE * kv.log_value:
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
    return (f"the ledger's own memory plan gives {kv.ledger_value / GiB:.2f} GiB of KV memory against the log's "
            f"{kv.log_value / GiB:.2f} GiB ({kv.difference / GiB:+.2f} GiB, {kv.difference / kv.log_value:+.1%}, "
            f"outside the {MEMORY_TOLERANCE:.0%} it is validated to){most}"
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


def memory_verdicts(rows: list[ComparisonRow], ctx: DoctorContext) -> tuple[str | None, str | None]:
    """(``memory_miss``, ``memory_forecast``) for a start-up's rows: at most one of them is set."""
    return memory_miss(rows, gpu_known=ctx.gpu_known, ctx=ctx), memory_forecast(rows, ctx)


def memory_forecast(rows: list[ComparisonRow], ctx: DoctorContext) -> str | None:
    """Where --engine-version names another release than the log printed (``forecast_versions``): that release's
    available KV memory on this start-up against the log's (``_forecast``); None otherwise or without both figures."""
    forecast = forecast_versions(ctx)
    kv = next((r for r in rows if r.term == "available KV memory" and r.difference is not None), None)
    return None if forecast is None or kv is None or not kv.log_value else _forecast(rows, kv, *forecast)


def _forecast(rows: list[ComparisonRow], kv: ComparisonRow, given: str, logged: str) -> str:
    """``memory_miss`` where the ledger applies ``given``'s rules to a ``logged`` start-up: a forecast, each term that
    moved by more than 0.05 GiB named with both releases' figures."""
    moved = [r for r in rows if r.unit == "B" and r.difference is not None and r.term not in _NOT_TERMS
             and abs(r.difference) > 0.05 * GiB]
    terms = "; ".join(f"{r.term} {r.ledger_value / GiB:.2f} GiB under {given} against {r.log_value / GiB:.2f} GiB "
                      f"logged" for r in sorted(moved, key=lambda r: -abs(r.difference))[:3])
    return (f"forecast, not a mismatch: {given}'s rules on this start-up give {kv.ledger_value / GiB:.2f} GiB of KV "
            f"memory against the {logged} log's {kv.log_value / GiB:.2f} GiB ({kv.difference / GiB:+.2f} GiB, "
            f"{kv.difference / kv.log_value:+.1%}); the log's figures are {logged}'s own, and the "
            f"{MEMORY_TOLERANCE:.0%} the memory plan is validated to holds against a log's own release"
            + (f" (moved: {terms})" if terms else ""))
