"""vLLM's ``--goodput`` syntax ("ttft:300 tpot:50", milliseconds implied) given to --slo, as a performance engineer
types it from vLLM's docs: read, with a note; half-converted text refused with the two spellings."""

from __future__ import annotations

import pytest

from kvledger.errors import InputError
from kvledger.ledgers.slo import parse_slo


def test_vllm_goodput_syntax_is_read_in_milliseconds_and_said():
    slo = parse_slo("ttft:300 tpot:50 e2el:5000")
    assert (slo.ttft_s, slo.tpot_s, slo.e2e_s) == pytest.approx((0.3, 0.05, 5.0))
    assert any("vLLM's --goodput syntax" in n and "ttft=300ms,tpot=50ms,e2el=5000ms" in n for n in slo.notes)


def test_kvledgers_own_syntax_is_unchanged():
    slo = parse_slo("ttft:300ms,tpot=50ms")
    assert (slo.ttft_s, slo.tpot_s) == pytest.approx((0.3, 0.05)) and not slo.notes


def test_space_separated_items_with_units_are_refused_with_both_spellings():
    with pytest.raises(InputError) as err:
        parse_slo("ttft:300 tpot:50ms")
    assert "separated by commas" in str(err.value) and "'ttft:300 tpot:50'" in str(err.value)
