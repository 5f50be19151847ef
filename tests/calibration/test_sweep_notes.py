"""A sweep's notes: what every stage says once, then each stage's own in stage order, named by its rate (fresh-user
trial: seven near-identical TPOT notes came sorted alphabetically with no stage named)."""

from __future__ import annotations

from types import SimpleNamespace

from kvledger.calibration.sweep_notes import sweep_notes


def test_common_notes_once_then_each_stages_own_by_rate():
    rows = [SimpleNamespace(run="stage_0", notes=["pool: 100 blocks", "TPOT: field 3.47 ms"]),
            SimpleNamespace(run="stage_1", notes=["pool: 100 blocks", "TPOT: field 4.00 ms",
                                                  "stage_1: the client fell behind"]),
            SimpleNamespace(run="stage_2", notes=["TPOT: field 3.47 ms", "pool: 100 blocks"])]
    assert sweep_notes(rows, [1.0, 31.4, 153.0]) == [
        "pool: 100 blocks",                     # every stage's: once, first
        "at 1.000 req/s: TPOT: field 3.47 ms",  # the rest in stage order, the rate as the table prints it
        "at 31.40 req/s: TPOT: field 4.00 ms",
        "stage_1: the client fell behind",      # already names its stage
        "at 153.0 req/s: TPOT: field 3.47 ms"]  # the same words at another stage are another stage's note
