"""`fp8-kv` and `spec-decode` after a user trial: FP8 as what lets a deployment start, a draft that leaves no pool,
the verify step's bound, the node rule, the calibration's unit, the default drafter."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from kvledger.cli.main import app

runner = CliRunner(env={"COLUMNS": "250"})


def run(*args):
    return runner.invoke(app, list(args), catch_exceptions=False)


def test_fp8_kv_says_fp8_is_what_lets_qwen3_32b_start_on_h100():
    # Qwen3-32B: 2 × 64 layers × 8 KV heads × 128 head_dim × 2 B = 262,144 B/token, so a 16-token page is 4 MiB in
    # bf16 and 2 MiB in fp8. max_model_len 40,960 needs 40,960 / 16 = 2,560 blocks. The memory plan's 8.61 GiB of KV
    # (`kvledger plan Qwen3-32B --gpu H100`) is 2,204 blocks of 4 MiB, 2,203 usable after the null block: short of
    # 2,560, so vLLM refuses to start in bf16; in fp8 it is 4,409 blocks, 4,408 usable ≥ 2,560: it starts.
    r = run("fp8-kv", "Qwen3-32B", "--gpu", "H100", "--context", "8K", "--json")
    assert r.exit_code == 0, r.output
    st = json.loads(r.stdout)["headline"]["start_up"]
    assert st == {"max_model_len": 40_960, "bf16": {"starts": False, "need_blocks": 2_560, "usable_blocks": 2_203},
                  "fp8": {"starts": True, "need_blocks": 2_560, "usable_blocks": 4_408}}
    r = run("fp8-kv", "Qwen3-32B", "--gpu", "H100", "--context", "8K")
    assert r.exit_code == 0
    text = " ".join(r.stdout.split())
    assert "bf16/auto: does not start (needs 2,560 blocks, has 2,203); fp8: starts" in text
    assert "FP8 KV is what lets this deployment start at this max_model_len" in text


def test_fp8_kv_says_nothing_of_start_up_where_bf16_starts():
    # Llama-3.1-8B on H100-SXM: 28,160 bf16 blocks (tests/analyses/test_analyses_cli.py) ≫ 131,072 / 16 = 8,192
    r = run("fp8-kv", "meta-llama/Llama-3.1-8B", "--gpu", "H100-SXM", "--concurrency", "8", "--contexts", "1K")
    assert r.exit_code == 0
    assert "does not start" not in r.stdout


def test_spec_decode_with_a_draft_that_empties_the_pool_exits_3_with_its_figures(cli_entry):
    # Llama-3.1-8B on H100: 55.00 GiB of KV memory = 28,160 blocks of 2 MiB (tests/analyses/test_analyses_cli.py).
    # Llama-3.1-70B as the draft at TP 1: 131.45 GiB of weights > 55.00 GiB, so nothing is left: 0 blocks, where one
    # request of max_model_len 131,072 tokens needs 131,072 / 16 = 8,192. vLLM could not start: exit 3, never a
    # negative request count (the old "pool holds -1 requests": 0 blocks − the null block = −1).
    code, _, err = cli_entry("spec-decode", "Llama-3.1-8B", "--gpu", "H100", "-k", "4", "--acceptance", "0.7",
                             "--draft-model", "Llama-3.1-70B")
    assert code == 3 and err.count("\n") == 1  # the one-paragraph error
    text = " ".join(err.split())
    assert "131.45 GiB per GPU" in text and "leaving 0 of 28,160 blocks (0 usable)" in text
    assert "needs 8,192 blocks" in text
    # 70.6 B parameters (80 layers of 8,192 hidden, 28,672 FFN, 128,256 vocab) against 8.0 B
    assert "draft model has 70.6 B parameters, not fewer than the target's 8.0 B" in text


def test_spec_decode_pool_holds_never_fewer_than_zero_requests():
    from kvledger.accounting.plan import build_plan
    from kvledger.analyses.judgments.spec_decode import SpecDecodeModel
    from kvledger.analyses.judgments.spec_decode_summary import make_draft
    from kvledger.catalog.gpu_file import resolve_gpu
    from kvledger.catalog.models import load_model

    target = load_model("Llama-3.1-8B")
    sm = SpecDecodeModel(build_plan(target, resolve_gpu("H100"), with_advice=False),
                         make_draft("Llama-3.1-70B", None, target), 4, 0.7)
    assert sm.pool_blocks() == 0 and sm.max_requests(2048) == 0


def test_spec_decode_warns_when_the_draft_is_the_targets_size():
    # Llama-3.1-8B drafting for itself: 14.99 GiB of draft weights leave 10,243 of 28,160 blocks; it starts (exit 0)
    r = run("spec-decode", "Llama-3.1-8B", "--gpu", "H100", "-k", "4", "--acceptance", "0.7", "--draft-model",
            "Llama-3.1-8B")
    assert r.exit_code == 0
    first = r.stdout.splitlines()[1]
    assert first.startswith("warning: the draft model has 8.0 B parameters, not fewer than the target's 8.0 B")


def _spec_model(name, gpu, tp, k):
    from kvledger.accounting.plan import build_plan
    from kvledger.accounting.settings import make_settings
    from kvledger.analyses.judgments.spec_decode import SpecDecodeModel
    from kvledger.analyses.judgments.spec_decode_summary import make_draft
    from kvledger.analyses.serving.plan_pricing import PricingFlags, priced_settings
    from kvledger.catalog.gpu_file import resolve_gpu
    from kvledger.catalog.models import load_model

    t, g, pf = load_model(name), resolve_gpu(gpu), PricingFlags()
    plan = build_plan(t, g, priced_settings(make_settings(tp=tp), g, pf, t), with_advice=False)
    return SpecDecodeModel(plan, make_draft(None, None, t), k, 0.7, pf)


def test_the_verify_steps_bound_is_the_term_its_time_pays():
    from dataclasses import replace

    # Llama-3.1-70B, H100, TP 4, k 4: the batch-64 verification is 64 × 5 = 320 tokens. Its weight read is the
    # weights per GPU at 80% of 3.35 TB/s = 12.97 ms; its GEMM FLOPs (2 × matmul parameters per GPU × 320) at 100% of
    # 989 TFLOP/s take 11.24 ms, under the read (the old label, "memory", from these two), but the step is priced at
    # the measured GEMM efficiency at 320 tokens, 0.456: 11.24 / 0.456 = 24.64 ms, above the read. The step pays
    # 24.64 ms + 4.01 ms attention + layer kernels and all-reduces = 38.19 ms: compute, as the label now says.
    sm = _spec_model("Llama-3.1-70B", "H100", 4, 4)
    c = sm.verify_costs(64, 2048)
    f, b = sm.rc.peak_flops * sm.rc.flops_fraction, sm.rc.bw * sm.rc.bandwidth_fraction
    assert round(c.weight_bytes / b * 1e3, 2) == 12.97 and round(c.matmul_flops / f * 1e3, 2) == 11.24
    assert round(c.matmul_flops / f / c.matmul_efficiency * 1e3, 2) == 24.64
    row = sm.row(64, 2048)
    assert round(row.verify_step_s * 1e3, 2) == 38.19 and row.verify_bound == "compute"
    assert sm.row(64, 2048).base_bound == "memory"  # plain: 64 tokens, 2.25 / 0.373 = 6.03 ms < 12.97 ms
    # everywhere: "memory" exactly when the GEMM FLOPs add no time to the priced step
    for name, gpu, tp, k in (("Llama-3.1-70B", "H100", 4, 4), ("Qwen2.5-72B", "H200", 2, 3)):
        sm = _spec_model(name, gpu, tp, k)
        for batch in (1, 8, 32, 64, 128, 512):
            for cost in (sm.verify_costs(batch, 2048), sm.rc.costs(_decode(batch))):
                free = replace(cost, matmul_flops=cost.expert_flops)  # no dense GEMM FLOPs left
                same = sm.rc.time_s(free) == sm.rc.time_s(cost)
                assert (sm.bound(cost) == "memory") == same, (name, batch)
    # Qwen2.5-72B, H200, TP 2, k 3: the batch-64 verification (256 tokens) pays 37.83 ms of GEMMs > 18.61 ms of read
    assert _spec_model("Qwen2.5-72B", "H200", 2, 3).row(64, 2048).verify_bound == "compute"


def _decode(batch):
    from kvledger.accounting.roofline_breakdown import decode_shape

    return decode_shape(batch, 2048)


def test_tp_16_on_h100_assumes_plans_two_nodes_of_8_with_its_warning():
    from kvledger.accounting.plan import build_plan
    from kvledger.accounting.settings import make_settings
    from kvledger.analyses.serving.plan_pricing import PricingFlags, simulate_step_cost
    from kvledger.catalog.gpu_file import resolve_gpu
    from kvledger.catalog.models import load_model

    # an H100 SXM5 baseboard holds 8 GPUs, so TP 16 is the fewest nodes that hold 16 ranks 8 a node: 16 / 8 = 2
    # (accounting/node_size.py, the rule `plan` applies and warns about)
    warn = "warning: --tp 16 is 16 GPUs, more than one node of this GPU holds (8: an 8-GPU SXM5 baseboard)"
    r = run("fp8-kv", "Llama-3.1-70B", "--gpu", "H100", "--tp", "16", "--contexts", "8K", "--concurrency", "8",
            "--json")
    d = json.loads(r.stdout)
    assert d["settings"]["nnodes"] == 2 and d["notes"][0].startswith(warn)
    # its steps are those of the plan with --nnodes 2 given (the all-reduce across the two nodes)
    plan = build_plan(load_model("Llama-3.1-70B"), resolve_gpu("H100"), make_settings(tp=16, nnodes=2),
                      with_advice=False)
    assert plan.nodes is None and plan.settings.nnodes == 2
    assert d["curve"][0]["bf16_step_s"] == simulate_step_cost(plan, PricingFlags())[0].step_time_s(_decode_at(8, 8192))
    r = run("spec-decode", "Llama-3.1-70B", "--gpu", "H100", "--tp", "16", "-k", "4", "--acceptance", "0.7", "--json")
    d = json.loads(r.stdout)
    assert d["settings"]["nnodes"] == 2 and d["notes"][0].startswith(warn)
    text = run("spec-decode", "Llama-3.1-70B", "--gpu", "H100", "--tp", "16", "-k", "4", "--acceptance", "0.7").stdout
    assert any(line.startswith(warn) for line in text.splitlines()[1:3])  # under the title and the drafter


def _decode_at(batch, context_tokens):
    from kvledger.accounting.roofline_breakdown import decode_shape

    return decode_shape(batch, context_tokens)


# the trial's rows, aggregate tok/s over 8 sequences as vllm bench reports them: fp8 below bf16 at 1,024 tokens
TRIAL_ROWS = "1024,8,350,330\n16384,8,250,270\n"


def test_calibration_columns_must_say_their_unit(tmp_path, cli_entry):
    csv = tmp_path / "cal.csv"
    csv.write_text("context_tokens,batch,bf16_tok_per_s,fp8_tok_per_s\n" + TRIAL_ROWS)
    code, _, err = cli_entry("fp8-kv", "Llama-3.1-8B", "--gpu", "H100", "--calibration", str(csv))
    assert code == 2 and "do not say whether the rates are per sequence or aggregate" in err
    assert "bf16_tok_per_s_per_seq" in err and "bf16_tok_per_s_aggregate" in err
    help_text = "".join(run("fp8-kv", "--help").stdout.split())  # the help wraps long names: compare unwrapped
    assert "bf16_tok_per_s_per_seq,fp8_tok_per_s_per_seq(tok/sofonesequence)" in help_text
    assert "bf16_tok_per_s_aggregate,fp8_tok_per_s_aggregate(tok/softhewholebatch" in help_text


def test_a_fit_past_the_gpus_bandwidth_is_refused_as_a_likely_unit_mix_up(tmp_path, cli_entry):
    # Llama-3.1-8B at batch 8: the two rows' steps differ by 8 × (16,384 − 1,024) tokens × 131,072 B of KV =
    # 16,106,127,360 B. Read per sequence, their step times 1/250 − 1/350 s = 1.142857 ms apart give an effective
    # bandwidth of 16,106,127,360 / 1.142857e-3 = 14,093 GB/s: 421% of the H100 SXM5's 3,350 GB/s. Refused, exit 2.
    csv = tmp_path / "cal.csv"
    csv.write_text("context_tokens,batch,bf16_tok_per_s_per_seq,fp8_tok_per_s_per_seq\n" + TRIAL_ROWS)
    code, _, err = cli_entry("fp8-kv", "Llama-3.1-8B", "--gpu", "H100", "--calibration", str(csv))
    assert code == 2 and err.count("\n") == 1
    assert "effective bandwidth of 14,093 GB/s, 421% of" in err and "unit mix-up: aggregate tok/s" in err
    # the same rows named aggregate: ÷ 8 = 43.75 and 31.25 tok/s per sequence, steps 22.857 and 32 ms, 9.142857 ms
    # apart: 16,106,127,360 / 9.142857e-3 = 1,761.6 GB/s, 52.6% of 3,350 GB/s
    csv.write_text("context_tokens,concurrency,bf16_tok_per_s_aggregate,fp8_tok_per_s_aggregate\n" + TRIAL_ROWS)
    d = json.loads(run("fp8-kv", "Llama-3.1-8B", "--gpu", "H100", "--calibration", str(csv), "--json").stdout)
    assert round(d["calibration"]["effective_bandwidth_bytes_per_s"] / 1e9, 1) == 1761.6
    assert [r["bf16_measured_s"] for r in d["calibration"]["rows"]] == [8 / 350, 8 / 250]


def test_measured_points_that_disagree_with_the_priced_steps_win_there(tmp_path):
    # batch 1 per sequence: fp8 steps 1 − 150/151 = 0.66% faster at 2,048 tokens, 1 − 140/136 = 2.94% slower at 8,192,
    # 1 − 110/125 = 12% faster at 32,768: no overhead of the fitted form (fixed per layer + per element, with KV bytes
    # halved) is slower at 8,192 only, so the fit must contradict at least one point, and the verdict says which
    csv = tmp_path / "cal.csv"
    csv.write_text("context_tokens,batch,bf16_tok_per_s_per_seq,fp8_tok_per_s_per_seq\n2048,1,150,151\n8192,1,140,136\n"
                   "32768,1,110,125\n")
    d = json.loads(run("fp8-kv", "Llama-3.1-8B", "--gpu", "H100", "--calibration", str(csv), "--json").stdout)
    first = d["verdict"][0]
    assert first.startswith("Your measurements disagree with this analysis at ")
    assert "at 8,192 tokens × batch 1 FP8 measured 2.9% slower (140 → 136 tok/s per sequence)" in first
    assert "the measurements win" in first
    # the vLLM docs' L4 table, fitted within 0.2% (tests/analyses/test_analyses_cli.py): nothing to contradict
    csv.write_text("context_tokens,batch,bf16_tok_per_s_per_seq,fp8_tok_per_s_per_seq\n2048,1,29.1,29.4\n"
                   "8192,1,26.4,27.9\n16384,1,23.6,26.2\n32768,1,19.4,23.4\n")
    qwen = str(Path(__file__).parents[1] / "fixtures" / "configs" / "Qwen3-4B.json")
    d = json.loads(run("fp8-kv", qwen, "--gpu", "L4", "--calibration", str(csv), "--json").stdout)
    assert not any(v.startswith("Your measurements disagree") for v in d["verdict"])


def test_spec_decode_says_its_default_drafter_first():
    r = run("spec-decode", "Llama-3.1-8B", "--gpu", "H100", "-k", "4", "--acceptance", "0.7")
    head = r.stdout.splitlines()[:2]
    assert head[0].endswith("draft: n-gram prompt lookup (default; no --draft-model given)")
    assert head[1].startswith("draft: n-gram prompt lookup (default; no --draft-model given): drafting costs no GPU")
    help_text = " ".join(run("spec-decode", "--help").stdout.split())
    assert "n-gram prompt lookup, drafting free (no GPU work), the most optimistic case" in help_text.replace(
        "--draft-cost- fraction", "--draft-cost-fraction")
    d = json.loads(run("spec-decode", "Llama-3.1-8B", "--gpu", "H100", "-k", "4", "--acceptance", "0.7",
                       "--json").stdout)
    assert d["summary"]["draft"]["kind"] == "free"
    # free drafting: a round is the verification alone, E = (1 − 0.7^5) / (1 − 0.7) = 0.83193 / 0.3 = 2.7731 tokens
    assert round(d["summary"]["expected_tokens_per_round"], 4) == 2.7731
