"""Evidence: readers of real benchmark outputs into RunRecords. Never imports the simulator.

Public API: :func:`read_runs` / :func:`read_run` (auto-detecting the format),
:class:`AggregateRun` and :class:`MetricSummary` for aggregate-only files, the
``READERS`` and ``FORMAT_DESCRIPTIONS`` tables, and :func:`write_records` for kvledger's
own records file.
"""

from kvledger.evidence.aggregate import AggregateRun, MetricSummary

__all__ = ["read_runs", "read_run", "Run", "AggregateRun", "MetricSummary", "READERS", "FORMAT_DESCRIPTIONS",
           "write_records"]

# name → (submodule, its name there), imported on first use (PEP 562): importing one evidence module (the goodput
# ledger needs only ``aggregate``) does not import every reader (about 10 ms of start-up)
_LAZY = {"FORMAT_DESCRIPTIONS": ("detect", "FORMAT_DESCRIPTIONS"), "write_records": ("kvledger_records", "write"),
         "READERS": ("read", "READERS"), "Run": ("read", "Run"), "read_run": ("read", "read_run"),
         "read_runs": ("read", "read_runs")}


def __getattr__(name: str):
    if name in _LAZY:
        import importlib

        module, attr = _LAZY[name]
        value = getattr(importlib.import_module(f"kvledger.evidence.{module}"), attr)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'kvledger.evidence' has no attribute {name!r}")
