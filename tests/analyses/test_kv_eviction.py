"""KV eviction in a paged cache: the random-survivor closed form against exact enumeration, sink+window by hand, the
report."""

from __future__ import annotations

import ast
import itertools
import math
from pathlib import Path

import numpy as np
import pytest

from kvledger.analyses.judgments.kv_eviction import (
    evict,
    expected_empty_blocks_random,
    p_block_empty,
    place_runs,
    sink_window_occupied,
)
from kvledger.analyses.judgments.kv_eviction_summary import analyse_kv_eviction
from kvledger.catalog.gpus import get_gpu
from kvledger.catalog.models import load_model
from kvledger.errors import InputError, KvLedgerError

MIB2 = 2_097_152  # Llama-3.1-8B bf16 page: 16 tokens × 131,072 B


def _enumerate_empty(n: int, s: int, B: int) -> float:
    """Average number of empty blocks over every survivor set of size s (exact)."""
    nb = math.ceil(n / B)
    sets = list(itertools.combinations(range(n), s))
    return sum(nb - len({p // B for p in c}) for c in sets) / len(sets)


def test_random_scatter_expectation_matches_exact_enumeration():
    # n = 8, B = 4, s = 2: P(block empty) = C(6, 4)/C(8, 4) = 15/70 = 3/14; two blocks → 3/7
    assert p_block_empty(8, 2, 4) == pytest.approx(3 / 14)
    assert expected_empty_blocks_random(8, 2, 4) == pytest.approx(3 / 7) == pytest.approx(_enumerate_empty(8, 2, 4))
    # a partial last block: n = 10, B = 4, s = 3 → 2 × C(7,4)/C(10,4) + C(7,2)/C(10,2) = 2 × 35/210 + 21/45
    assert (
        expected_empty_blocks_random(10, 3, 4)
        == pytest.approx(2 * 35 / 210 + 21 / 45)
        == pytest.approx(_enumerate_empty(10, 3, 4))
    )
    for n, s, b in ((20, 5, 4), (100, 37, 16), (1000, 90, 16)):  # C(n−b, s)/C(n, s) = C(n−s, b)/C(n, b)
        assert (
            p_block_empty(n, s, b)
            == pytest.approx(math.comb(n - b, s) / math.comb(n, s))
            == pytest.approx(math.comb(n - s, b) / math.comb(n, b))
        )


def test_ninety_percent_scattered_frees_about_r_to_the_b():
    # 32,768 tokens, 90% evicted → 3,277 kept; P(empty) ≈ 0.9^16 = 0.1853 → ≈ 379 of 2,048 blocks
    r = evict(32768, 16, MIB2, "scattered", evict_fraction=0.9, seed=0, heads_per_block=256)
    assert r.kept_tokens == 3277 and r.num_blocks == 2048
    assert r.expected_empty_blocks == pytest.approx(379.30, abs=0.01) and r.binomial_empty_blocks == pytest.approx(
        2048 * (29491 / 32768) ** 16
    )  # r = e/n exactly
    sd = math.sqrt(2048 * 0.1853 * 0.8147)  # ≈ 17.6 blocks
    assert abs(r.empty_blocks - r.expected_empty_blocks) < 4 * sd
    assert r.freed_fraction < 0.25 and r.per_head_expected_empty_blocks < 1e-100  # 256 heads: 0.185^256
    assert evict(32768, 16, MIB2, "scattered", evict_fraction=0.9, seed=0).empty_blocks == r.empty_blocks  # seeded
    assert evict(32768, 16, MIB2, "worst", evict_fraction=0.9).empty_blocks == 0  # 3,277 survivors ≥ 2,048 blocks


def test_sink_plus_window_by_hand():
    # 32,768 tokens, 90% evicted: keep 3,277 = 4 sinks + a 3,273-token window [29,495, 32,768).
    # sinks: block 0; window: blocks 29,495 // 16 = 1,843 … 32,767 // 16 = 2,047 → 205 blocks; 206 occupied, 1,842 empty
    r = evict(32768, 16, MIB2, "sink-window", evict_fraction=0.9)
    assert (r.sink_tokens, r.window_tokens, r.empty_blocks) == (4, 3273, 1842)
    assert r.freed_bytes == 1842 * MIB2  # 3.60 GiB of the 4 GiB the sequence held
    assert sink_window_occupied(100, 16, 4, 10) == 3  # blocks 0, 5 (80..95 holds 90..95) and 6 (96..99)
    assert sink_window_occupied(100, 16, 20, 90) == 7  # sinks and window overlap: all ⌈100/16⌉ = 7 blocks
    w = evict(1000, 16, MIB2, "sink-window", evict_fraction=0.9, window_tokens=96, sink_tokens=4)
    assert w.kept_tokens == 100 and not w.notes  # 4 + 96 = 100 kept is exactly 90% evicted
    # 4 + 196 = 200 kept of 1,000 is 80.0% evicted, not the 90% of --evict: refused (a user trial's --evict 0.5
    # --window 4K printed "Evicting 87%" for every layout with the 0.5 silently dropped)
    with pytest.raises(InputError, match=r"^--evict 0\.9 and --window 196 disagree: with --sink-tokens 4 the window "
                                         r"keeps 200 of 1,000 tokens, so 80\.0% are evicted, not 90\.0%; give --evict "
                                         r"or --window, not both$"):
        evict(1000, 16, MIB2, "sink-window", evict_fraction=0.9, window_tokens=196, sink_tokens=4)


def test_clustered_runs():
    rng = np.random.default_rng(0)
    pos = place_runs(1000, 130, 64, rng)
    assert len(pos) == 130 and len(set(pos.tolist())) == 130 and pos.min() >= 0 and pos.max() < 1000
    # Hermite: over the B offsets a run of R starts at, it crosses (R − 1)/B block boundaries on average
    B, R = 16, 40
    assert sum(1 + (o + R - 1) // B for o in range(B)) / B == pytest.approx(1 + (R - 1) / B)
    # the closed form is a lower bound on the expected empty blocks: check it on the mean over 40 seeds
    draws = [evict(4096, 16, MIB2, "clustered", evict_fraction=0.8, run_tokens=32, seed=s) for s in range(40)]
    assert np.mean([d.empty_blocks for d in draws]) >= draws[0].expected_empty_blocks


def test_report_for_llama_8b_on_h100():
    m, g = load_model("meta-llama/Llama-3.1-8B"), get_gpu("H100-SXM")
    r = analyse_kv_eviction(m, g, None, layout="sink-window", evict_fraction=0.9, context_tokens=32768)
    assert r.heads_per_block == 32 * 8  # 32 layers × 8 KV heads share one block id
    # usable blocks 28,173 (vLLM 0.33 rules: 59,085,800,244 B / 2 MiB = 28,174 − the null block):
    # 28,173 // 2,048 = 13 requests before; 28,173 // 206 = 136 after
    assert (r.concurrency_before, r.concurrency_after) == (13, 136)
    by = {x.layout: x.freed_fraction for x in r.by_layout}
    assert by["scattered"] < 0.25 and by["worst"] == 0.0 and by["sink-window"] > 0.85
    text = " ".join(r.verdict)
    assert "FlashAttention never writes the score matrix" in text and "compaction" in text
    tags = {x["method"]: x for x in r.methods}
    assert tags["SnapKV"]["query"].startswith("aware") and tags["KVzip"]["query"] == "agnostic"
    assert tags["StreamingLLM"]["needs_scores"].startswith("no") and tags["H2O"]["needs_scores"].startswith("yes")


def test_bad_inputs():
    for kwargs, text in [
        (dict(layout="scattered", evict_fraction=1.0), r"\[0, 1\)"),
        (dict(layout="scattered"), "give --evict"),
        (dict(layout="sink-window", window_tokens=5000), "≤ the context"),
        (dict(layout="scattered", evict_fraction=0.5, seed=None), "--seed"),
        (dict(layout="worst", evict_fraction=0.5, window_tokens=64), "--window is the recent window of --layout "
                                                                      "sink-window; layout 'worst' keeps no window"),
    ]:
        with pytest.raises(InputError, match=text):
            evict(4096, 16, MIB2, **kwargs)
    with pytest.raises(InputError, match=r"^--context 0 is out of range; allowed: \[1, 67,108,864\] tokens$"):
        evict(0, 16, MIB2, "scattered", evict_fraction=0.5, seed=0)  # 2^26 tokens: kvledger.ranges' token bound
    with pytest.raises(InputError, match=r"^--block-size 0 is out of range; allowed: \[1, 4,096\] tokens$"):
        evict(4096, 0, MIB2, "scattered", evict_fraction=0.5, seed=0)
    with pytest.raises(InputError, match=r"^--context must be a whole number of tokens, got 2\.5$"):
        evict(2.5, 16, MIB2, "scattered", evict_fraction=0.5, seed=0)
    with pytest.raises(KvLedgerError, match="unknown eviction layout"):
        evict(4096, 16, MIB2, "scatter", evict_fraction=0.5)
    with pytest.raises(KvLedgerError, match=r"^unknown eviction layout 'bogus'\. Known: scattered, worst, sink-window, "
                                            r"clustered\.$"):  # no close name: the valid choices listed
        evict(4096, 16, MIB2, "bogus", evict_fraction=0.5)


def test_the_help_says_when_evict_may_be_omitted():
    from typer.testing import CliRunner

    from kvledger.cli.main import app

    out = " ".join(CliRunner(env={"COLUMNS": "200"}).invoke(app, ["kv-eviction", "--help"]).stdout.split())
    evict_help = out[out.index("--evict <float>"):out.index("--layout <str>")]  # model and --gpu are [required]
    assert "[required]" not in evict_help and "Required, except with --layout sink-window --window W" in evict_help


def test_lower_layers_do_not_import_the_analyses():
    # analyses sits above accounting and dynamics; the evidence readers and the ledgers must not depend on it
    root = Path(__file__).parents[2] / "src" / "kvledger"
    for pkg in ("units.py", "catalog", "accounting", "dynamics", "evidence", "ledgers"):
        for f in ([root / pkg] if pkg.endswith(".py") else sorted((root / pkg).rglob("*.py"))):
            for node in ast.walk(ast.parse(f.read_text(encoding="utf-8"))):
                if isinstance(node, ast.Import):
                    names = [a.name for a in node.names]
                elif isinstance(node, ast.ImportFrom):
                    names = [node.module or ""]
                else:
                    names = []
                assert not any(n.startswith("kvledger.analyses") for n in names), f
