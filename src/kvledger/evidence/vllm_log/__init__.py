"""Reading vLLM server logs (start-up figures, periodic metrics, preemptions) into a typed, serializable ``VllmLog``.

Public API: :func:`read_vllm_log` (a file; raises on non-vLLM logs), :func:`parse_vllm_log` (text; never
raises on content), :func:`require_vllm`, and the result types.
"""

from kvledger.evidence.vllm_log.files import UnsupportedLogError, read_vllm_log, require_vllm
from kvledger.evidence.vllm_log.restarts import parse_vllm_log
from kvledger.evidence.vllm_log.types import STARTUP_FIELDS, PreemptionEvent, StartupFacts, StatsSample, VllmLog

__all__ = ["read_vllm_log", "parse_vllm_log", "require_vllm", "UnsupportedLogError", "VllmLog", "StartupFacts",
           "StatsSample", "PreemptionEvent", "STARTUP_FIELDS"]
