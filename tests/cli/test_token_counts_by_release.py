"""Token counts read as the vLLM release given reads them (token_counts.parse_tokens / parse_max_model_len,
accounting/vllm_auto_len.py), and --max-model-len -1 / auto planned as vLLM's auto-fit (accounting/vllm_auto_len.py).

What the wheels say (``engine/arg_utils.py::human_readable_int``): 0.10.1, 0.11.0 and 0.12.0 match t and T in the regex
but have no multiplier for them, so ``int("1t")`` raises and argparse exits "invalid human_readable_int value: '1t'";
0.13.0, 0.16.0 and 0.19.0 read t = 10^12 and T = 2^40. ``human_readable_int_or_auto`` (--max-model-len's type) is
absent from 0.13.0 and present in 0.14.0, 0.16.0 and 0.19.0: -1 or "auto" → -1, the auto-fit of
``v1/core/kv_cache_utils.py::_auto_fit_max_model_len``."""

from __future__ import annotations

import json
import re

import pytest
from cli_run import refused, run_cli

from kvledger.accounting.vllm_auto_len import read_max_model_len
from kvledger.errors import InputError
from kvledger.token_counts import AUTO_MAX_MODEL_LEN, parse_max_model_len, parse_tokens


@pytest.mark.parametrize("text, ver, tokens", [
    ("1t", (0, 13, 0), 10**12), ("1T", (0, 19, 0), 1_099_511_627_776),  # 10^12; 2^40 = 1,099,511,627,776
    ("2t", None, 2 * 10**12),  # no release known: every suffix (the newest modelled reads them)
    ("8K", (0, 10, 1), 8_192), ("2k", (0, 12, 0), 2_000)])  # k and K are read by every release with suffixes
def test_t_and_T_from_0_13(text, ver, tokens):
    assert parse_tokens(text, vllm_version=ver) == tokens


@pytest.mark.parametrize("text, ver", [("1t", (0, 10, 1)), ("1T", (0, 10, 1)), ("1T", (0, 12, 0))])
def test_t_and_T_refused_before_0_13_with_the_releases_words(text, ver):
    with pytest.raises(InputError, match=re.escape(f"\"invalid human_readable_int value: '{text}'\"")) as err:
        parse_tokens(text, what="--max-num-batched-tokens", vllm_version=ver)
    assert f"vLLM {'.'.join(map(str, ver))} refuses it" in str(err.value) and "read from 0.13.0" in str(err.value)


@pytest.mark.parametrize("text", ["auto", "AUTO", " auto ", "-1", " -1"])
def test_auto_and_minus_one_from_0_14(text):
    assert parse_max_model_len(text, vllm_version=(0, 14, 0)) == AUTO_MAX_MODEL_LEN == -1
    assert parse_max_model_len(text, vllm_version=None) == -1  # the newest modelled reads them
    assert read_max_model_len(text, "vllm", "0.19.0") == (None, True)


def test_auto_and_minus_one_refused_before_0_14_with_what_that_release_does():
    with pytest.raises(InputError, match=re.escape("vLLM 0.13.0 has no auto-fit (`vllm serve` exits with \"invalid "
                                                   "human_readable_int value: 'auto'\")")):
        parse_max_model_len("auto", vllm_version=(0, 13, 0))
    # 0.10.1: int("-1") passes argparse and _get_and_verify_max_len returns -1 as the length (config/__init__.py)
    with pytest.raises(InputError, match="it reads -1 as a length of -1 tokens, which no request fits"):
        parse_max_model_len("-1", vllm_version=(0, 10, 1))
    # 0.13.0: config/model.py declares max_model_len: int = Field(default=None, gt=0): pydantic refuses -1
    with pytest.raises(InputError, match="its ModelConfig refuses it at start-up"):
        parse_max_model_len("-1", vllm_version=(0, 13, 0))
    assert "read from 0.14.0" in refused("plan", "meta-llama/Llama-3.1-8B", "--gpu", "H100", "--engine-version",
                                         "0.10.1", "--max-model-len", "auto")


@pytest.mark.parametrize("text, read", [("1.005k", "1,004"), ("8.2m", "8,199,999"), ("4.1m", "4,099,999")])
def test_a_decimal_vllm_truncates_is_refused(text, read):
    # human_readable_int (engine/arg_utils.py 0.10.1-0.19.0, utils/argparse_utils.py 0.26.0-0.34.0) returns
    # int(float(number) * mult) for k m g t: float("1.005") * 1000 = 1004.9999999999999 → 1,004, and
    # 8.2 * 10**6 = 8199999.999999999 → 8,199,999, where the exact decimal is 1,005 and 8,200,000
    with pytest.raises(InputError, match=re.escape(f"vLLM reads it as {read}")):
        parse_tokens(text, what="--max-model-len")
    # the same decimals whose float product is exact are read as written: 25.6 * 1000 = 25600.0, 1.5 * 1000 = 1500.0
    assert (parse_tokens("25.6k"), parse_tokens("1.5k"), parse_tokens("4.35k")) == (25_600, 1_500, 4_350)


def test_other_engines_keep_kvledgers_vocabulary():
    # SGLang and TensorRT-LLM have no -1/auto here: refused as any non-positive count or word
    with pytest.raises(InputError, match="whole, positive"):
        read_max_model_len("-1", "sglang", None)
    assert read_max_model_len("1T", "sglang", None) == (2**40, False)


def _plan(*args: str, exit_code: int = 0) -> dict:
    res = run_cli("plan", "meta-llama/Llama-3.1-70B-Instruct", "--gpu", "H100", *args, "--json")
    assert res.exit_code == exit_code
    return json.loads(res.stdout)["memory"]


def test_auto_lowers_to_the_longest_request_the_pool_holds():
    # Llama-3.1-70B at TP 2 on H100, vLLM 0.19.0: the plan's pool is 618 blocks of 16 tokens (the same with and
    # without auto: vLLM profiles at the derived 131,072 and only max_model_len moves). One full-attention request
    # of L tokens takes ceil(L / 16) blocks; 0.19's check counts every block (the null block kept back from 0.29.0),
    # so the longest is 618 × 16 = 9,888 (9,889 needs 619). 131,072 would take 8,192 blocks.
    given = _plan("--tp", "2", "--engine-version", "0.19.0", exit_code=3)  # 131,072 does not fit: vLLM will not start
    m = _plan("--tp", "2", "--engine-version", "0.19.0", "--max-model-len", "auto")
    assert (m["num_gpu_blocks"], given["num_gpu_blocks"], m["block_size"]) == (618, 618, 16)
    assert m["max_model_len"] == 9_888 and given["max_model_len"] == 131_072
    (note,) = [n for n in m["notes"] if n.startswith("max_model_len auto (-1): ")]
    assert note.startswith("max_model_len auto (-1): 9,888 tokens, lowered from the model's 131,072 as vLLM 0.19.0 "
                           "lowers it: one request at 131,072 takes 8,192 blocks, more than the 618 the start-up check "
                           "counts")
    # 0.33.0 (from 0.29.0 the check keeps the null block back): its pool is 969 blocks, 968 counted, 968 × 16 = 15,488
    m33 = _plan("--tp", "2", "--engine-version", "0.33.0", "--max-model-len", "-1")
    assert (m33["num_gpu_blocks"], m33["max_model_len"]) == (969, 15_488)


def test_auto_keeps_the_models_length_where_one_request_fits():
    # TP 4: 28,099 blocks; one 131,072-token request takes 131,072 / 16 = 8,192 of them, so the model's length stays
    m = _plan("--tp", "4", "--engine-version", "0.19.0", "--max-model-len", "auto")
    assert (m["num_gpu_blocks"], m["max_model_len"]) == (28_099, 131_072)
    assert any(n.startswith("max_model_len auto (-1): the model's 131,072 tokens kept") and "8,192 of the 28,099 "
               "blocks" in n for n in m["notes"])


def test_search_takes_one_length_so_refuses_auto_and_reads_t_by_release():
    base = ("search", "meta-llama/Llama-3.1-8B", "--gpus", "H100", "--slo", "ttft=2s", "--engine-version")
    assert "auto-fit gives each GPU and TP its own; give a length" in refused(*base, "0.19.0", "--max-model-len",
                                                                               "auto")
    assert "vLLM 0.12.0 refuses it" in refused(*base, "0.12.0", "--max-model-len", "1t")
