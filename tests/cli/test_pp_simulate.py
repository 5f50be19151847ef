"""``--pp`` (vLLM --pipeline-parallel-size) in simulate, goodput --simulate and cost --simulate: vLLM's pipeline loop
on the plan's stages (analyses/serving/sim_pp.py, dynamics/pipeline.py); what it does not model refused."""

from __future__ import annotations

from cli_run import cli_json, refused, run_cli

L70 = ("meta-llama/Llama-3.1-70B-Instruct", "--gpu", "H100", "--tp", "8", "--pp", "2", "--engine-version", "0.19.0")
OVERLAP = (*L70, "--no-async-scheduling", "--num-requests", "30")


def test_simulate_runs_the_stages_and_says_where_the_rule_came_from():
    # Llama-3.1-70B has 80 layers: vLLM's get_pp_indices gives 80 // 2 = 40 a stage; 2 stages × TP 8 = 16 GPUs
    d = cli_json("simulate", *OVERLAP)
    pp = d["pipeline"]
    assert pp["pipeline_parallel_size"] == 2 and pp["layers_per_stage"] == [40, 40] and pp["gpus"] == 16
    assert pp["batches_in_flight_max"] == 2 and 0 < pp["stage_busy_share"] <= 1
    assert "vLLM 0.19.0 v1/engine/core.py EngineCore.step_with_batch_queue" in pp["rule_source"]
    assert "stages of 40 + 40 layers" in d["step_cost"]["source"]
    assert "simulated in the Python engine loop" in d["step_cost"]["source"]
    assert d["engine"]["async_scheduling"] is False
    assert all("measured on runs without pipeline parallelism (none with it)" in b["source"]
               for b in d["error_bands"].values())
    assert d["summary"]["num_finished"] == 30
    assert cli_json("simulate", *OVERLAP) == d  # deterministic


def test_the_text_names_the_pipeline():
    res = run_cli("simulate", *OVERLAP)
    assert res.exit_code == 0, res.output
    text = " ".join(res.stdout.split())
    assert ("pipeline: vLLM 0.19.0 batch-queue pipeline loop (no async scheduling), 2 stages of 40 + 40 layers on 16 "
            "GPUs") in text and "up to 2 batches in flight" in text


def test_async_scheduling_runs_one_pass_at_a_time():
    # vLLM 0.19 schedules asynchronously under PP by default: one batch through the stages at a time
    d = cli_json("simulate", *L70, "--num-requests", "20")
    assert d["engine"]["async_scheduling"] is True and d["pipeline"]["batches_in_flight_max"] == 1
    assert "stage_busy_share" not in d["pipeline"]


L8 = ("meta-llama/Llama-3.1-8B", "--gpu", "H100", "--pp", "2", "--num-requests", "20")


def test_the_default_release_runs_the_v2_runner_loop():
    # vLLM 0.33.0 (the default) runs Llama-3.1-8B on its V2 model runner with async scheduling kept under PP: its loop
    # (dynamics/pipeline_v2.py), pipeline_parallel_size + 1 = 3 batches in flight; 32 layers // 2 = 16 a stage
    res = run_cli("simulate", *L8)
    assert res.exit_code == 0, res.output
    text = " ".join(res.stdout.split())
    assert ("pipeline: vLLM 0.33.0 V2 model runner pipeline loop (async scheduling), 2 stages of 16 + 16 layers on 2 "
            "GPUs") in text and "up to 3 batches in flight" in text
    d = cli_json("simulate", *L8)
    assert d["engine"]["async_scheduling"] is True and d["pipeline"]["batches_in_flight_max"] == 3
    assert "AsyncScheduler._update_after_schedule (next_decode_eligible_step)" in d["pipeline"]["rule_source"]
    assert d["summary"]["num_finished"] == 20 and 0 < d["pipeline"]["stage_busy_share"] <= 1
    # without async scheduling the V2 runner runs the plain scheduler with the batch queue of 2
    off = cli_json("simulate", *L8, "--no-async-scheduling")["pipeline"]
    assert off["loop"] == "vLLM 0.33.0 batch-queue pipeline loop (no async scheduling)"
    assert off["batches_in_flight_max"] == 2
    g = cli_json("goodput", "--simulate", *L8, "--rate", "2", "--slo", "ttft=2s,tpot=100ms")
    assert g["num_gpus"] == 2 and g["num_completed"] == 20


def test_pp_1_is_the_run_without_it():
    args = ("simulate", "meta-llama/Llama-3.1-8B", "--gpu", "H100", "--num-requests", "60", "--json")
    assert run_cli(*args, "--pp", "1").stdout == run_cli(*args).stdout


def test_goodput_counts_every_stage_gpu():
    d = cli_json("goodput", "--simulate", *OVERLAP, "--rate", "2", "--slo", "ttft=2s,tpot=100ms")
    assert d["num_gpus"] == 16 and d["num_completed"] == 30


def test_what_is_not_modelled_is_refused():
    assert "schedules up to 3 batches ahead" in refused("simulate", *L70[:6], "4", *L70[7:], "--num-requests", "4")
    assert "drop --replicas and --router" in refused("simulate", *OVERLAP, "--replicas", "2")
    assert "SGLang's pipeline loop" in refused("simulate", *OVERLAP, "--policy", "sglang")
    assert "read from 0.19.0 on" in refused("simulate", *L70[:-1], "0.18.0", "--num-requests", "4")
    assert "--pp 0 is out of range" in refused("simulate", *L70[:6], "0", *L70[7:], "--num-requests", "4")


def test_cost_rents_every_stage_gpu():
    # the SLO-capacity search's probes stop early once they miss (early_stop.py), on the pipelined loop too; a
    # 16-GPU replica spans two 8-GPU nodes, so its price per GPU-hour is given
    res = run_cli("cost", "--simulate", *OVERLAP[:-1], "50", "--slo", "ttft=2s,tpot=100ms", "--api", "OpenAI:gpt-4.1",
                  "--utilization", "0.5", "--gpu-usd-per-hour", "3")
    assert res.exit_code == 0, res.output
    assert "one deployment unit = 1 replica × TP 8 × PP 2 = 16 GPUs" in " ".join(res.stdout.split())
