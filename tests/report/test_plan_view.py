"""The plan's terminal view: figures printed as computed (what the third new-user trial found)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from rich.console import Console

from kvledger.accounting.plan import build_plan
from kvledger.accounting.settings import make_settings
from kvledger.catalog.gpus import get_gpu
from kvledger.catalog.modelspec import parse_config
from kvledger.report.plan_view import render_plan
from kvledger.units import fmt_bytes

DSV4 = Path(__file__).resolve().parents[2] / "benchmarks" / "data" / "oracle_configs" / "deepseek_v4.json"


def test_fractional_byte_counts_are_not_cut():
    # 584 B / 128 tokens = 4.5625 B per token per layer; × 23 layers = 104.9375 B: printed 104.94 B (it was "104 B")
    assert fmt_bytes(23 * 584 / 128) == "104.94 B"
    assert fmt_bytes(3684.9375) == "3.6 KiB (3,684.94 B)"
    assert fmt_bytes(131072) == "128 KiB (131,072 B)" and fmt_bytes(1000) == "1,000 B"


def test_dsv4_kv_table_prints_its_ratio_128_layers_per_token_bytes():
    dsv4 = parse_config(json.loads(DSV4.read_text()), source="deepseek_v4 default config")
    plan = build_plan(dsv4, get_gpu("H200"), make_settings(tp=8, max_model_len=8192))
    con = Console(record=True, width=400)
    render_plan(plan, con, verbose=True)
    text = con.export_text()
    row = next(ln for ln in text.splitlines() if ln.startswith("│ 23 mla"))
    # the two layer kinds are told apart by their compress ratio (both read "mla" before), and the table's title
    # names DeepSeek-V4's 584-B fp8_ds_mla entries rather than "auto = 2 B/element"
    assert row.startswith("│ 23 mla (compress ratio 128) ") and "│ 104.94 B " in row
    assert any(ln.startswith("│ 20 mla (compress ratio 4) ") for ln in text.splitlines())
    assert "KV bytes per token (KV dtype auto: fp8_ds_mla entries of 584 B, per GPU at TP 8)" in text
    assert "AllocGroup" not in text


def test_decode_attention_intensity_names_its_context_where_it_varies():
    from kvledger.catalog.models import load_model
    from kvledger.report.plan_summary import summary_lines

    # Llama-3.1-8B: 32 query heads over 8 KV heads read 2 B elements, 2 FLOP per element and head for QK and for PV:
    # 4 × 32 / (2 × 2 × 8) = 4.0 FLOP/B at every context, so the summary states one figure
    llama = build_plan(load_model("meta-llama/Llama-3.1-8B"), get_gpu("H100"), make_settings())
    assert set(round(v, 6) for v in llama.roofline.decode_attention_by_context.values()) == {4.0}
    line = next(ln for ln in summary_lines(llama) if ln.startswith("roofline:"))
    assert line.endswith("decode attention 4.0 FLOP/B, bandwidth-bound at any batch")
    # DeepSeek-V4 reads its window and the indexer's top 512 entries but scores every compressed key: FLOP/B grows with
    # the context, so the figure says where it was taken (it changed with --max-model-len unexplained)
    dsv4 = parse_config(json.loads(DSV4.read_text()), source="deepseek_v4 default config")
    plan = build_plan(dsv4, get_gpu("H200"), make_settings(tp=8, max_model_len=65536))
    by = plan.roofline.decode_attention_by_context
    assert sorted(by) == [2048, 8192, 32768, 65536] and by[2048] < by[8192] < by[32768] < by[65536]
    assert plan.roofline.decode_attention_intensity == by[65536]
    line = next(ln for ln in summary_lines(plan) if ln.startswith("roofline:"))
    assert f"decode attention {by[65536]:,.1f} FLOP/B at 65,536 tokens of context ({by[2048]:,.1f} at 2,048, " in line
    assert json.loads(json.dumps(plan.roofline.to_dict()))["decode_attention_by_context"]["65536"] == by[65536]


def test_models_caption_offers_the_wide_columns_only_when_they_are_hidden():
    from kvledger.report.catalog_view import render_models

    rows = [{"hf_id": "x/y", "num_params": 8e9, "num_active_params": 8e9, "kv_bytes_per_token": 131072,
             "state_bytes_per_seq": 0, "layers": {"full": 32}, "quantization": "none", "dtype": "bfloat16",
             "max_model_len": 40960}]
    narrow, wide = Console(record=True, width=100), Console(record=True, width=200)
    render_models(rows, narrow)
    render_models(rows, wide)
    n, w = " ".join(narrow.export_text().split()), " ".join(wide.export_text().split())
    assert "130 columns or more (or --json) adds state, layers" in n and "40,960" not in n
    assert "adds state" not in w and "40,960" in w and "state/seq: Mamba/linear-attention state per sequence" in w


def test_models_max_len_names_each_rule_where_they_differ():
    from kvledger.catalog.modelspec import parse_config as parse
    from kvledger.report.catalog_view import render_models

    # Qwen3-8B's config with the model card's YaRN block (factor 4 from 32,768): vLLM 0.26 derives 32,768 × 4 =
    # 131,072 (config/model.py, 0.19), vLLM 0.33 and SGLang (get_context_length: the dict names the original length,
    # factor 1) 40,960
    cfg = dict(model_type="qwen3", architectures=["Qwen3ForCausalLM"], hidden_size=4096, num_hidden_layers=36,
               num_attention_heads=32, num_key_value_heads=8, head_dim=128, intermediate_size=12288,
               vocab_size=151936, max_position_embeddings=40960, torch_dtype="bfloat16",
               rope_scaling={"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 32768})
    by = parse(cfg, source="qwen3-yarn").max_model_len_by_engine
    rows = [{"hf_id": "x/y", "num_params": 8e9, "num_active_params": 8e9, "kv_bytes_per_token": 131072,
             "state_bytes_per_seq": 0, "layers": {"full": 36}, "quantization": "none", "dtype": "bfloat16",
             "max_model_len": by["vllm 0.33"], "max_model_len_by_engine": by}]
    wide = Console(record=True, width=250)
    render_models(rows, wide)
    w = " ".join(wide.export_text().split())
    assert "40,960 (vllm up to 0.26: 131,072)" in w and "by vLLM 0.33's rule (plan's default)" in w


def test_decode_attention_names_why_it_varies():
    from kvledger.catalog.models import load_model
    from kvledger.report.plan_summary import summary_lines

    # Qwen3-Next at TP 4 has no window: its FLOP/B grows with the context because each request also reads its 36 Gated
    # DeltaNet states, 36 × 274,432 B = 9,879,552 B per step, whatever the context; DeepSeek-V4 reads windows and a
    # state.
    q = build_plan(load_model("Qwen/Qwen3-Next-80B-A3B-Thinking"), get_gpu("H100"), make_settings(tp=4))
    assert (
        q.roofline.decode_attention_varies_because
        == "each request also reads a fixed 9,879,552 B of recurrent or compressor state"
    )
    line = next(ln for ln in summary_lines(q) if ln.startswith("roofline:"))
    assert "window" not in line and "fixed 9,879,552 B of recurrent" in line
    dsv4 = parse_config(json.loads(DSV4.read_text()), source="deepseek_v4 default config")
    d = build_plan(dsv4, get_gpu("H200"), make_settings(tp=8, max_model_len=8192)).roofline
    assert (
        d.decode_attention_varies_because.startswith("it reads bounded windows")
        and "compressor state" in d.decode_attention_varies_because
    )


def test_verbose_plan_prints_block_and_concurrency_ranges():
    from kvledger.catalog.models import load_model

    plan = build_plan(load_model("meta-llama/Llama-3.1-8B", allow_hub=False), get_gpu("H100"),
                      make_settings(contexts=[8192]))
    b_lo, b_hi = plan.memory.ranges["num_gpu_blocks"]
    row = plan.row_at(8192)
    # 8,192 tokens ÷ 16 per block = 512 blocks per request: the concurrency range is each end of the block range ÷ 512
    assert row.blocks_per_request == 512 and row.max_concurrency_range == (b_lo / 512, b_hi / 512)
    con = Console(record=True, width=400)
    render_plan(plan, con, verbose=True)
    text = con.export_text()
    assert f"range {b_lo:,}–{b_hi:,} from the available KV range" in text
    assert f"{row.max_concurrency:,.2f}x ({b_lo / 512:,.2f}–{b_hi / 512:,.2f}x)" in text


def test_wddm_total_cites_the_board_not_the_linux_measurement():
    # --wddm: TensorRT-LLM sees the whole board nvidia-smi shows (RTX 4090: 24,564 MiB = 23.99 GiB), so the device
    # total row must cite that, not the Linux CUDA measurement 25,250,627,584 B (23.52 GiB) alone (fresh-user trial);
    # the summary applies free_gpu_memory_fraction to the free memory after the dry run, not to the device total.
    from kvledger.catalog.models import load_model
    from kvledger.report.plan_summary import summary_lines

    plan = build_plan(load_model("Qwen/Qwen3-8B"), get_gpu("rtx4090"), make_settings(engine="trtllm", wddm=True))
    con = Console(record=True, width=400)
    render_plan(plan, con, verbose=True)
    row = next(ln for ln in con.export_text().splitlines() if "the whole board as nvidia-smi shows it" in ln)
    assert "(24,564 MiB)" in row and "CUDA's total under Linux 23.52 GiB" in row
    text = " ".join(summary_lines(plan))
    assert "device total 23.99 GiB less weights" in text and "× free_gpu_memory_fraction" not in text
    assert "free_gpu_memory_fraction 0.9 applies to the memory free after the dry run" in text


def test_wddm_start_up_line_reaches_the_summary_and_the_memory_figure():
    # vLLM 0.19 on an RTX 4090 under --wddm at 0.95: ceil(0.95 × 24,564 MiB) = 22.79 GiB asked, free at start-up
    # 23.99 − 1.07 (wddm.py: 0.393 + 0.0283 × 23.988 GiB) − 0.45 (vLLM's process, startup_free.LINUX_CONTEXT_GIB,
    # 0.37–0.51) = 22.47 GiB (20.71–22.85): the low end refuses, so the summary and the report's memory figure (its
    # sources, shown by the report and the web app) carry the warning with the largest utilization that starts,
    # 22.466 ÷ 23.988 = 0.9366 → 0.936.
    from kvledger.catalog.models import load_model
    from kvledger.report.figures_kv import memory_waterfall
    from kvledger.report.plan_summary import summary_lines

    s = make_settings(engine_version="0.19.0", max_model_len=8192, wddm=True, gpu_memory_utilization=0.95)
    plan = build_plan(load_model("Qwen/Qwen3-8B"), get_gpu("rtx4090"), s)
    line = next(ln for ln in summary_lines(plan) if ln.startswith("warning (--wddm)"))
    assert "asks 22.79 GiB" in line and "= 22.47 GiB (20.71–22.85)" in line and "largest that starts is 0.936" in line
    assert line in memory_waterfall(plan.to_dict()).sources


def test_a_given_kv_budget_is_not_shown_as_what_the_terms_leave():
    # --available-kv-memory 50GiB with --gpu-memory-utilization 0.5 on an H100 (79.19 GiB): the terms leave
    # 39.59 − 14.99 − 1.89 − 0.25 − 0.73 ≈ 21.74 GiB, and the table read "= available KV memory 50.00" under them
    from typer.testing import CliRunner

    from kvledger.cli.main import app

    out = CliRunner(env={"COLUMNS": "400"}).invoke(app, ["plan", "meta-llama/Llama-3.1-8B", "--gpu", "H100-SXM",
                                                         "--available-kv-memory", "50GiB",
                                                         "--gpu-memory-utilization", "0.5", "--verbose"]).output
    assert "available KV memory (given)" in out and "= available KV memory" not in out
    assert "the terms above are the ledger's own, which would leave 21.74 GiB, and do not set it" in out


def test_the_concurrency_line_says_where_max_num_seqs_caps_what_the_kv_holds():
    from kvledger.catalog.models import load_model
    from kvledger.report.plan_summary import summary_lines

    # Llama-3.1-8B on an H100 with max_num_seqs 128: the KV holds 224 requests of 2,048 tokens and 56 of 8,192
    # (131,072 B a token; the smaller sampler peak of 128 sequences leaves a little more KV than the default's 219), so
    # the engine's cap of 128 is the limit at 2,048 tokens only; at the default 1,024 no context is capped and the
    # line says nothing of it
    capped = build_plan(load_model("meta-llama/Llama-3.1-8B"), get_gpu("H100"), make_settings(max_num_seqs=128))
    rows = {r.context_tokens: r.max_requests for r in capped.concurrency}
    assert rows[2048] == 224 > 128 > rows[8192] == 56
    line = next(ln for ln in summary_lines(capped) if ln.startswith("concurrency (per replica):"))
    assert "2,048 tokens: 224 requests" in line
    assert line.endswith("— what the KV holds; the engine runs at most max_num_seqs = 128 at once, the limit at "
                         "contexts up to 2,048 tokens")
    free = build_plan(load_model("meta-llama/Llama-3.1-8B"), get_gpu("H100"), make_settings())
    assert "max_num_seqs" not in next(ln for ln in summary_lines(free) if ln.startswith("concurrency (per replica):"))


def test_concurrency_cells_take_one_form_and_fits_says_how_few_at_the_low_end():
    # Qwen3-30B-A3B at 8K and 32K on one H100 and on one H200 (a fresh-user trial): the H100's whole requests move
    # inside the range (32K: 4.10x, range 3.63–4.31x → 3 or 4), the H200's do not (22.74x, range 22.16–22.98x → 22;
    # the low end printed rounded down, units.fmt_low, so that the whole requests it holds read off it);
    # both cells print the point's × first, then the range's ×, never "(range 3–4; 4.10x)" beside "(22.74x, range …)"
    from kvledger.accounting.plan import build_plan
    from kvledger.accounting.settings import make_settings
    from kvledger.catalog.gpus import get_gpu
    from kvledger.catalog.models import load_model
    from kvledger.report.plan_summary import summary_lines

    model, settings = load_model("Qwen/Qwen3-30B-A3B"), make_settings(contexts=(8192, 32768))
    h100 = build_plan(model, get_gpu("nvidia_h100_sxm"), settings)
    h200 = build_plan(model, get_gpu("nvidia_h200_sxm"), settings)
    line = next(ln for ln in summary_lines(h100) if ln.startswith("concurrency (per replica):"))
    assert "32,768 tokens: 4 requests (4.10x, range 3.63–4.31x)" in line and "(range " not in line
    line = next(ln for ln in summary_lines(h200) if ln.startswith("concurrency (per replica):"))
    assert "32,768 tokens: 22 requests (22.74x, range 22.16–22.98x)" in line
    # fits: 32K holds 4 at the point; at the low end 3.63x × 2,048 blocks per request ≈ 7,434 blocks, less the null
    # block, ÷ 2,048 → 3 whole requests; 8K: 14.53x → 14 (512 blocks each); the H200's 32K low end still holds 22
    # (the range's low end named once, on the first context that drops)
    assert h100.advice.message.startswith("fits: 16 concurrent 8,192-token requests (as few as 14 at the range's low "
                                          "end), 4 concurrent 32,768-token requests (as few as 3); at max_model_len, "
                                          "3 concurrent 40,960-token requests")
    assert "22 concurrent 32,768-token requests;" in h200.advice.message


def test_a_range_low_end_prints_rounded_down():
    # 327,620 tokens ÷ 16,384 = 19.996x holds 19 whole requests: printed 19.99x, not 20.00x beside "as few as 19"
    from kvledger.units import fmt_low

    assert fmt_low(327_620 / 16_384) == "19.99" and fmt_low(22.0) == "22.00" and fmt_low(1234.5678) == "1,234.56"


def test_every_concurrency_range_of_one_plan_prints_its_low_end_alike():
    # Qwen3-8B at 32K on one H100 (a fresh-user trial): the range's low end is 11.8066x. The summary's concurrency
    # line and the verdict printed 11.80x (rounded down, units.fmt_low) while the memory line and the --verbose
    # table printed 11.81x (rounded): one figure, one form, wherever the plan prints it
    from kvledger.accounting.plan import build_plan
    from kvledger.accounting.settings import make_settings
    from kvledger.catalog.gpus import get_gpu
    from kvledger.catalog.models import load_model
    from kvledger.report.plan_summary import summary_lines

    plan = build_plan(load_model("Qwen/Qwen3-8B"), get_gpu("H100"), make_settings(max_model_len=32768))
    assert 11.80 < plan.memory.ranges["max_concurrency"][0] < 11.81
    text = "\n".join(summary_lines(plan))
    # the range at max_model_len is the concurrency line's 32,768-token cell; the memory line no longer repeats it
    assert "max concurrency at 32,768 tokens" not in text
    assert "32,768 tokens: 12 requests (12.09x, range 11.80–12.21x)" in text
    import io

    from rich.console import Console

    out = io.StringIO()
    render_plan(plan, Console(file=out, width=250), verbose=True)
    assert "12.09x (11.80–12.21x)" in out.getvalue() and "11.81" not in out.getvalue()


def _dsv3_text(engine: str, context: int) -> tuple:
    from kvledger.catalog.models import load_model

    plan = build_plan(load_model("deepseek-ai/DeepSeek-V3"), get_gpu("h200-sxm"),
                      make_settings(tp=8, engine=engine, contexts=(context,)))
    con = Console(record=True, width=400)
    render_plan(plan, con, verbose=True)
    return plan, con.export_text()


def test_the_decode_table_gives_the_replicas_tok_s_and_each_gpus():
    # DeepSeek-V3 on 8 H200s (vLLM, TP 8), 8,192-token context, batch 64: each GPU runs the 34.75 ms step for the same
    # 64 tokens, so the replica makes 64 / 0.034745 = 1,842 tok/s and each GPU 1,842 / 8 = 230 (the one tok/s column
    # was titled "per GPU" and held the replica's figure)
    plan, text = _dsv3_text("vllm", 8192)
    assert "Decode step vs concurrency (step: each GPU's; tok/s: the replica's 8 GPUs together, and per GPU)" in text
    assert "┃ tok/s (replica) ┃ tok/s/GPU ┃" in text
    row = next(ln for ln in text.splitlines() if ln.startswith("│ 8,192   │ 64    │"))
    assert "│ 34.75 ms │" in row and "│ 1,842           │ 230       │" in row


def test_sglang_budget_line_states_the_formula_its_number_follows():
    # SGLang 0.5.23 (profile_max_num_token): free before load 139.96 − 2.67 = 137.29 GiB; less weights 79.29, RoPE
    # buffer 0.04, segment tails 0.14, MLA's bfloat16 w_kc/w_vc copies 0.24, load overhead 0.07 and the reserve
    # 0.114 × 137.29 = 15.65: 41.86 GiB (0.886: the prefill graphs' 1.5 GiB for MLA in the reserve). Read as "device
    # total × 0.886 less …" it would have been 139.96 × 0.886 − 79.78 − 15.65 = 28.57.
    plan, text = _dsv3_text("sglang", 4096)
    m = plan.memory
    assert m.requested_bytes - sum(d.bytes for d in m.deductions) == pytest.approx(m.available_kv_bytes, abs=1)
    assert ("(sglang 0.5.23 rules: free before the weights load 137.29 GiB (device total 139.96 − 2.67 GiB held "
            "before it) less weights, RoPE cos/sin buffer, allocator segment tails, MLA w_kc/w_vc copies, weight-load "
            "overhead, reserve (1 − mem_fraction_static 0.886) × free before load)") in text
    assert "device total 139.96 GiB × mem_fraction_static" not in text
    # the verbose row of the free memory names its own source, not the mem_fraction_static rule
    row = next(ln for ln in text.splitlines() if ln.startswith("│ free before the weights load"))
    assert "│ 137.29 │" in row and "device total 139.96 − 2.67 GiB held before the weights load (measured with " \
        "custom all-reduce: sglang_rules.SGLANG_PRELOAD_GIB)" in row and "engine rule" not in row


def test_memory_waterfall_of_weights_larger_than_the_gpu_keeps_its_layout():
    # DeepSeek-V3 at TP 1 on one H100: 628.85 GiB of weights against 72.85 GiB requested (555.99 short, to the cent of
    # GiB the figures round); the bars below 0 were drawn
    # (and labelled) hundreds of GiB left of the axes, and matplotlib's constrained layout gave up on the figure
    import warnings

    from kvledger.catalog.models import load_model
    from kvledger.report.figure import svg_of
    from kvledger.report.figures_kv import memory_waterfall

    plan = build_plan(load_model("deepseek-ai/DeepSeek-V3"), get_gpu("H100"), make_settings()).to_dict()
    fig = memory_waterfall(plan)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        svg_of(fig.fig)
    texts = [t.get_text() for t in fig.fig.axes[0].texts]
    assert texts[2] == "628.85 (555.99 more than is left)" and texts[-1] == "0.00"
    assert min(t.get_position()[0] for t in fig.fig.axes[0].texts) >= 0
