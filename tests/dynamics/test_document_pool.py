"""The document-pool workload (``--document-pool``): its spec, popularity law, seeded draw, segments, and the expected
hit shares (Che's LRU formula, the LRU replay of the draw), each against values worked out by hand."""

from __future__ import annotations

import numpy as np
import pytest

from kvledger.analyses.serving.doc_pool_hits import che_hit_tokens, lru_replay_hit_tokens
from kvledger.dynamics.workload.document_pool import (
    DocumentPool,
    parse_document_pool,
    pool_rng,
    pool_sequence,
    popularity,
    segment_size,
    with_document_pool,
)
from kvledger.dynamics.workload.synthetic import Fixed, synthetic_workload
from kvledger.errors import InputError


def _questions(n: int):
    return synthetic_workload(n, rate_per_s=1.0, prompt=Fixed(16), output=Fixed(16), seed=0)


def test_the_spec_reads_count_length_and_law():
    assert parse_document_pool("200:60000:zipf=1.0") == DocumentPool(200, "60000", 1.0)
    assert parse_document_pool("2:1024") == DocumentPool(2, "1024", None)  # uniform by default
    assert parse_document_pool("2:1024:uniform") == DocumentPool(2, "1024", None)
    # a length distribution keeps its own colons
    assert parse_document_pool("50:lognormal:40000:0.3:zipf=0.8") == DocumentPool(50, "lognormal:40000:0.3", 0.8)
    for bad, said in (("x:1024", "not understood"), ("0:1024", r"--document-pool K 0 is out of range"),
                      ("3:1024:zipf=11", "out of range"), ("3:1024:zipf=a", "not a number"),
                      ("3:fixed:0", "length distribution"), ("3", "not understood")):
        with pytest.raises(InputError, match=said):
            parse_document_pool(bad)


def test_zipf_probabilities_for_three_documents_at_s_1():
    # P(k) = k^-1 / H3, H3 = 1 + 1/2 + 1/3 = 11/6: 6/11, 3/11, 2/11
    p = popularity(DocumentPool(3, "100", 1.0))
    assert p == pytest.approx([6 / 11, 3 / 11, 2 / 11], abs=1e-15)
    assert popularity(DocumentPool(4, "100", None)) == pytest.approx([0.25] * 4)
    assert popularity(DocumentPool(3, "100", 0.0)) == pytest.approx([1 / 3] * 3)  # s = 0 is uniform


def test_two_documents_drawn_uniformly_with_seed_0():
    out, draw = with_document_pool(_questions(8), parse_document_pool("2:1024:uniform"), None, pool_rng(0))
    # Fixed lengths draw nothing; the choice of 2 at p = (½, ½) maps each uniform u of the stream to 0 if u < ½ else 1.
    # The stream's first 8 uniforms: .498 .641 .534 .060 .808 .444 .217 .290 → 0 1 1 0 1 0 0 0
    u = np.random.default_rng([0, 0x444F43]).random(8)
    assert draw.documents == (0, 1, 1, 0, 1, 0, 0, 0) == tuple(int(x >= 0.5) for x in u)
    # seen before: every request but the first 0 (i=0) and the first 1 (i=1): 6 of 8
    assert draw.seen_before() == 6
    # 1,024 = 2 × 512: two 512-token segments per document, no token left unshared; prompt = 1,024 + 16 question
    assert (draw.segment_tokens, draw.undershared_tokens) == (512, 0)
    assert [s.num_prompt_tokens for s in out] == [1040] * 8 and all(s.num_shareable_tokens == 1024 for s in out)
    # request 0 and 3 (document 0) share their segments; request 1 (document 1) shares none with them
    assert out[0].prefix_segments == out[3].prefix_segments == ((1 << 32) | 0, (1 << 32) | 1)
    assert not set(out[0].prefix_segments) & set(out[1].prefix_segments)
    assert pool_sequence(out) == ([0, 1, 1, 0, 1, 0, 0, 0], {0: 1024, 1: 1024}, 0)
    again, _ = with_document_pool(_questions(8), parse_document_pool("2:1024:uniform"), None, pool_rng(0))
    assert again == out  # the same seed, the same requests


def test_a_system_prompt_is_shared_by_every_document():
    # P = 512, L = 1,536: gcd 512 → 512-token segments; segment 0 is the system prompt, the same id for both documents
    out, draw = with_document_pool(_questions(8), parse_document_pool("2:1536"), 512, pool_rng(0))
    assert draw.segment_tokens == 512 and out[0].num_prompt_tokens == 512 + 1536 + 16
    assert out[0].prefix_segments[0] == out[1].prefix_segments[0] == 0
    assert out[0].prefix_segments[1:] != out[1].prefix_segments[1:]
    assert pool_sequence(out)[1:] == ({0: 1536, 1: 1536}, 512)


def test_segment_size_is_a_divisor_of_every_boundary_or_64():
    assert segment_size(0, (60_000,)) == 500  # largest divisor of 60,000 not above 512
    assert segment_size(2000, (60_000, 40_000)) == 500  # gcd 2,000 → 500
    assert segment_size(100, (1024,)) == 64  # gcd 4: below 64, so 64; (100 + 1,024) mod 64 = 36 tokens unshared
    _, draw = with_document_pool(_questions(8), parse_document_pool("2:1024"), 100, pool_rng(0))
    assert draw.undershared_tokens == 8 * 36


def test_lru_replay_of_the_two_document_draw():
    docs, sizes = [0, 1, 1, 0, 1, 0, 0, 0], {0: 1024, 1: 1024}
    # one document held: a hit only when the document repeats the last one (i = 2, 6, 7): 3 × 1,024
    assert lru_replay_hit_tokens(docs, sizes, 1056) == 3 * 1024
    # both held: every request after each document's first (6) hits
    assert lru_replay_hit_tokens(docs, sizes, 2048) == 6 * 1024
    assert lru_replay_hit_tokens(docs, sizes, 1000) == 0  # no document fits


def test_che_formula_by_hand():
    p, sizes = np.array([0.5, 0.5]), np.array([1024.0, 1024.0])
    # C = 1,024 tokens of two equal documents: Σ L·h = 2,048·h = 1,024 → h = ½; Σ p·h·L = 2 × ½ × ½ × 1,024 = 512
    assert che_hit_tokens(p, sizes, 1024) == pytest.approx(512.0)
    assert che_hit_tokens(p, sizes, 4096) == 1024.0 and che_hit_tokens(p, sizes, 0) == 0.0  # all fit; none
    # Zipf K = 3, s = 1, 100 tokens each, C = 100: T solves Σ (1 − e^(−p_k·T)) = 1; h_k = 1 − e^(−p_k·T)
    z = popularity(DocumentPool(3, "100", 1.0))
    got = che_hit_tokens(z, np.full(3, 100.0), 100.0)
    # Newton's method from T = 1 on (1 − e^(−6T/11)) + (1 − e^(−3T/11)) + (1 − e^(−2T/11)) = 1: T = 1.27209;
    # h = 0.50036, 0.29315, 0.20649; Σ p·h·100 = (6/11·0.50036 + 3/11·0.29315 + 2/11·0.20649)·100 = 39.042 tokens
    assert got == pytest.approx(39.042, abs=1e-3)
