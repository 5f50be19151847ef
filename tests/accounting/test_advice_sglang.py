"""SGLang's --mem-fraction-static fix (the smallest fraction that holds one max_model_len request, capped at SGLang's
own default unless the value given was above it) and the FP8 KV flag in SGLang's spelling."""

from __future__ import annotations

from kvledger.accounting.plan import build_plan
from kvledger.accounting.settings import make_settings
from kvledger.catalog.gpus import get_gpu
from kvledger.catalog.models import load_model
from kvledger.report.plan_summary import summary_lines


def _plan(model: str, **kw):
    return build_plan(load_model(model), get_gpu("a100-80gb-sxm"), make_settings(engine="sglang", **kw),
                      with_roofline=False)


def test_a_low_fraction_gets_the_smallest_that_fits_and_the_default_is_named():
    # Qwen2.5-7B on an A100 80GB, SGLang 0.5.23, --mem-fraction-static 0.18 (fresh-user trial: exit 3 with no fraction
    # fix). Free before the load 84,643,067,985 B; the terms other than the reserve: weights 15,231,233,024 + RoPE
    # 16,777,216 + segment tails 105,239,552 + load overhead 69,793,218.56 = 15,423,042,010.56 B. One 32,768-token
    # request at 57,344 B/token: 1,879,048,192 B. (15,423,042,010.56 + 1,879,048,192) / 84,643,067,985 = 0.2044 → 0.21.
    # At 0.21: 84,643,067,985 × 0.21 − 15,423,042,010.56 = 2,352,002,266 B / 57,344 = 41,015 tokens,
    # 41,015 / 32,768 = 1.25x; at 0.20 only 1,505,571,586 B = 26,255 tokens (< 32,768), so 0.21 is the smallest.
    # SGLang's default here 0.83 (81,920 MiB: 512 + 1.5 × 8,192 + 2 × 256 + 464 (58 prefill graph sizes × 8) + 128
    # = 13,904 MiB → round(68,016 / 81,920, 3) = 0.83): 84,643,067,985 × 0.83 − 15,423,042,010.56 = 54,830,704,417 B
    # = 956,171 tokens, 956,171 / 32,768 = 29.18x: 29 requests.
    p = _plan("Qwen/Qwen2.5-7B-Instruct", mem_fraction_static=0.18)
    assert p.advice.verdict == "weights_do_not_fit"
    o = next(o for o in p.advice.options if o.action.startswith("--mem-fraction-static"))
    assert o.action == "--mem-fraction-static 0.21" and o.max_requests == 1 and round(o.max_concurrency, 2) == 1.25
    assert "leaving 2.19 GiB for the KV cache" in o.detail  # 2,352,002,266 B / 2^30
    assert ("SGLang's own default here, 0.83 (leave the flag out), holds 29 concurrent 32,768-token requests"
            in o.detail)
    # 0.20: a pool of 26,255 tokens, short of one 32,768-token request: SGLang starts and serves at a lower length
    # (max_req_len = min(32,767, 26,254)), as with --context-length 26255 (advice_sglang_len)
    q = _plan("Qwen/Qwen2.5-7B-Instruct", mem_fraction_static=0.2)
    assert (q.advice.verdict, q.advice.estimated_max_model_len) == ("served_at_lower_len", 26_255)
    assert "--mem-fraction-static 0.21" in [o.action for o in q.advice.options]


def test_the_fraction_goes_above_the_default_only_when_the_given_value_did():
    # Qwen3-32B on an A100 80GB: the terms other than the reserve 65,524,246,528 + 20,971,520 + 1,267,712 +
    # 69,793,218.56 = 65,616,278,978.56 B; one 40,960-token request at 262,144 B/token = 10,737,418,240 B;
    # 76,353,697,218.56 / 84,643,067,985 = 0.902 → 0.91, above SGLang's default 0.836.
    # Given 0.9 (above the default): 0.91 is offered: 84,643,067,985 × 0.91 − 65,616,278,978.56 = 11,408,912,887 B
    # = 43,521 tokens, 43,521 / 40,960 = 1.06x.
    hi = _plan("Qwen/Qwen3-32B", mem_fraction_static=0.9)
    o = next(o for o in hi.advice.options if o.action.startswith("--mem-fraction-static"))
    assert o.action == "--mem-fraction-static 0.91" and o.max_requests == 1 and round(o.max_concurrency, 2) == 1.06
    assert "own default" not in o.detail  # the default (0.836) is below the given 0.9: it does not fit
    # Given 0.6 (below the default): 0.91 is above the default, so no fraction is offered
    lo = _plan("Qwen/Qwen3-32B", mem_fraction_static=0.6)
    assert not [o for o in lo.advice.options if o.action.startswith("--mem-fraction-static")]


def test_fp8_kv_is_spelt_as_sglang_takes_it():
    p = _plan("Qwen/Qwen2.5-7B-Instruct", kv_cache_dtype="fp8")
    # the summary names the flag SGLang takes (its FP8 KV formats are fp8_e4m3 and fp8_e5m2); 1 B per element:
    # 2 × 28 layers × 4 KV heads × 128 × 1 B = 28,672 B/token
    assert p.kv.bytes_per_token == 28672
    assert any("pass --kv-cache-dtype fp8_e4m3 to SGLang" in line for line in summary_lines(p))
    assert not any("fp8_e4m3" in n for n in _plan("Qwen/Qwen2.5-7B-Instruct", kv_cache_dtype="fp8_e4m3").memory.notes)
    # the FP8 KV fix in a plan that does not fit is spelt the same way
    q = _plan("Qwen/Qwen2.5-7B-Instruct", mem_fraction_static=0.2)
    assert "--kv-cache-dtype fp8_e4m3" in [o.action for o in q.advice.options]
