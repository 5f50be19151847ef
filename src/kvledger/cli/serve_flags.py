"""`vllm serve` flags that change nothing kvledger plans or simulates, and why: an operator pastes a launch line into a
command (`kvledger plan … --swap-space 16 --port 8000`) and click's "No such option: --swap-space (Possible options:
--sampler-backend)" guessed a flag by its spelling; the error says what the flag does instead, and to drop it."""

from __future__ import annotations

__all__ = ["SERVE_ONLY", "serve_only_message"]

_SERVER = "the API server's own setting (address, names, auth, logging): no memory or scheduling effect"
_LOADING = "how the checkpoint is fetched and read: kvledger reads the model's config.json, not its files"

SERVE_ONLY: dict[str, str] = {
    # vLLM 0.10.1 keeps swap_space in CacheConfig (cache.py) but no v1/ module reads it; 0.19.0's CLI has no such
    # flag and its LLM class drops the keyword as deprecated (entrypoints/llm.py)
    "--swap-space": ("CPU memory for V0's swap-out preemption: the V1 engine preempts by recompute only and never "
                     "reads it (vLLM 0.10.1's v1/ code; the flag is gone from 0.19's CLI), so it moves neither the KV "
                     "pool nor the preemptions"),
    "--port": _SERVER, "--host": _SERVER, "--served-model-name": _SERVER, "--api-key": _SERVER,
    "--uvicorn-log-level": _SERVER, "--disable-log-requests": _SERVER, "--enable-log-requests": _SERVER,
    "--disable-log-stats": _SERVER, "--disable-uvicorn-access-log": _SERVER,
    "--trust-remote-code": _LOADING, "--download-dir": _LOADING, "--load-format": _LOADING,
}
"""flag → what it does in vLLM, said where kvledger refuses it."""


def serve_only_message(option: str | None, command_path: str) -> str | None:
    """The error for ``option`` where it is a `vllm serve` flag of ``SERVE_ONLY``, else None."""
    why = SERVE_ONLY.get(option or "")
    if why is None:
        return None
    return (f"{option} is a `vllm serve` flag that changes nothing {command_path} models: {why}; drop it from the "
            "command line (the other vLLM flags it takes keep vLLM's names)")
