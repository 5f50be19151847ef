"""`fp8-kv` and `spec-decode` after a user trial: FP8 as what lets a deployment start, a draft that leaves no pool,
the verify step's bound, the node rule, the calibration's unit, the default drafter."""

from __future__ import annotations

import json

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
