"""The grouped conformal ranks of the error bands (kvledger.ledgers.conformal), worked by hand."""

import pytest

from kvledger.ledgers.conformal import conformal_interval, conformal_level


def test_one_value_per_group_is_the_plain_split_conformal_rank():
    # n = 10 values, each its own deployment: the ⌈0.9 × 11⌉ = 10th smallest is the upper end and, mirrored, the
    # ⌊0.1 × 11⌋ = 1st smallest the lower end (lodo_bands' order statistics before groups were counted)
    vals = [0.05, -0.02, 0.11, 0.0, -0.07, 0.03, 0.08, -0.01, 0.02, 0.04]
    assert conformal_interval(vals) == (-0.07, 0.11)
    # n = 19: level 0.9 × 20/19 = 0.947, reached at the 18th of 19 (18/19 = 0.947); lower end the 2nd smallest
    vals = [i / 100 for i in range(19)]
    assert conformal_interval(vals) == (0.01, 0.17)


def test_a_sweep_of_many_stages_counts_as_one_deployment():
    # 21 deployments: 20 with one error each (0.00, 0.01, … 0.19) and one sweep "s" of ten stages all at −0.50.
    # Counted by value (n = 30), the ⌊0.1 × 31⌋ = 3rd smallest is the sweep's −0.50 and the ⌈0.9 × 31⌉ = 28th is
    # 0.17 (ten −0.50s, then 0.00 … 0.17): the one configuration far off sets the lower end because it ran ten loads
    vals = [i / 100 for i in range(20)] + [-0.50] * 10
    groups = [f"d{i}" for i in range(20)] + ["s"] * 10
    assert conformal_interval(vals) == (-0.50, 0.17)
    # Pooled (k = 21, level 0.9 × 22/21 = 0.943; each deployment 1/21 = 0.048, the sweep's stages 1/210 each): from
    # the top, 19 singles reach 0.905 and the 20th (0.00) 0.952, the lower end; from the bottom the sweep's 0.048 and
    # 19 singles (0.00 … 0.18) reach 0.952, the upper end 0.18. One deployment of 21 off is what the 1/(k + 1) tail
    # allows, however many stages it ran
    assert conformal_interval(vals, groups) == (0.0, 0.18)


def test_a_sweep_of_many_stages_does_not_narrow_the_band_against_the_others():
    # 12 deployments: 11 single errors at +0.01 … +0.11 and one sweep of five stages at −0.20. Counted by value
    # (16 values), the lower end is the ⌊0.1 × 17⌋ = 1st smallest, −0.20, and the upper the ⌈0.9 × 17⌉ = 16th, +0.11.
    # Now 11 *more* stages of one sweep at 0.0 (27 values): by value the upper end falls to the ⌈0.9 × 28⌉ = 26th
    # = +0.10 — more stages of one configuration narrow the band against a new deployment. Pooled (k = 13, level
    # 0.9 × 14/13 = 0.969; singles 1/13 = 0.077 each, the two sweeps 0.077 shared among their stages): from the
    # bottom 0.077 (−0.20 sweep) + 0.077 (0.0 sweep) + 10 singles = 0.923 < 0.969 at +0.10, 1.0 at +0.11
    singles = [i / 100 for i in range(1, 12)]
    vals = singles + [-0.20] * 5 + [0.0] * 11
    groups = [f"d{i}" for i in range(11)] + ["a"] * 5 + ["b"] * 11
    assert conformal_interval(vals)[1] == 0.10
    assert conformal_interval(vals, groups) == (-0.20, 0.11)


def test_few_deployments_take_the_widest_band_the_data_give():
    # k = 5: 0.9 × 6/5 = 1.08 > 1, capped at 1: the ends are the smallest and largest values
    assert conformal_level(5) == 1.0
    assert conformal_interval([0.1, 0.2, 0.3, 0.4, 0.5, 0.6], ["a", "a", "b", "c", "d", "e"]) == (0.1, 0.6)
    assert conformal_level(9) == pytest.approx(1.0) and conformal_level(19) == pytest.approx(0.9 * 20 / 19)


def test_bad_input_is_refused():
    with pytest.raises(ValueError, match="at least one value"):
        conformal_interval([])
    with pytest.raises(ValueError, match="2 values but 1 group"):
        conformal_interval([0.1, 0.2], ["a"])


def test_fewer_than_nine_deployments_widen_to_the_t_interval():
    from kvledger.ledgers.conformal import few_groups_interval

    # three deployments: a's two stages +10% and +30% (each 1/6), b 0% and c −10% (each 1/3). ln(1 + e): 0.0953,
    # 0.2624, 0, −0.1054; pooled mean = (0.0953 + 0.2624)/6 − 0.1054/3 = 0.02449; spread s² = Σ w (z − mean)² × 3/2 =
    # 0.02413, s = 0.1553; t(0.9, 2 df) = 1.886; half-width 1.886 × 0.1553 × √(1 + 1/3) = 0.3383 →
    # e^(0.02449 − 0.3383) − 1 = −26.93%, e^(0.02449 + 0.3383) − 1 = +43.73%: wider than −10 … +30% seen
    lo, hi = few_groups_interval([0.10, 0.30, 0.0, -0.10], ["a", "a", "b", "c"])
    assert (lo, hi) == (pytest.approx(-0.26934, abs=1e-5), pytest.approx(0.43733, abs=1e-5))
    # never inside the errors seen: one far value keeps its end where the t interval falls short of it
    lo, hi = few_groups_interval([0.0, 0.01, 0.02, 0.03, 5.0], list("abcde"))
    assert hi >= 5.0 and lo <= 0.0
    # one deployment: no spread between deployments to scale, its smallest … largest
    assert few_groups_interval([0.1, 0.3], ["a", "a"]) == (0.1, 0.3)
    # the nine-deployment throughput band of error_bands.json: nine single values, each 1/9, t(0.9, 8) = 1.397 — the
    # unweighted t interval of the stored −9.57 … +22.53% (docs/validation.md §2.20)
    nine = [0.165, -0.052, -0.061, 0.223, -0.004, 0.022, -0.055, 0.139, 0.141]
    lo, hi = few_groups_interval(nine, [str(i) for i in range(9)])
    assert (lo, hi) == (pytest.approx(-0.0957, abs=5e-4), pytest.approx(0.2253, abs=5e-4))
