"""A search candidate whose TP group spans nodes gets a launch line per node, as the engines start one: vLLM (from
0.11.1) ``--nnodes N --node-rank R --master-addr`` with the nodes past 0 ``--headless`` (entrypoints/cli/serve.py runs
only the multiproc workers where node_rank_within_dp > 0), Ray before it; SGLang ``--nnodes --node-rank
--dist-init-addr``."""

from __future__ import annotations

from kvledger.accounting.plan import build_plan
from kvledger.accounting.settings import make_settings
from kvledger.analyses.search.launch import launch_commands
from kvledger.analyses.search.screen import plan_figures
from kvledger.catalog.gpus import get_gpu
from kvledger.catalog.models import load_model


def _entry(tp: int, gpu: str, **kw):
    plan = build_plan(load_model("deepseek-ai/DeepSeek-V3"), get_gpu(gpu), make_settings(tp=tp, **kw),
                      with_advice=False)
    return {"tp": tp, "enable_prefix_caching": None, "plan": plan_figures(plan)}


def test_tp16_on_8_gpu_h100_boards_launches_on_two_nodes():
    # TP 16 on HGX H100 (8 GPUs a board): the plan assumes 2 nodes of 8 (node_size.assume_nodes)
    e = _entry(16, "H100-SXM")
    assert e["plan"]["nnodes"] == 2
    cmd = launch_commands("deepseek-ai/DeepSeek-V3", "nvidia_h100_sxm", e)
    node0, node1 = cmd["vllm"].split("\n")
    assert node0.startswith("node 0: vllm serve deepseek-ai/DeepSeek-V3 --tensor-parallel-size 16 ")
    assert node0.endswith(" --nnodes 2 --node-rank 0 --master-addr HEAD_IP")
    assert node1.endswith(" --nnodes 2 --node-rank 1 --master-addr HEAD_IP --headless")
    s0, s1 = cmd["sglang"].split("\n")
    assert s0.endswith("--nnodes 2 --node-rank 0 --dist-init-addr HEAD_IP:5000") and "--node-rank 1 " in s1
    assert cmd["check"].endswith(" --nnodes 2") and "spans 2 nodes" in cmd["note"]


def test_before_vllm_nnodes_the_line_runs_on_ray():
    e = _entry(16, "H100-SXM", engine_version="0.11.0")
    cmd = launch_commands("deepseek-ai/DeepSeek-V3", "nvidia_h100_sxm", e, "0.11.0")
    assert "\n" not in cmd["vllm"] and cmd["vllm"].endswith("--distributed-executor-backend ray")
    assert "ray start --head" in cmd["note"]


def test_one_node_keeps_one_line():
    cmd = launch_commands("deepseek-ai/DeepSeek-V3", "nvidia_h200_sxm", _entry(8, "H200"))
    assert "\n" not in cmd["vllm"] and "--nnodes" not in cmd["vllm"] + cmd["check"]
