"""``kvledger doctor`` against what the log itself says: the engine's own batch limits ("Defaulting max_num_seqs to
1024"), a ``--gpu`` the log contradicts, a bundled config standing in for a fine-tune's name, a quantization the given
model lacks, and remedy lines that say what they cost (vLLM 0.19.0 start-ups on H100, trimmed copies)."""

from __future__ import annotations

from pathlib import Path

from kvledger.analyses.doctor.context import build_context
from kvledger.analyses.doctor.diagnose import diagnose, diagnose_file
from kvledger.analyses.doctor.log_model import stand_in_model
from kvledger.evidence.vllm_log import parse_vllm_log, read_vllm_log
from kvledger.units import GiB

LOGS = Path(__file__).parents[1] / "fixtures" / "vllm_startups_0_19" / "logs"
LLAMA = LOGS / "meta-llama-llama-3-1-8b---h100-80gb--tp1pp1dp1--8192.log"
DSV2 = LOGS / "deepseek-ai-deepseek-v2---h100-80gb--tp1pp1dp1--8192.log"
W4A16 = LOGS / "w4a16-redhatai-lla--h100-80gb--tp1pp1dp1--8192-dtf16.log"
METRICS = ("(APIServer pid=1) INFO 04-22 00:10:{s} [v1/metrics/loggers.py:259] Engine 000: Avg prompt throughput: "
           "18000.0 tokens/s, Avg generation throughput: 4300.0 tokens/s, Running: {r} reqs, Waiting: 60 reqs, "
           "{pre}GPU KV cache usage: {u}%, Prefix cache hit rate: 0.0%\n")


def test_the_engines_defaulting_lines_set_the_batch_limits_whatever_the_gpu():
    # the log: "Defaulting max_num_batched_tokens to 8192 …", "Defaulting max_num_seqs to 1024 …" (H100: ≥70 GiB, not
    # an A100). With --gpu A100-80GB the ledger's own rule gives 2048/256 (vLLM's A100 branch); the log's figures win.
    ctx = build_context(read_vllm_log(LLAMA), gpu="A100-80GB")
    assert (ctx.settings["max_num_seqs"], ctx.settings["max_num_batched_tokens"]) == (1024, 8192)
    assert ctx.sources["max_num_seqs"].startswith("log line ")
    rows = {r.term: r for r in diagnose_file(LLAMA, gpu="A100-80GB").startup.rows}
    # the sampler's dummy batch is min(1024, 8192) requests: activation 1.88 GiB (log 1.89), not 979 MiB at 256
    assert abs(rows["activation peak"].ledger_value - 1.89 * GiB) < 0.02 * GiB
    # available KV: 58.17 GiB against the log's 58.11 (the A100's 79.25 GiB total, +0.06), not 59.09
    assert abs(rows["available KV memory"].ledger_value - 58.17 * GiB) < 0.01 * GiB


def test_without_the_defaulting_lines_the_a100_rule_applies():
    text = "".join(line for line in LLAMA.read_text().splitlines(True) if "Defaulting max_num" not in line)
    log = parse_vllm_log(text, source="no-defaulting.log")
    ctx = build_context(log, gpu="A100-80GB")
    assert ctx.settings["max_num_seqs"] is None and ctx.sources["max_num_seqs"].startswith("vLLM default")
    # the ledger's rule for an A100 (engine/arg_utils.py: ≥70 GiB and "a100" not in the name → else 2048/256): the
    # sampler's dummy batch is 256 requests, the activation peak under 1 GiB against the H100 log's 1.89
    peak = diagnose(log, gpu="A100-80GB").startup.row("activation peak").ledger_value
    assert peak < 1.0 * GiB


def test_a_gpu_the_log_contradicts_is_warned():
    warn = " ".join(diagnose_file(LLAMA, gpu="A100-80GB").warnings)
    assert "--gpu A100-80GB (NVIDIA A100 80GB SXM4) is not the GPU this log ran on" in warn
    assert "FlashAttention 3" in warn and "Hopper (sm90)" in warn and "is sm80" in warn
    h200 = " ".join(diagnose_file(LLAMA, gpu="H200").warnings)
    assert "device total is 79.19 GiB" in h200 and "139.96 GiB" in h200
    assert not [w for w in diagnose_file(LLAMA, gpu="H100-SXM").warnings if "--gpu" in w]
    assert not [w for w in diagnose_file(LLAMA).warnings if "--gpu" in w]


def test_a_device_the_log_names_contradicts_the_gpu(tmp_path):
    log = tmp_path / "named.log"
    log.write_text(LLAMA.read_text() + "(EngineCore pid=242) INFO 04-22 00:04:21 [fused_moe.py:1] Using configuration "
                   "from device_name=NVIDIA_H100_80GB_HBM3,dtype=bf16.json\n")
    warn = " ".join(diagnose_file(log, gpu="A100-80GB").warnings)
    assert "the log names the device 'NVIDIA H100 80GB HBM3'" in warn and "NVIDIA H100 80GB SXM5" in warn


def test_a_chat_model_is_planned_with_its_bundled_base_config_and_says_so():
    rep = diagnose_file(DSV2)
    assert rep.model == "deepseek-ai/DeepSeek-V2-Lite-Chat (config of deepseek-ai/DeepSeek-V2-Lite)"
    assert any(n.startswith("model: 'deepseek-ai/DeepSeek-V2-Lite-Chat'") and "bundled deepseek-ai/DeepSeek-V2-Lite "
               "stands in" in n for n in rep.notes)
    kv = rep.startup.row("available KV memory")
    assert kv.log_value == round(43.61 * GiB) and abs(kv.difference) < 0.01 * GiB
    assert rep.startup.consistent is True


def test_a_redhatai_checkpoint_the_log_names_is_planned_without_model():
    # the log's args line names 'RedHatAI/Meta-Llama-3.1-8B-Instruct-quantized.w4a16' (memory_accuracy's
    # QUANTIZED_CHECKPOINTS: Llama-3.1-8B-Instruct + GPTQ 4-bit g128); was "not a bundled model … pass --model".
    # Log: "Model loading took 5.38 GiB" (line 31), "Available KV cache memory: 67.71 GiB" (line 56)
    rep = diagnose_file(W4A16)
    assert rep.model == "RedHatAI/Meta-Llama-3.1-8B-Instruct-quantized.w4a16"
    w, kv = rep.startup.row("weights"), rep.startup.row("available KV memory")
    assert (w.log_line, kv.log_line) == (31, 56) and abs(w.difference) < 0.02 * GiB and abs(kv.difference) < 0.02 * GiB
    assert rep.startup.consistent is True


def test_fine_tune_suffixes_the_catalog_would_match():
    assert stand_in_model("deepseek-ai/DeepSeek-V2-Lite-Chat")[1] == "deepseek-ai/DeepSeek-V2-Lite"
    assert stand_in_model("meta-llama/Llama-3.1-8B-Chat")[1] == "meta-llama/Meta-Llama-3.1-8B"  # via -Instruct's alias
    assert stand_in_model("google/gemma-2-9b-chat")[1] == "google/gemma-2-9b-it"
    assert stand_in_model("DeepSeek-V2-Lite-Instruct")[0].name == ("DeepSeek-V2-Lite-Instruct (config of "
                                                                   "deepseek-ai/DeepSeek-V2-Lite)")
    assert stand_in_model("someone/unbundled-7b-Chat") is None


def test_a_quantization_the_given_model_lacks_is_warned():
    warn = " ".join(diagnose_file(W4A16, model="meta-llama/Llama-3.1-8B").warnings)
    assert "the log names the weight quantization 'gptq_marlin'" in warn
    assert "--model meta-llama/Llama-3.1-8B's config is unquantized" in warn
    assert not [w for w in diagnose_file(LLAMA, model="meta-llama/Llama-3.1-8B").warnings if "quantization" in w]


def preemption_log(tmp_path: Path) -> Path:
    """The Llama start-up and three metrics lines at ≥ 99.6% KV with 57–58 running: ≈8,180 tokens each."""
    lines = [METRICS.format(s="10", r=58, pre="", u=99.6),
             METRICS.format(s="20", r=57, pre="Preemptions: 14, ", u=99.8),
             METRICS.format(s="30", r=58, pre="Preemptions: 11, ", u=99.7)]
    log = tmp_path / "llama_preempted.log"
    log.write_text(LLAMA.read_text() + "".join(lines))
    return log


def test_remedies_say_what_they_cost(tmp_path):
    f = diagnose_file(preemption_log(tmp_path)).finding("capacity")
    assert f.triggered and f.verdict == "capacity_bound_preemptions"
    opts = {o["action"]: o for o in f.options}
    logged, half = opts["as logged"], opts["--max-model-len 4096"]
    # half the limit frees no KV memory: the logged pool (29,751 blocks), not the budget re-divided (29,752)
    assert (logged["num_gpu_blocks"], half["num_gpu_blocks"]) == (29_751, 29_751)
    # the requests observed hold ≈8,182 tokens: none fits under 4,096
    assert half["requests_of_observed_size"] == 0 and "would refuse the requests observed" in half["detail"]
    assert opts["--tensor-parallel-size 2"]["gpus_per_replica"] == 2 and logged["gpus_per_replica"] == 1
