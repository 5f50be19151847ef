"""Evidence: readers of real benchmark outputs into RunRecords. Never imports the simulator.

Public API: :func:`read_runs` / :func:`read_run` (auto-detecting the format),
:class:`AggregateRun` and :class:`MetricSummary` for aggregate-only files, the
``READERS`` and ``FORMAT_DESCRIPTIONS`` tables, and :func:`write_records` for kvledger's
own records file.
"""

from kvledger.evidence.aggregate import AggregateRun, MetricSummary
from kvledger.evidence.detect import FORMAT_DESCRIPTIONS
from kvledger.evidence.kvledger_records import write as write_records
from kvledger.evidence.read import READERS, Run, read_run, read_runs

__all__ = ["read_runs", "read_run", "Run", "AggregateRun", "MetricSummary", "READERS", "FORMAT_DESCRIPTIONS",
           "write_records"]
