"""Parsing of ``--slo`` text: units, aliases, ITL statistics, and every way it can be wrong."""

from __future__ import annotations

import pytest

from kvledger.errors import InputError, UnknownNameError
from kvledger.ledgers.slo import SLO, parse_slo


def test_units_become_seconds():
    s = parse_slo("ttft=200ms,tpot=50ms,e2e=2.5s,itl=100000us")
    assert (s.ttft_s, s.tpot_s, s.e2e_s, s.itl_s) == pytest.approx((0.2, 0.05, 2.5, 0.1)) and s.itl_stat == "max"
    assert s.constraints() == [("ttft", 0.2), ("tpot", 0.05), ("itl", pytest.approx(0.1)), ("e2e", 2.5)]


def test_vllm_style_colons_and_aliases():
    # vllm bench serve --goodput writes "ttft:300 tpot:50 e2el:4000" (ms implied there; here units are explicit)
    s = parse_slo("ttft:300ms, e2el:4s")
    assert (s.ttft_s, s.e2e_s) == pytest.approx((0.3, 4.0))


def test_itl_statistics():
    assert parse_slo("itl_mean=30ms").itl_stat == "mean"
    s = parse_slo("itl_p99=80ms")
    assert s.itl_stat == 99.0 and s.itl_key == "itl_p99" and s.describe() == "itl_p99 ≤ 80.00 ms"


@pytest.mark.parametrize("text, err, match", [
    ("", InputError, "--slo is empty"),
    ("ttft=200", InputError, "has no unit"),
    ("ttft=200ms,ttft=300ms", InputError, "given twice in 'ttft=200ms,ttft=300ms': give each limit once$"),
    # the keys as given are named, not the slot they share ('itl' was named though neither key was 'itl')
    ("itl=50ms,itl_mean=20ms", InputError,
     r"^SLO keys 'itl' and 'itl_mean' in 'itl=50ms,itl_mean=20ms' are both ITL statistics \(one ITL statistic at a "
     r"time\)$"),
    ("itl_p99=40ms,itl_max=40ms", InputError, r"^SLO keys 'itl_p99' and 'itl_max' in .* are both ITL statistics"),
    ("e2e=1s,e2el=2s", InputError, r"^SLO keys 'e2e' and 'e2el' in 'e2e=1s,e2el=2s' set the same e2e limit"),
    # an empty item is refused, not skipped
    ("ttft=5ms,,tpot=1ms", InputError, r"^--slo 'ttft=5ms,,tpot=1ms' has an empty item \(two commas together"),
    ("ttft=5ms,", InputError, "has an empty item"),
    ("ttft=-5ms", InputError, "cannot read|non-negative"),
    ("ttft=nanms", InputError, "cannot read"),
    ("ttft 200ms", InputError, "not KEY=VALUE"),
    ("itl_p0=5ms", InputError, r"^SLO key 'itl_p0': percentile 0 is out of range; allowed: \(0, 100\]$"),
    ("tfft=200ms", UnknownNameError, "did you mean: ttft"),
    # a limit over one day (86,400 s) is refused: 1e308 s was printed as a 309-digit number before
    ("ttft=1e308s", InputError, r"longer than a day \(86,400 s\)"),
    ("e2e=1441min", InputError, r"'1441min' is longer than a day"),
])
def test_bad_slo_text(text, err, match):
    with pytest.raises(err, match=match):
        parse_slo(text)


def test_a_day_is_the_longest_limit():
    # 24 h = 1,440 min = 86,400 s exactly is still read
    assert parse_slo("e2e=24h").e2e_s == 86_400.0 and parse_slo("e2e=1440min").e2e_s == 86_400.0


def test_describe_and_dict():
    s = SLO(ttft_s=0.2, tpot_s=0.05)
    assert s.describe() == "ttft ≤ 200.00 ms, tpot ≤ 50.00 ms"
    assert s.to_dict()["text"] == s.describe()


def test_a_percentile_over_requests_is_the_target_not_a_key():
    # an SRE's "p99 TTFT ≤ 2 s": the share of requests within a per-request limit, so --slo ttft=2s --target 0.99
    for written, metric, target in (("ttft_p99", "ttft", "0.99"), ("p99_ttft", "ttft", "0.99"),
                                    ("tpot_p90", "tpot", "0.9"), ("e2el_p95", "e2e", "0.95")):
        with pytest.raises(InputError) as err:
            parse_slo(f"{written}=2s")
        assert f"is --slo {metric}=X with --target {target} " in str(err.value)
    assert parse_slo("itl_p99=100ms").itl_stat == 99.0  # ITL's per-request percentile stays a key
