"""``plan`` on quantized checkpoints as a first-time user meets them: TP shards vLLM refuses at load, the checkpoint's
own ``--quantization``, a ModelOpt FP8 KV cache under auto, ``-q fp8`` on a T4 by release."""

from __future__ import annotations

import json
from importlib import resources

from cli_run import refused, run_cli


def _config(tmp_path, base: str, **update) -> str:
    raw = json.loads((resources.files("kvledger.catalog") / "data/models" / base).read_text())
    raw.update(update)
    path = tmp_path / "config.json"
    path.write_text(json.dumps(raw))
    return str(path)


AWQ = {"quant_method": "awq", "bits": 4, "group_size": 128, "zero_point": True, "version": "gemm"}


def test_qwen72b_awq_at_tp2_does_not_start_and_names_the_fix(tmp_path):
    # 29,568 / 2 = 14,784 down_proj inputs per GPU; 14,784 / 128 = 115.5 → refused as the heads-not-dividing-TP case
    # is (a setting vLLM refuses: the console entry prints the one paragraph and exits 2)
    cfg = _config(tmp_path, "Qwen--Qwen2.5-72B.json", quantization_config=AWQ)
    msg = refused("plan", cfg, "--gpu", "L40S", "--tp", "2")
    assert "vLLM 0.33.0 does not start" in msg and "14,784 input features per GPU (29,568/2)" in msg
    assert msg.endswith("a TP that works: --tp 1")


def test_qwen3_fp8_block_and_moe_refusals(tmp_path):
    msg = refused("plan", "Qwen/Qwen3-32B-FP8", "--gpu", "L40S", "--tp", "16")  # 25,600 / 16 = 1,600 = 12.5 × 128
    assert "1,600 input features per GPU (25,600/16), not a multiple of 128" in msg
    msg = refused("plan", "Qwen/Qwen3-30B-A3B-FP8", "--gpu", "H100", "--tp", "8")  # 768 / 8 = 96 < block_n 128
    assert "96 intermediate features per GPU (768/8)" in msg
    assert run_cli("plan", "Qwen/Qwen3-30B-A3B-FP8", "--gpu", "H100", "--tp", "8",
                   "--enable-expert-parallel").exit_code == 0


def test_the_checkpoints_own_method_plans_as_auto(tmp_path):
    cfg = _config(tmp_path, "meta-llama--Meta-Llama-3.1-8B.json", quantization_config=AWQ)
    auto = json.loads(run_cli("plan", cfg, "--gpu", "L40S", "--json").output)
    for flag in ("awq", "awq_marlin"):
        d = json.loads(run_cli("plan", cfg, "--gpu", "L40S", "-q", flag, "--json").output)
        assert d["memory"]["num_gpu_blocks"] == auto["memory"]["num_gpu_blocks"]
    msg = refused("plan", cfg, "--gpu", "L40S", "-q", "fp8")
    assert "is already quantized as awq" in msg and "only 'fp8'" not in msg


def test_modelopt_fp8_kv_under_auto_and_fp8_weights_on_a_t4_by_release(tmp_path):
    qc = {"quant_method": "modelopt", "quant_algo": "FP8", "kv_cache_quant_algo": "FP8"}
    cfg = _config(tmp_path, "meta-llama--Meta-Llama-3.1-8B.json", quantization_config=qc)
    out = run_cli("plan", cfg, "--gpu", "L40S").output
    assert "65,536 B (64.00 KiB) per GPU, KV dtype fp8_e4m3 (--kv-cache-dtype auto → fp8_e4m3" in out
    # Fp8Config.get_min_capability: 80 up to 0.13, 75 from 0.14 (T4 is 7.5)
    old = refused("plan", "meta-llama/Llama-3.1-8B", "--gpu", "T4", "-q", "fp8", "--engine-version", "0.13.0")
    assert "needs compute capability 80 or more, this GPU has 75" in old
    assert "needs compute capability" not in run_cli("plan", "meta-llama/Llama-3.1-8B", "--gpu", "T4", "-q",
                                                     "fp8").output


def test_gpt_oss_on_a_t4_and_bitsandbytes_on_0_33_do_not_start(tmp_path):
    # Mxfp4Config.get_min_capability() = 80 (mxfp4.py, 0.11-0.33); T4 is 7.5: refused at every TP, not "fits at --tp 2"
    for tp in ("1", "2"):
        msg = refused("plan", "openai/gpt-oss-20b", "--gpu", "T4", "--tp", tp)
        assert msg.startswith("vLLM 0.33.0 does not start: the quantization method mxfp4 needs compute capability 80 "
                              "or more, this GPU has 75")
    assert run_cli("plan", "openai/gpt-oss-20b", "--gpu", "A10G", "--max-model-len", "4096").exit_code == 0
    # SGLang (model_loader/loader.py, mxfp4.py get_min_capability 80 in 0.5.3, 0.5.5, 0.5.23) refuses it alike
    msg = refused("plan", "openai/gpt-oss-20b", "--gpu", "T4", "--engine", "sglang", "--tp", "2")
    assert msg.startswith("SGLang 0.5.23 does not start openai/gpt-oss-20b: the quantization method mxfp4 needs "
                          "compute capability 80 or more, this GPU has 75")
    # an unsloth-style bnb-4bit checkpoint: vLLM 0.28.0 removed bitsandbytes ("Unknown quantization method")
    qc = {"quant_method": "bitsandbytes", "load_in_4bit": True, "bnb_4bit_quant_type": "nf4",
          "bnb_4bit_use_double_quant": True}
    cfg = _config(tmp_path, "meta-llama--Meta-Llama-3.1-8B.json", quantization_config=qc)
    msg = refused("plan", cfg, "--gpu", "A10G")
    assert "vLLM 0.33.0 does not start: bitsandbytes was removed in vLLM 0.28.0" in msg
    assert "--engine-version 0.27.0" in msg
    old = json.loads(run_cli("plan", cfg, "--gpu", "A10G", "--engine-version", "0.27.0", "--json").output)
    # 6,979,321,856 Linear params × (0.5 B + 4 B / 64 absmax; the loader dequantizes a double-quant absmax to fp32)
    # = 3,925,868,544 B; embed_tokens + lm_head 2 × 128,256 × 4,096 × 2 B = 2,101,346,304 B; 65 norms × 4,096 × 2 B
    # = 532,480 B: 6,027,747,328 B
    assert old["model"]["weight_bytes"] == 6_027_747_328


def test_an_fbgemm_fp8_checkpoint_says_the_flag_vllm_needs(tmp_path):
    # Llama-3.1-405B-Instruct-FP8's quant_method: in DEPRECATED_QUANTIZATION_METHODS from vLLM 0.14.0, refused at
    # start-up without --allow-deprecated-quantization; 0.13.0 has no such list
    qc = {"quant_method": "fbgemm_fp8", "activation_scale_ub": 1200.0, "modules_to_not_convert": ["lm_head"]}
    cfg = _config(tmp_path, "meta-llama--Meta-Llama-3.1-8B.json", quantization_config=qc)
    flag = "starts a fbgemm_fp8 checkpoint only with --allow-deprecated-quantization"
    for version, said in (("0.33.0", True), ("0.13.0", False)):
        d = json.loads(run_cli("plan", cfg, "--gpu", "A10G", "--engine-version", version, "--json").output)
        assert any(flag in n for n in d["memory"]["notes"]) is said


def test_a_valid_method_the_release_refuses_on_the_gpu_exits_3_a_bad_spelling_2(cli_entry):
    # README "exit status": 3 = nothing can start. Mxfp4Config.get_min_capability 80 > T4's 75; vLLM 0.10.0 has no
    # mxfp4.py ("Unknown quantization method: mxfp4", first in 0.10.1); SGLang's Fp8Config 80 > 75 for an fp8
    # checkpoint; "-q int3" is no method at all: bad input, 2
    for argv in (["openai/gpt-oss-20b", "--gpu", "T4", "--tp", "2"],
                 ["openai/gpt-oss-20b", "--gpu", "H100", "--engine-version", "0.10.0"],
                 ["Qwen/Qwen3-32B-FP8", "--gpu", "T4", "--tp", "4", "--engine", "sglang"]):
        code, out, err = cli_entry("plan", *argv, "--json")
        e = json.loads(out)["error"]
        assert code == 3 and e["exit_code"] == 3 and e["type"] == "EngineRefusalError", err
        assert "does not start" in e["message"]
    code, _, err = cli_entry("plan", "meta-llama/Llama-3.1-8B", "--gpu", "T4", "-q", "int3")
    assert code == 2 and "not a vLLM quantization method" in err
