"""Whether a log can show its server's preemptions at all, and where it counts them.

vLLM V1's scheduler logs no line per preemption (``v1/core/sched/scheduler.py``: inline in ``schedule`` in 0.10.1,
``_preempt_request`` in 0.19.0; neither logs). Its periodic metrics line
(``v1/metrics/loggers.py::LoggingStatLogger.log``) adds ``Preemptions: N`` from 0.11.1, and only for an interval whose
count is above 0 (0.19.0: ``if self.num_preemptions > 0``, the count reset every interval by ``_reset``); 0.10.1's
format string has no such field. Before 0.11.1 a V1 log therefore never shows a preemption, and only the Prometheus
counter ``vllm:num_preemptions_total`` (``/metrics``; named ``vllm:num_preemptions`` in the same loggers.py, 0.10.1 and
0.19.0) counts them. V0 warns on the 1st, 51st, 101st, … preemption (``stats.py``).
"""

from __future__ import annotations

from typing import Any

from kvledger.accounting.vllm_rules import version_tuple
from kvledger.evidence.vllm_log.stats import FORMAT_FIELDS

__all__ = ["PROMETHEUS_COUNTER", "preemption_counting"]

PROMETHEUS_COUNTER = "vllm:num_preemptions_total"
"""The server's running total of preemptions on ``/metrics`` (a Prometheus counter: the name gets ``_total``)."""


def preemption_counting(log: Any) -> tuple[str, str]:
    """(kind, words) for the ``VllmLog`` ``log``: how its lines count preemptions. Kinds: ``counted`` (a metrics line
    prints ``Preemptions: N``), ``v0`` (V0's warnings), ``when_nonzero`` (a V1 release from 0.11.1 with no such field:
    no interval preempted), ``never`` (a V1 release before 0.11.1: the log cannot show them), ``unknown`` (V1 lines,
    version not known: either)."""
    field, first, before = FORMAT_FIELDS["stats_preemptions"]
    field = field.strip()
    if any(s.preemptions is not None for s in log.stats):
        return "counted", f"the metrics lines count them ('{field} N')"
    if log.generation == "v0":
        return "v0", "vLLM V0 warns on the 1st, 51st, 101st, … preemption"
    if not log.stats:
        return "unknown", "no metrics lines to count them"
    ver = version_tuple(log.version) if log.version else None
    if ver is not None and ver >= version_tuple(first):
        return "when_nonzero", (f"none in these metrics intervals: vLLM {log.version} prints '{field} N' in a metrics "
                                "line whenever N > 0")
    where = f"{PROMETHEUS_COUNTER} on the server's /metrics counts them"
    if ver is not None:
        return "never", (f"vLLM {log.version} logs no preemption at all: its V1 scheduler logs none, and its metrics "
                         f"lines count them from {first} on ({before}'s have no '{field}' field); {where}")
    return "unknown", (f"none printed, and the log's version is not known: V1 metrics lines print '{field} N' when "
                       f"N > 0 from {first}, and never before it, so none or unseen; {where}")
