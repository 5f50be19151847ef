"""The scheduler limits vLLM sets itself from the flags given (``analyses/serving/sched_defaults.py``): V1 up to
0.11.0 ignores ``--no-enable-chunked-prefill``; the V0 engine on a V1-default release keeps V0's own defaults."""

from __future__ import annotations

from dataclasses import replace

from kvledger.accounting.vllm_rules import v0_long_context_chunked, v1_forces_chunked_prefill
from kvledger.analyses.serving.sim_setup import SimRequestArgs, prepare


def _setup(**kw):
    return prepare(SimRequestArgs(model="meta-llama/Llama-3.1-8B", gpu="H100", trace="azure-conv", num_requests=20,
                                  max_model_len=512, **kw))


def test_v1_up_to_0_11_0_forces_chunked_prefill_on():
    # vLLM 0.11.0 engine/arg_utils.py :: _set_default_args sets enable_chunked_prefill = True for every generative
    # model before the flag is read (kubecon's `vllm` launch ran `--no-enable-chunked-prefill` on 0.11.0); the token
    # budget is then the API server's usage-context default on an 80 GB H100 (≥ 70 GiB, not an A100): 8,192
    s = _setup(engine_version="0.11.0", enable_chunked_prefill=False)
    assert s.config.enable_chunked_prefill is True and s.config.max_num_batched_tokens == 8192
    assert any("has no effect in vLLM 0.11.0" in n for n in s.notes)
    # 0.11.1 honours the flag: chunked prefill off, budget max(max_model_len 512, default 8,192) = 8,192
    s = _setup(engine_version="0.11.1", enable_chunked_prefill=False)
    assert s.config.enable_chunked_prefill is False and s.config.max_num_batched_tokens == 8192
    assert any("chunked prefill off: max_num_batched_tokens = max(max_model_len, default) = 8,192" in n
               for n in s.notes)
    # with a context past the budget the rule raises it, and the KV pool note says the raised figure: max(16,384,
    # 8,192) = 16,384
    s = prepare(SimRequestArgs(model="meta-llama/Llama-3.1-8B", gpu="H100", trace="azure-conv", num_requests=20,
                               max_model_len=16384, engine_version="0.11.1", enable_chunked_prefill=False))
    assert s.config.max_num_batched_tokens == 16384
    assert "max_model_len 16,384, max_num_batched_tokens 16,384, max_num_seqs" in next(
        n for n in s.notes if n.startswith("KV pool: "))
    assert [v1_forces_chunked_prefill(v) for v in ((0, 7, 3), (0, 8, 0), (0, 11, 0), (0, 11, 1))] == [
        False, True, True, False]


def test_v0_engine_on_a_v1_release_keeps_v0_defaults():
    # kubecon's `vllm+v0_engine` launch: vLLM 0.9.0 with VLLM_USE_V1=0, max_model_len 512. 0.9.0's
    # create_engine_config calls _set_default_args_v0 (chunked prefill off up to a 32K context, max_num_seqs 256)
    # and SchedulerConfig then gives max(max_model_len 512, 2,048) = 2,048 tokens — not V1's 8,192 / 1,024
    s = _setup(engine_version="0.9.0", batching="vllm_v0", enable_prefix_caching=False)
    assert s.config.enable_chunked_prefill is False
    assert s.config.max_num_batched_tokens == 2048 and s.config.max_num_seqs == 256
    assert any("V0 engine on vLLM 0.9.0" in n for n in s.notes)
    # the KV pool note states the limits the run uses, not the plan's V1 usage-context defaults (8,192 tokens, 1,024
    # sequences on an 80 GB H100): it had printed "max_num_batched_tokens 8,192" beside the V0 note's 2,048
    pool = next(n for n in s.notes if n.startswith("KV pool: "))
    assert "max_model_len 512, max_num_batched_tokens 2,048, max_num_seqs 256 (" in pool
    # limits given on the command line stand
    s = _setup(engine_version="0.9.0", batching="vllm_v0", enable_prefix_caching=False, max_num_seqs=128,
               max_num_batched_tokens="4096")
    assert s.config.max_num_batched_tokens == 4096 and s.config.max_num_seqs == 128
    # and the V0 note says the given cap runs, not V0's default 256 (a fresh-user trial read "256 seqs" beside the
    # KV pool note's "max_num_seqs 128 (the run's record)" as a contradiction)
    assert any("max_num_seqs 128 as given, not V0's 256" in n for n in s.notes)


def test_v0_engine_keeps_chunked_prefill_off_for_a_sliding_window_model_above_32k(tmp_path):
    # vLLM 0.9.0 engine/arg_utils.py :: _set_default_args_v0 turns chunked prefill on for use_long_context
    # (max_model_len > 32768) only `if (is_gpu and not use_sliding_window and ...)`, use_sliding_window =
    # model_config.get_sliding_window() is not None (0.6.3's create_engine_config has the same test). Mistral-7B-v0.1
    # has a 4,096-token sliding window (its config, here with max_position_embeddings 65,536 so that 65,536 tokens
    # are allowed), so at max_model_len 65,536 chunked prefill stays off and SchedulerConfig gives max(65,536, 2,048)
    # = 65,536 tokens, 256 sequences. The V0-engine path had left the window out, turned chunked prefill on and
    # refused the run (vllm_v0 needs it off). (gpt-oss-20b, once this test's model, does not load on 0.9.0: no MXFP4.)
    import json
    from importlib import resources

    raw = json.loads((resources.files("kvledger.catalog") / "data/models/mistralai--Mistral-7B-v0.1.json").read_text())
    cfg = tmp_path / "config.json"
    cfg.write_text(json.dumps(raw | {"max_position_embeddings": 65536}))
    s = prepare(SimRequestArgs(model=str(cfg), gpu="H100", trace="azure-conv", num_requests=20,
                               max_model_len=65536, engine_version="0.9.0", batching="vllm_v0",
                               enable_prefix_caching=False))
    assert s.config.enable_chunked_prefill is False
    assert s.config.max_num_batched_tokens == 65536 and s.config.max_num_seqs == 256
    assert any("chunked prefill off, max_num_batched_tokens 65,536, max_num_seqs 256 (vLLM V0 default (no chunked "
               "prefill" in n for n in s.notes)
    # the one rule: above 32,768 tokens without a window only
    assert [v0_long_context_chunked(n, w) for n, w in ((32768, False), (32769, False), (65536, True))] == [
        False, True, False]


def test_goodput_and_cost_simulate_carry_the_ignored_flag_note_in_their_sources():
    # goodput --simulate and cost --simulate print SimulatedRun.source_lines as their sources: the note simulate and
    # validate print on --no-enable-chunked-prefill under 0.11.0 (its V1 engine forces chunked prefill on) is one of
    # them; with the flag honoured (0.11.1) there is none
    from kvledger.analyses.serving.sim_goodput import simulated_goodput
    from kvledger.ledgers.slo import SLO

    args = SimRequestArgs(model="meta-llama/Llama-3.1-8B", gpu="H100", trace="azure-conv", num_requests=20,
                          max_model_len=512, engine_version="0.11.0", enable_chunked_prefill=False)
    lines = simulated_goodput(args, SLO(ttft_s=1.0)).sim.source_lines()
    assert sum("--no-enable-chunked-prefill has no effect in vLLM 0.11.0" in n for n in lines) == 1
    honoured = simulated_goodput(replace(args, engine_version="0.11.1"), SLO(ttft_s=1.0)).sim.source_lines()
    assert not any("has no effect" in n for n in honoured)


def test_v0_async_output_processor_from_0_6_0_without_enforce_eager():
    # vLLM 0.6.0 config.py adds use_async_output_proc (absent in 0.5.5), default True; verify_async_output_proc turns
    # it off with --enforce-eager; the V0 engine is gone from 0.11.0. kubecon's `vllm+v0_engine` (0.9.0, CUDA graphs)
    # has it; DistServe's replay (0.5.0, --enforce-eager) does not.
    s = _setup(engine_version="0.9.0", batching="vllm_v0", enable_prefix_caching=False)
    assert s.config.async_output_proc is True
    assert any(n.startswith("V0's async output processor on") for n in s.notes)
    for kw in (dict(engine_version="0.9.0", enforce_eager=True),
               dict(engine_version="0.5.0", enable_chunked_prefill=False)):
        s = _setup(batching="vllm_v0", enable_prefix_caching=False, **kw)
        assert s.config.async_output_proc is False
    assert _setup(engine_version="0.9.0").config.async_output_proc is False  # V1 (its own async scheduling rule)


def test_chunked_prefill_off_plans_the_pool_at_the_budget_it_runs():
    # vLLM 0.33.0 engine/arg_utils.py: with --no-enable-chunked-prefill and no --max-num-batched-tokens the budget is
    # max(max_model_len, default) = max(131,072, 8,192) = 131,072, and gpu_worker's profile_run runs a dummy batch of
    # that many tokens, so the activation peak and the KV pool follow it. `kvledger plan meta-llama/Llama-3.1-8B --gpu
    # H100 --max-model-len 131072` gives 28,160 blocks at the default 8,192 and 21,677 (42.34 GiB) with
    # --max-num-batched-tokens 131072; the simulator had served 28,160 blocks beside a 131,072-token budget
    base = dict(model="meta-llama/Llama-3.1-8B", gpu="H100", trace="azure-conv", num_requests=20, max_model_len=131072)
    off = prepare(SimRequestArgs(**base, enable_chunked_prefill=False))
    given = prepare(SimRequestArgs(**base, enable_chunked_prefill=False, max_num_batched_tokens="131072"))
    on = prepare(SimRequestArgs(**base))
    assert off.config.max_num_batched_tokens == given.config.max_num_batched_tokens == 131072
    assert off.config.num_gpu_blocks == given.config.num_gpu_blocks == 21677
    assert on.config.num_gpu_blocks == 28160 and on.config.max_num_batched_tokens == 8192
    assert off.plan.memory.max_num_batched_tokens == 131072
