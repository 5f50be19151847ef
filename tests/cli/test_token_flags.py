"""Token counts read as vLLM reads ``--max-model-len`` (lowercase k = 1,000, uppercase K = 1,024), on every token flag,
and the note a lowercase suffix earns (units.parse_tokens, cli/token_flags.py)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from kvledger.cli.main import app
from kvledger.cli.token_flags import TOKEN_FLAGS, suffix_notes
from kvledger.errors import InputError
from kvledger.units import parse_tokens, token_suffix_note

SRC = Path(__file__).resolve().parents[2] / "src" / "kvledger"


@pytest.mark.parametrize("text, tokens", [
    ("8k", 8_000), ("8K", 8_192),  # 8 × 10^3; 8 × 2^10
    ("128k", 128_000), ("128K", 131_072),  # 128 × 1,000; 128 × 1,024
    ("1m", 1_000_000), ("1M", 1_048_576), ("2g", 2_000_000_000), ("1G", 1_073_741_824),  # 10^6, 2^20, 2 × 10^9, 2^30
    ("25.6k", 25_600),  # vLLM's own docstring example: 25.6 × 1,000
    ("0.3k", 300),  # exact: 0.3 × 1,000 in floats is 300.00000000000006
    ("8192", 8192), ("8_192", 8192), (" 8K ", 8192), (4096, 4096),
    ("+32768", 32768)])  # no suffix: vLLM's int(value.strip()) (arg_utils.human_readable_int) takes a sign and '_'

def test_token_counts_follow_vllm(text, tokens):
    assert parse_tokens(text) == tokens


@pytest.mark.parametrize("text, words", [
    ("1.5K", "vLLM refuses a decimal with a binary suffix"),  # as vLLM's ArgumentTypeError: "Did you mean 1.5k"
    ("1B", "vLLM's suffixes"), ("8kb", "vLLM's suffixes"), ("8 K", "vLLM's suffixes"),  # no b/B; no space (fullmatch)
    ("1.0005k", "whole, positive"),  # 1,000.5 tokens: vLLM drops the half, kvledger refuses it
    ("0", "whole, positive"), ("-1", "whole, positive"),
    # no suffix: vLLM's int("32768.0") raises, so argparse exits "invalid human_readable_int value: '32768.0'"
    # (0.10.1 and 0.19.0 vllm/engine/arg_utils.py); int("1e4") and int("0x10") the same
    ("32768.0", "invalid human_readable_int value: '32768.0'"), ("1e4", "invalid human_readable_int value: '1e4'"),
    ("0x10", "invalid human_readable_int value")])
def test_what_vllm_refuses_or_would_round_is_refused(text, words):
    with pytest.raises(InputError, match=re.escape(words)):
        parse_tokens(text, what="--max-model-len")


def test_a_lowercase_suffix_earns_a_note_and_an_uppercase_one_none():
    assert token_suffix_note("8k", what="--max-model-len") == ("--max-model-len 8k = 8,000 tokens (vLLM's rule: "
                                                                "k = 1,000, K = 1,024)")
    assert token_suffix_note("2m", what="--context") == ("--context 2m = 2,000,000 tokens (vLLM's rule: m = 1,000,000, "
                                                         "M = 1,048,576)")
    assert token_suffix_note("8K", what="--max-model-len") is None and token_suffix_note("8192", what="x") is None
    assert token_suffix_note("1.0005k", what="x") is None  # refused: the error says so, not a note
    argv = ["plan", "m", "--max-model-len", "8k", "--context=8K,32k", "--max-num-batched-tokens", "2K", "--",
            "--context", "4k"]
    assert suffix_notes(argv) == ["--max-model-len 8k = 8,000 tokens (vLLM's rule: k = 1,000, K = 1,024)",
                                  "--context 32k = 32,000 tokens (vLLM's rule: k = 1,000, K = 1,024)"]


def test_every_flag_parse_tokens_reads_is_a_token_flag():
    # the flags named where the source hands a value to parse_tokens (directly, through parse_token_list or search's
    # token axes): each must be in TOKEN_FLAGS, or its lowercase suffix would go without the note
    pat = re.compile(r'parse_tokens\([^)]*?what="(--[a-z-]+)"|parse_token_list\([^,]+, "(--[a-z-]+)"'
                     r'|_ints\([^,]+, "(--[a-z-]+)", tokens=True')
    named = {next(filter(None, m.groups())) for p in SRC.rglob("*.py")
             for m in pat.finditer(p.read_text(encoding="utf-8"))}
    assert named and named <= set(TOKEN_FLAGS), named - set(TOKEN_FLAGS)
    assert {"--max-model-len", "--max-num-batched-tokens", "--context", "--window"} <= named


def test_plan_reads_8k_as_vllm_does_and_says_so(monkeypatch, capsys):
    # The finding: `plan meta-llama/Llama-3.1-8B --gpu H100 --max-model-len 8k` planned 8,192 tokens; vLLM serves 8,000.
    import sys

    from kvledger.cli.main import run

    monkeypatch.setattr(sys, "argv", ["kvledger", "plan", "meta-llama/Llama-3.1-8B", "--gpu", "H100-SXM",
                                      "--max-model-len", "8k", "--json"])
    try:
        run()
    except SystemExit as done:
        assert done.code in (0, None)
    out, err = capsys.readouterr()
    assert json.loads(out)["settings"]["max_model_len"] == 8000  # stdout stays one JSON document
    assert "note: --max-model-len 8k = 8,000 tokens (vLLM's rule: k = 1,000, K = 1,024)" in err
    res = CliRunner().invoke(app, ["plan", "meta-llama/Llama-3.1-8B", "--gpu", "H100-SXM", "--max-model-len", "8K",
                                   "--json"])
    assert json.loads(res.stdout)["settings"]["max_model_len"] == 8192
