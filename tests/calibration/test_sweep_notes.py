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


def test_a_note_two_stages_give_with_their_own_figures_is_said_once():
    # "HEAD (this stage: FIGURES)" from two stages: the head once, each stage's figures after it by rate; a stage's
    # note of that form that no other stage shares keeps its own line (fresh-user trial: 14 near-identical notes on
    # kubecon's seven stages)
    head = "TPOT: the field disagrees with the file's own TTFT"
    rows = [SimpleNamespace(run="stage_0", notes=[f"{head} (this stage: 3.47 ms against 7.13 ms)"]),
            SimpleNamespace(run="stage_1", notes=[f"{head} (this stage: 4.00 ms against 8.20 ms)",
                                                  "cap: 440 in flight (this stage: achieved 106 of 123 req/s)"]),
            SimpleNamespace(run="stage_2", notes=[f"{head} (this stage: 9.29 ms against 19.04 ms)"])]
    assert sweep_notes(rows, [1.0, 31.4, 183.38]) == [
        f"{head} (by stage: 1.000 req/s: 3.47 ms against 7.13 ms; 31.40 req/s: 4.00 ms against 8.20 ms; 183.4 req/s: "
        "9.29 ms against 19.04 ms)",
        "at 31.40 req/s: cap: 440 in flight (this stage: achieved 106 of 123 req/s)"]
