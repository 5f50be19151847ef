"""`goodput --simulate --target` names a pipeline deployment's GPUs as `cost --simulate` does: Llama-3.1-70B on H100s at
--tp 8 --pp 2 is 16 GPUs = 1 replica × TP 8 × PP 2. The probe table inferred DP ranks from the GPU count (16 ÷ (1 × 8)
= 2) and printed "1 replica × DP 2 × TP 8", a layout the run did not have; the probe note left the PP out."""

from __future__ import annotations

from cli_run import run_cli

RUN = ("llama-3.1-70b", "--gpu", "H100", "--tp", "8", "--pp", "2", "--slo", "ttft=500ms,tpot=50ms", "--prompt-lengths",
       "2000", "--output-lengths", "300", "--num-requests", "300", "--max-model-len", "32768")


def test_goodput_target_names_the_pipeline_stages_as_cost_does():
    out = run_cli("goodput", "--simulate", *RUN, "--target", "0.9")
    assert out.exit_code == 0, out.stdout
    assert "probes (16 GPUs = 1 replica × TP 8 × PP 2)" in out.stdout
    assert "16 GPUs = 1 replica × TP 8 × PP 2\n" in out.stdout  # the probe note, its last words
    assert "DP 2" not in out.stdout
    cost = run_cli("cost", "--simulate", *RUN, "--gpu-usd-per-hour", "3")
    assert "one deployment unit = 1 replica × TP 8 × PP 2 = 16 GPUs" in cost.stdout


def test_a_two_node_pipeline_without_a_cluster_price_names_the_stage_sends():
    # 16 GPUs (TP 8 × PP 2) pass the 8-GPU pod limit: no catalog row sells the cluster; the stages' sends are what
    # cross the nodes (each TP group's all-reduces stay on its node), and the refusal now names them. The refusal comes
    # after the capacity search (cost prices the packing last), and nothing of that search is read here: 50 requests a
    # probe (the fewest a capacity probe takes) rather than RUN's 300
    from cli_run import refused

    said = refused("cost", "--simulate", *RUN[:-4], "--num-requests", "50", *RUN[-2:])
    assert said.startswith("a replica of 16 GPUs spans nodes (a TP group's all-reduces, DP ranks' MoE all-gathers or "
                           "pipeline stages' sends cross InfiniBand/RoCE between them)")
