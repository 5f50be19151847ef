"""SGLang's --ep-size and --moe-a2a-backend on the command line (accounting/sglang_ep.py): what SGLang 0.5.23 refuses is
refused at the boundary (exit 2, one line, in SGLang's meaning); what it takes is planned and simulated, and the plan
prints SGLang's flags."""

from __future__ import annotations

import json
import sys
from importlib import resources

import pytest
from cli_run import cli_json, refused, run_cli

V3 = "deepseek-ai/DeepSeek-V3"


def test_experts_that_do_not_divide_over_the_ep_ranks_are_refused(tmp_path, monkeypatch, capsys):
    # Qwen3-30B-A3B's config with 60 routed experts: at --ep-size 8, 60 / 8 = 7.5 experts a rank. SGLang 0.5.23's
    # FusedMoE.__init__ asserts num_global_routed % ep_size == 0 (every rank the same count; vLLM would place 8 on
    # the first 4 ranks and 7 on the others), so it does not start; kvledger says so before planning.
    raw = json.loads((resources.files("kvledger.catalog") / "data/models/Qwen--Qwen3-30B-A3B.json").read_text())
    raw["num_experts"] = 60
    cfg = tmp_path / "config.json"
    cfg.write_text(json.dumps(raw))
    msg = refused("plan", str(cfg), "--gpu", "H100", "--engine", "sglang", "--tp", "8", "--ep-size", "8")
    assert msg.startswith("--ep-size 8: SGLang places the same number of whole experts on every EP rank and asserts "
                          "num_experts % ep_size == 0 (FusedMoE);")
    assert msg.endswith("60 routed experts do not divide by 8: use an EP size that divides 60") and "\n" not in msg
    # the real console entry: exit status 2, the one line on stderr
    from kvledger.cli.main import run as main_run

    monkeypatch.setattr(sys, "argv", ["kvledger", "plan", str(cfg), "--gpu", "H100", "--engine", "sglang", "--tp", "8",
                                      "--ep-size", "8"])
    with pytest.raises(SystemExit) as ended:
        main_run()
    err = capsys.readouterr().err
    assert ended.value.code == 2 and "num_experts % ep_size == 0" in err and "Traceback" not in err


def test_deepep_on_a_dense_model_and_an_unknown_backend_are_refused():
    dense = refused("plan", "meta-llama/Llama-3.1-8B", "--gpu", "H100", "--engine", "sglang", "--tp", "2",
                    "--moe-a2a-backend", "deepep")
    assert dense.startswith("--moe-a2a-backend deepep: meta-llama/Llama-3.1-8B") and "has no routed experts" in dense
    bogus = refused("plan", V3, "--gpu", "H200", "--engine", "sglang", "--tp", "8", "--moe-a2a-backend", "nccl")
    assert bogus.startswith("--moe-a2a-backend nccl: not one of SGLang 0.5.23's choices (none, deepep, mooncake")
    vllm = refused("plan", V3, "--gpu", "H200", "--tp", "8", "--moe-a2a-backend", "deepep")
    assert vllm.startswith("--moe-a2a-backend is SGLang's flag; plan it with --engine sglang")


def test_the_plan_prints_sglangs_flags_and_simulate_runs_the_ep_ranks():
    base = (V3, "--gpu", "H200", "--engine", "sglang", "--tp", "8")
    out = run_cli("plan", *base, "--ep-size", "8", "--moe-a2a-backend", "deepep").stdout
    head = out.splitlines()[0]
    assert "TP 8, --ep-size 8, --moe-a2a-backend deepep" in head and "--enable-expert-parallel" not in out
    # simulate: the same plan's pool, the step cost over 8 EP ranks (tests/accounting/test_sglang_ep.py); the
    # all-to-all backend is simulated only with --enable-dp-attention
    sim = ("simulate", *base, "--num-requests", "8", "--prompt-lengths", "fixed:512", "--output-lengths", "fixed:32",
           "--rate", "4")
    ep, tp = cli_json(*sim, "--ep-size", "8"), cli_json(*sim)
    assert ep["summary"]["num_finished"] == tp["summary"]["num_finished"] == 8
    # one decode token's expert work waits for the busiest of 8 ranks (2.91× the even share): slower decode steps
    assert ep["summary"]["tpot_s"]["mean"] > tp["summary"]["tpot_s"]["mean"]
    assert "expert parallelism over 8 ranks (SGLang --ep-size 8, --moe-a2a-backend none)" in ep["step_cost"]["source"]
    assert "expert parallelism" not in tp["step_cost"]["source"]
