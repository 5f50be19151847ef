"""kvledger: the KV-cache ledger and the serving/cost ledger for LLM inference.

The public API is what this module exports; submodules are implementation detail.
"""

from kvledger.errors import ConfigError, FormatError, InputError, KvLedgerError, UnknownNameError

__version__ = "0.1.0"

_LAZY = {"RequestRecord": "kvledger.records", "RunMetadata": "kvledger.records", "RunRecords": "kvledger.records"}


def __getattr__(name: str):
    """Import the record types on first use, so the CLI does not pay for numpy unless it needs it (PEP 562)."""
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'kvledger' has no attribute {name!r}")

__all__ = [
    "ConfigError",
    "FormatError",
    "InputError",
    "KvLedgerError",
    "RequestRecord",
    "RunMetadata",
    "RunRecords",
    "UnknownNameError",
    "__version__",
]
