"""The search's winner line says when its verdict rests on a low-confidence price row that would flip it, or on GPUs
whose matmuls were priced on different bases — not only in the notes printed after it (a fresh-user trial read an
MI300X winner on a RunPod row as settled)."""

from __future__ import annotations

from cli_run import run_cli

from kvledger.analyses.search.price_flip import PriceFlip
from kvledger.analyses.search.winner_basis import basis_flags


def test_the_winner_line_names_the_flip_on_its_low_confidence_price_and_the_matmul_bases():
    out = run_cli("search", "meta-llama/Llama-3.1-8B", "--gpus", "H100,MI300X", "--slo", "ttft=500ms,tpot=50ms",
                  "--rate", "5", "--num-requests", "200").stdout
    flat = " ".join(out.split())
    winner = flat[flat.index("winner: "):flat.index(" vllm serve ")]  # the winner line, up to its launch command
    # MI300X at TP 1 wins at $2.49/GPU-h (RunPod Secure Cloud, low confidence) × 730 h = $1,818/month against the H100
    # SXM's $2.69 × 730 = $1,964: the two tie at 2.69 / 2.49 = 1.08× the winner's price
    assert winner.startswith("winner: amd_mi300x:tp1:kv-auto — $1,818/month")
    assert ("the ranking over nvidia_h100_sxm:tp1:kv-auto flips at 1.08× the winner's low-confidence price") in winner
    # H100 SXM has a measured GEMM efficiency curve (gemm_efficiency); MI300X is priced at one flat FLOP fraction
    assert ("GPU efficiency: weight matmuls on amd_mi300x at one flat FLOP fraction, on nvidia_h100_sxm by its "
            "measured curve") in winner


def test_a_high_confidence_price_and_one_gpu_add_nothing():
    flip = PriceFlip("b", True, 1.08, 0.93, 2.49, 2.69, 2.69, 2.49)
    w = {"id": "a", "gpu_id": "nvidia_h100_sxm", "price": {"confidence": "high"}}
    assert basis_flags(None, w, flip, {"id": "b", "gpu_id": "nvidia_h100_sxm"}) == []
    given = {**w, "price": {"confidence": "user input"}}  # --gpu-usd-per-hour: the user's price, no row to doubt
    assert basis_flags(None, given, flip, None) == []
    low = {**w, "price": {"confidence": "medium"}}
    assert basis_flags(None, low, flip, None) == [
        "the ranking over b flips at 1.08× the winner's medium-confidence price (see the price flip note)"]
