"""A document pool (``--document-pool K:L[:zipf=S]``): every prompt re-reads one of K documents (a RAG corpus, a
case file), drawn per request by a popularity law, then asks its own question.

Prompt of request i = [shared system prompt of P tokens, optional] + document d_i (L_d tokens) + question (the
synthetic prompt length drawn for i: ``--prompt-lengths`` gives the question's length, not the whole prompt's).
The K document lengths are drawn once from L (a length distribution as ``synthetic.parse_lengths`` reads it, or
one count); d_i is drawn independently for each request with P(d = k) = k^-s / H(K, s) (Zipf of exponent s, k =
1 … K by rank; H(K, s) = Σ_j j^-s) or 1/K (uniform). Draw order: the K lengths, then the N documents, both from
the one ``numpy.random.Generator`` the caller passes (its own stream: the synthetic arrivals and lengths drawn
before are unchanged).

Representation: the shareable part (system prompt + document) is cut into segments of S tokens, one S for the
whole workload: S = the largest divisor ≤ 512 of gcd(P, L_1, …, L_K), so every segment boundary falls on the
system prompt's end and each document's end and a prefix cache sees exactly P + L_d shared tokens (block
granularity is the engine's: vLLM keys full blocks, ``prefix_keys.shareable_block_keys``). Where that divisor is
below 64 (lengths drawn from a distribution), S = 64 and the last (P + L_d) mod 64 tokens of each document are
left unshared (< 64 tokens a request: ``undershared_tokens``). A segment wholly inside the system prompt has an id
every document shares; the rest are the document's own, so requests of one document share P + L_d tokens and
requests of two documents share the system prompt.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from functools import reduce

import numpy as np

from kvledger.dynamics.engine.request import RequestSpec
from kvledger.errors import InputError

__all__ = ["DocumentPool", "PoolDraw", "parse_document_pool", "popularity", "with_document_pool", "pool_rng",
           "segment_size", "pool_sequence", "DOCUMENT_POOL_FORM"]

#: the spec's form, for help and errors
DOCUMENT_POOL_FORM = "K:L[:zipf=S|:uniform] (K documents of L tokens, e.g. 200:60000:zipf=1.0)"
_MAX_SEGMENT, _MIN_SEGMENT = 512, 64
_STREAM = 0x444F43  # the document draw's own stream of the run's seed ("DOC")


@dataclass(frozen=True, slots=True)
class DocumentPool:
    """K documents (``num_documents``) whose lengths follow ``lengths`` (text as ``parse_lengths`` reads it), drawn
    by Zipf of exponent ``zipf_s`` (None: uniform)."""

    num_documents: int
    lengths: str
    zipf_s: float | None = None

    @property
    def law(self) -> str:
        return "uniform" if self.zipf_s is None else f"Zipf s = {self.zipf_s:g}"


@dataclass(frozen=True, slots=True)
class PoolDraw:
    """What one run drew: each document's tokens (``document_tokens[k]``, rank k + 1), each request's document in
    the order requests reach the engine (``documents``), the system prompt ``prefix_tokens`` (0: none), the segment
    size ``segment_tokens`` and the tokens a request's document leaves unshared (``undershared_tokens``, Σ)."""

    document_tokens: tuple[int, ...]
    documents: tuple[int, ...]
    prefix_tokens: int
    segment_tokens: int
    undershared_tokens: int

    def seen_before(self) -> int:
        """Requests whose document an earlier request had drawn (what a cache that never evicts would hit), count."""
        return len(self.documents) - len(set(self.documents))


def parse_document_pool(text: str) -> DocumentPool:
    """``K:L[:zipf=S|:uniform]``; L any length distribution (``lognormal:60000:0.3``), its colons kept.

    Raises:
        InputError: a form not read, K or S out of range, or an unreadable length distribution (named).
    """
    from kvledger.dynamics.workload.synthetic import parse_lengths
    from kvledger.ranges import check_options

    parts = [p.strip() for p in str(text).split(":")]
    law, s = parts[-1].lower(), None
    if law == "uniform" or law.startswith("zipf="):
        parts = parts[:-1]
        if law != "uniform":
            try:
                s = float(law.removeprefix("zipf="))
            except ValueError:
                raise InputError(f"--document-pool {text!r}: zipf={law[5:]!r} is not a number") from None
    if len(parts) < 2 or not parts[0].isdigit():
        raise InputError(f"--document-pool {text!r} not understood; use {DOCUMENT_POOL_FORM}")
    k = int(parts[0])
    check_options("simulate", {"document_pool_documents": k, "zipf_exponent": s},
                  {"document_pool_documents": "--document-pool K", "zipf_exponent": "--document-pool zipf=S"})
    lengths = ":".join(parts[1:])
    try:
        parse_lengths(lengths)
    except InputError as err:
        raise InputError(f"--document-pool {text!r}: {err}") from None
    return DocumentPool(k, lengths, s)


def popularity(pool: DocumentPool) -> np.ndarray:
    """P(document of rank k), k = 1 … K: k^-s / H(K, s) for Zipf, 1/K uniform (sums to 1)."""
    if pool.zipf_s is None:
        return np.full(pool.num_documents, 1.0 / pool.num_documents)
    w = np.arange(1, pool.num_documents + 1, dtype=float) ** -pool.zipf_s
    return w / w.sum()


def pool_rng(seed: int) -> np.random.Generator:
    """The document draw's Generator for a run's ``seed``: its own stream (module doc), the same for the same seed."""
    return np.random.default_rng([int(seed), _STREAM])


def segment_size(prefix_tokens: int, document_tokens: tuple[int, ...]) -> int:
    """S (module doc): the largest divisor ≤ 512 of gcd(P, L_1 … L_K), or 64 where that is below 64, tokens."""
    g = reduce(math.gcd, document_tokens, prefix_tokens)
    best = max(d for d in range(1, min(g, _MAX_SEGMENT) + 1) if g % d == 0)
    return best if best >= _MIN_SEGMENT else _MIN_SEGMENT


def _segments(doc: int, prefix: int, length: int, size: int) -> tuple[int, ...]:
    """Segment ids of the system prompt + document ``doc``: ``j`` for segment j wholly inside the system prompt,
    ``(doc + 1) << 32 | j`` for the rest (the document's own; module doc)."""
    n = (prefix + length) // size
    return tuple(j if (j + 1) * size <= prefix else ((doc + 1) << 32) | j for j in range(n))


def with_document_pool(specs: list[RequestSpec], pool: DocumentPool, prefix_tokens: int | None,
                       rng: np.random.Generator) -> tuple[list[RequestSpec], PoolDraw]:
    """``specs`` (their prompt lengths read as the questions') with the system prompt and a drawn document before
    each question (module doc), and what was drawn. ``rng``: the draw's Generator (``pool_rng``).

    Raises:
        InputError: requests that already name prefix segments (a trace's hash ids).
    """
    from kvledger.dynamics.workload.synthetic import parse_lengths

    if any(s.prefix_segments for s in specs):
        raise InputError("--document-pool builds each prompt's shared prefix itself; the workload already names its "
                         "prefixes (hash ids): give the questions' lengths with --prompt-lengths instead")
    p = int(prefix_tokens or 0)
    lengths = tuple(int(x) for x in parse_lengths(pool.lengths).sample(pool.num_documents, rng))
    docs = rng.choice(pool.num_documents, size=len(specs), p=popularity(pool))
    size = segment_size(p, lengths)
    segs: dict[int, tuple[int, ...]] = {}
    out, short = [], 0
    for spec, d in zip(specs, docs.tolist(), strict=True):
        seg = segs.get(d)
        if seg is None:
            seg = segs[d] = _segments(d, p, lengths[d], size)
        short += (p + lengths[d]) % size
        out.append(replace(spec, num_prompt_tokens=p + lengths[d] + spec.num_prompt_tokens, prefix_segments=seg,
                           segment_tokens=size))
    return out, PoolDraw(lengths, tuple(docs.tolist()), p, size, short)


def pool_sequence(specs: list[RequestSpec]) -> tuple[list[int | None], dict[int, int], int]:
    """(each request's document, None where it shares no document segment; each document's shared tokens beyond the
    system prompt; the system prompt's shared tokens) read back from the segments ``with_document_pool`` gave, in
    the order of ``specs``."""
    docs: list[int | None] = []
    doc_tokens: dict[int, int] = {}
    prefix = 0
    for spec in specs:
        own = [seg for seg in spec.prefix_segments if seg >> 32]
        prefix = max(prefix, (len(spec.prefix_segments) - len(own)) * spec.segment_tokens)
        d = (own[0] >> 32) - 1 if own else None
        if d is not None:
            doc_tokens[d] = len(own) * spec.segment_tokens
        docs.append(d)
    return docs, doc_tokens, prefix
