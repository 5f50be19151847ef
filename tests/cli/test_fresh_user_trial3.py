"""What the third fresh-user trial of the CLI found, each pinned: counts written as the outputs write them (3B), a JSON
error object on stdout with --json, the engines' common spellings, the price rows' source and confidence in the
table, and search's --gpu and --show-command taking what the table shows."""

from __future__ import annotations

import io
import json

import pytest
import typer.main
from rich.console import Console
from typer.testing import CliRunner

from kvledger.cli.main import app
from kvledger.errors import InputError
from kvledger.units import parse_count, parse_tokens

runner = CliRunner()
SEARCH = ["search", "meta-llama/Llama-3.2-3B", "--slo", "ttft=2s,tpot=100ms", "--tp", "1", "--max-model-len", "8K",
          "--num-requests", "60", "--utilization", "0.5"]


def _params(*argv: str) -> dict:
    """The values click hands the command for ``argv`` (parsing only: nothing runs)."""
    return typer.main.get_command(app).commands[argv[0]].make_context(argv[0], list(argv[1:])).params


@pytest.mark.parametrize("text, value", [("3B", 3e9), ("3b", 3e9), ("3e9", 3e9), ("3_000_000_000", 3e9),
                                         ("1.5M", 1.5e6), ("2k", 2e3), ("0.5T", 5e11), ("7", 7.0)])
def test_one_count_parser_reads_suffixes_exponents_and_underscores(text, value):
    assert parse_count(text) == value  # K, M, B, T: steps of 10^3 (3B = 3 × 10^9, as the outputs write it)


def test_context_sizes_read_suffixes_as_vllm_does():
    # vLLM's human_readable_int (--max-model-len): uppercase binary, lowercase decimal. 8K = 8 × 1,024 = 8,192;
    # 128k = 128 × 1,000 = 128,000 (until 2026-12 kvledger read it as 131,072, what vLLM does not); 1M = 2^20.
    assert (parse_tokens("8K"), parse_tokens("128k"), parse_tokens("1M")) == (8192, 128000, 1048576)
    assert parse_tokens("8_192") == 8192
    # no suffix: vLLM's int("0.5") raises, argparse exits "invalid human_readable_int value" (arg_utils.py)
    with pytest.raises(InputError, match="invalid human_readable_int value: '0.5'"):
        parse_tokens("0.5")


@pytest.mark.parametrize("text", ["3X", "nan", "inf", "1__0", "3 B B", "-x"])
def test_a_bad_count_names_the_forms_it_takes(text):
    with pytest.raises(InputError, match=r"--monthly-tokens: cannot read .* 3e9 or 3B"):
        parse_count(text, what="--monthly-tokens")


def test_a_negative_or_zero_volume_is_refused_as_such():
    # fresh-user trial: '-3e9' was "cannot read ... as a count" (a parse error for a readable number), and
    # --monthly-tokens 0 ran: "$0.00/month on the API vs $6,963.70/month self-hosted"
    with pytest.raises(InputError, match=r"--monthly-tokens: '-3e9' is negative; a count is 0 or more"):
        parse_count("-3e9", what="--monthly-tokens")
    base = ["cost", "--simulate", "meta-llama/Llama-3.1-8B", "--gpu", "H100", "--slo", "ttft=200ms"]
    for flag in ("--monthly-tokens", "--monthly-requests"):
        res = runner.invoke(app, [*base, flag, "0"])
        assert isinstance(res.exception, InputError) and "is zero; a volume must be more than 0" in str(res.exception)
        # and a negative volume states the volume's own bound, not a count's "0 or more", which 0 then broke
        res = runner.invoke(app, [*base, flag, "-3e9"])
        assert isinstance(res.exception, InputError)
        assert "is negative; a volume must be more than 0" in str(res.exception)
    assert _params(*base, "--monthly-input-tokens", "2B", "--monthly-output-tokens", "0")["monthly_output_tokens"] == 0


def test_every_monthly_count_flag_takes_the_suffixes():
    base = ["cost", "--simulate", "meta-llama/Llama-3.1-8B", "--gpu", "H100", "--slo", "ttft=200ms"]
    p = _params(*base, "--monthly-tokens", "3B")
    assert p["monthly_tokens"] == 3e9
    p = _params(*base, "--monthly-requests", "1.5M")
    assert p["monthly_requests"] == 1.5e6
    p = _params(*base, "--monthly-input-tokens", "2.4B", "--monthly-output-tokens", "600M")
    assert (p["monthly_input_tokens"], p["monthly_output_tokens"]) == (2.4e9, 6e8)
    assert _params(*SEARCH, "--monthly-tokens", "3_000_000_000")["monthly_tokens"] == 3e9
    assert _params("report", "meta-llama/Llama-3.1-8B", "--gpu", "H100", "--slo", "ttft=1s", "--monthly-tokens", "3e9")[
        "monthly_tokens"] == 3e9



def test_with_json_an_error_is_also_a_json_object_on_stdout(monkeypatch, capsys, cli_entry):
    code, out, err = cli_entry("cost", "--simulate", "meta-llama/Llama-3.1-8B", "--gpu", "H100",
                                "--slo", "ttft=200ms", "--monthly-tokens", "3X", "--json")
    assert code == 2 and "error: --monthly-tokens: cannot read '3X'" in err  # the message stays on stderr
    d = json.loads(out)
    assert d["error"]["exit_code"] == 2 and d["error"]["type"] == "InputError"
    assert d["error"]["message"].startswith("--monthly-tokens: cannot read '3X' as a count")
    # a usage error click finds (an unknown flag) is JSON too, with click's exit status 2
    code, out, err = cli_entry("plan", "meta-llama/Llama-3.1-8B", "--gpu", "H100", "--bogus",
                                "--json")
    assert code == 2 and "No such option: --bogus" in err
    assert json.loads(out)["error"] == {"message": "No such option: --bogus (Possible options: --gpu, --verbose)",
                                        "type": "NoSuchOption", "exit_code": 2}
    # without --json, stdout stays empty
    code, out, err = cli_entry("plan", "meta-llama/Llama-3.1-8B", "--gpu", "H100", "--tp", "0")
    assert code == 2 and out == "" and "--tp" in err


def test_a_usage_error_is_one_line_as_every_other_error(monkeypatch, capsys, cli_entry):
    # click's own handling printed a four-line block (Usage:, Try '… --help', a blank line, Error: …) for a flag
    # given a non-number; now one line naming the help to read, with click's exit status 2 and nothing on stdout
    code, out, err = cli_entry("simulate", "meta-llama/Llama-3.1-8B", "--gpu", "H100", "--rate",
                                "abc")
    assert code == 2 and out == ""
    assert err.strip() == ("error: --rate 'abc' is not a number: write it without a unit or suffix, e.g. --rate 1.5; "
                           "allowed: (0, 1,000,000] req/s or inf (see 'kvledger simulate --help')")
    code, out, err = cli_entry("plan")
    assert code == 2 and err.strip() == "error: Missing argument 'model' (see 'kvledger plan --help')"
    code, out, err = cli_entry()  # a bare command still prints its help, as click does
    assert code == 2 and err.startswith("Usage: kvledger [OPTIONS] COMMAND [ARGS]...")


@pytest.mark.parametrize("spelling", ["tensorrt-llm", "TensorRT-LLM", "tensorrt_llm", "trt-llm"])
def test_the_engines_common_spellings_are_aliases(spelling):
    from kvledger.accounting.settings import make_settings

    assert make_settings(engine=spelling).engine == "trtllm"
    res = runner.invoke(app, ["plan", "Qwen/Qwen3-8B", "--gpu", "H100", "--engine", spelling, "--json"],
                        catch_exceptions=False)
    assert json.loads(res.stdout)["memory"]["engine"] == "trtllm"


def test_the_price_table_shows_each_rows_source_and_confidence():
    from kvledger.catalog.prices import find_gpu_prices
    from kvledger.report.catalog_view import render_prices

    rows = find_gpu_prices("nvidia_h100_sxm")
    con = Console(file=io.StringIO(), width=500, highlight=False)
    render_prices([], rows, con, show_api=False, show_gpu=True)
    lines = con.file.getvalue().splitlines()
    header = next(ln for ln in lines if ln.startswith("┃ provider"))
    assert "┃ as of " in header and "┃ confidence ┃ source " in header
    for r in rows:  # one line per row at this width, its confidence and whole source in it
        line = next(ln for ln in lines if f"│ {r.instance_type} " in ln)
        assert f"│ {r.confidence} " in line and f"│ {r.source} " in line
    res = runner.invoke(app, ["prices", "--kind", "gpu", "--gpu", "H100"], env={"COLUMNS": "200"})
    assert "confidence" in res.stdout and "source" in res.stdout


def test_search_takes_gpu_like_the_other_commands_and_an_unknown_name_lists_the_choices():
    for gpus in (["--gpu", "L4", "--gpu", "H100"], ["--gpu", "L4,H100"], ["--gpus", "L4,H100"]):
        res = runner.invoke(app, [*SEARCH, *gpus, "--show-command", "h100-tp1"])
        assert isinstance(res.exception, InputError)
        assert str(res.exception).endswith(": nvidia_l4:tp1:kv-auto (l4 tp1 auto), nvidia_h100_sxm:tp1:kv-auto "
                                           "(h100_sxm tp1 auto)")


def test_show_command_takes_the_name_the_table_shows_and_its_rank(tmp_path):
    by_name = json.loads(runner.invoke(app, [*SEARCH, "--gpu", "H100", "--show-command", "h100_sxm tp1 auto",
                                             "--json"], catch_exceptions=False).stdout)
    assert by_name["id"] == "nvidia_h100_sxm:tp1:kv-auto"
    led = tmp_path / "ledger.jsonl"
    full = json.loads(runner.invoke(app, [*SEARCH, "--gpu", "L4,H100", "--ledger", str(led), "--json"],
                                    catch_exceptions=False).stdout)
    # the rank number the table prints (2 = the runner-up), read from the finished ledger without simulating again
    second = json.loads(runner.invoke(app, [*SEARCH, "--gpu", "L4,H100", "--resume", str(led), "--show-command", "2",
                                            "--json"], catch_exceptions=False).stdout)
    assert second["rank"] == 2 and second["id"] == full["ranking"][1]
    assert second["launch"] == next(c for c in full["candidates"] if c["id"] == second["id"])["launch"]
    res = runner.invoke(app, [*SEARCH, "--gpu", "L4,H100", "--resume", str(led), "--show-command", "3"])
    assert isinstance(res.exception, InputError) and "give a rank from 1 to 2" in str(res.exception)


def test_a_short_name_that_fits_several_candidates_asks_for_the_setting_that_differs():
    from kvledger.analyses.search.naming import resolve_candidate
    from kvledger.analyses.search.spec import Candidate

    a, b = Candidate("nvidia_h100_sxm", 1, max_num_seqs=128), Candidate("nvidia_h100_sxm", 1, max_num_seqs=256)
    assert resolve_candidate("h100_sxm tp1 auto seqs 256", [a, b]) == b
    assert resolve_candidate("NVIDIA_H100_SXM  tp1 auto seqs 128", [a, b]) == a
    assert resolve_candidate("nvidia_h100_sxm:tp1:kv-auto:seqs-256", [a, b]) == b
    with pytest.raises(InputError, match=r"names 2 candidates; give one id: nvidia_h100_sxm:tp1:kv-auto:seqs-128"):
        resolve_candidate("h100_sxm tp1 auto", [a, b])
