"""``--quantization`` against the checkpoint's method (quant_flag.py), vLLM's release refusals (quant_rules.py) and the
KV scheme a checkpoint declares (quant_kv.py)."""

from __future__ import annotations

import json
from importlib import resources

import pytest

from kvledger.catalog.loading import loaded_weights
from kvledger.catalog.modelspec import parse_config
from kvledger.catalog.quant_flag import scheme_for_flag
from kvledger.catalog.quant_rules import check_quant_release, deprecated_method_note
from kvledger.errors import ConfigError, InputError
from kvledger.errors import EngineRefusalError as Refused  # exit 3: the release does not start it on this GPU

V033, V027, V019, V013 = (0, 33, 0), (0, 27, 0), (0, 19, 0), (0, 13, 0)


def _llama8b(qc: dict | None = None):
    raw = json.loads((resources.files("kvledger.catalog") / "data/models" / "meta-llama--Meta-Llama-3.1-8B.json")
                     .read_text())
    if qc is not None:
        raw["quantization_config"] = qc
    return parse_config(raw, source="t", name="llama8b")


AWQ = {"quant_method": "awq", "bits": 4, "group_size": 128, "zero_point": True}
GPTQ = {"quant_method": "gptq", "bits": 4, "group_size": 128, "sym": True, "desc_act": False}


@pytest.mark.parametrize("flag", ["awq", "awq_marlin", "marlin"])
def test_an_awq_checkpoint_takes_the_flags_vllm_takes_with_the_same_weights(flag):
    # 0.19: awq_marlin's override takes None/marlin/awq_marlin; "awq" equals the config's method (plain AWQ kernel)
    m = _llama8b(AWQ)
    for v in (V019, V033):
        assert scheme_for_flag(m, flag, v) is m.quant
    assert loaded_weights(m, quantization=flag).bytes == loaded_weights(m).bytes


def test_a_method_that_does_not_match_the_checkpoint_is_refused_in_vllms_words():
    with pytest.raises(InputError) as err:
        scheme_for_flag(_llama8b(AWQ), "fp8", V019)
    msg = str(err.value)
    assert msg.startswith("--quantization fp8: llama8b is already quantized as awq (awq: 4-bit weights")
    assert ("\"Quantization method specified in the model config (awq) does not match the quantization method "
            "specified in the `quantization` argument (fp8)\"") in msg
    assert msg.endswith("leave --quantization out: vLLM serves it as awq_marlin")
    with pytest.raises(InputError, match="serves it as auto_awq$"):  # 0.26+: auto_awq.py
        scheme_for_flag(_llama8b(AWQ), "gptq", V033)


def test_gptq_marlin_needs_a_marlin_compatible_checkpoint_before_0_26():
    three = dict(GPTQ, bits=3)  # 3-bit: gptq_marlin's TYPE_MAP has (4, sym) and (8, sym) only; plain gptq takes it
    assert scheme_for_flag(_llama8b(three), "gptq", V019).bits == 3
    with pytest.raises(InputError, match=r"model config \(gptq\) does not match .* argument \(gptq_marlin\)"):
        scheme_for_flag(_llama8b(three), "gptq_marlin", V019)


def test_online_bitsandbytes_is_four_bits_plus_an_fp32_absmax_per_64():
    # Llama-3.1-8B: 6,979,321,856 Linear params × 0.5 B = 3,489,660,928 B + 6,979,321,856 / 64 × 4 B = 436,207,616 B of
    # absmax, the same bytes as a bnb 4-bit checkpoint (load_in_4bit, blocksize 64); the rest stays bf16.
    plain, bnb = _llama8b(), _llama8b({"quant_method": "bitsandbytes", "load_in_4bit": True})
    q = scheme_for_flag(plain, "bitsandbytes", V027)
    assert (q.method, q.bits, q.group_size, q.scale_bytes) == ("bitsandbytes", 4, 64, 4)
    assert (loaded_weights(plain, quantization="bitsandbytes", engine_version=V027).bytes
            == loaded_weights(bnb, engine_version=V027).bytes)
    # gptq reads quantize_config.json from a pre-quantized checkpoint (gptq.py get_config_filenames); vLLM refuses it
    # on an unquantized one
    with pytest.raises(InputError, match=r"gptq does not quantize weights on load: .* or quantize_config.json\), "
                                         r"and with neither refuses at start-up"):
        scheme_for_flag(plain, "gptq", V033)
    # experts_int8 quantizes on load (no config file) but is not modelled
    with pytest.raises(InputError, match="quantizing it with experts_int8 on load is not modelled"):
        scheme_for_flag(plain, "experts_int8", V033)
    with pytest.raises(InputError, match="not a vLLM quantization method"):
        scheme_for_flag(plain, "int3", V033)


def test_awq_at_three_bits_is_refused_as_vllm_refuses_it():
    with pytest.raises(ConfigError, match=r"3-bit AWQ: vLLM refuses it .*only 4-bit weight quantization is supported"):
        _llama8b(dict(AWQ, bits=3))


def test_gptq_widths_by_release():
    # gptq.py (to 0.19) takes 2/3/4/8 bits; auto_gptq.py (0.26+) 4- and 8-bit symmetric only
    three = _llama8b(dict(GPTQ, bits=3)).quant
    check_quant_release(three, None, V019, "sm89")
    with pytest.raises(Refused, match=r"bits=3, sym=True"):
        check_quant_release(three, None, V033, "sm89")
    with pytest.raises(Refused, match=r"bits=4, sym=False"):
        check_quant_release(_llama8b(dict(GPTQ, sym=False)).quant, None, V033, "sm89")


def test_fp8_minimum_capability_by_release():
    # Fp8Config.get_min_capability: 80 in 0.11-0.13, 75 from 0.14 — a T4 (sm75) takes -q fp8 from 0.14 on
    online = scheme_for_flag(_llama8b(), "fp8", V033)
    check_quant_release(online, "fp8", V033, "sm75")
    check_quant_release(online, "fp8", (0, 14, 0), "sm75")
    with pytest.raises(Refused, match=r"vLLM 0.13.0 does not start: the quantization method fp8 needs compute "
                                      r"capability 80 or more, this GPU has 75"):
        check_quant_release(online, "fp8", V013, "sm75")
    check_quant_release(online, "fp8", V013, "sm80")
    check_quant_release(online, "fp8", V013, "")  # not NVIDIA: no capability to compare


def test_bitsandbytes_is_refused_from_0_28_which_removed_it():
    # 0.27.0 ships quantization/bitsandbytes.py; 0.28.0 and 0.33.0 do not, and "bitsandbytes" is out of
    # QUANTIZATION_METHODS: ModelConfig._verify_quantization raises "Unknown quantization method: bitsandbytes"
    bnb = _llama8b({"quant_method": "bitsandbytes", "load_in_4bit": True}).quant
    check_quant_release(bnb, None, V027, "sm86")
    for v in ((0, 28, 0), V033):
        with pytest.raises(Refused, match=r"^this bitsandbytes checkpoint .*: vLLM 0\.(28|33)\.0 does not start: "
                                          r"bitsandbytes was removed in vLLM 0\.28\.0"):
            check_quant_release(bnb, None, v, "sm86")
    online = scheme_for_flag(_llama8b(), "bitsandbytes", V033)
    with pytest.raises(Refused, match=r"^--quantization bitsandbytes: vLLM 0\.33\.0 does not start"):
        check_quant_release(online, "bitsandbytes", V033, "sm90")


def test_mxfp4_needs_compute_capability_80_in_every_release_read():
    # mxfp4.py Mxfp4Config.get_min_capability() returns 80 in 0.11.0-0.33.0: gpt-oss does not start on a T4 (7.5)
    # at any TP; an A10G (8.6) or A100 (8.0) loads it (Marlin MXFP4, weight-only)
    raw = json.loads((resources.files("kvledger.catalog") / "data/models" / "openai--gpt-oss-20b.json").read_text())
    q = parse_config(raw, source="t", name="gpt-oss-20b").quant
    assert q.method == "mxfp4"
    for v in ((0, 11, 0), V019, V033):
        with pytest.raises(Refused, match=r"the quantization method mxfp4 needs compute capability 80 or more, "
                                          r"this GPU has 75 .*; a GPU of compute capability 8\.0 or more loads it$"):
            check_quant_release(q, None, v, "sm75")
        check_quant_release(q, None, v, "sm80")
        check_quant_release(q, None, v, "sm86")


def test_fbgemm_fp8_needs_80_and_from_0_14_the_deprecated_flag():
    # meta-llama/Llama-3.1-405B-Instruct-FP8's method: FBGEMMFp8Config.get_min_capability() = 80 (0.11-0.33), not
    # Fp8Config's 75; DEPRECATED_QUANTIZATION_METHODS lists it from 0.14.0 (0.13.0 has no list)
    q = _llama8b({"quant_method": "fbgemm_fp8", "activation_scale_ub": 1200.0,
                  "modules_to_not_convert": ["lm_head"]}).quant
    with pytest.raises(Refused, match=r"method fbgemm_fp8 needs compute capability 80 or more, this GPU has 75"):
        check_quant_release(q, None, V033, "sm75")
    check_quant_release(q, None, V033, "sm80")
    assert deprecated_method_note(q, V013) is None
    for v in ((0, 14, 0), V019, V033):
        assert deprecated_method_note(q, v).startswith(f"vLLM {'.'.join(map(str, v))} starts a fbgemm_fp8 checkpoint "
                                                       f"only with --allow-deprecated-quantization")
    assert deprecated_method_note(_llama8b(AWQ).quant, V033) is None


def test_declared_kv_schemes_are_read_as_vllm_reads_them():
    mo = _llama8b({"quant_method": "modelopt", "quant_algo": "FP8", "kv_cache_quant_algo": "FP8"}).quant
    assert (mo.kv_algo, mo.kv_algo_from) == ("fp8", "modelopt")
    nested = _llama8b({"quant_method": "modelopt", "quantization": {"quant_algo": "FP8", "kv_cache_quant_algo": "FP8"}})
    assert nested.quant.kv_algo == "fp8"
    ct = _llama8b({"quant_method": "compressed-tensors", "config_groups": {"g": {"weights": {
        "num_bits": 8, "type": "float", "strategy": "channel"}}}, "kv_cache_scheme": {
        "num_bits": 8, "type": "float", "strategy": "tensor", "dynamic": False}}).quant
    assert (ct.kv_algo, ct.kv_algo_from) == ("fp8", "compressed-tensors")
    assert _llama8b(AWQ).quant.kv_algo == ""


def _gpt_oss():
    raw = json.loads((resources.files("kvledger.catalog") / "data/models" / "openai--gpt-oss-20b.json").read_text())
    return parse_config(raw, source="t", name="gpt-oss-20b").quant


def test_mxfp4_arrives_in_0_10_1():
    # wheels read: 0.9.2 and 0.10.0 have no quantization/mxfp4.py and no "mxfp4" in QUANTIZATION_METHODS (config.py
    # _verify_quantization: "Unknown quantization method: mxfp4"); 0.10.1 ships mxfp4.py (Mxfp4Config, min 80) and
    # GptOssForCausalLM in the registry
    q = _gpt_oss()
    for v, text in (((0, 9, 2), "0.9.2"), ((0, 10, 0), "0.10.0")):
        with pytest.raises(Refused) as err:
            check_quant_release(q, None, v, "sm90")
        assert str(err.value).startswith(f"this MXFP4 checkpoint (quant_method mxfp4): vLLM {text} does not start: "
                                         "MXFP4 arrived in vLLM 0.10.1 (config.py: \"Unknown quantization method: "
                                         "mxfp4\"")
    check_quant_release(q, None, (0, 10, 1), "sm90")
    with pytest.raises(Refused, match="needs compute capability 80 or more, this GPU has 75"):
        check_quant_release(q, None, (0, 10, 1), "sm75")


def test_modelopt_minimum_capability_by_release():
    # modelopt.py get_min_capability, read per wheel: ModelOptNvFp4Config 80 in 0.9.2-0.13.0, 75 from 0.14.0 (0.14.0,
    # 0.15.0, 0.17.0, 0.19.0, 0.26.0-0.29.0, 0.33.0); ModelOptFp8Config 89 to 0.26.0, 80 from 0.27.0
    nvfp4 = _llama8b({"quant_method": "modelopt", "quant_algo": "NVFP4", "group_size": 16}).quant
    fp8 = _llama8b({"quant_method": "modelopt", "quant_algo": "FP8"}).quant
    with pytest.raises(Refused, match=r"^vLLM 0\.13\.0 does not start: the quantization method modelopt_fp4 "
                                      r"needs compute capability 80 or more, this GPU has 75 .*; vLLM 0\.14 "
                                      r"and later take modelopt_fp4 from 75$"):
        check_quant_release(nvfp4, None, V013, "sm75")
    check_quant_release(nvfp4, None, V013, "sm80")
    for v in ((0, 14, 0), V019, V033):
        check_quant_release(nvfp4, None, v, "sm75")
    with pytest.raises(Refused, match=r"method modelopt needs compute capability 89 or more, this GPU has "
                                      r"86"):
        check_quant_release(fp8, None, (0, 26, 0), "sm86")
    for v in (V027, V033):
        check_quant_release(fp8, None, v, "sm80")
    with pytest.raises(Refused, match="method modelopt needs compute capability 80 or more, this GPU has 75"):
        check_quant_release(fp8, None, V027, "sm75")


def test_an_unknown_quantization_spelling_stays_bad_input():
    # exit 2, not the start-up refusal's 3: not a method name at all
    with pytest.raises(InputError, match="not a vLLM quantization method") as err:
        scheme_for_flag(_llama8b(), "int3", V033)
    assert not isinstance(err.value, Refused)
