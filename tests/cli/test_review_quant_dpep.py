"""Review of the quantization refusals and DP + EP rules against vLLM's own code, as a user meets them in ``plan``."""

from __future__ import annotations

from cli_run import cli_json, refused


def test_a_token_budget_below_the_default_max_num_seqs_starts_on_0_10_1():
    # vLLM 0.10.1 engine/arg_utils.py::_set_default_args_v1: with --max-num-seqs unset, max_num_seqs =
    # min(default_max_num_seqs[usage_context] = 1,024 on an H100, max_num_batched_tokens 512) = 512, so the
    # scheduler's "must be greater than or equal to max_num_seqs" holds; 0.10.0 keeps 1,024 and refuses
    d = cli_json("plan", "Qwen/Qwen3-8B", "--gpu", "H100", "--engine-version", "0.10.1",
                 "--max-num-batched-tokens", "512")
    assert (d["memory"]["max_num_batched_tokens"], d["memory"]["max_num_seqs"]) == (512, 512)
    msg = refused("plan", "Qwen/Qwen3-8B", "--gpu", "H100", "--engine-version", "0.10.0",
                  "--max-num-batched-tokens", "512")
    assert "max_num_batched_tokens (512) must be at least max_num_seqs (1,024)" in msg


def test_deepep_low_latency_is_taken_on_0_10_1_and_chunks_the_profile_rows():
    # 0.10.1 cuda_communicator.py takes deepep_low_latency; fused_moe/layer.py::forward_impl chunks it at 256
    # tokens per rank: DP 2 × min(8,192, 256) = 512 rows (the default naive gathers 2 × 8,192 = 16,384)
    flags = ("Qwen/Qwen3-30B-A3B", "--gpu", "H100", "-dp", "2", "--enable-expert-parallel", "--engine-version",
             "0.10.1")
    assert cli_json("plan", *flags)["data_parallel"]["moe_profile_tokens"] == 16_384
    d = cli_json("plan", *flags, "--all2all-backend", "deepep_low_latency")
    assert d["data_parallel"]["moe_profile_tokens"] == 512


def _llama8b_with(tmp_path, quantization_config: dict) -> str:
    import json
    from importlib import resources

    base = resources.files("kvledger.catalog") / "data/models/meta-llama--Meta-Llama-3.1-8B.json"
    raw = json.loads(base.read_text()) | {"quantization_config": quantization_config}
    path = tmp_path / "config.json"
    path.write_text(json.dumps(raw))
    return str(path)


def _ct_config(tmp_path, weights: dict, acts: dict | None = None) -> str:
    group = {"targets": ["Linear"], "weights": weights} | ({"input_activations": acts} if acts else {})
    return _llama8b_with(tmp_path, {"quant_method": "compressed-tensors", "config_groups": {"group_0": group},
                                    "ignore": ["lm_head"]})


FP8_W = {"num_bits": 8, "type": "float", "strategy": "channel", "symmetric": True, "dynamic": False}
FP8_A = {"num_bits": 8, "type": "float", "strategy": "token", "dynamic": True, "symmetric": True}
W4A16 = {"num_bits": 4, "type": "int", "strategy": "group", "group_size": 128, "symmetric": True}


def test_compressed_tensors_fp8_on_a_t4_is_refused_up_to_0_15(tmp_path):
    # compressed_tensors.py::_get_scheme_from_parts: FP8 W8A8 (CompressedTensorsW8A8Fp8.get_min_capability 89) is not
    # supported on sm75, so CompressedTensorsW8A16Fp8 is chosen, whose get_min_capability is 80 in 0.11.0–0.15.0 and
    # 75 from 0.16.0 (schemes/compressed_tensors_w8a16_fp8.py); _check_scheme_supported then raises below it
    cfg = _ct_config(tmp_path, FP8_W, FP8_A)
    msg = refused("plan", cfg, "--gpu", "T4", "--engine-version", "0.15.0", "--max-model-len", "4096")
    assert msg.startswith("vLLM 0.15.0 does not start: this compressed-tensors checkpoint (channel float8) needs "
                          "compute capability 80 or more, this GPU has 75")
    assert msg.endswith("vLLM 0.16 and later take it from 75")
    assert cli_json("plan", cfg, "--gpu", "T4", "--engine-version", "0.16.0",
                    "--max-model-len", "4096")["memory"]["num_gpu_blocks"] > 0


def test_compressed_tensors_w4a16_on_a_t4_by_release(tmp_path):
    # schemes/compressed_tensors_wNa16.py get_min_capability: 80 in 0.10.1 and 0.11.0, 75 from 0.12.0
    cfg = _ct_config(tmp_path, W4A16)
    msg = refused("plan", cfg, "--gpu", "T4", "--engine-version", "0.11.0", "--max-model-len", "4096")
    assert "needs compute capability 80 or more, this GPU has 75" in msg and msg.endswith("vLLM 0.12 and later take "
                                                                                          "it from 75")
    assert cli_json("plan", cfg, "--gpu", "T4", "--engine-version", "0.12.0",
                    "--max-model-len", "4096")["memory"]["num_gpu_blocks"] > 0
    # A10G (sm86) passes every scheme's minimum (80 at most below the W8A8 FP8 fallback)
    assert cli_json("plan", _ct_config(tmp_path, FP8_W, FP8_A), "--gpu", "A10G", "--engine-version", "0.11.0",
                    "--max-model-len", "4096")["memory"]["num_gpu_blocks"] > 0


def test_the_dp_note_names_the_release_s_default_all2all_backend():
    # envs.py VLLM_ALL2ALL_BACKEND defaults to "naive" in 0.9.0–0.10.2 and "allgather_reducescatter" from 0.11.0
    def note(ver: str) -> str:
        d = cli_json("plan", "Qwen/Qwen3-30B-A3B", "--gpu", "H100", "-dp", "2", "--enable-expert-parallel",
                     "--engine-version", ver)
        return next(n for n in d["memory"]["notes"] if n.startswith("--data-parallel-size 2"))

    assert "(the default all2all_backend, naive, gathers every rank's rows;" in note("0.10.1")
    assert "(the default all2all_backend, allgather_reducescatter, gathers every rank's rows;" in note("0.11.0")


def test_a_modelopt_fp8_checkpoint_on_a_t4_is_refused_for_its_method_before_its_fp8_kv(tmp_path):
    # vLLM 0.27.0: VllmConfig builds the quantization config first (config/vllm.py::_get_quantization_config:
    # ModelOptFp8Config.get_min_capability 80 > 75), before model init picks an attention backend for the checkpoint's
    # FP8 KV cache (kv_cache_quant_algo FP8 → fp8_e4m3 under auto), so that is the refusal the server prints
    cfg = _llama8b_with(tmp_path, {"quant_method": "modelopt", "quant_algo": "FP8", "kv_cache_quant_algo": "FP8"})
    msg = refused("plan", cfg, "--gpu", "T4", "--engine-version", "0.27.0", "--max-model-len", "4096")
    assert msg.startswith("vLLM 0.27.0 does not start: the quantization method modelopt needs compute capability 80 "
                          "or more, this GPU has 75")
