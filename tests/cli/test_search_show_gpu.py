"""``search --show-command ID`` refuses an id on a GPU the search does not cover (it printed the commands of an A100
from a search of L4 and H100), naming the GPUs searched; an id on a searched GPU is still shown, planned only."""

from __future__ import annotations

import json

from cli_run import refused, run_cli

SEARCH = ["search", "meta-llama/Llama-3.2-3B", "--slo", "ttft=2s,tpot=100ms", "--gpus", "L4,H100", "--tp", "1",
          "--max-model-len", "8K", "--utilization", "0.5"]


def test_an_id_on_a_gpu_not_searched_is_refused_naming_the_gpus_searched():
    # A100 resolves to the catalog's nvidia_a100_80gb_sxm; the search covers L4 and H100, in --gpus order
    assert refused(*SEARCH, "--show-command", "A100:tp1:kv-auto") == (
        "--show-command A100:tp1:kv-auto: its GPU, nvidia_a100_80gb_sxm, is not one this search covers (the GPUs "
        "searched: nvidia_l4, nvidia_h100_sxm); give a candidate on one of them, or add A100 to --gpus")


def test_an_id_on_a_searched_gpu_by_another_name_is_shown():
    # H100 is nvidia_h100_sxm, one of the GPUs searched: TP 2 is off the --tp axis but the id is planned as given
    res = run_cli(*SEARCH, "--show-command", "H100:tp2:kv-auto", "--json")
    assert res.exit_code == 0, res.output
    d = json.loads(res.stdout)
    assert d["id"] == "nvidia_h100_sxm:tp2:kv-auto" and "--tensor-parallel-size 2" in d["launch"]["vllm"]


def test_without_gpus_the_gpus_searched_are_the_priced_ones():
    # the RTX PRO 6000 Server Edition has no rental row in gpu_prices.csv, so a search without --gpus leaves it out
    msg = refused("search", "meta-llama/Llama-3.2-3B", "--slo", "ttft=2s", "--tp", "1", "--utilization", "0.5",
                  "--show-command", "nvidia_rtx_pro_6000_server:tp1:kv-auto")
    assert msg.startswith("--show-command nvidia_rtx_pro_6000_server:tp1:kv-auto: its GPU, nvidia_rtx_pro_6000_server, "
                          "is not one this search covers (the GPUs searched, without --gpus every one with a rental "
                          "row: nvidia_a10, nvidia_a10g, nvidia_l4, ")
    assert "nvidia_h100_sxm" in msg and "\n" not in msg
