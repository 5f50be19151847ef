"""`kvledger plan --engine sglang --enable-dp-attention` without --dp-size: SGLang ignores the flag at dp_size 1, and
the plan says so rather than take it silently."""

from __future__ import annotations

from cli_run import cli_json, run_cli
from typer.testing import CliRunner

from kvledger.cli.main import app

runner = CliRunner()

ARGS = ("plan", "deepseek-ai/DeepSeek-V3", "--gpu", "H200", "--engine", "sglang", "--tp", "8")


def test_dp_attention_without_a_dp_size_is_planned_as_sglang_runs_it_and_said():
    # SGLang 0.5.23 arg_groups/parallel_hook.py _handle_deprecated_dp_attention: --enable-dp-attention moves dp_size
    # (1) into attn_dp_size and sets the flag off; attn_dp_enabled_of is then false, so the memory reserve's DP terms
    # are skipped too: the pool is the plain TP 8 plan's, 639,654 tokens (tests/accounting/test_dp_attention.py's TP 8
    # figure), not DP attention's 8 × 191,924
    with_flag, without = cli_json(*ARGS, "--enable-dp-attention", "--json"), cli_json(*ARGS, "--json")
    assert with_flag["memory"]["num_gpu_blocks"] == without["memory"]["num_gpu_blocks"] == 639_654
    said = [n for n in with_flag["memory"]["notes"] if n.startswith("--enable-dp-attention without --dp-size")]
    assert len(said) == 1 and "SGLang ignores it, running attention over the whole TP 8 group" in said[0]
    assert "_handle_deprecated_dp_attention" in said[0] and "releases before 0.5.23" not in said[0]
    assert not any("without --dp-size" in n for n in without["memory"]["notes"])
    # the short output says it in the note on what DP attention would hold (an MLA model at TP 8: 8 × 191,924 =
    # 1,535,392 KV tokens against 639,654, 2.40×), one note and not two, so the short plan stays within 26 lines at 80
    # columns (it ran to 29 with the flag's own 2-line note and SGLang's 2-line device-total clause)
    for flags in ((), ("--enable-dp-attention",)):
        res = runner.invoke(app, [*ARGS, *flags], env={"COLUMNS": "80"})
        lines = res.stdout.splitlines()
        assert res.exit_code == 0 and len(lines) <= 26 and max(len(line) for line in lines) <= 80, res.stdout
    out = " ".join(res.stdout.split())
    # the remedy in SGLang 0.5.23's spelling, --attn-dp-size 8 (from 0.5.22), the flag given said to be deprecated
    assert ("note: SGLang ignores --enable-dp-attention (deprecated) without --dp-size; MLA's latent KV is copied on "
            "all 8 TP ranks: --attn-dp-size 8 holds 2.40× the KV tokens on these GPUs (8 × 191,924 against "
            "639,654, SGLang 0.5.23 rules)") in out


def test_a_model_without_the_dp_note_keeps_the_flag_s_own_line():
    # Qwen3-8B (GQA, no MLA): no note on DP attention's gain, so the flag's own one-line note stands alone
    out = " ".join(run_cli("plan", "Qwen/Qwen3-8B", "--gpu", "H100", "--engine", "sglang", "--tp", "2",
                           "--enable-dp-attention").stdout.split())
    assert ("note: --enable-dp-attention without --dp-size: SGLang ignores it (attention over the whole TP group, as "
            "planned); for DP attention give --attn-dp-size N (--enable-dp-attention is deprecated)") in out


def test_an_older_release_says_what_it_did_before_turning_it_off():
    # 0.5.3 server_args.py: _handle_gpu_memory_settings counts cuda_graph_max_bs × dp_size × 3 MiB for DP attention,
    # then _handle_data_parallelism sets enable_dp_attention off at dp_size 1; the plan says the reserve is left out
    d = cli_json(*ARGS, "--enable-dp-attention", "--engine-version", "0.5.3", "--json")
    said = next(n for n in d["memory"]["notes"] if n.startswith("--enable-dp-attention without --dp-size"))
    assert "releases before 0.5.23 (read in 0.5.3, server_args.py _handle_data_parallelism) turn it off too" in said
