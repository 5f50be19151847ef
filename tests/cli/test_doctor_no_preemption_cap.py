"""`kvledger doctor`'s --max-num-seqs option names the cap at which no request can be preempted (the SRE trial: the
cap at the observed request size, 319, stood next to the 320 requests running when the log preempted)."""

from __future__ import annotations

from pathlib import Path

from cli_run import run_cli

LOG = Path(__file__).parents[1] / "fixtures" / "vllm_logs" / "constructed_v1_preemptions_at_full_kv.log"


def test_the_brief_line_names_the_cap_that_cannot_preempt():
    res = run_cli("doctor", str(LOG), "--model", "meta-llama/Llama-3.1-8B", "--gpu", "H100")
    text = " ".join(res.stdout.split())  # the console wraps lines past its width
    # 26,305 usable blocks ÷ cdiv(16,000, 16) = 1,000 blocks a max_model_len request = 26 (the log's 26.31x)
    assert ("→ --max-num-seqs 127: 28,251 blocks per replica (+1,945 blocks, +7.4%, re-planned at this cap), 127 "
            "requests of the size observed at saturation; none can be preempted at --max-num-seqs 26 or fewer (26 "
            "requests of max_model_len 16,000 tokens fit the pool as logged)") in text
