"""GPU catalog: CUDA-visible memory, ridge points, aliases, custom GPUs, and errors."""

from __future__ import annotations

import pytest

from kvledger.catalog.gpus import CUDA_RESERVE_MIB, get_gpu, gpu_catalog, resolve_gpu
from kvledger.errors import ConfigError, InputError, UnknownNameError
from kvledger.units import GiB, MiB


def test_h100_memory_is_what_cuda_reports_not_the_marketing_number():
    g = get_gpu("H100-SXM")
    # vLLM PR #12126 log: "total_gpu_memory (79.22GiB)" = 81,120 MiB; nvidia-smi shows 81,559 MiB; marketed 80 GB.
    assert g.memory_bytes == 81_120 * MiB
    assert round(g.memory_bytes / GiB, 2) == 79.22
    assert (g.nvidia_smi_mib, g.memory_gb_marketed) == (81_559, 80)


def test_other_gpus_use_the_h100_gap_and_match_public_logs():
    # RTX 4090: nvidia-smi 24,564 MiB − 439 MiB = 24,125 MiB = 23.56 GiB; vLLM issue #11550 logs 23.55 GiB.
    g = get_gpu("rtx-4090")
    assert g.memory_bytes == (24_564 - CUDA_RESERVE_MIB) * MiB
    assert abs(g.memory_bytes / GiB - 23.55) < 0.02


@pytest.mark.parametrize("name,ridge", [("h100", 295.4), ("H200", 206.1), ("b200", 281.25), ("a100-80gb", 153.0)])
def test_ridge_points(name, ridge):
    # dense BF16 ÷ HBM bandwidth: 989.5/3.35 = 295.4; 989.5/4.8 = 206.1; 2250/8.0 = 281.25; 312/2.039 = 153.0
    assert get_gpu(name).ridge_flops_per_byte() == pytest.approx(ridge, abs=0.05)


def test_aliases_and_ids():
    assert get_gpu("nvidia_h100_sxm") is get_gpu("H100") is get_gpu("h100 sxm")
    assert get_gpu("A100").gpu_id == "nvidia_a100_80gb_sxm"
    assert len(gpu_catalog()) >= 25


def test_unknown_gpu_suggests():
    with pytest.raises(UnknownNameError) as e:
        get_gpu("H1000")
    assert e.value.suggestions


def test_custom_gpu_file_and_override(tmp_path):
    f = tmp_path / "mygpu.toml"
    f.write_text('name = "lab card"\nmemory = "47.5GiB"\nbandwidth_tb_s = 1.0\nbf16_tflops = 200\n')
    g = resolve_gpu(str(f))
    assert g.memory_bytes == int(47.5 * GiB) and g.ridge_flops_per_byte() == pytest.approx(200.0)
    g2 = resolve_gpu("h100", memory_bytes=int(79.18 * GiB))
    assert g2.memory_bytes == int(79.18 * GiB) and g2.hbm_bandwidth_bytes_per_s == 3.35e12
    bad = tmp_path / "bad.json"
    bad.write_text('{"name": "x", "memory": "10GiB"}')
    with pytest.raises(ConfigError, match="missing bandwidth_tb_s"):
        resolve_gpu(str(bad))
    with pytest.raises(InputError, match="GPU memory .* is not plausible"):
        resolve_gpu("h100", memory_bytes=10)
