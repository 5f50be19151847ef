"""vLLM's --all2all-backend (VLLM_ALL2ALL_BACKEND before 0.11.1): each release's choices, default and fallbacks, its
refusals in vLLM's words, and the profile rows per backend (vllm_all2all.py), read in 0.9.0, 0.11.0, 0.12.0–0.15.0,
0.17.0, 0.19.0, 0.26.0, 0.29.0, 0.33.0 and 0.34.0 (config/parallel.py, envs.py, default_moe_runner.py::use_dp_chunking).

Qwen3-235B-A22B (bf16): hidden 4,096, 128 routed experts of intermediate 1,536, top-8; vLLM's kept Triton workspace
under EP is M × 8 × (4,096 + 4,096) × 2 B = M × 131,072 B (test_vllm_dp_moe.py).
"""

from __future__ import annotations

import pytest

from kvledger.accounting.plan import build_plan
from kvledger.accounting.settings import make_settings
from kvledger.accounting.vllm_all2all import all2all_choice, all2all_rows
from kvledger.accounting.vllm_profile import activation_peak
from kvledger.catalog.gpu_file import resolve_gpu
from kvledger.catalog.models import load_model
from kvledger.errors import InputError

QWEN = "Qwen/Qwen3-235B-A22B"


@pytest.mark.parametrize("ver, given, backend, rows", [
    ((0, 33, 0), None, "allgather_reducescatter", "gathered"),  # config/parallel.py default
    ((0, 9, 0), None, "naive", "gathered"),  # envs.py VLLM_ALL2ALL_BACKEND default "naive"
    ((0, 11, 0), None, "allgather_reducescatter", "gathered"),  # env_with_choices default
    ((0, 19, 0), "pplx", "allgather_reducescatter", "gathered"),  # removed: falls back (0.19 __post_init__)
    ((0, 17, 0), "pplx", "allgather_reducescatter", "gathered"),  # 0.17 falls back for pplx only
    ((0, 15, 0), "naive", "naive", "gathered"),  # NaiveAll2AllManager still there
    ((0, 19, 0), "flashinfer_all2allv", "flashinfer_nvlink_two_sided", "chunked"),  # alias; use_dp_chunking
    ((0, 19, 0), "deepep_low_latency", "deepep_low_latency", "chunked"),
    ((0, 11, 0), "deepep_low_latency", "deepep_low_latency", "chunked"),  # 0.11 layer.py chunked forward
    ((0, 33, 0), "deepep_low_latency", "deepep_low_latency", "unmodelled"),  # 0.33: no DP chunking
    ((0, 33, 0), "deepep_high_throughput", "deepep_high_throughput", "routed"),
    # 0.34.0 config/parallel.py's All2AllBackend has a plain "mori" again (0.23–0.33 only the two mori_*): taken, and
    # its rows not modelled (no DP chunking since 0.20)
    ((0, 34, 0), "mori", "mori", "unmodelled"),
])
def test_backend_vllm_runs_and_how_its_rows_count(ver, given, backend, rows):
    c = all2all_choice(ver, given)
    assert (c.backend, c.rows) == (backend, rows)


def test_rows_per_backend():
    # DP 8, 8,192 tokens: gathered 65,536; routed at most the same (upper bound); chunked 8 × min(8,192, 256) = 2,048
    # and 8 × min(100, 256) = 800; unmodelled keeps the gathered figure
    assert all2all_rows(all2all_choice((0, 33, 0), None), 8192, 8) == 65_536
    assert all2all_rows(all2all_choice((0, 33, 0), "deepep_high_throughput"), 8192, 8) == 65_536
    ll = all2all_choice((0, 19, 0), "deepep_low_latency")
    assert all2all_rows(ll, 8192, 8) == 2048 and all2all_rows(ll, 100, 8) == 800
    assert all2all_rows(all2all_choice((0, 33, 0), "nixl_ep"), 8192, 8) == 65_536
    assert "not modelled" in all2all_choice((0, 33, 0), "nixl_ep").words
    assert "upper bound" in all2all_choice((0, 33, 0), "deepep_high_throughput").words


@pytest.mark.parametrize("ver, given, words", [
    ((0, 33, 0), "bogus", "argument --all2all-backend: invalid choice: 'bogus' (choose from 'naive', 'pplx', "),
    ((0, 33, 0), "passthrough", "invalid choice: 'passthrough'"),  # arg_utils.py removes it from the CLI choices
    ((0, 19, 0), "moonep", "invalid choice: 'moonep'"),  # 0.33's Literal only
    ((0, 29, 0), "mori", "invalid choice: 'mori'"),  # 0.26–0.29: mori_high_throughput / mori_low_latency
    ((0, 33, 0), "mori", "invalid choice: 'mori'"),  # back in 0.34.0
    ((0, 14, 0), "mori", "invalid choice: 'mori'"),  # mori from 0.15
    ((0, 11, 0), "mori", "\"Invalid value 'mori' for VLLM_ALL2ALL_BACKEND. Valid options: ['naive', 'pplx', "),
    ((0, 9, 0), "deepep_low_latency", "'Unknown all2all backend: deepep_low_latency'"),
])
def test_refused_in_vllm_s_words(ver, given, words):
    with pytest.raises(InputError) as err:
        all2all_choice(ver, given)
    assert words in str(err.value)


def test_deepep_low_latency_on_0_19_chunks_the_profile_rows():
    # 0.19, DP 8 × TP 1 + EP, 8,192 tokens: chunked 8 × 256 = 2,048 rows, workspace 2,048 × 131,072 = 268,435,456 B
    # against the gathered 65,536 rows' 8,589,934,592 B; the sampler (2.03 GiB) stays the peak over the forward, so the
    # activation peak falls by 8,589,934,592 − 268,435,456 = 8,321,499,136 B
    q = load_model(QWEN)
    v, ll = (0, 19, 0), all2all_choice((0, 19, 0), "deepep_low_latency")
    ag = activation_peak(q, v, 8192, 1024, 1, arch="sm90", ep=8, dp=8)[0]
    chunked, why = activation_peak(q, v, 8192, 1024, 1, arch="sm90", ep=8, dp=8, a2a=ll)
    assert ag - chunked == 8_321_499_136
    assert "MoE rows 2,048 = DP 8 × min(8,192, 256)" in why and "not modelled" in why
    s = make_settings(tp=1, data_parallel_size=8, enable_expert_parallel=True, engine_version="0.19.0",
                      all2all_backend="deepep_low_latency")
    p = build_plan(q, resolve_gpu("H100-SXM"), s, with_roofline=False)
    assert p.data_parallel.moe_profile_tokens == 2048 and p.settings.all2all_backend == "deepep_low_latency"
    note = next(n for n in p.memory.notes if n.startswith("--data-parallel-size 8"))
    assert "8 × min(max_num_batched_tokens, 256) rows on every GPU" in note


def test_a_backend_without_dp_and_ep_changes_nothing_and_other_engines_refuse_it():
    q = load_model("Qwen/Qwen3-8B")
    p = build_plan(q, resolve_gpu("H100-SXM"), make_settings(all2all_backend="naive"), with_roofline=False)
    assert any(n.startswith("--all2all-backend naive: vLLM runs an all2all backend only with DP > 1") for n in
               p.memory.notes)
    assert p.memory.num_gpu_blocks == build_plan(q, resolve_gpu("H100-SXM"), make_settings(),
                                                 with_roofline=False).memory.num_gpu_blocks
    with pytest.raises(InputError, match="--all2all-backend is a vLLM flag"):
        build_plan(q, resolve_gpu("H100-SXM"), make_settings(engine="sglang", all2all_backend="naive"))


@pytest.mark.parametrize("ver", [(0, 9, 1), (0, 9, 2), (0, 10, 0), (0, 10, 1), (0, 10, 2)])
def test_deepep_is_taken_from_0_9_1_and_its_low_latency_rows_chunk(ver):
    # cuda_communicator.py (0.9.1, 0.9.2, 0.10.0–0.10.2) takes "naive", "pplx", "deepep_high_throughput" and
    # "deepep_low_latency" from VLLM_ALL2ALL_BACKEND (default "naive"); 0.9.0 only the first two. fused_moe/layer.py::
    # FusedMoE.forward_impl sends pplx and deepep_low_latency to forward_impl_chunked, 256 tokens per rank
    # (MOE_DP_CHUNK_SIZE / VLLM_MOE_DP_CHUNK_SIZE): DP 8 × min(8,192, 256) = 2,048 rows
    assert all2all_choice(ver, None).backend == "naive"
    assert all2all_choice(ver, "deepep_high_throughput").rows == "routed"
    ll = all2all_choice(ver, "deepep_low_latency")
    assert ll.rows == "chunked" and all2all_rows(ll, 8192, 8) == 2048
    assert "fused_moe/layer.py::FusedMoE.forward_impl_chunked" in ll.words
    with pytest.raises(InputError, match="'Unknown all2all backend: allgather_reducescatter'"):
        all2all_choice(ver, "allgather_reducescatter")  # not in cuda_communicator.py before 0.11
    assert all2all_rows(all2all_choice((0, 9, 0), "pplx"), 8192, 8) == 2048  # 0.9.0 layer.py: pplx chunked


@pytest.mark.parametrize("ver, given, backend, rows", [
    # config/parallel.py All2AllBackend in 0.18.0 already holds nixl_ep and flashinfer_nvlink_two_sided/_one_sided,
    # flashinfer_all2allv its alias (fused_moe/config.py::use_fi_nvl_two_sided_kernels); 0.18's
    # default_moe_runner.py::use_dp_chunking chunks deepep_low_latency, mori, fi_nvl_two_sided and nixl_ep
    ((0, 18, 0), "nixl_ep", "nixl_ep", "chunked"),
    ((0, 18, 0), "flashinfer_all2allv", "flashinfer_nvlink_two_sided", "chunked"),
    ((0, 18, 0), "naive", "naive", "gathered"),  # 0.18 falls back for pplx only (ParallelConfig.__post_init__)
    # layer.py::FusedMoE.use_dp_chunking: pplx and deepep_low_latency in 0.12.0–0.14.0, + mori in 0.15.0,
    # + flashinfer_all2allv (use_fi_all2allv_kernels) in 0.16.0; 0.17.0's runner drops pplx (it falls back)
    ((0, 13, 0), "pplx", "pplx", "chunked"),
    ((0, 14, 0), "deepep_low_latency", "deepep_low_latency", "chunked"),
    ((0, 15, 0), "mori", "mori", "chunked"),
    ((0, 16, 0), "flashinfer_all2allv", "flashinfer_all2allv", "chunked"),
    ((0, 17, 0), "mori", "mori", "chunked"),
    ((0, 26, 0), "deepep_low_latency", "deepep_low_latency", "unmodelled"),  # no VLLM_MOE_DP_CHUNK_SIZE in 0.26
    ((0, 19, 0), "mori", "mori", "chunked"),  # 0.19.0's envs.py still has VLLM_MOE_DP_CHUNK_SIZE = 256
    # 0.20.0 and 0.25.0 (read: envs.py has no VLLM_MOE_DP_CHUNK_SIZE, fused_moe/ no use_dp_chunking): not chunked,
    # the gathered DP × T rows kept as for any unmodelled backend (was 0.18's chunking, "the last release read")
    ((0, 20, 0), "deepep_low_latency", "deepep_low_latency", "unmodelled"),
    ((0, 25, 0), "nixl_ep", "nixl_ep", "unmodelled"),
])
def test_choices_and_dp_chunking_read_in_0_12_to_0_18(ver, given, backend, rows):
    c = all2all_choice(ver, given)
    assert (c.backend, c.rows) == (backend, rows)
    if rows == "chunked":
        assert all2all_rows(c, 8192, 8) == 2048  # DP 8 × min(8,192, 256)


def test_the_flag_came_in_0_11_1_and_launches_as_the_variable_before_it():
    # vLLM 0.11.1 and 0.11.2 have ParallelConfig.all2all_backend (a Literal of 0.11.0's six choices, default None:
    # VLLM_ALL2ALL_BACKEND's value) and engine/arg_utils.py's --all2all-backend, so a bad choice is argparse's
    # "invalid choice" there, not envs.py's "Invalid value ... for VLLM_ALL2ALL_BACKEND" (0.11.0)
    from kvledger.accounting.vllm_all2all import all2all_launch

    for ver in ((0, 11, 1), (0, 11, 2)):
        with pytest.raises(InputError, match="argument --all2all-backend: invalid choice: 'mori'"):
            all2all_choice(ver, "mori")
    with pytest.raises(InputError, match="Invalid value 'mori' for VLLM_ALL2ALL_BACKEND"):
        all2all_choice((0, 11, 0), "mori")
    # vllm serve before 0.11.1 has no --all2all-backend (argparse: unrecognized arguments): the launch sets the variable
    flags = ["--tensor-parallel-size", "1", "--all2all-backend", "deepep_low_latency", "--max-num-seqs", "8"]
    assert all2all_launch("0.10.2", flags) == (["VLLM_ALL2ALL_BACKEND=deepep_low_latency"],
                                               ["--tensor-parallel-size", "1", "--max-num-seqs", "8"])
    assert all2all_launch("0.11.1", flags) == ([], flags) == all2all_launch(None, flags)


def test_mori_splits_in_0_23_and_deepep_v2_comes_in_0_24():
    # config/parallel.py All2AllBackend: 0.22.0 still "mori"; 0.23.0 "mori_high_throughput"/"mori_low_latency" in its
    # place; 0.24.0 adds "deepep_v2" (read in 0.22.0, 0.23.0, 0.24.0, 0.25.0; were 0.26.0's changes)
    assert all2all_choice((0, 22, 0), "mori").backend == "mori"
    for ver in ((0, 23, 0), (0, 24, 0)):
        with pytest.raises(InputError, match="invalid choice: 'mori'"):
            all2all_choice(ver, "mori")
        assert all2all_choice(ver, "mori_low_latency").backend == "mori_low_latency"
    with pytest.raises(InputError, match="invalid choice: 'deepep_v2'"):
        all2all_choice((0, 23, 0), "deepep_v2")
    assert all2all_choice((0, 24, 0), "deepep_v2").rows == "unmodelled"
