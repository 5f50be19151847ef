"""The results of ``kvledger doctor``: findings, the start-up comparison with the ledger, and the whole report."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from kvledger.jsonable import to_jsonable

__all__ = ["Finding", "ComparisonRow", "StartupComparison", "DoctorReport"]


@dataclass(frozen=True)
class Finding:
    """One diagnosis.

    Attributes:
        name: "capacity", "prefix_cache_routing", "batching_ttft_itl" or (two DP engines' lines) "dp_balance".
        triggered: whether the log shows the problem. verdict: a short code (see each analysis module).
        message: the diagnosis in one paragraph, with numbers and units.
        rule: the rule and thresholds applied, and where they come from.
        evidence: rows {"line": n, "time": "...", "what": "...", "value": ...} from the log.
        options: rows for the remedies (capacity: {"action", "num_gpu_blocks", "max_concurrency", ...}).
        diagnosed: False where the log holds too little to judge (no metrics lines, no hit rate, no traffic share):
            the finding is neither a problem nor a clean bill, and is shown as "not diagnosed", never "ok".
    """

    name: str
    triggered: bool
    verdict: str
    message: str
    rule: str
    evidence: tuple[dict[str, Any], ...] = ()
    options: tuple[dict[str, Any], ...] = ()
    notes: tuple[str, ...] = ()
    diagnosed: bool = True

    def to_dict(self) -> dict[str, Any]:
        return to_jsonable(self)


@dataclass(frozen=True)
class ComparisonRow:
    """One term of the start-up comparison.

    Attributes:
        term: "device total", "weights", "blocks", ... unit: "B", "blocks", "tokens" or "x".
        log_value / log_line: what the log printed (None: not printed) and where.
        ledger_value: what ``kvledger plan`` gives for the same settings (None: not computable).
        difference: ledger − log, in ``unit`` (None when either is missing).
        explanation: why they differ (or agree), term by term.
        agrees: for a capacity check (blocks, tokens, concurrency with both figures): True when the ledger reproduces
            the log's figure (equal; for blocks, also inside the range vLLM's 2-decimal memory print allows), False
            when not; None for a row that is not such a check (a memory term, a missing figure, blocks from the
            ledger's own memory model). ``StartupComparison.consistent`` is decided from it.
    """

    term: str
    unit: str
    log_value: float | None
    log_line: int | None
    ledger_value: float | None
    difference: float | None
    explanation: str
    agrees: bool | None = None

    @classmethod
    def compared(cls, term: str, unit: str, log_value: float | None, log_line: int | None,
                 ledger_value: float | None, explanation: str, *, check: bool = True,
                 in_range: bool = False) -> ComparisonRow:
        """A row with its difference and ``agrees``, decided for the capacity checks (blocks, tokens, concurrency with
        both figures): equal, or for blocks ``in_range`` (inside the range the log's 2-decimal memory print allows);
        ``check=False`` for a figure that is not a check of the log (the ledger's blocks from its own memory model)."""
        diff = None if log_value is None or ledger_value is None else ledger_value - log_value
        agrees = None
        if check and diff is not None and unit in ("blocks", "tokens", "x"):
            agrees = bool(diff == 0 or in_range) if unit == "blocks" else abs(diff) < 1e-9
        return cls(term, unit, log_value, log_line, ledger_value, diff, explanation, agrees)

    def to_dict(self) -> dict[str, Any]:
        return to_jsonable(self)


@dataclass(frozen=True)
class StartupComparison:
    """The log's start-up figures against ``kvledger plan`` for the same settings.

    Attributes:
        settings: the settings used, each {"value", "source"} (log line, option, or engine default).
        rows: the comparison, term by term. consistent: True when every block/token/concurrency row agrees
            (within vLLM's printed rounding). notes: assumptions and rule choices.
        skipped: when no row could be compared (``consistent`` is None), why and what to pass to compare; else None.
        memory_only: when the memory terms were compared but the log prints no capacity figure to check (a log cut
            off after "Available KV cache memory"), what was compared; else None.
        memory_miss: when the ledger's own available KV memory misses the log's: the log's figure outside the
            plan's own range for it (the range ``kvledger plan`` prints), or, only where the plan gives none, off by
            more than the 2% the memory plan is validated to (``startup_verdicts.kv_judgement``): by how much, against
            which criterion, the term that differs most, and what to pass; else None. The capacity checks
            (``consistent``) start from the log's printed KV memory, so they can agree while the plan's own figure
            is off. Where --engine-version names a release whose rules
            size this start-up otherwise than the log's own (``memory_forecast``), the check under the log's own
            release's rules.
        memory_forecast: where --engine-version names another release than the log printed and its rules give other
            figures, that release's available KV memory on this start-up against the log's, any size, and the terms
            that moved; else None (the same figures: a check, ``memory_miss``).
        memory_match: where the ledger's own available KV memory matches the log's (no miss, no forecast), the
            criterion it meets in words ("inside the plan's range 58.01–58.20 GiB (±0.17%, …)", or the 2% where the
            plan gives no range, and why); else None.
    """

    settings: dict[str, dict[str, Any]]
    rows: tuple[ComparisonRow, ...]
    consistent: bool | None
    notes: tuple[str, ...] = ()
    skipped: str | None = None
    memory_only: str | None = None
    memory_miss: str | None = None
    memory_forecast: str | None = None
    memory_match: str | None = None
    reproduced: str | None = None
    """Where ``consistent``: what the ledger reproduced, worded by the figures (``blocks_words.capacity_words``: the
    block count only where equal, else how many blocks apart and why); else None."""

    def row(self, term: str) -> ComparisonRow | None:
        return next((r for r in self.rows if r.term == term), None)

    def to_dict(self) -> dict[str, Any]:
        return to_jsonable(self)


@dataclass(frozen=True)
class DoctorReport:
    """Everything ``kvledger doctor`` found in one log."""

    __json__ = ("source", ("log", "log_summary"), "model", "gpu", "startup", "findings", "failed", "not_started",
                "unfinished", "stopped", "startups", "lifecycle", "notes", "warnings")
    source: str
    log_summary: dict[str, Any]
    model: str | None
    gpu: str | None
    startup: StartupComparison | None
    findings: tuple[Finding, ...]
    notes: tuple[str, ...] = field(default_factory=tuple)
    warnings: tuple[str, ...] = field(default_factory=tuple)
    """What the reader must see first: e.g. --model naming another model than the log serves."""
    unfinished: bool = False
    """True when the log ends during start-up without a failure (no serving line: still starting, or cut): it does not
    show that the server started, so it is no healthy server either (a warning says it; ``doctor`` exits 1)."""
    stopped: int | None = None
    """The shutdown line of a stop the operator asked for (SIGTERM, Ctrl-C; no failure before it): no failure."""
    startups: tuple[dict[str, Any], ...] = ()
    """Every start-up in the log ({"first_line", "last_line", "outcome"}), first first; the verdict is the last's."""
    lifecycle: tuple[str, ...] = ()
    """Lines the summary prints first: how many start-ups the log holds and what became of the earlier ones, a stop."""
    max_len_fix: str = ""
    """"--max-model-len N (how N follows from the log's pool)" for a start-up refused for max_model_len, "" when the log
    gives no pool size (``max_len_fix.py``; in the start-up failure finding's message in --json)."""
    override_started: str = ""
    """A V1 start-up before 0.21 that started with a max_model_len its --num-gpu-blocks-override pool cannot hold (the
    check judged the profiled memory): why, and the fixes (``max_len_fix.override_started``); "" otherwise."""

    def finding(self, name: str) -> Finding | None:
        return next((f for f in self.findings if f.name == name), None)

    @property
    def failed(self) -> bool:
        """True when the log shows the server failing to start or dying while serving (a ``startup_failure`` or
        ``crashed_while_serving`` finding): never a healthy server."""
        return self.not_started or self.finding("crashed_while_serving") is not None

    @property
    def not_started(self) -> bool:
        """True when the server did not start (a ``startup_failure`` finding): its traffic findings say nothing."""
        return self.finding("startup_failure") is not None

    def to_dict(self) -> dict[str, Any]:
        return to_jsonable(self)
