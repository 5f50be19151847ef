"""A bare token count as a length distribution means fixed:N (``synthetic.parse_lengths``), in a mixture too."""

from __future__ import annotations

import pytest

from kvledger.dynamics.workload.synthetic import Fixed, is_fixed, parse_lengths
from kvledger.errors import InputError


def test_a_bare_count_is_fixed():
    assert parse_lengths("1000") == Fixed(1000) == parse_lengths("fixed:1000")
    assert parse_lengths("8K") == Fixed(8192)  # as every token flag reads 8K: 8 × 1,024
    assert is_fixed("1000") and is_fixed("fixed:7") and not is_fixed("uniform:1:9")
    mix = parse_lengths("mix:0.5*100,0.5*fixed:300")  # components read by the same parser
    assert mix.parts == (Fixed(100), Fixed(300)) and mix.weights == pytest.approx((0.5, 0.5))


@pytest.mark.parametrize("bad", ["0", "-5"])
def test_a_bare_count_not_positive_is_refused_as_fixed_is(bad):
    with pytest.raises(InputError, match=f"'{bad}' is not a positive token count"):
        parse_lengths(bad)


def test_a_word_is_still_not_understood():
    with pytest.raises(InputError, match="not understood; use N or fixed:N"):
        parse_lengths("abc")
