"""A memory term typed without its unit: refused when it would be an implausible handful of bytes."""

import pytest

from kvledger.errors import InputError
from kvledger.units import GiB, parse_memory_flag


def test_bare_small_number_is_refused_with_the_unit_to_add():
    # "--weights-memory 15" read as 15 B would plan as if the 8B model weighed nothing (55+15 GiB of KV)
    with pytest.raises(InputError, match=r"'15' has no unit .* '15GiB'"):
        parse_memory_flag("15", what="--weights-memory")


def test_units_zero_and_large_byte_counts_still_read():
    assert parse_memory_flag("14.99GiB", what="x") == int(14.99 * GiB)
    assert parse_memory_flag("0", what="x") == 0  # "no non-torch memory" is a real answer
    # a byte count as vLLM's debug lines print it (16,094,076,928 B = 14.99 GiB) stays bytes
    assert parse_memory_flag("16094076928", what="x") == 16_094_076_928
