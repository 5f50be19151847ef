"""The band of a GPU with no measured run (kvledger.ledgers.unmeasured_gpu): the leave-one-GPU-out interval worked
by hand, and the measured-GPU set read from the stored bands."""

import pytest

from kvledger.ledgers.error_band import error_band, stored_bands
from kvledger.ledgers.unmeasured_gpu import held_out_gpu_interval, measured_gpu_ids


def test_three_gpus_are_too_few_for_ranks_and_get_the_widest_envelope():
    # Held-out errors: GPU a −10%, −5%; GPU b +20%; GPU c +5%. k = 3 GPUs < 9: no conformal rank reaches 80%.
    # Smallest … largest: −10% … +20%. t interval of z = ln(1 + e), each GPU weighing 1/3 (a's two values 1/6 each):
    # z = −0.10536, −0.05129, 0.18232, 0.04879; mean = (−0.10536 − 0.05129)/6 + (0.18232 + 0.04879)/3 = 0.05093;
    # var = [(0.15629² + 0.10222²)/6 + 0.13139²/3 + 0.00214²/3] × 3/2 = 0.017353, s = 0.13173;
    # half = t(0.9, 2 df) 1.886 × 0.13173 × √(4/3) = 0.28688; band expm1(0.05093 ∓ 0.28688) = −21.02% … +40.19%,
    # wider than the range on both sides
    vals, gpus = [-0.10, -0.05, 0.20, 0.05], ["a", "a", "b", "c"]
    lo, hi, how = held_out_gpu_interval(vals, gpus)
    assert lo == pytest.approx(-0.21018, abs=2e-5) and hi == pytest.approx(0.40187, abs=5e-5)
    assert how.startswith("too few held-out GPUs for a split-conformal 80% quantile (3 GPUs, 4 values")
    # the measured GPUs' band −30% … +10% is wider below: never narrower than it, said so
    lo, hi, how = held_out_gpu_interval(vals, gpus, (-0.30, 0.10))
    assert (lo, hi) == (-0.30, pytest.approx(0.40187, abs=5e-5))
    assert how.endswith("never narrower than the measured GPUs' own band")


def test_one_gpu_gives_its_range_and_nine_gpus_give_conformal_ranks():
    # one GPU: no spread between GPUs to scale a t interval; its smallest … largest, −20% … +10%
    assert held_out_gpu_interval([-0.2, 0.1], ["a", "a"])[:2] == (-0.2, 0.1)
    # 19 GPUs, one error each (0.00 … 0.18): level 0.9 × 20/19 = 0.947, the 18th smallest (+17%) above and the 2nd
    # (+1%) below; the measured band 0.0 … +10% is wider below only
    lo, hi, how = held_out_gpu_interval([i / 100 for i in range(19)], [f"g{i}" for i in range(19)], (0.0, 0.1))
    assert (lo, hi) == (0.0, 0.17) and how.startswith("split-conformal 80% interval, each of 19 held-out GPUs")
    with pytest.raises(ValueError):
        held_out_gpu_interval([0.1], [])


def test_measured_gpus_are_read_from_the_stored_bands():
    # every GPU behind a stored band (error_bands.json: regimes, cross_model, unmeasured_gpu's held-out GPUs)
    table = stored_bands()
    named = {g for ms in table["regimes"].values() for b in ms.values() for g in b["gpu_ids"]}
    measured = measured_gpu_ids(table)
    assert named <= measured and set(table["unmeasured_gpu"]["held_out_gpus"]) <= measured
    assert {"nvidia_h100_sxm", "nvidia_rtx_4090"} <= measured
    assert not {"nvidia_l40s", "nvidia_h200_sxm", "nvidia_b200"} & measured
    # the set is the file's: a table without the H100's runs would not count it
    assert "nvidia_h100_sxm" not in measured_gpu_ids({"regimes": {"r": {"m": {"gpu_ids": ["nvidia_rtx_4090"]}}}})
    band = error_band("uncalibrated/dense/vllm", "tpot_mean")
    assert band.on_gpu("nvidia_h100_sxm", "NVIDIA H100 80GB SXM5") is band  # measured: its own band
    wide = band.on_gpu("nvidia_l40s", "NVIDIA L40S")
    assert wide.low <= band.low and wide.high >= band.high and (wide.low, wide.high) != (band.low, band.high)
    assert wide.elsewhere.startswith("no measured run on NVIDIA L40S: the unmeasured-GPU band")
