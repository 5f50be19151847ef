"""TP × PP past one node: a vLLM plan assumes the nodes the ranks need (node_size.py), says so, and its fixes that
raise TP name the --nnodes they were planned with."""

from __future__ import annotations

import pytest

from kvledger.accounting.node_size import assume_nodes, gpus_per_node
from kvledger.accounting.plan import build_plan
from kvledger.accounting.settings import make_settings
from kvledger.catalog.gpu_file import resolve_gpu
from kvledger.catalog.models import load_model
from kvledger.units import GiB

MIXTRAL = "mistralai/Mixtral-8x7B-v0.1"


@pytest.mark.parametrize("gpu, per_node", [
    ("H100-SXM", 8), ("B200", 8), ("MI300X", 8),  # SXM/HGX and OAM baseboards: 8 GPUs a node
    ("google_tpu_v5e", 8),  # stated: gpus.csv form_factor "TPU board (8 chips/host)"
    ("L40S", 10), ("H100-PCIe", 10), ("nvidia_rtx_4090", 10),  # double-width PCIe: a 10-slot 4U server at most
    ("L4", 20), ("nvidia_t4", 20),  # low-profile PCIe: a 20-slot server behind PCIe switches at most
    ("nvidia_gb200", None),  # a 72-GPU NVLink domain (NVL72), no per-host figure in the catalog
])
def test_gpus_per_node_where_the_catalog_or_the_board_says(gpu, per_node):
    got = gpus_per_node(resolve_gpu(gpu))
    assert (got[0] if got else None) == per_node


def test_tp_16_on_h100_sxm_is_planned_on_the_2_nodes_it_needs():
    # 16 GPUs on 8-GPU HGX boards: 2 nodes. On one node of 16 the plan priced NVLink SHARP buffers on an NVSwitch board
    # (non-torch 2,415,919,104 B = 2.25 GiB) and kept 63.59 GiB of KV; across 2 nodes custom all-reduce and NVLS are off
    # (non-torch 0.25 GiB measured + 0.2 GiB NCCL = 0.45 GiB), so 63.59 + 1.80 = 65.39 GiB, the --nnodes 2 figure
    model, h100 = load_model(MIXTRAL), resolve_gpu("H100-SXM")
    p = build_plan(model, h100, make_settings(tp=16), with_advice=False)
    two = build_plan(model, h100, make_settings(tp=16, nnodes=2), with_advice=False)
    assert p.settings.nnodes == 2 and (p.nodes.given, p.nodes.nnodes, p.nodes.per_node) == (1, 2, 8)
    assert two.nodes is None  # --nnodes 2 holds the ranks: nothing assumed, no warning
    assert round(p.memory.available_kv_bytes / GiB, 2) == round(two.memory.available_kv_bytes / GiB, 2) == 65.39
    assert p.nodes.text in p.memory.notes and "the plan assumes 2 nodes of 8 (--nnodes 2)" in p.nodes.text


@pytest.mark.parametrize("tp, pp, nnodes, want", [
    (8, 2, 1, 2),  # 16 ranks: 2 nodes of 8, each TP group inside one (tp_group_nodes = ceil(2 / 2) = 1)
    (32, 1, 2, 4),  # --nnodes 2 puts 16 on a node: 4 nodes of 8
    (8, 1, 1, None),  # one node holds TP 8
])
def test_the_fewest_nodes_that_hold_the_ranks(tp, pp, nnodes, want):
    s, nodes = assume_nodes(resolve_gpu("H100-SXM"), make_settings(tp=tp, pp=pp, nnodes=nnodes))
    assert (nodes.nnodes if nodes else None) == want and s.nnodes == (want or nnodes)


def test_engines_whose_plan_reads_no_node_count_are_planned_as_given_with_the_warning():
    # --nnodes is vLLM's (its custom all-reduce rule): SGLang's plan of TP 16 is what it was (nnodes 1), but 16 GPUs
    # are 2 nodes of an 8-GPU board all the same, and the warning says so (SGLang's own --nnodes; TensorRT-LLM's MPI)
    s, nodes = assume_nodes(resolve_gpu("H100-SXM"), make_settings(tp=16, engine="sglang"))
    assert s.nnodes == 1 and (nodes.nnodes, nodes.per_node, nodes.engine) == (2, 8, "sglang")
    assert nodes.text.startswith("--tp 16 is 16 GPUs, more than one node of this GPU holds (8: an 8-GPU SXM5 "
                                 "baseboard), so it runs on 2 nodes of 8 (SGLang's --nnodes 2 with a --node-rank")
    trt = assume_nodes(resolve_gpu("H100-SXM"), make_settings(tp=16, engine="trtllm"))[1]
    assert "(one MPI world across them)" in trt.text and "--nnodes" not in trt.text
    assert assume_nodes(resolve_gpu("H100-SXM"), make_settings(tp=8, engine="sglang"))[1] is None


def test_a_fix_raising_tp_past_one_node_names_its_nnodes():
    # DeepSeek-V3 on H200 at TP 8 holds 3 requests of 163,840 tokens; the fix "--tp 16" is planned on 2 nodes of 8:
    # 83.57 GiB of KV per GPU (81.77 GiB when it was planned as one node of 16, with NVLS buffers), 7.79x
    p = build_plan(load_model("deepseek-ai/DeepSeek-V3"), resolve_gpu("H200-SXM"), make_settings(tp=8))
    assert p.nodes is None
    tp16 = next(o for o in p.advice.options if o.action.startswith("--tp 16"))
    assert tp16.action == "--tp 16 --nnodes 2" and tp16.max_requests == 7 and round(tp16.max_concurrency, 2) == 7.79
    assert "83.57 GiB KV per GPU" in tp16.detail
    assert not any("--nnodes" in o.action for o in p.advice.options if o is not tp16)  # FP8 KV stays on one node


def test_sglangs_fix_raising_tp_past_one_node_names_its_nnodes_too():
    # SGLang's TP 16 of H200s runs on 2 nodes of 8 as its own warning says ("SGLang's --nnodes 2 with a --node-rank on
    # each"; sglang.launch_server takes --nnodes), so its fix line says so as vLLM's does; it read "--tp 16" alone.
    # Figures: the SGLang 0.5.23 plan at TP 16, 82.07 GiB KV per GPU ÷ 70,272 B per token ÷ 163,840 = 7.65x (82.19
    # and 7.67x before MLA's w_kc/w_vc copies: 8 heads × 256 × 512 × 2 B × 61 layers = 0.119 GiB a GPU)
    dsv3, h200 = load_model("deepseek-ai/DeepSeek-V3"), resolve_gpu("H200-SXM")
    p = build_plan(dsv3, h200, make_settings(tp=8, engine="sglang"))
    tp16 = next(o for o in p.advice.options if o.action.startswith("--tp 16"))
    assert tp16.action == "--tp 16 --nnodes 2" and round(tp16.max_concurrency, 2) == 7.65
    assert "82.07 GiB KV per GPU" in tp16.detail
    # TensorRT-LLM's MPI world takes no --nnodes: its fix keeps "--tp 16" alone
    trt = build_plan(dsv3, h200, make_settings(tp=8, engine="trtllm"))
    assert [o.action for o in trt.advice.options][0] == "--tp 16"


@pytest.mark.parametrize("gpu", ["nvidia_l40s", "nvidia_rtx_4090"])
def test_tp_16_on_pcie_cards_is_planned_on_2_nodes_with_the_warning(gpu):
    # 16 double-width PCIe cards: no server holds more than 10, so 16 ranks need 2 nodes; the fewest nodes that split
    # 16 evenly with ≤ 10 a node is 2 (8 each). Before, one node of 16 was planned without a word.
    model = load_model("meta-llama/Llama-3.1-70B-Instruct")
    p = build_plan(model, resolve_gpu(gpu), make_settings(tp=16), with_advice=False)
    assert p.settings.nnodes == 2 and (p.nodes.given, p.nodes.nnodes, p.nodes.per_node) == (1, 2, 10)
    assert "more than one node of this GPU holds (10: the most double-width PCIe cards one server holds" in p.nodes.text
    assert "the plan assumes 2 nodes of 8 (--nnodes 2)" in p.nodes.text and p.nodes.text in p.memory.notes


def test_ten_pcie_cards_stay_on_one_node():
    # TP 2 × PP 5 = 10 ranks ≤ 10 a node: nothing assumed
    s, nodes = assume_nodes(resolve_gpu("L40S"), make_settings(tp=2, pp=5))
    assert nodes is None and s.nnodes == 1


def test_the_short_warning_is_its_facts_in_one_line_at_80_columns():
    # TP 16 × PP 2 = 32 GPUs under --nnodes 2 is 16 a node, past an HGX H100's 8: the plan assumes 4 nodes of 8, whole
    # TP groups of 16 spanning 2 nodes each, so the TP all-reduces cross the network; TP 8 × PP 2 on 2 nodes keeps each
    # TP group of 8 on its node and only the stage-to-stage sends cross it
    from kvledger.accounting.node_size import assume_nodes
    from kvledger.accounting.settings import make_settings
    from kvledger.catalog.gpus import get_gpu

    gpu = get_gpu("H100")
    _, given = assume_nodes(gpu, make_settings(tp=16, pp=2, nnodes=2))
    assert given.brief == "32 GPUs, 8 a node: assumes --nnodes 4 (not 2); TP all-reduces over NICs"
    assert len("WARNING: " + given.brief) <= 80
    _, pp = assume_nodes(gpu, make_settings(tp=8, pp=2))
    assert pp.brief == "16 GPUs, 8 a node: assumes --nnodes 2; only PP sends over NICs"
    _, sg = assume_nodes(gpu, make_settings(tp=16, engine="sglang"))
    assert sg.brief == "16 GPUs, 8 a node: runs on 2 nodes; TP all-reduces over NICs"
