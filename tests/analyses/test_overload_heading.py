"""The queue-growth note's heading: "overloaded" is a verdict; a growth within what the trace's own bursts can add is
"queue growing" (a fresh-user trial read "overloaded" and "a capacity search does not count this load out" in one
note)."""

from __future__ import annotations

from kvledger.analyses.serving.notes import overloaded, overloaded_waiting


def test_growth_within_the_bursts_allowance_is_not_called_overloaded():
    # mooncake, 2 replicas: 105 → 159 in the system, 117.2 expected after the rate's change, allowance 91.7:
    # 159 − 117.2 = 41.8 ≤ 91.7 → within
    within = overloaded(105, 141.0, 159, 267.0, 3.11, 2.68, expected=117.2, allowance=91.7, z=3)
    assert within.startswith("queue growing: requests in the system (arrived, not finished) grew from 105")
    assert "so a capacity search does not count this load out" in within
    # 250 − 117.2 = 132.8 > 91.7 → beyond: overloaded; and with no allowance known, overloaded as before
    assert overloaded(105, 141.0, 250, 267.0, 3.11, 2.0, expected=117.2, allowance=91.7, z=3).startswith("overloaded:")
    assert overloaded(105, 141.0, 159, 267.0, 3.11, 2.68).startswith("overloaded:")
    assert overloaded_waiting(23, 14.0, 30, 29.2, 9.8, 9.0, expected=21.0, allowance=14.0, z=3).startswith(
        "queue growing: requests waiting for their first token")
