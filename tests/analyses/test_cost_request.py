"""``analyses.serving.cost_compute.compute_cost`` prices a declared ``CostRequest`` with no command line: the request
built by hand from checked values gives ``kvledger cost --json``'s document for the same inputs."""

from __future__ import annotations

import json
from pathlib import Path

from kvledger import strict_json
from kvledger.analyses.serving.cost_compute import compute_cost
from kvledger.analyses.serving.cost_request import CostPrices, CostRequest, FileSource
from kvledger.catalog.api_match import find_api_price
from kvledger.ledgers.slo import parse_slo

# llmperf's leaderboard run of Llama-2-70B-chat on 4 H100s (150 requests; tests/evidence/data/SOURCES.md)
LLMPERF = "tests/evidence/data/llmperf/leaderboard_individual_anyscale_70b.json"


def test_a_request_built_without_the_cli_is_the_commands_json(cli_json):
    request = CostRequest(FileSource((Path(LLMPERF),), num_gpus=4),
                          CostPrices(parse_slo("ttft=500ms,tpot=50ms"), find_api_price("OpenAI:gpt-4.1"), gpu="H100",
                                     gpu_provider="Nebius", utilization=0.5))
    doc = cli_json("cost", LLMPERF, "--slo", "ttft=500ms,tpot=50ms", "--api", "OpenAI:gpt-4.1", "--utilization", "0.5",
                   "--gpu", "H100", "--gpu-provider", "Nebius", "--num-gpus", "4")
    got = json.loads(strict_json.dumps(compute_cost(request).document))
    assert got == doc
    # the GPU rate compute_cost looked up itself (no gpu_rate given): gpu_prices.csv's Nebius gpu-h100-sxm 8gpu row,
    # $23.60/h ÷ 8 GPUs = $2.95 per GPU-hour; the run's names, each with where it was read
    assert got["inputs"]["usd_per_gpu_hour"] == 2.95
    assert got["notes"][0] == ("priced run: model meta-llama/Llama-2-70b-chat-hf (from the run's file), GPU H100 "
                               "(--gpu), 4 GPUs a replica (--num-gpus)")
