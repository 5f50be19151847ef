"""The layers' norm, RoPE, activation and add kernels (accounting/layer_kernels.py): the fit recovers known constants
from synthetic rows, reproduces Vidur's measured rows, and the roofline adds the term where the curve prices."""

from __future__ import annotations

import csv
from importlib import resources
from pathlib import Path

import pytest

from kvledger.accounting.layer_kernels import (
    OPS,
    LayerKernels,
    fit_layer_kernels,
    kernels_apply,
    layer_kernel_fit,
    layer_ops,
    op_shape,
)
from kvledger.accounting.op_profiles import PROFILED_GPU
from kvledger.accounting.stepcost import StepShape
from kvledger.analyses.serving.sim_setup import SimRequestArgs, prepare
from kvledger.catalog.gpus import get_gpu
from kvledger.catalog.models import load_model

H100 = "nvidia_h100_sxm"


def test_op_shapes_by_hand():
    # Llama-3.1-8B at TP 1: hidden 4096, intermediate 14336, 32 query and 8 KV heads of 128
    # norms: 2 B × (read + write) × 4096 = 16,384 B a token, rows of 4096; add: 3 arrays × 2 B × 4096 = 24,576 B;
    # RoPE: (32 + 8) × 128 = 5120 elements, read and written: 20,480 B; SiLU-and-mul: reads 2 × 14336, writes 14336
    # at 2 B = 86,016 B, rows of 14336
    dims = (4096, 14336, 32, 8, 128, 1)
    assert op_shape("input_layernorm", *dims) == (16384.0, 4096.0)
    assert op_shape("add", *dims) == (24576.0, 4096.0)
    assert op_shape("attn_rope", *dims) == (20480.0, 5120.0)
    assert op_shape("mlp_act", *dims) == (86016.0, 14336.0)
    # at TP 4 the heads and the intermediate width split: RoPE (8 + 2) × 128 = 1280, activation 3584
    assert op_shape("attn_rope", 4096, 14336, 32, 8, 128, 4) == (5120.0, 1280.0)
    assert op_shape("mlp_act", 4096, 14336, 32, 8, 128, 4) == (21504.0, 3584.0)


def test_the_fit_recovers_known_constants_from_synthetic_rows(tmp_path, monkeypatch):
    # rows made from t = max(a + w·width, bytes/bw) with a = 2 µs, w = 0.5 ns per element, bw = 1.5 TB/s for every op:
    # the floor's least squares over ≤ 16-token rows is exact (two widths), and every row slower than 3 × the
    # median floor is bandwidth-bound, bytes / t = bw exactly
    import kvledger.accounting.vidur_profiles as vp

    a, w, bw = 2e-6, 0.5e-9, 1.5e12
    head = [f"time_stats.{op}.median" for op in OPS] + ["n_head", "n_kv_head", "n_embd", "n_expanded_embd",
                                                        "use_gated_mlp", "num_tokens", "num_tensor_parallel_workers"]
    for h, nq in ((2048, 16), (4096, 32)):  # two shapes, so that leaving one out leaves one
        folder = tmp_path / "h100" / "org" / f"shape-{h}"
        folder.mkdir(parents=True)
        with open(folder / "mlp_median.csv", "w", newline="") as fh:
            out = csv.writer(fh)
            out.writerow(head)
            for T in (1, 2, 4, 8, 16, 4096, 8192, 16384):
                ts = []
                for op in OPS:
                    bpt, width = op_shape(op, h, 4 * h, nq, nq, 128, 1)
                    ts.append(max(a + w * width, bpt * T / bw) * 1e3)  # the CSV holds ms
                out.writerow(ts + [nq, nq, h, 4 * h, "True", T, 1])
    monkeypatch.setattr(vp, "vidur_profile_dir", lambda f: tmp_path / f)
    fit = fit_layer_kernels(H100)
    for fa, fw, fbw in fit.params:
        assert fa == pytest.approx(a, rel=1e-9) and fw == pytest.approx(w, rel=1e-9)
        assert fbw == pytest.approx(bw, rel=1e-9)
    assert fit.fit_median == pytest.approx(0.0, abs=1e-9)


def _measured_row(path: str, tokens: int, tp: int) -> float:
    """Vidur's measured per-layer sum of the five ops at one row, s."""
    p = Path(str(resources.files("kvledger.accounting") / "data" / "profiling" / "vidur" / "compute" / path))
    with open(p / "mlp_median.csv", newline="") as fh:
        for r in csv.DictReader(fh):
            if int(r["num_tokens"]) == tokens and int(r["num_tensor_parallel_workers"]) == tp:
                return sum(float(r[f"time_stats.{op}.median"]) for op in OPS) * 1e-3
    raise AssertionError("row not found")


def test_the_h100_fit_against_vidurs_rows():
    # Llama-2-70B at TP 4 on the H100, 32 tokens (a decode step): Vidur measured 22 µs per layer over the five ops,
    # every op at its floor, which the fit reproduces within 15% whatever the bandwidth end. At 4,096 tokens (a
    # prefill) the ops are bandwidth-bound: priced at the roofline's 0.8 × 3.35 TB/s they take less than Vidur's
    # 2023-era kernels took (1.1–1.8 TB/s for the norms and the activation), never less than the bytes at the full HBM
    fit = layer_kernel_fit(H100)
    m = load_model("meta-llama/Llama-2-70b-hf")
    hbm = get_gpu(H100).hbm_bandwidth_bytes_per_s
    k = LayerKernels(fit, m, 4, 0.8 * hbm)
    assert k.step_s(32) / m.num_layers == pytest.approx(_measured_row("h100/meta-llama/Llama-2-70b-hf", 32, 4),
                                                        rel=0.15)
    # bytes a token at TP 4: norms 2 × 4 × 8192, add 6 × 8192, RoPE 4 × (16 + 2) × 128, activation 6 × 7168
    per_token = 2 * 4 * 8192 + 6 * 8192 + 4 * 18 * 128 + 6 * 7168
    assert per_token * 4096 / hbm < k.step_s(4096) / m.num_layers < _measured_row("h100/meta-llama/Llama-2-70b-hf",
                                                                                  4096, 4)
    assert k.step_s(4096) / m.num_layers == pytest.approx(per_token * 4096 / (0.8 * hbm), rel=1e-12)
    assert fit.loso_median < 0.06 and fit.loso_p90 < 0.2
    assert layer_kernel_fit("nvidia_l40s") is None


@pytest.mark.parametrize("gpu_id", sorted(PROFILED_GPU))
def test_the_bundled_fit_is_the_fit_of_the_bundled_profiles(gpu_id):
    # layer_kernel_fit reads data/layer_kernels.json (benchmarks/build_gemm_curves.py --write): it must hold exactly
    # what fit_layer_kernels computes from Vidur's CSVs, float for float
    assert layer_kernel_fit(gpu_id) == fit_layer_kernels(gpu_id)


def test_a_same_die_gpu_takes_the_profiled_floors_and_says_so():
    # the H200 takes the H100's fit (the same die): the same floors; its bytes are priced at its own bandwidth by the
    # roofline (0.8 × 4.8 TB/s), so a 16,384-token step's kernels take 3.35/4.8 of the H100's
    m = load_model("meta-llama/Llama-3.1-8B")
    args = dict(model="meta-llama/Llama-3.1-8B", num_requests=5, gpu_profile="none", max_model_len=8192)
    a, b = prepare(SimRequestArgs(**args, gpu="H100")).cost, prepare(SimRequestArgs(**args, gpu="H200")).cost
    assert a.layer_kernels_s(1) == b.layer_kernels_s(1) > 0 and m.num_layers == 32
    ratio = get_gpu(H100).hbm_bandwidth_bytes_per_s / get_gpu("nvidia_h200_sxm").hbm_bandwidth_bytes_per_s
    assert b.layer_kernels_s(16384) == pytest.approx(a.layer_kernels_s(16384) * ratio, rel=1e-9)
    assert layer_kernel_fit("nvidia_h200_sxm").params == layer_kernel_fit(H100).params
    assert "taken for nvidia_h200_sxm" in layer_kernel_fit("nvidia_h200_sxm").source


def test_the_roofline_adds_the_kernels_after_the_matmuls_and_flat_has_none():
    # Llama-3.1-8B on the H100, a decode step of 32 sequences: every op is at its floor (norm bytes 32 × 16,384 B at
    # 1.2 TB/s = 0.4 µs, under ~2 µs), so the term is 32 layers × Σ (a + w · width) over widths 4096, 4096, 5120,
    # 14336, 4096 (norm, norm, RoPE, activation, add)
    args = dict(model="meta-llama/Llama-3.1-8B", gpu="H100", num_requests=5, gpu_profile="none", max_model_len=8192)
    meas = prepare(SimRequestArgs(**args)).cost
    flat = prepare(SimRequestArgs(**args, gemm_efficiency="flat")).cost
    p = layer_kernel_fit(H100).params
    by_hand = 32 * sum(a + w * width for (a, w, _), width in zip(p, (4096, 4096, 5120, 14336, 4096), strict=True))
    assert meas.layer_kernels_s(32) == pytest.approx(by_hand, rel=1e-12)
    assert 0.4e-3 < by_hand < 0.9e-3
    shape = StepShape(0, 0, 0, 0, 32, 32 * 1000)
    c = meas.costs(shape)
    assert c.layer_kernels_s == meas.layer_kernels_s(32)
    gemm = max(c.matmul_flops / (meas.peak_flops * c.matmul_efficiency), c.weight_bytes / (meas.bw * 0.8))
    assert meas.step_time_s(shape) == pytest.approx(gemm + c.layer_kernels_s + meas.attention_s(c), rel=1e-12)
    assert flat.layer_kernels is None and flat.costs(shape).layer_kernels_s == 0.0
    # the decode fast path prices the same step bit for bit
    assert meas.decode_steps_list(32, 32 * 1000, 1)[0] == meas.step_time_s(shape)


def test_which_ops_a_layer_runs_by_its_weights():
    # one norm kernel per hidden-size norm weight of layer 0: Llama two, Gemma-2 four (pre/post attention and MLP),
    # phi-2 one (attention and MLP in parallel off one norm); OPT has learned positions, so no RoPE; a hybrid
    # (Nemotron-H: Mamba, MLP and attention blocks) is not priced at all
    def ops(name):
        return layer_ops(load_model(name))

    assert ops("meta-llama/Llama-3.1-8B") == ("input_layernorm", "post_attention_layernorm", "attn_rope", "mlp_act",
                                               "add")
    assert ops("google/gemma-2-9b-it").count("post_attention_layernorm") == 3
    assert ops("microsoft/phi-2") == ("input_layernorm", "attn_rope", "mlp_act", "add")
    assert ops("facebook/opt-13b") == ("input_layernorm", "post_attention_layernorm", "mlp_act", "add")
    assert not kernels_apply(load_model("nvidia/Nemotron-H-56B-Base-8K"))
    args = dict(gpu="H100", num_requests=5, gpu_profile="none", max_model_len=4096)
    assert prepare(SimRequestArgs(model="nvidia/Nemotron-H-56B-Base-8K", tp=2, **args)).cost.layer_kernels is None
    # OPT-13B on the A100 (curve and floors), 8 tokens: 40 layers × four floors, its activation over a non-gated
    # row (fc1's 20,480 / TP 1), no RoPE term
    opt = prepare(SimRequestArgs(model="facebook/opt-13b", gpu="A100-80GB", num_requests=5, gpu_profile="none",
                                 max_model_len=2048)).cost
    p = dict(zip(OPS, layer_kernel_fit("nvidia_a100_80gb_sxm").params, strict=True))
    widths = {"input_layernorm": 5120, "post_attention_layernorm": 5120, "mlp_act": 20480, "add": 5120}
    by_hand = 40 * sum(p[op][0] + p[op][1] * w for op, w in widths.items())
    assert opt.layer_kernels_s(8) == pytest.approx(by_hand, rel=1e-12)
    assert opt.layer_kernels.ops == tuple(widths)


def test_rope_width_counts_replicated_kv_heads():
    # 128 query and 8 KV heads of 128 at TP 16: 8 query heads and one KV head a GPU (vLLM replicates KV heads when
    # they are fewer than the ranks), (8 + 1) × 128 = 1,152 elements, not (128 + 8) // 16 × 128 = 1,024
    assert op_shape("attn_rope", 16384, 53248, 128, 8, 128, 16) == (4.0 * 1152, 1152.0)


def test_the_step_cost_line_names_the_models_own_kernels():
    # the line says what layer_ops priced: OPT no RoPE, Gemma-2 four norms, phi-2 one; a hybrid none, and says why
    from kvledger.accounting.layer_kernels import kernel_words

    assert kernel_words(layer_ops(load_model("facebook/opt-13b"))) == "2 norms, activation and add"
    assert kernel_words(layer_ops(load_model("google/gemma-2-9b-it"))) == "4 norms, RoPE, activation and add"
    assert kernel_words(layer_ops(load_model("microsoft/phi-2"))) == "1 norm, RoPE, activation and add"
    info = prepare(SimRequestArgs(model="facebook/opt-13b", gpu="A100-80GB", num_requests=5, gpu_profile="none",
                                  max_model_len=2048)).cost_info["source"]
    assert "then each layer's 2 norms, activation and add kernels, max(floor, activation bytes" in info
    # on the RTX PRO 6000 the floors are vLLM 0.19's, whose residual add runs inside the norm: no add kernel
    info = prepare(SimRequestArgs(model="meta-llama/Llama-3.1-8B", gpu="rtx_pro_6000_server", num_requests=5,
                                  gpu_profile="none", max_model_len=2048)).cost_info["source"]
    assert "each layer's 2 norms (the residual add fused in), RoPE and activation kernels" in info
    hybrid = prepare(SimRequestArgs(model="nvidia/Nemotron-H-56B-Base-8K", gpu="H100", tp=2, num_requests=5,
                                    gpu_profile="none", max_model_len=4096)).cost_info["source"]
    assert "no layer-kernel term: a hybrid model's other layers (Mamba, linear attention) run kernels" in hybrid


def test_the_array_forms_are_the_scalar_ones():
    # the step split prices whole runs at once: the kernels' array form is the scalar one elementwise (the same float
    # operations), the curve's array form its interpolation within rounding
    import numpy as np

    from kvledger.accounting.gemm_efficiency import gemm_curve

    cost = prepare(SimRequestArgs(model="meta-llama/Llama-3.1-8B", gpu="H100", num_requests=5, gpu_profile="none",
                                  max_model_len=8192)).cost
    T = np.array([0, 1, 7, 64, 191, 192, 300, 2048, 8192, 20000])
    assert cost.layer_kernels.step_s_array(T).tolist() == [cost.layer_kernels_s(int(t)) for t in T]
    c = gemm_curve(H100)
    np.testing.assert_allclose(c.efficiency_array(T[1:], cost.gemm_nk),
                               [c.efficiency(int(t), cost.gemm_nk) for t in T[1:]], rtol=1e-12)



def test_one_llama_and_one_opt_layer_on_the_h100_by_hand():
    # The H100's fitted floors (data/layer_kernels.json, a + w · width at 1 token, TP 1):
    #   input norm  a 1.6868 µs, w 0.52426 ns/element;  post-attention norm 1.7987 µs, 0.51141 ns;
    #   RoPE        1.3204 µs, 0.38853 ns;               activation 0.49017 µs, 0.52002 ns;  add 0.45263 µs, 0.14905 ns.
    # Llama-3.1-8B: norm 1.6868 + 0.52426 × 4.096 = 3.834; post norm 1.7987 + 0.51141 × 4.096 = 3.893; RoPE over
    #   (32 + 8) × 128 = 5,120: 1.3204 + 0.38853 × 5.120 = 3.310; activation over 14,336: 0.4902 + 0.52002 × 14.336 =
    #   7.945; add over 4,096: 0.4526 + 0.14905 × 4.096 = 1.063;  sum 20.05 µs a layer (vLLM fuses both residual adds
    #   into its RMSNorms, so 18.98 µs of kernels it runs; the add is kept: module doc)
    # OPT-13B (learned positions, no RoPE): norm 1.6868 + 0.52426 × 5.120 = 4.371; post norm 1.7987 + 0.51141 ×
    #   5.120 = 4.417; activation over fc1's 20,480: 0.4902 + 0.52002 × 20.480 = 11.140; add 0.4526 + 0.14905 ×
    #   5.120 = 1.216;  sum 21.14 µs a layer (vLLM's opt.py runs two adds: 22.36 µs)
    fit = layer_kernel_fit(H100)
    llama = LayerKernels(fit, load_model("meta-llama/Llama-3.1-8B"), 1, 0.8 * get_gpu(H100).hbm_bandwidth_bytes_per_s)
    assert llama.ops == ("input_layernorm", "post_attention_layernorm", "attn_rope", "mlp_act", "add")
    assert llama.step_s(1) / 32 == pytest.approx(20.05e-6, abs=0.01e-6)
    opt = LayerKernels(fit, load_model("facebook/opt-13b"), 1, 0.8 * get_gpu(H100).hbm_bandwidth_bytes_per_s)
    assert opt.ops == ("input_layernorm", "post_attention_layernorm", "mlp_act", "add")
    assert opt.step_s(1) / 40 == pytest.approx(21.14e-6, abs=0.01e-6)


def test_an_fp8_model_takes_the_profiled_gpus_floors_as_an_unprofiled_gpu_carries_them():
    # vLLM builds the same RMSNorm, RoPE and SiluAndMul for an FP8 checkpoint (the quant_config reaches the linear
    # layers alone), so Qwen3-32B-FP8 pays the layer kernels on the H100 (its own floors; the matmuls stay flat) as
    # it does on the B200 (the carried floors); before, the H100 priced none
    args = dict(model="Qwen/Qwen3-32B-FP8", num_requests=5, max_model_len=8192)
    h100, b200 = prepare(SimRequestArgs(gpu="H100", **args)), prepare(SimRequestArgs(gpu="B200", **args))
    assert h100.cost.gemm_curve is None and h100.cost.layer_kernels.fit == layer_kernel_fit(H100)
    assert h100.cost.layer_kernels.ops == ("input_layernorm", "post_attention_layernorm", "attn_rope", "mlp_act",
                                           "add")
    assert "each layer's 2 norms, RoPE, activation and add kernels" in h100.cost_info["source"]
    assert b200.cost.layer_kernels is not None and b200.cost.layer_kernels.fit.source.startswith("carried")
    flat = prepare(SimRequestArgs(gpu="H100", gemm_efficiency="flat", **args)).cost
    assert flat.layer_kernels is None
