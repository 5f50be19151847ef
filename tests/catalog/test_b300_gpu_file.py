"""B300 / GB300: compute capability 10.3 (NVIDIA's CUDA compute capability table), kept by a GPU file based on them,
and their SM counts as the devices report them (catalog/data/gpu_compute_units.csv: OpenXLA's b300 and gb300 target
specs, core_count 158 and 152, both compute capability 10.3)."""

from __future__ import annotations

import pytest

from kvledger.accounting.plan import build_plan
from kvledger.accounting.settings import make_settings
from kvledger.accounting.vllm_profile import sm_count
from kvledger.catalog.gpu_file import resolve_gpu
from kvledger.catalog.gpus import get_gpu
from kvledger.catalog.models import load_model


def test_the_sm_counts_are_the_devices():
    assert sm_count("nvidia_b300", "sm100") == 158 and sm_count("nvidia_gb300", "sm100") == 152
    assert sm_count("nvidia_b200", "sm100") == 148  # unchanged


@pytest.mark.parametrize("base,capability", [("b300", 103), ("gb300", 103), ("b200", 100), ("h100", 90)])
def test_a_gpu_file_keeps_its_bases_exact_capability(tmp_path, base, capability):
    f = tmp_path / "mine.toml"
    f.write_text(f'memory = "260GiB"\nbandwidth_tb_s = 7.7\nbf16_tflops = 2250\nbase = "{base}"\n')
    g = resolve_gpu(str(f))
    assert g.gpu_id == "custom" and g.capability == capability and g.exact_arch == f"sm{capability}"


def test_a_b300_file_plans_as_a_b300(tmp_path):
    # vLLM 0.11.0 forces CUTLASS_MLA's 128-token block on SM 10.0 exactly (platforms/cuda.py is_device_capability(100));
    # a B300-based file is SM 10.3 and keeps 16, as the catalog B300 does (before: the family's 10.0, 128)
    f = tmp_path / "mine.toml"
    f.write_text('memory = "260GiB"\nbandwidth_tb_s = 7.7\nbf16_tflops = 2250\nbase = "b300"\n')
    s = make_settings(engine_version="0.11.0", max_model_len=8_192)
    m = load_model("deepseek-ai/DeepSeek-V2-Lite")
    assert build_plan(m, resolve_gpu(str(f)), s, with_roofline=False).memory.block_size == 16
    assert build_plan(m, get_gpu("b300"), s, with_roofline=False).memory.block_size == 16
