"""Pipeline parallelism across nodes in the plan: a step is one pass through the stages with the sends between them
(pipeline_pass.py), and the node warning says what crosses the network (node_size.py)."""

from __future__ import annotations

import pytest

from kvledger.accounting.plan import build_plan
from kvledger.accounting.settings import make_settings
from kvledger.catalog.gpu_file import resolve_gpu
from kvledger.catalog.models import load_model
from kvledger.report.plan_pipeline import decode_title, pipeline_rows

LLAMA_405B = "meta-llama/Llama-3.1-405B-Instruct"


def _plan(**kw):
    return build_plan(load_model(LLAMA_405B), resolve_gpu("H100-SXM"),
                      make_settings(max_model_len=32768, contexts=[32768], **kw), with_advice=False)


def test_tp8_pp2_on_two_h100_nodes_prices_the_one_boundary_over_the_nic():
    # Llama-3.1-405B: hidden 16,384, bf16; a stage hands on hidden_states + residual = 2 × 16,384 × 2 = 65,536 B a
    # token. TP 8 × PP 2 on 8-GPU boards: rank = pp_rank × 8 + tp_rank, so stage 0 is node 0 and stage 1 node 1: the
    # one boundary crosses nodes. A 8,192-token prefill chunk: 536,870,912 B, each GPU sending 1/8 = 67,108,864 B over
    # its 50 GB/s NIC = 1.34218 ms + 2.7 µs, then the stage's all-gather of the rest over NVLink (450 GB/s a direction):
    # 536,870,912 × 7/8 / 450e9 = 1.04391 ms + 7 × 0.6 µs; 1.34218 + 0.0027 + 1.04391 + 0.0042 = 2.39299 ms.
    # A 1-token decode: 8,192 B / 50e9 = 0.164 µs + 2.7 + 57,344 / 450e9 = 0.127 µs + 4.2 = 7.191 µs.
    p = _plan(tp=8, pp=2)
    pl = p.roofline.pipeline
    assert (pl["stages"], pl["gpus_per_stage"], pl["send_bytes_per_token"]) == (2, 8, 65536)
    assert (pl["boundaries_across_nodes"], pl["boundaries_within_node"]) == (1, 0)
    assert pl["prefill_send_s"] == pytest.approx(2.39299e-3, rel=1e-5)
    assert pl["decode_send_s"] == pytest.approx(7.191e-6, rel=1e-3)
    assert p.roofline.prefill["pipeline_send_s"] == pl["prefill_send_s"]


def test_a_slower_inter_node_link_lengthens_the_pass_it_was_ignored_before():
    # --inter-node-link 100 Gb/s = 12.5 GB/s a GPU: the slice of a 8,192-token chunk, 67,108,864 B, takes 5.36871 ms
    # instead of 1.34218 ms, so the prefill pass is 4.02653 ms longer (before: the same step time at any link).
    fast, slow = _plan(tp=8, pp=2), _plan(tp=8, pp=2, inter_node_link_bytes_per_s=12.5e9)
    assert slow.roofline.prefill["step_s"] - fast.roofline.prefill["step_s"] == pytest.approx(4.02653e-3, rel=1e-4)
    gap = slow.roofline.decode[0].step_s - fast.roofline.decode[0].step_s  # 8,192 B: 0.655 µs − 0.164 µs
    assert gap == pytest.approx(0.4915e-6, rel=1e-3)


def test_the_decode_step_is_the_pass_through_both_stages_not_one_gpus_step():
    # The roofline prices the whole model at TP 8: the weights it reads in a batch-1 step, 101.5 GB, are the two
    # stages' together; one GPU holds 47.28 GiB = 50.77 GB of them (the binding stage's). The title said "each GPU's".
    p = _plan(tp=8, pp=2)
    row = p.roofline.decode[0]
    weights_per_gpu = next(d.bytes for d in p.memory.deductions if d.name == "weights")
    assert row.bytes > 1.9 * weights_per_gpu  # the pass's bytes: both stages' weights, not one GPU's
    assert "one batch's pass through the 2 stages" in decode_title(p) and "each GPU's" not in decode_title(p)
    names = [r[0] for r in pipeline_rows(p.roofline)]
    assert names == ["pipeline step", "stage-to-stage sends", "pipeline bubble"]


def test_no_pipeline_figures_at_pp_1():
    p = _plan(tp=16)
    assert p.roofline.pipeline is None and pipeline_rows(p.roofline) == []
    assert decode_title(p).startswith("Decode step vs concurrency (step: each GPU's;")


def test_pp_across_nodes_warns_that_only_the_stage_boundary_crosses_the_network():
    # TP 8 × PP 2 on 2 nodes of 8: each node holds a whole TP group; the old warning said vLLM "runs TP across nodes"
    # with custom all-reduce off, which is the TP 16 layout, not this one (its non-torch term keeps custom all-reduce)
    pp = _plan(tp=8, pp=2).nodes.text
    assert "pipeline stages across nodes" in pp and "whole TP groups of 8" in pp and "TP across nodes" not in pp
    tp = _plan(tp=16).nodes.text
    assert "runs TP across nodes" in tp and "custom all-reduce off where a TP group spans nodes" in tp


def test_the_tp_fix_of_a_pp_plan_says_it_doubles_the_replicas_gpus():
    # TP 8 × PP 2 at max_model_len 131,072: the next TP step, 16, keeps PP 2, so the replica takes 32 GPUs on 4 nodes
    # (the fix said only "more GPUs"). Its figure: 45.20 GiB a GPU ÷ (16 × 32,256 B a block of the binding stage) =
    # 94,038 blocks × 16 = 1,504,608 tokens ÷ 131,072 = 11.48 requests.
    p = build_plan(load_model(LLAMA_405B), resolve_gpu("H100-SXM"), make_settings(tp=8, pp=2))
    tp_fix = next(o for o in p.advice.options if o.action.startswith("--tp 16"))
    assert "(32, from 16: TP 16 × PP 2)" in tp_fix.detail and round(tp_fix.max_concurrency, 2) == 11.48


def test_a_tensor_tp_does_not_divide_is_sent_whole_by_every_rank():
    # send_tensor_dict splits only where tp divides the tensor's elements, tokens × hidden (vLLM 0.19
    # parallel_state.py::_should_use_all_gather: numel % world_size): hidden 50 (100 B a token over both tensors) at
    # TP 3 and 10 tokens, 500 elements, 500 % 3 = 2 → each rank sends all 1,000 B over the 50 GB/s NIC (0.02 µs) +
    # 2.7 µs, and no all-gather follows: 2.72 µs. At 12 tokens, 600 % 3 = 0: split, 1,200 / 3 = 400 B (0.008 µs) + 2.7
    # µs + the gather of 800 B at 450 GB/s and 2 × 0.6 µs. TP 4 at 10 tokens (500 = 4 × 125): split, 250 B + the
    # gather of 750 B at 450 GB/s and 3 × 0.6 µs. (The rule was hidden % tp alone: TP 3 sent 12 tokens whole.)
    from kvledger.accounting.pipeline_pass import PipelineSends

    tp3 = PipelineSends(2, 3, 100, 1, 0, 50e9, 450e9, "given", hidden=50)
    assert tp3.seconds(10) == pytest.approx(2.72e-6, rel=1e-9)
    assert tp3.seconds(12) == pytest.approx(2.7e-6 + 400 / 50e9 + 2 * 0.6e-6 + 800 / 450e9, rel=1e-9)
    sliced = PipelineSends(2, 4, 100, 1, 0, 50e9, 450e9, "given", hidden=50)
    assert sliced.seconds(10) == pytest.approx(2.7e-6 + 250 / 50e9 + 3 * 0.6e-6 + 750 / 450e9, rel=1e-9)
