"""The shared part of a simulated workload's prompts as the user gave it: one system prompt (``--shared-prefix-tokens``,
``dynamics/workload/shared_prefix.py``) and a document pool (``--document-pool``, ``dynamics/workload/
document_pool.py``) that re-reads K documents; their workload description entries and their refusals."""

from __future__ import annotations

from typing import Any

from kvledger.dynamics.workload.shared_prefix import shared_prefix_info, shared_prefix_refusal, with_shared_prefix
from kvledger.errors import InputError

__all__ = ["shared_prompts", "refuse_with_sessions", "POOL_NEEDS_SYNTHETIC"]

POOL_NEEDS_SYNTHETIC = ("--document-pool puts a drawn document before each request's question, whose length a "
                        "synthetic workload gives: use --prompt-lengths (the question's tokens) and --output-lengths "
                        "instead of a trace")


def refuse_with_sessions(a: Any) -> None:
    """Refuse ``--shared-prefix-tokens`` or ``--document-pool`` with a session workload (its own prefixes)."""
    what = "a session workload (each session's system prompt and earlier turns)"
    if a.shared_prefix_tokens is not None:
        raise InputError(shared_prefix_refusal(what))
    if getattr(a, "document_pool", None) is not None:
        raise InputError(f"--document-pool builds each prompt's prefix, but {what} already names its own; drop "
                         f"--document-pool, or {POOL_NEEDS_SYNTHETIC.split(': ', 1)[1]}")


def shared_prompts(a: Any, specs: Any, name: str, synthetic: bool) -> tuple[Any, dict[str, Any]]:
    """(``specs`` with the system prompt and the drawn documents, their workload description entries); ``a``: the
    ``SimRequestArgs``; ``synthetic``: whether ``specs`` are a synthetic workload's (a document pool's questions).

    Raises:
        InputError: a document pool on a trace; a prefix the workload already names (hash ids).
    """
    pool_text = getattr(a, "document_pool", None)
    if pool_text is None:
        if a.shared_prefix_tokens is None:
            return specs, {}
        specs = with_shared_prefix(specs, a.shared_prefix_tokens, name)
        return specs, shared_prefix_info(specs, a.shared_prefix_tokens)
    if not synthetic:
        raise InputError(POOL_NEEDS_SYNTHETIC)
    from kvledger.dynamics.workload.document_pool import parse_document_pool, pool_rng, with_document_pool

    pool = parse_document_pool(pool_text)
    specs, draw = with_document_pool(list(specs), pool, a.shared_prefix_tokens, pool_rng(a.seed))
    info: dict[str, Any] = {}
    if a.shared_prefix_tokens is not None:  # every prompt reaches it: it comes before the document
        info.update(shared_prefix_tokens=a.shared_prefix_tokens, shared_prefix_requests=len(specs))
    n, lengths = len(draw.documents), draw.document_tokens
    info["document_pool"] = {
        "spec": pool_text, "documents": pool.num_documents, "document_tokens": pool.lengths,
        "document_tokens_mean": sum(lengths) / len(lengths), "popularity": pool.law, "zipf_s": pool.zipf_s,
        "segment_tokens": draw.segment_tokens, "undershared_tokens": draw.undershared_tokens,
        "distinct_documents_drawn": len(set(draw.documents)), "requests_seen_before": draw.seen_before(),
        "seen_before_share": draw.seen_before() / n,
        "source": "dynamics/workload/document_pool.py (drawn with the run's seed, its own stream)"}
    return specs, info
