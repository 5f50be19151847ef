"""A simulate on a GPU with no measured run prints the wider unmeasured-GPU band (leave one GPU out:
kvledger.ledgers.unmeasured_gpu); on a measured GPU, the regime's own band."""

import pytest
from cli_run import MODEL, cli_json, run_cli

# fixed 512/128 tokens at 2 req/s keep up on both GPUs: mean TTFT and TPOT are banded, throughput is not
ARGS = ["simulate", MODEL, "--prompt-lengths", "fixed:512", "--output-lengths", "fixed:128", "--rate", "2",
        "--num-requests", "200"]


def _multipliers(doc: dict, metric: str) -> tuple[float, float]:
    b = doc["error_bands"][metric]
    return b["low"] / b["predicted"], b["high"] / b["predicted"]


def test_h100_prints_the_measured_band_and_l40s_the_wider_unmeasured_gpu_band():
    # error_bands.json, regimes uncalibrated/dense/vllm (H100 is among its GPUs): TPOT q10 −6.347%, q90 +11.751%,
    # so the band is [1/(1 + 0.11751), 1/(1 − 0.06347)] = [0.89484, 1.06777] × the prediction; TTFT q10 −71.141%,
    # q90 +13.928%: [0.87775, 3.46516]
    h100 = cli_json(*ARGS, "--gpu", "H100")
    assert _multipliers(h100, "tpot_mean") == pytest.approx((0.89484, 1.06777), abs=1e-5)
    assert _multipliers(h100, "ttft_mean") == pytest.approx((0.87775, 3.46516), abs=1e-5)
    # unmeasured_gpu, uncalibrated/dense/vllm: the H100's runs held out and priced as if nobody had profiled it
    # (--gemm-efficiency carried --gpu-profile none: flat matmuls, the A100's and RTX PRO 6000's kernel floors at its
    # clock, bandwidth share 0.8) fall at TPOT −44.723% … +6.6% and TTFT −94.030% … −10.1% — one GPU, too few for a
    # quantile — widened to the measured band's +11.751% and +13.928% above: TPOT [1/1.11751, 1/(1 − 0.44723)] =
    # [0.89484, 1.80907], TTFT [1/1.13928, 1/(1 − 0.94030)] = [0.87775, 16.7512]. No L40S run is in the data, so
    # L40S gets it
    l40s = cli_json(*ARGS, "--gpu", "L40S")
    assert _multipliers(l40s, "tpot_mean") == pytest.approx((0.89484, 1.80907), abs=1e-5)
    assert _multipliers(l40s, "ttft_mean") == pytest.approx((0.87775, 16.7512), abs=1e-4)
    src = l40s["error_bands"]["tpot_mean"]["source"]
    assert "no measured run on NVIDIA L40S: the unmeasured-GPU band -44.7% … +11.8%, from 31 measured points of 13 " \
           "deployments on 1 GPU, each GPU held out in turn" in src
    assert "too few held-out GPUs for a split-conformal 80% quantile (1 GPU, 31 values" in src
    assert "unmeasured-GPU" not in h100["error_bands"]["tpot_mean"]["source"]
    text = " ".join(run_cli(*ARGS, "--gpu", "L40S").output.split())
    assert "no measured run on NVIDIA L40S: the unmeasured-GPU band" in text
