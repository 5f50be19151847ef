"""kvledger: the KV-cache ledger and the serving/cost ledger for LLM inference.

The public API is what this module exports; submodules are implementation detail.
"""

from kvledger.errors import ConfigError, FormatError, InputError, KvLedgerError, UnknownNameError
from kvledger.records import RequestRecord, RunMetadata, RunRecords

__version__ = "0.1.0"

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
