"""Predicted against measured for one replayed run: TTFT, ITL, TPOT, E2E (mean, p50, p90, p99), throughput and goodput,
each with its error.

Error = predicted/measured − 1 (``rel_error``; None where the measured value is 0 or absent).
Both sides are summarised by the same code (``kvledger.dynamics.outputs.metrics.summarize_records``
and ``kvledger.ledgers.goodput.goodput``), so a definition can never differ between them. A
measured file without per-token times has no ITL distribution; the row says so rather than
comparing against nothing.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from kvledger.dynamics.outputs.metrics import summarize_records
from kvledger.jsonable import to_jsonable
from kvledger.ledgers.goodput import goodput
from kvledger.ledgers.slo import SLO
from kvledger.records import RunRecords

__all__ = ["MetricRow", "Comparison", "compare_runs", "rel_error", "tokens_per_chunk", "LATENCY_METRICS", "STATS",
           "MULTI_TOKEN_CHUNKS"]

LATENCY_METRICS = (("ttft_s", "TTFT"), ("itl_s", "ITL"), ("tpot_s", "TPOT"), ("e2e_s", "E2E"))
STATS = ("mean", "p50", "p90", "p99")


@dataclass(frozen=True)
class MetricRow:
    """One compared figure: name, unit, measured, predicted, predicted/measured − 1."""

    metric: str
    unit: str
    measured: float | None
    predicted: float | None
    rel_error: float | None
    note: str = ""

    def to_dict(self) -> dict[str, Any]:
        return to_jsonable(self)


@dataclass
class Comparison:
    """Every compared figure of one run, and what was compared (its JSON calls ``label`` "run")."""

    __json__ = (("run", "label"), "num_measured", "num_predicted", "slo", "rows", "notes")
    label: str
    rows: list[MetricRow]
    num_measured: int
    num_predicted: int
    slo: dict[str, Any] | None = None
    notes: list[str] = field(default_factory=list)

    def row(self, metric: str) -> MetricRow:
        """The row named ``metric`` (e.g. "TTFT mean")."""
        for r in self.rows:
            if r.metric == metric:
                return r
        raise KeyError(metric)

    def to_dict(self) -> dict[str, Any]:
        return to_jsonable(self)


def rel_error(pred: float | None, meas: float | None) -> float | None:
    if pred is None or meas is None or meas == 0:
        return None
    return pred / meas - 1.0


#: mean output tokens per streamed chunk from which a file's inter-chunk gaps are not per-token ITLs (one token a
#: chunk is the rule; 1.25 leaves room for a first chunk that carries a few tokens)
MULTI_TOKEN_CHUNKS = 1.25


def tokens_per_chunk(run: RunRecords) -> float | None:
    """Output tokens per streamed chunk over the finished requests with chunk times (None: no such request): the
    chunks counted after the first, against the tokens after the first, so a first chunk's extra tokens do not
    count."""
    tokens = chunks = 0
    for r in run.records:
        ct = r.chunk_times_s
        if r.ok and ct is not None and len(ct) >= 2 and r.num_output_tokens >= 2:
            tokens, chunks = tokens + r.num_output_tokens - 1, chunks + len(ct) - 1
    return tokens / chunks if chunks else None


def compare_runs(label: str, measured: RunRecords, predicted: RunRecords, slo: SLO | None = None) -> Comparison:
    """Rows for the four latency metrics' mean/p50/p90/p99 (s), request and output-token throughput, and goodput under
    ``slo``."""
    m, p = summarize_records(measured), summarize_records(predicted)
    rows: list[MetricRow] = []
    notes: list[str] = [said] if (said := measured.metadata.extra.get("client_loop")) else []  # send times drawn
    per_chunk = tokens_per_chunk(measured)
    for key, name in LATENCY_METRICS:
        ms, ps = getattr(m, key), getattr(p, key)
        if ms.count == 0:
            if key == "itl_s":
                notes.append("ITL: the measured file has no per-token times, so ITL is not compared (TPOT is)")
            continue
        if key == "itl_s" and per_chunk is not None and per_chunk >= MULTI_TOKEN_CHUNKS:
            notes.append(f"ITL: the measured server streamed {per_chunk:.1f} output tokens per chunk on average "
                         "(multi-step scheduling or a stream interval), so the file's gaps are per chunk, not per "
                         "token, and ITL is not compared with the simulated per-token ITL (TPOT, per token, is)")
            continue
        for stat in STATS:
            a, b = getattr(ms, stat), getattr(ps, stat)
            rows.append(MetricRow(f"{name} {stat}", "s", a, b, rel_error(b, a)))
    for key, name, unit, what in (("throughput_req_per_s", "throughput", "req/s", "finished requests"),
                                  ("throughput_output_tok_per_s", "output throughput", "tokens/s",
                                   "output tokens of finished requests")):
        a, b = getattr(m, key), getattr(p, key)
        rows.append(MetricRow(name, unit, a, b, rel_error(b, a), f"{what} / (last finish − first arrival)"))
    if slo is not None:
        gm, gp = goodput(measured, slo), goodput(predicted, slo)
        rows.append(MetricRow("goodput", "req/s", gm.goodput_req_per_s, gp.goodput_req_per_s,
                              rel_error(gp.goodput_req_per_s, gm.goodput_req_per_s), f"requests meeting "
                                  f"{slo.describe()}"))
        rows.append(MetricRow("SLO attainment", "fraction", gm.attainment, gp.attainment, rel_error(gp.attainment,
            gm.attainment)))
    return Comparison(label, rows, m.num_finished, p.num_finished, slo.to_dict() if slo else None, notes)
