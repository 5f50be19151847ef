"""FP8 KV below SM89: refused where vLLM's only backend for the model is a Triton one, and never offered as a fix there
(a trial: Llama-3.1-8B on a T4 was offered `--tp 2 --kv-cache-dtype fp8`, gpt-oss-20b on an RTX 3090
`--kv-cache-dtype fp8`; vLLM 0.33 refuses both at start-up). Source: vLLM 0.33.0
v1/attention/backends/triton_attn.py (TritonAttentionImpl.__init__: "FP8 KV cache is not supported by the Triton
attention backend ... requires SM89+"), mla/triton_mla.py (TritonMLAImpl.__init__), flashinfer.py
(supports_compute_capability ≥ 8.0 from 0.25.0, supports_sink), platforms/cuda.py (_get_backend_priorities)."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from kvledger.accounting.vllm_kv_dtype_support import fp8_kv_refusal
from kvledger.catalog.gpus import get_gpu
from kvledger.catalog.models import load_model
from kvledger.cli.main import app
from kvledger.errors import EngineRefusalError


def _plan(*args: str):
    res = CliRunner().invoke(app, ["plan", *args, "--json"], catch_exceptions=False)
    return res.exit_code, json.loads(res.stdout)


def test_t4_is_not_offered_fp8_kv():
    code, d = _plan("meta-llama/Llama-3.1-8B", "--gpu", "T4")
    assert code == 3
    opts = {o["action"]: o for o in d["advice"]["options"]}
    # the 0.33 fixes before: --tp 4, --tp 2 --kv-cache-dtype fp8 (1.04x), three bigger GPUs; the FP8 KV one is gone.
    # The 48 GB size's pick is the RTX 6000 Ada (960 GB/s) over the RTX A6000 (768 GB/s): within a size, the highest
    # HBM bandwidth (advice._bigger_gpus)
    assert list(opts) == ["--tp 4", "--gpu a100-40gb-pcie", "--gpu l40s", "--gpu rtx-6000-ada"]
    assert (opts["--tp 4"]["max_requests"], round(opts["--tp 4"]["max_concurrency"], 2)) == (1, 1.98)


def test_t4_fp8_kv_refused_from_0_25():
    args = ("meta-llama/Llama-3.1-8B", "--gpu", "T4", "--kv-cache-dtype", "fp8", "--max-model-len", "4096")
    with pytest.raises(EngineRefusalError, match=r"vLLM 0\.33\.0 refuses .*below SM80 only TRITON_ATTN is left.*FP8 "
                       "KV cache is not supported by the Triton attention backend"):
        _plan(*args)
    # 0.24.0: FlashInfer still took SM75 (supports_compute_capability ≥ 7.5), so vLLM started with it
    assert _plan(*args, "--engine-version", "0.24.0")[1]["settings"]["kv_cache_dtype"] == "fp8"


def test_sinks_on_ampere_not_offered_fp8_kv():
    # gpt-oss-20b fits on an RTX 3090 with 3 requests at 131,072 tokens: the fixes that raise it were --tp 2 and
    # --kv-cache-dtype fp8 (4.02x); on SM86 a model with sinks gets TRITON_ATTN, which refuses FP8 KV. At --tp 2 the
    # Marlin MXFP4 layout pads each rank's 1,440 expert intermediate to 1,536 (mxfp4.py pads
    # intermediate_size_per_partition; 8.28x when the whole 2,880 was padded to 2,944 and halved, 1,472)
    code, d = _plan("openai/gpt-oss-20b", "--gpu", "RTX-3090")
    assert code == 0
    opts = {o["action"]: o for o in d["advice"]["options"]}
    assert list(opts) == ["--tp 2"]
    assert (opts["--tp 2"]["max_requests"], round(opts["--tp 2"]["max_concurrency"], 2)) == (8, 8.15)
    # on an L4 (SM89) Triton has native FP8: accepted
    l4 = _plan("openai/gpt-oss-20b", "--gpu", "L4", "--kv-cache-dtype", "fp8")[1]
    assert l4["settings"]["kv_cache_dtype"] == "fp8"


def test_refusal_by_model_gpu_and_version():
    llama, oss, dsv3 = (load_model(m) for m in ("meta-llama/Llama-3.1-8B", "openai/gpt-oss-20b",
                                                "deepseek-ai/DeepSeek-V3"))
    a100, rtx3090, h100, mi300x = (get_gpu(g) for g in ("a100-80gb-sxm", "rtx-3090", "h100", "mi300x"))
    assert fp8_kv_refusal(llama, rtx3090, "fp8_e5m2", (0, 33, 0)) is None  # SM86 without sinks: FlashInfer
    assert fp8_kv_refusal(llama, a100, "auto", (0, 33, 0)) is None
    assert fp8_kv_refusal(oss, h100, "fp8", (0, 33, 0)) is None  # SM90
    assert fp8_kv_refusal(oss, mi300x, "fp8", (0, 33, 0)) is None  # ROCm: not these CUDA rules
    assert fp8_kv_refusal(oss, a100, "fp8", (0, 24, 0)).startswith("a model with attention sinks")
    assert fp8_kv_refusal(oss, a100, "fp8", (0, 23, 0)) is None
    assert fp8_kv_refusal(dsv3, a100, "fp8", (0, 26, 0)).startswith("an MLA model gets TRITON_MLA")
    assert fp8_kv_refusal(dsv3, a100, "fp8", (0, 25, 0)) is None


def test_t4_fp8_kv_refused_by_0_11_0_flex_attention():
    # vLLM 0.11.0 (platforms/cuda.py get_attn_backend_cls): below SM80 the V1 engine returns FLEX_ATTENTION, whose
    # FlexAttentionImpl.__init__ raises "FlexAttention does not support quantized kv-cache. Yet"; 0.10.2 fell back to
    # V0 (EngineArgs._is_v1_supported_oracle), 0.11.1 picks by priority and FlashInfer (SM 7.5+) takes FP8
    args = ("meta-llama/Llama-3.1-8B", "--gpu", "T4", "--kv-cache-dtype", "fp8", "--max-model-len", "4096")
    with pytest.raises(EngineRefusalError, match=r"vLLM 0\.11\.0 refuses an FP8 KV cache for .* on the NVIDIA Tesla T4 "
                       r"\(sm75, compute capability 7\.5\): .*FLEX_ATTENTION.*FlexAttention does not support quantized "
                       "kv-cache"):
        _plan(*args, "--engine-version", "0.11.0")
    for v in ("0.10.2", "0.11.1", "0.12.0"):
        assert _plan(*args, "--engine-version", v)[1]["settings"]["kv_cache_dtype"] == "fp8"
    llama, a100 = load_model("meta-llama/Llama-3.1-8B"), get_gpu("a100-80gb-sxm")
    assert fp8_kv_refusal(llama, a100, "fp8", (0, 11, 0)) is None  # SM80: not the FlexAttention case
