"""``kvledger doctor`` on a real vLLM 0.10.2 start-up of a hybrid model (Qwen3-Next-80B-A3B at TP 2 on two H200s):
the block count behind a multi-group "GPU KV cache size", and the 0.10.2 memory summary line
(tests/fixtures/vllm_logs/README.md names the source)."""

from __future__ import annotations

from pathlib import Path

from kvledger.analyses.doctor.diagnose import diagnose_file
from kvledger.evidence.vllm_log import read_vllm_log
from kvledger.units import GiB

LOG = Path(__file__).parents[1] / "fixtures" / "vllm_logs" / "v0.10.2_qwen3-next-80b_h200_tp2.log"
MODEL = "Qwen/Qwen3-Next-80B-A3B-Thinking"  # the bundled config; Instruct has the same architecture


def test_printed_concurrency_picks_the_block_count_among_the_groups():
    # 4 KV-cache groups (12 attention + 36 linear-attention layers in groups of 12), 544-token blocks: the printed
    # 973,760 tokens = (n // 4) × 544 allow n = 7,160–7,163; 14.77x = n / 485 (cdiv(262,144, 544) + 3 state blocks)
    # leaves 7,162–7,163, and vLLM itself reported num_gpu_blocks 7,162 (its loggers.py line in the same log).
    c = diagnose_file(LOG, model=MODEL, gpu="H200").startup
    b = c.row("GPU blocks")
    assert (b.log_value, b.ledger_value) == (7162, 7162)
    r = c.row("max concurrency at 262,144 tokens")
    assert (r.log_value, r.ledger_value) == (14.77, 14.77)
    assert c.row("KV cache size (printed)").ledger_value == 973_760
    assert c.consistent is True


def test_0_10_2_summary_line_gives_activation_non_torch_and_budget():
    # "Desired GPU memory utilization is (0.9, 125.83 GiB). Actual usage is 74.28 GiB for weight, 5.58 GiB for peak
    # activation, 1.38 GiB for non-torch memory, and 2.37 GiB for CUDAGraph memory." (gpu_worker.py, 0.10.2)
    st = read_vllm_log(LOG).startup
    assert st.gpu_memory_utilization == 0.9
    assert round(st.requested_memory_bytes / GiB, 2) == 125.83
    assert round(st.activation_peak_bytes / GiB, 2) == 5.58
    assert round(st.non_torch_bytes / GiB, 2) == 1.38


def test_graph_capture_after_the_pool_is_not_a_budget_term_before_0_20():
    # 125.83 − 74.28 − 5.58 − 1.38 = 44.59 GiB, the printed budget: the 2.37 GiB capture is not subtracted, so the
    # ledger's gap to the log is the requested memory (+0.14) and non-torch memory (ledger 2.23 vs 1.38), no residual.
    c = diagnose_file(LOG, model=MODEL, gpu="H200").startup
    assert c.row("CUDA graphs").log_value == 0
    assert "residual -0.00 GiB" in c.row("available KV memory").explanation
