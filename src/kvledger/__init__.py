"""kvledger: the KV-cache ledger and the serving/cost ledger for LLM inference.

The public API is what this module exports: ``plan``, ``simulate``, ``goodput``, ``cost`` and ``search``
(``kvledger.api``), their result types, the errors and the record types; submodules are implementation detail.
"""

from kvledger.errors import (
    ConfigError,
    DoesNotFitError,
    EngineRefusalError,
    FormatError,
    InputError,
    KvLedgerError,
    NoAnswerError,
    UnknownNameError,
)

__version__ = "0.1.0"

_LAZY = {"RequestRecord": "kvledger.records", "RunMetadata": "kvledger.records", "RunRecords": "kvledger.records",
         "plan": "kvledger.api", "simulate": "kvledger.api", "goodput": "kvledger.api", "PlanResult": "kvledger.api",
         "GoodputResult": "kvledger.api", "cost": "kvledger.api", "CostResult": "kvledger.api",
         "search": "kvledger.api", "SimDocument": "kvledger.api", "SessionReport": "kvledger.api",
         "SimTierReport": "kvledger.api", "SearchDocument": "kvledger.api", "OffloadVariant": "kvledger.api"}


def __getattr__(name: str):
    """Import the record types and the API's calls (``kvledger.api``) on first use, so the CLI does not pay for numpy
    unless it needs it (PEP 562)."""
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'kvledger' has no attribute {name!r}")


def __dir__() -> list[str]:
    """The module's names with the lazy ones (PEP 562), so ``dir(kvledger)`` and tab completion list ``plan`` and the
    other calls before their first use."""
    return sorted(set(globals()) | set(_LAZY))

__all__ = [
    "ConfigError",
    "CostResult",
    "DoesNotFitError",
    "EngineRefusalError",
    "GoodputResult",
    "PlanResult",
    "cost",
    "goodput",
    "plan",
    "search",
    "simulate",
    "SimDocument",
    "SessionReport",
    "SimTierReport",
    "SearchDocument",
    "OffloadVariant",
    "FormatError",
    "InputError",
    "KvLedgerError",
    "NoAnswerError",
    "RequestRecord",
    "RunMetadata",
    "RunRecords",
    "UnknownNameError",
    "__version__",
]
