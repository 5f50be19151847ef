"""How finely a sweep's stages resolve its knees: both read by linear interpolation between the stages that straddle
them, so two knees between the same two stages agree to within the spacing by construction (a fresh-user trial read
kubecon's 93.44 against 93.38 req/s as a 0.06 req/s match)."""

from __future__ import annotations

from kvledger.report.sweep_view import knee_resolution

# kubecon `vllm` sweep's requested rates (stage files 0–6), req/s
RATES = [1.0, 31.27, 61.73, 92.19, 122.59, 153.05, 183.47]


def test_two_knees_between_the_same_stages_are_said_to_agree_only_within_the_spacing():
    said = knee_resolution(RATES, 93.44, 93.38)
    # 122.59 − 92.19 = 30.40 req/s between the straddling stages
    assert said == ("both knees lie between the stages at 92.19 and 122.59 req/s and are read by linear "
                    "interpolation there: the sweep resolves them only to its spacing, 30.40 req/s, so their "
                    "agreement within it is not a measure of the simulator's error")


def test_knees_between_different_stages_name_each_pair_and_a_missing_knee_says_nothing():
    assert knee_resolution(RATES, 93.44, 125.0) == ("the measured knee lies between the stages at 92.19 and 122.59 "
                                                    "req/s, the simulated one between the stages at 122.59 and "
                                                    "153.05 req/s")
    assert knee_resolution(RATES, 93.44, None) is None
    assert knee_resolution(RATES, 200.0, 93.0) is None  # past the last stage: no pair straddles it


def test_a_knee_on_the_lowest_stage_is_said_to_be_at_or_below_it():
    # knee_rate returns the first stage's own rate when that stage is already past the threshold
    assert knee_resolution(RATES, 93.44, 1.0) == ("the measured knee lies between the stages at 92.19 and 122.59 "
                                                  "req/s, the simulated one at or below the lowest stage, 1.00 req/s")
