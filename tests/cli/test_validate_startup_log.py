"""``validate --startup-log FILE`` (and ``calibrate``): the replay's KV pool from the measured server's vLLM start-up
log, read as ``doctor`` reads it (calibration/startup_pool.py over analyses/doctor/context.py :: log_blocks).

The run: LLMServingSim's RTX 4090 run of Llama-3.1-8B on vLLM 0.19.0
(tests/calibration/data/llmservingsim_rtx4090_edits/as_recorded/), whose meta.json records
``kv_cache.num_gpu_blocks`` 2,588 and ``num_kv_tokens`` 41,408 (= 2,588 × 16).
Its start-up log is not published, so ``_log`` writes the two capacity lines vLLM 0.19.0 prints for that pool
(kv_cache_utils.py:1319/1324, the format of the real 0.19.0 H100 log in tests/fixtures/vllm_startups_0_19/logs/, whose
banner and argument lines it copies with the run's model and max_model_len): "GPU KV cache size: 41,408 tokens" and
the concurrency at 32,768 tokens, 2,588 / ceil(32,768 / 16) = 2,588 / 2,048 = 1.26x. Constructed, not a real log.
"""

from __future__ import annotations

from pathlib import Path

from cli_run import cli_json, refused, run_cli

RUN = Path(__file__).resolve().parents[1] / "calibration" / "data" / "llmservingsim_rtx4090_edits" / "as_recorded"
REQUESTS = str(RUN / "requests.jsonl")
LOGS = Path(__file__).resolve().parents[1] / "fixtures" / "vllm_logs"
H = "(APIServer pid=1) INFO 04-25 18:40:00 [entrypoints/utils.py:{}] "
E = "(EngineCore pid=242) INFO 04-25 18:41:00 [v1/core/kv_cache_utils.py:{}] "


def _log(tmp_path: Path, tokens: int, concurrency: str, args: str = "") -> str:
    lines = [H.format(299) + " ▄▄ ▄█ █     █     █ ▀▄▀ █  version 0.19.0",
             H.format(299) + "  █▄█▀ █     █     █     █  model   meta-llama/Llama-3.1-8B",
             H.format(233) + "non-default args: {'model_tag': 'meta-llama/Llama-3.1-8B', 'model': "
                             "'meta-llama/Llama-3.1-8B', 'max_model_len': 32768, 'max_num_batched_tokens': 2048, "
                             f"'max_num_seqs': 256, 'seed': 42{args}}}",
             E.format(1319) + f"GPU KV cache size: {tokens:,} tokens",
             E.format(1324) + f"Maximum concurrency for 32,768 tokens per request: {concurrency}x"]
    path = tmp_path / f"startup_{tokens}{'_' * bool(args)}{len(args) or ''}.log"
    path.write_text("\n".join(lines) + "\n")
    return str(path)


def _notes(*args: str) -> list[str]:
    return cli_json("validate", REQUESTS, *args)["notes"]


def test_the_pool_comes_from_the_log_with_its_figure_and_line(tmp_path):
    # 41,408 tokens / 16 = 2,588 blocks (and 2,588 / 2,048 = 1.26x, as printed): the record's 2,588 as well
    log = _log(tmp_path, 41408, "1.26")
    notes = _notes("--startup-log", log)
    pool = next(n for n in notes if n.startswith("KV pool: "))
    assert pool.startswith(f"KV pool: 2,588 blocks of 16 tokens from the start-up log {Path(log).name} ('GPU KV cache "
                           "size: 41,408 tokens', from the printed KV cache size, line 4: tokens = n × block_size, and "
                           "the printed concurrency, line 5; blocks of 16 tokens under the log's settings) (5.05 GiB "
                           "of KV per GPU")
    assert ("the run's record (" + str(RUN / "meta.json") + ") gives the same block count as the start-up log: "
            "num_gpu_blocks 2,588") in notes
    assert not any("overrides the run's own record" in n for n in notes)
    assert "2,588 blocks of 16 tokens from the start-up log" in " ".join(run_cli("validate", REQUESTS, "--startup-log",
                                                                                  log).stdout.split())


def test_a_log_that_disagrees_with_the_record_is_said_and_used(tmp_path):
    # 41,600 tokens / 16 = 2,600 blocks (2,600 / 2,048 = 1.27x): +12 against the record's 2,588; the log's is replayed
    log = _log(tmp_path, 41600, "1.27")
    notes = _notes("--startup-log", log)
    assert (f"WARNING: the run's record ({RUN / 'meta.json'}) gives num_gpu_blocks 2,588, the start-up log 2,600 (+12 "
            "blocks): they disagree, and the log's is used (--startup-log wins, as a flag does); is the log that of "
            "the server that was measured? Drop --startup-log to replay the record's pool") in notes
    assert next(n for n in notes if n.startswith("KV pool: ")).startswith("KV pool: 2,600 blocks of 16 tokens from "
                                                                           "the start-up log")


def test_logs_that_state_no_pool_are_refused_clearly(tmp_path):
    empty = tmp_path / "empty.log"
    empty.write_text("")
    assert refused("validate", REQUESTS, "--startup-log", str(empty)) == f"--startup-log {empty}: the file is empty"
    sglang = refused("validate", REQUESTS, "--startup-log", str(LOGS / "sglang_server.log"))
    assert sglang.startswith(f"--startup-log {LOGS / 'sglang_server.log'}: this log comes from SGLang, not vLLM "
                             "(line 1:")
    assert sglang.endswith("--startup-log reads the KV pool of a vLLM start-up log")
    # vLLM metrics lines only (vllm-project/vllm#21809's excerpt): no block count, no KV cache size
    metrics = LOGS / "v0.10_metrics_kv_near_full.log"
    assert refused("validate", REQUESTS, "--startup-log", str(metrics)).startswith(
        f"--startup-log {metrics}: no line states the KV pool: vLLM prints '# GPU blocks: N' or 'GPU KV cache size: T "
        "tokens' once the pool is sized")
    both = refused("validate", REQUESTS, "--startup-log", _log(tmp_path, 41408, "1.26"), "--num-gpu-blocks-override",
                   "100")
    assert both.endswith("and --num-gpu-blocks-override 100 both set the KV pool: give one")
    assert refused("calibrate", REQUESTS, "--scope", "gpu", "--startup-log", _log(tmp_path, 41408, "1.26")).startswith(
        "--startup-log sets one server's KV pool, but --scope gpu fits runs of several models")


def test_calibrate_replays_the_logs_pool_and_keeps_its_notes_in_the_profile(tmp_path):
    # calibrate replays the run as validate does (calibration.api.engine_for): the same pool and notes, kept in the
    # profile's notes (engine_assumptions.engine_notes), and the replayed engine's 2,600 blocks
    prof = cli_json("calibrate", REQUESTS, "--startup-log", _log(tmp_path, 41600, "1.27"), "--no-leave-one-out")
    assert prof["engine"]["num_gpu_blocks"] == 2600
    assert any(n.startswith("KV pool: 2,600 blocks of 16 tokens from the start-up log startup_41600.log") for n in
               prof["notes"])
    assert any(n.startswith("WARNING: the run's record") and "the start-up log 2,600 (+12 blocks)" in n
               for n in prof["notes"])


def test_what_validate_reads_from_a_meta_json_is_what_it_records():
    # README/docs: the GPU comes from meta.json only where it records hardware. LLMServingSim's public RTX PRO 6000
    # Qwen3-32B run (benchmarks/data/public-runs/, meta.json keys: schema_version, model, vllm_version, engine_kwargs,
    # dataset_path, dataset_hash, num_requests, started_at, finished_at, tick_seconds) names none: --gpu is asked for
    qwen = Path(__file__).resolve().parents[2] / "benchmarks" / "data" / "public-runs"
    qwen = qwen / "llmservingsim-rtxpro6000-qwen3-32b"
    assert refused("validate", str(qwen / "vllm" / "requests.jsonl")).endswith(
        "the run's record names no GPU; pass --gpu (the GPU it ran on: a catalog name, see `kvledger gpus`, or a GPU "
        "file)")
    # the RTX 4090 example records hardware.device_name "NVIDIA GeForce RTX 4090": taken, and said
    notes = _notes()
    assert f"GPU NVIDIA GeForce RTX 4090 from {RUN / 'meta.json'} (NVIDIA GeForce RTX 4090; no --gpu given)" in notes


def test_a_log_of_another_gpu_is_refused_in_startup_logs_words(tmp_path):
    # an H100's pool: 500,000 tokens / 16 = 31,250 blocks (31,250 / 2,048 = 15.26x). Llama-3.1-8B's block is 16 tokens
    # × 131,072 B (32 layers × 8 KV heads × 128 × 2 (K, V) × 2 B) = 2 MiB, so 31,250 blocks are 61.04 GiB, where the
    # RTX 4090 leaves 7.72 GiB (3,954 blocks). The refusal named --num-gpu-blocks-override, a flag nobody gave
    msg = refused("validate", REQUESTS, "--startup-log", _log(tmp_path, 500000, "15.26"))
    assert "does not fit: --startup-log's 31,250 blocks ask 61.04 GiB of KV cache (31,250 × 2,097,152 B a block)" in msg
    assert "At most 3,954 blocks can be allocated" in msg and "--num-gpu-blocks-override" not in msg
    assert msg.endswith("is the log that of the server that was measured, on this GPU with these settings? A log of "
                        "another GPU states another pool: give the measured server's, or drop --startup-log to replay "
                        "the planned pool.")


def test_a_log_whose_blocks_are_not_the_replays_is_refused_or_taken_with_the_block_size(tmp_path):
    # a server launched with --block-size 32 (its non-default args say so): 41,408 tokens / 32 = 1,294 blocks
    # (1,294 / ceil(32,768 / 32) = 1,294 / 1,024 = 1.26x). The run's record (meta.json) states block_size 16: 1,294
    # blocks of 16 tokens would be 20,704 token slots, half the server's pool; the replay took them so before
    log32 = _log(tmp_path, 41408, "1.26", ", 'block_size': 32")
    msg = refused("validate", REQUESTS, "--startup-log", log32)
    assert msg.startswith("--startup-log: the log states a pool of 1,294 blocks of 32 tokens (41,408 token slots; the "
                          f"start-up log {Path(log32).name} (")
    assert msg.endswith("but the replay's blocks are 16 tokens (the run's record's block_size), so 1,294 of them would "
                        "be 20,704 token slots, another pool than the server's; give --block-size 32, the size the "
                        "logged server ran with, or drop --startup-log")
    # --block-size 32: the log's pool as it was, and the record's 16 said to be replaced
    notes = _notes("--startup-log", log32, "--block-size", "32")
    assert next(n for n in notes if n.startswith("KV pool: ")).startswith("KV pool: 1,294 blocks of 32 tokens from the "
                                                                           "start-up log")
    assert any("block_size 16 → 32" in n for n in notes)
    # the other way: a 16-token log (2,588 blocks) under --block-size 32 (82,816 slots, twice the server's)
    assert refused("validate", REQUESTS, "--startup-log", _log(tmp_path, 41408, "1.26"), "--block-size", "32").endswith(
        "but the replay's blocks are 32 tokens (--block-size), so 2,588 of them would be 82,816 token slots, another "
        "pool than the server's; give --block-size 16, the size the logged server ran with, or drop --startup-log")
