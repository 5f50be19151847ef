"""GPU catalog: CUDA-visible memory, ridge points, aliases, custom GPUs, and errors."""

from __future__ import annotations

import pytest

from kvledger.catalog.gpu_file import resolve_gpu
from kvledger.catalog.gpus import CUDA_RESERVE_MIB, get_gpu, gpu_catalog
from kvledger.errors import ConfigError, InputError, UnknownNameError
from kvledger.units import GiB, MiB


def test_h100_memory_is_what_cuda_reports_not_the_marketing_number():
    g = get_gpu("H100-SXM")
    # All 40 vLLM 0.19.0 H100 start-ups (shared/data/vllm-startups-0.19) print total_memory 79.19 GiB: 81,090 MiB
    # (79.189 GiB); nvidia-smi shows 81,559 MiB; marketed 80 GB. vLLM PR #12126 printed 79.22 GiB on another driver.
    assert g.memory_bytes == 81_090 * MiB and round(g.memory_bytes / GiB, 2) == 79.19
    assert (g.nvidia_smi_mib, g.memory_gb_marketed, g.memory_basis) == (81_559, 80, "measured")
    assert round(g.memory_low_bytes / GiB, 2) <= 79.19 <= round(g.memory_high_bytes / GiB, 2) == 79.22


def test_rtx_pro_6000_server_total_is_the_logged_94_97_gib():
    # issue 20: a public vLLM start-up on RTX PRO 6000 Blackwell Server Edition prints 94.97 GiB total (97,249 MiB),
    # where the catalog used to list 89.41 GiB (the marketed 96 GB in GiB).
    g = get_gpu("rtx-pro-6000")
    assert g.gpu_id == "nvidia_rtx_pro_6000_server" and round(g.memory_bytes / GiB, 2) == 94.97
    assert get_gpu("rtx-pro-6000-workstation").memory_basis == "derived"


def test_other_gpus_derive_from_nvidia_smi_with_a_range_that_holds_the_logs():
    # RTX A6000 has no CUDA figure in the catalog: nvidia-smi 49,140 − 450 = 48,690 MiB = 47.55 GiB, range
    # 49,140 − 800 … 49,140 − 300 MiB = 47.21–47.70 GiB.
    g = get_gpu("rtx-a6000")
    assert g.memory_bytes == (49_140 - CUDA_RESERVE_MIB) * MiB and g.memory_basis == "derived"
    assert (g.memory_low_bytes, g.memory_high_bytes) == ((49_140 - 800) * MiB, (49_140 - 300) * MiB)
    # RTX 4090: LLMServingSim's record 25,250,627,584 B (23.52 GiB); vLLM #11550 prints 23.55, CogVideo#36 23.68 GiB.
    g = get_gpu("rtx-4090")
    assert g.memory_low_bytes / GiB <= 23.55 <= g.memory_high_bytes / GiB and round(g.memory_high_bytes / GiB,
                                                                                    2) == 23.68
    assert not g.p2p and get_gpu("h100").nvlink_all_to_all and not get_gpu("l40s").nvlink_all_to_all


def test_every_catalog_gpu_has_a_cuda_total_with_its_source_and_the_deployed_gpus_are_there():
    for g in gpu_catalog().values():
        assert g.memory_source and g.memory_low_bytes <= g.memory_bytes <= g.memory_high_bytes, g.gpu_id
        assert g.memory_basis in ("measured", "derived"), g.gpu_id
    for name in ("T4", "A10G", "A10", "L4", "L40", "L40S", "A40", "rtx-a4000", "rtx-a5000", "rtx-a6000", "3090", "4090",
                 "5090", "rtx-pro-6000-workstation", "rtx-pro-6000-server", "a100-40gb", "a100-40gb-pcie", "a100-80gb",
                 "a100-pcie", "h20", "h100-pcie", "h100", "h100-nvl", "h200", "gh200", "b200", "b300", "gb200", "mi210",
                 "mi250x", "mi300x", "mi325x", "mi355x", "gaudi3"):
        assert get_gpu(name).bf16_flops_per_s > 0, name


def test_unknown_gpu_names_the_custom_gpu_file_and_flags():
    with pytest.raises(UnknownNameError) as e:
        get_gpu("Radeon 9000")
    msg = str(e.value) + str(getattr(e.value, "hint", ""))
    assert "--gpu FILE.json" in msg and "--gpu-memory" in msg and "bandwidth_tb_s" in msg


@pytest.mark.parametrize("name,ridge", [("h100", 295.4), ("H200", 206.1), ("b200", 281.25), ("a100-80gb", 153.0)])
def test_ridge_points(name, ridge):
    # dense BF16 ÷ HBM bandwidth: 989.5/3.35 = 295.4; 989.5/4.8 = 206.1; 2250/8.0 = 281.25; 312/2.039 = 153.0
    assert get_gpu(name).ridge_flops_per_byte() == pytest.approx(ridge, abs=0.05)


def test_aliases_and_ids():
    assert get_gpu("nvidia_h100_sxm") is get_gpu("H100") is get_gpu("h100 sxm")
    assert get_gpu("A100").gpu_id == "nvidia_a100_80gb_sxm"
    assert len(gpu_catalog()) >= 25


def test_a_row_answers_to_its_own_full_name():
    # the name `kvledger gpus` prints and a run's record names (LLMServingSim's meta.json: "device_name": "NVIDIA RTX
    # PRO 6000 Blackwell Server Edition") picks that row, with or without the vendor word, in any case; the two
    # editions stay apart, and no name answers to two rows
    assert get_gpu("RTX PRO 6000 Blackwell Server Edition").gpu_id == "nvidia_rtx_pro_6000_server"
    assert get_gpu("nvidia rtx pro 6000 blackwell workstation edition").gpu_id == "nvidia_rtx_pro_6000_workstation"
    assert all(get_gpu(g.name) is g for g in gpu_catalog().values())
    # the full names widen no family: B200 stays one row's name (no "also: B200 in GB200 NVL72" note), and a full name
    # is never ambiguous
    from kvledger.catalog.gpus import gpu_alias_note

    assert gpu_alias_note("B200") is None and gpu_alias_note("RTX PRO 6000 Blackwell Server Edition") is None


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


def test_mi250x_is_one_gcd_not_the_package():
    # ROCm, torch and vLLM see each of an MI250X's two GCDs as a device: torch prints total_memory=65520MB for
    # 'AMD Instinct MI250X/MI250' and HIP 68,702,699,520 B = 65,520 MiB = 63.98 GiB (gpus.SOURCES.md), not the
    # package's 127.71 GiB. Half the package: 3.2768 / 2 = 1.6384 TB/s, 383 / 2 = 191.5 TF BF16 dense.
    g = get_gpu("MI250X")
    assert g.memory_bytes == 65_520 * MiB == 68_702_699_520 and round(g.memory_bytes / GiB, 2) == 63.98
    assert g.memory_basis == "measured" and "one GCD" in g.name
    assert (g.hbm_bandwidth_bytes_per_s, g.bf16_flops_per_s) == (1.6384e12, 191.5e12)
    # MI250: same die and device name, 362.1 TF a package → about 181 TF a GCD
    assert get_gpu("MI250").memory_bytes == g.memory_bytes and get_gpu("MI250").bf16_flops_per_s == 181e12


def test_mi300x_total_is_what_hip_reports_not_rocm_smi():
    # torch.cuda.get_device_properties on MI300X prints total_memory=196592MB (ROCm/ROCm issue #4203, ROCm 6.2.4), and
    # HIP OOM messages and vLLM's total_gpu_memory print 191.98 GiB (ROCm/rocm-blogs gptq blog, 2025-04-09): 196,592 MiB
    # = 206,141,652,992 B = 192 GiB − 16 MiB, 304 MiB above rocm-smi's 205,822,885,888 B (196,288 MiB, 191.69 GiB).
    g = get_gpu("mi300x")
    assert g.memory_bytes == 196_592 * MiB == 206_141_652_992 and round(g.memory_bytes / GiB, 2) == 191.98
    assert g.memory_basis == "measured" and g.nvidia_smi_mib == 196_288
    # MI325X: 255.98 GiB in a HIP OOM message on 8 × MI325X (vllm-project/vllm issue #41962) = 256 GiB − 16 MiB;
    # MI355X derived the same way: 288 GiB − 16 MiB = 287.98 GiB.
    assert get_gpu("mi325x").memory_bytes == 262_128 * MiB and get_gpu("mi325x").memory_basis == "measured"
    assert round(get_gpu("mi325x").memory_bytes / GiB, 2) == 255.98
    assert get_gpu("mi355x").memory_bytes == 294_896 * MiB and round(get_gpu("mi355x").memory_bytes / GiB, 2) == 287.98


def test_superchips_count_the_gpu_hbm_only():
    # nvidia-smi prints the GPU's HBM (not Grace's LPDDR5X): GB300 284,208 MiB, GB200 189,471, GH200 (96 GB) 97,871;
    # CUDA total = nvidia-smi − 450 MiB (range −800 … −300). GB300 had been 288 GB − 900 MiB = 294,012 MiB (+9.6 GiB).
    for name, smi in (("gb300", 284_208), ("gb200", 189_471), ("gh200", 97_871), ("gh200-144gb", 146_831)):
        g = get_gpu(name)
        assert g.nvidia_smi_mib == smi and g.memory_bytes == (smi - CUDA_RESERVE_MIB) * MiB, name
        assert (g.memory_low_bytes, g.memory_high_bytes) == ((smi - 800) * MiB, (smi - 300) * MiB), name


def test_mxfp4_weights_source_names_the_layout_per_capability():
    # gpt-oss-20b: 24 layers × 32 experts, hidden = intermediate = 2,880. MXFP4 = 0.5 B a value + 1 B a scale per 32.
    # Marlin (A100, sm80) pads hidden to 3,072 (256) and intermediate to 2,944 (128), per expert:
    #   w13 5,760 × 2,880 → 5,888 × 3,072: (9,043,968 + 565,248) − (8,294,400 + 518,400) = 796,416 B
    #   w2  2,880 × 2,880 → 3,072 × 2,944: (4,521,984 + 282,624) − (4,147,200 + 259,200) = 398,208 B
    #   (796,416 + 398,208) × 32 × 24 = 917,471,232 B. On H100 (0.33, Triton: intermediate to a multiple of 64) none.
    from kvledger.catalog.loading import loaded_weights
    from kvledger.catalog.models import load_model

    m = load_model("openai/gpt-oss-20b")
    a100, h100 = loaded_weights(m, gpu_arch="sm80"), loaded_weights(m, gpu_arch="sm90")
    assert "repacked for Marlin on sm80" in a100.how and "+917,471,232 B of padding" in a100.how
    assert "Triton layout on sm90" in h100.how and "no padding" in h100.how and "Marlin" not in h100.how
    assert "FlashInfer's TRT-LLM layout on sm100" in loaded_weights(m, gpu_arch="sm100").how


def test_a_name_with_its_words_in_another_order_picks_the_row_that_has_them():
    # records write a GPU's words in their own order: DistServe's runs say "A100-SXM-80GB", torch's device name
    # (what nvidia-smi prints) "NVIDIA A100-SXM4-80GB" and "NVIDIA A100-PCIE-40GB"; each is one row's words (SXM4 is
    # the A100's SXM), so each picks that row; words that several rows share ("80GB") pick none
    assert get_gpu("A100-SXM-80GB").gpu_id == "nvidia_a100_80gb_sxm"
    assert get_gpu("NVIDIA A100-SXM4-80GB").gpu_id == "nvidia_a100_80gb_sxm"
    assert get_gpu("NVIDIA A100-PCIE-40GB").gpu_id == "nvidia_a100_40gb_pcie"
    with pytest.raises(UnknownNameError):
        get_gpu("80GB")


def test_a_bare_g_after_a_memory_size_reads_as_gb():
    # a newcomer's trial: `--gpu "A100 40G"` (as cloud SKUs and nvidia-smi habits write it) was an unknown GPU while
    # "A100 40GB" picked the row; a size word's bare G is GB, and only a size word (A10G stays the A10G)
    assert get_gpu("A100 40G") is get_gpu("A100 40GB")
    assert get_gpu("h100 80g").gpu_id == "nvidia_h100_sxm"
    assert get_gpu("A100-80G-PCIe").gpu_id == "nvidia_a100_80gb_pcie"
    assert get_gpu("A10G").gpu_id == "nvidia_a10g"


@pytest.mark.parametrize("smi_name,gpu_id", [("Tesla A10G", "nvidia_a10g"), ("NVIDIA A10G", "nvidia_a10g"),
                                             ("L40S-48GB", "nvidia_l40s"),
                                             ("NVIDIA RTX 6000 Ada Generation", "nvidia_rtx_6000_ada"),
                                             ("Tesla T4", "nvidia_t4")])
def test_nvidia_smi_query_gpu_names_pick_their_row(smi_name, gpu_id):
    # `nvidia-smi --query-gpu=name` spellings (AWS G5 prints "NVIDIA A10G", older drivers "Tesla A10G"; a cloud SKU
    # list writes "L40S-48GB"; RunPod and nvidia-smi tables print "NVIDIA RTX 6000 Ada Generation").
    assert get_gpu(smi_name).gpu_id == gpu_id


def test_an_smi_memory_suffix_must_be_the_rows_memory_and_a_family_name_still_lists_its_choices():
    # The L40S is 48 GB: "L40S-24GB" names no catalog card, so it is refused, not read as the L40S. nvidia-smi's
    # "NVIDIA GH200 480GB" (the superchip's CPU+GPU total) is not the 96 GB GH200 row's 96, so it is refused too.
    for name in ("L40S-24GB", "NVIDIA GH200 480GB"):
        with pytest.raises(UnknownNameError):
            get_gpu(name)
    from kvledger.catalog.gpus import gpu_alias_note

    assert "name one to choose" in gpu_alias_note("NVIDIA H200") and "h200-nvl" in gpu_alias_note("NVIDIA H200")
    with pytest.raises(UnknownNameError, match="rtx-a6000"):  # "RTX 6000" is the Ampere A6000, Ada or PRO: refused
        get_gpu("RTX 6000")


def test_rtx_6000_ada_row_from_its_datasheet():
    # NVIDIA RTX 6000 Ada datasheet: 48 GB GDDR6 ECC, 960 GB/s, "Tensor Performance 1,457 TFLOPS" (FP8, sparse):
    # dense FP8 1,457 / 2 = 728.5 TFLOPS, BF16 dense 728.5 / 2 = 364.25; ridge 364.25e12 / 960e9 = 379.4 FLOP/B.
    # nvidia-smi prints 49,140 MiB; CUDA total derived 49,140 − 450 = 48,690 MiB = 47.55 GiB; sm89 (Ada, FP8 MMAs).
    g = get_gpu("rtx-6000-ada")
    assert (g.memory_gb_marketed, g.nvidia_smi_mib, g.memory_bytes) == (48, 49_140, 48_690 * MiB)
    assert (g.hbm_bandwidth_bytes_per_s, g.bf16_flops_per_s, g.fp8_flops_per_s) == (960e9, 364.25e12, 728.5e12)
    assert g.arch == "sm89" and g.fp4_flops_per_s is None and round(g.ridge_flops_per_byte(), 1) == 379.4
