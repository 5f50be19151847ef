"""The measured sustained HBM bandwidth and boost clock tables (catalog/gpu_measured.py): every row a catalog GPU,
with its source in words, its address in references and its licence; the figures below their datasheet peaks."""

from __future__ import annotations

import csv
from importlib import resources

import pytest

from kvledger.catalog.gpu_measured import REFERENCE_GPU, boost_clock, hbm_measured, hbm_rows
from kvledger.catalog.gpus import get_gpu


def _rows(name: str) -> list[dict[str, str]]:
    with (resources.files("kvledger.catalog") / "data" / name).open(encoding="utf-8") as fh:
        return list(csv.DictReader(fh))


def test_each_bandwidth_row_names_its_source_url_and_licence():
    rows = _rows("gpu_hbm_measured.csv")
    assert {r["gpu_id"] for r in rows} == {"nvidia_h100_sxm", "nvidia_h200_sxm", "nvidia_a100_80gb_sxm", "amd_mi300x"}
    for r in rows:
        assert r["source"].strip() and r["method"].startswith("BabelStream"), r["gpu_id"]
        assert r["references"].startswith("https://github.com/") and "/blob/" in r["references"], r["gpu_id"]  # pinned
        assert "github" not in r["source"] and "://" not in r["source"], r["gpu_id"]  # printed: words, no address
        assert r["licence"].strip() and r["as_of"].strip(), r["gpu_id"]
        m = hbm_measured(r["gpu_id"])
        # sustained below the datasheet peak: H100 2.90 of 3.35 TB/s (86.6%), MI300X 4.11 of 5.3 (77.5%) …
        assert 0.5 < m.copy_bytes_per_s / get_gpu(r["gpu_id"]).hbm_bandwidth_bytes_per_s < 1.0, r["gpu_id"]
    assert hbm_measured(REFERENCE_GPU).copy_bytes_per_s == pytest.approx(2.90e12)
    assert hbm_measured("nvidia_b200") is None and len(hbm_rows()) == len(rows)


def test_each_clock_row_names_its_source_and_is_a_catalog_gpu():
    for r in _rows("gpu_clocks.csv"):
        get_gpu(r["gpu_id"])  # raises on an unknown id
        assert r["source"].strip() and r["confidence"] in ("high", "medium", "low"), r["gpu_id"]
        assert "://" not in r["source"], r["gpu_id"]  # addresses go in references
        assert 1000 <= float(r["boost_clock_mhz"]) <= 3000
    # A100's 312 dense BF16 TFLOPS = 108 SMs × 2,048 FLOP/clk × 1.41 GHz: the clock agrees with the catalog's peak
    hz, _ = boost_clock("nvidia_a100_80gb_sxm")
    assert 108 * 2048 * hz == pytest.approx(get_gpu("nvidia_a100_80gb_sxm").bf16_flops_per_s, rel=0.01)
    assert boost_clock("nvidia_gb200") is None
