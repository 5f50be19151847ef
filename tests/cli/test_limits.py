"""The option range table covers every numeric option of every command; ranges and output checks behave as stated."""

from __future__ import annotations

import math
import os

import pytest
from typer.main import get_command

from kvledger import strict_json
from kvledger.cli.limits import Range, check_options, range_for
from kvledger.cli.main import app
from kvledger.cli.outputs import prepare_output_dir, prepare_output_file
from kvledger.errors import InputError
from kvledger.strict_json import dumps, write_text_atomic


def _numeric_options():
    for name, cmd in get_command(app).commands.items():
        for p in cmd.params:
            ann = str(p.type_descriptor.annotation)
            if "int" in ann or "float" in ann:
                yield name, p.name


def test_every_numeric_option_of_every_command_has_a_range():
    missing = [f"{c} {n}" for c, n in _numeric_options() if range_for(c, n) is None]
    assert not missing, f"add these to OPTION_RANGES or COMMAND_RANGES in kvledger/cli/limits.py: {missing}"
    assert len(list(_numeric_options())) > 100  # the walk really sees the commands' options


def test_every_command_is_range_checked_before_it_runs():
    from kvledger.cli.limits import SELF_CHECKED

    unchecked = [i.name for i in app.registered_commands if i.name not in SELF_CHECKED and not getattr(i.callback,
        "range_checked", False)]
    assert not unchecked, f"register these before the range-check loop in kvledger/cli/main.py (build_app): {unchecked}"


def test_cpu_overhead_is_read_in_seconds_and_bounded_in_every_command_that_takes_it():
    # --cpu-overhead is text with a unit; its range is PlanSettings.cpu_overhead_s's, [0, 10] s. "10s" = 10 s is
    # the top (accepted), "0us" = 0 s the bottom; "10001ms" = 10.001 s and the trial's "1e9s" = 1e9 s are above it.
    from kvledger.cli.limits import DURATION_OPTIONS

    takes_it = sorted({c for c,
                       cmd in get_command(app).commands.items() for p in cmd.params if p.name == "cpu_overhead"})
    assert takes_it == ["calibrate", "cost", "goodput", "search", "simulate", "validate"]
    assert "cpu_overhead" in DURATION_OPTIONS
    for command in takes_it:
        check_options(command, {"cpu_overhead": "10s"}, {"cpu_overhead": "--cpu-overhead"})
        check_options(command, {"cpu_overhead": "0us"}, {"cpu_overhead": "--cpu-overhead"})
        for bad in ("10001ms", "1e9s"):
            with pytest.raises(InputError, match=rf"^--cpu-overhead {bad} is out of range; allowed: \[0, 10\] s$"):
                check_options(command, {"cpu_overhead": bad}, {"cpu_overhead": "--cpu-overhead"})
    with pytest.raises(InputError, match="--cpu-overhead: '2' has no unit"):  # the unit is still required
        check_options("simulate", {"cpu_overhead": "2"}, {"cpu_overhead": "--cpu-overhead"})


def test_cpu_overhead_out_of_range_ends_the_command_before_it_runs():
    from typer.testing import CliRunner

    sim = ["--simulate", "meta-llama/Meta-Llama-3.1-8B", "--gpu", "H100", "--num-requests", "5", "--cpu-overhead",
           "1e9s"]
    for argv in (["goodput", *sim, "--slo", "ttft=1s"],
                 ["cost", *sim, "--slo", "ttft=1s", "--api", "OpenAI:gpt-4.1", "--utilization", "0.5",
                  "--gpu-usd-per-hour", "3"]):
        res = CliRunner().invoke(app, argv)
        assert (
            isinstance(res.exception, InputError)
            and str(res.exception) == "--cpu-overhead 1e9s is out of range; allowed: [0, 10] s"
        )


def test_range_errors_share_one_wording_flag_value_range():
    # every range check outside the option table words its error as the table does: "<flag> <value> is out of
    # range; allowed: <range>", the value shown as the table shows it (a whole float without ".0", thousands
    # separated; others short form) — the allowed values themselves are unchanged
    from kvledger.analyses.judgments.spec_decode import expected_tokens_per_step
    from kvledger.analyses.judgments.spec_decode_summary import make_draft
    from kvledger.errors import range_error, show_number

    assert [show_number(x) for x in (7.0, 0, 4096, 1e300, 0.25, math.nan, "x")] == ["7", "0", "4,096", "1e+300", "0.25",
                                                                                    "nan", "x"]
    assert str(range_error("--f", 1.5, "[0, 1]")) == "--f 1.5 is out of range; allowed: [0, 1]"
    with pytest.raises(InputError, match=r"^--acceptance 1\.5 is out of range; allowed: \[0, 1\] \(per-token "
                                         r"acceptance rate\)$"):
        expected_tokens_per_step(1.5, 3)
    assert expected_tokens_per_step(1.0, 3) == 4.0  # α = 1 still accepted: k + 1 = 4 tokens per step
    with pytest.raises(InputError, match=r"^--draft-cost-fraction 2 is out of range; allowed: \(0, 1\] of the target's "
                                         r"decode step$"):
        make_draft(draft_cost_fraction=2.0)
    assert make_draft(draft_cost_fraction=1.0).kind == "fraction"  # 1 is the top of (0, 1]
    # the option table's own refusals read the same way (Range.check)
    with pytest.raises(InputError, match=r"^--utilization 7 is out of range; allowed: \(0, 1\] \(fraction\); did you "
                                         r"mean --utilization 0\.07 \(7 %\)\?$"):
        check_options("search", {"utilization": 7.0}, {"utilization": "--utilization"})


def test_range_bounds_and_specials():
    frac = Range(0.0, 1.0, lo_open=True)
    frac.check("--f", 1.0)
    for bad in (0.0, 1.0000001, math.nan, math.inf, -math.inf):
        with pytest.raises(InputError):
            frac.check("--f", bad)
    rate = Range(0.0, math.inf, lo_open=True, allow_inf=True, unit="req/s")
    rate.check("--rate", math.inf)
    with pytest.raises(InputError, match=r"--rate -inf is not finite; allowed: \(0, inf\] req/s"):
        rate.check("--rate", -math.inf)


def test_rate_is_bounded_above_and_still_takes_inf():
    # --rate: (0, 1e6] req/s, or inf (every request at t = 0); 1e308 used to pass and print a 300-digit overload note
    rate = range_for("simulate", "rate")
    rate.check("--rate", 1e6)
    rate.check("--rate", math.inf)
    with pytest.raises(InputError, match=r"--rate 1e\+308 is out of range; allowed: \(0, 1,000,000\] req/s or inf"):
        rate.check("--rate", 1e308)


def test_several_bad_options_are_reported_together():
    with pytest.raises(InputError) as err:
        check_options("simulate", {"seed": -1, "replicas": 0, "tp": 1, "rate": None}, {"seed": "--seed",
                                                                                       "replicas": "--replicas"})
    assert (
        str(err.value).startswith("2 problems with the inputs:")
        and "--seed -1" in str(err.value)
        and "--replicas 0" in str(err.value)
    )


def test_strict_json_never_writes_nan_or_infinity():
    import numpy as np

    text = dumps({"a": math.inf, "b": [math.nan, -math.inf, np.float64(1.5)], "c": np.arange(2)})
    assert text == '{"a": "inf", "b": [null, "-inf", 1.5], "c": [0, 1]}'


def test_dollar_figures_are_rounded_at_the_json_boundary_only():
    # float noise of sums and products (search's sizing.rental_usd_per_month 15768.000000000002, cost's
    # decision.api_usd_per_month 1480.0896000000002): a monthly total to the cent, any other dollar figure to 15
    # significant digits, a double's exact ones (0.003935409999999999 $/request → 0.00393541, 0.30000000000000004
    # $/Mtok → 0.3, 0.0123456789012345678 → 0.0123456789012346); a key without "usd" is left as it is
    doc = {"sizing": {"rental_usd_per_month": 15768.000000000002, "monthly_usd_range": [4365.400000000001, 4365.4049]},
           "decision": {"api_usd_per_month": 1480.0896000000002, "api_usd": 0.003935409999999999},
           "host_memory_usd_per_gib_month": 0.0123456789012345678, "usd_per_mtok_output": 0.30000000000000004,
           "attainment": 0.30000000000000004, "num_gpus_usd": 3}
    assert dumps(doc) == dumps(strict_json.to_strict(doc)) == (
        '{"sizing": {"rental_usd_per_month": 15768.0, "monthly_usd_range": [4365.4, 4365.4]}, '
        '"decision": {"api_usd_per_month": 1480.09, "api_usd": 0.00393541}, '
        '"host_memory_usd_per_gib_month": 0.0123456789012346, "usd_per_mtok_output": 0.3, '
        '"attainment": 0.30000000000000004, "num_gpus_usd": 3}')
    assert doc["sizing"]["rental_usd_per_month"] == 15768.000000000002  # the value itself is untouched


def test_output_file_checks(tmp_path, capsys):
    inp = tmp_path / "bench.json"
    inp.write_text("{}")
    for force in (False, True):  # an input is never replaced, --force or not (issue 22)
        with pytest.raises(InputError, match="is also an input of this command"):
            prepare_output_file(inp, force=force, inputs=[inp])
    with pytest.raises(InputError, match="already exists"):
        prepare_output_file(inp, force=False)
    with pytest.raises(InputError, match="is a directory"):
        prepare_output_file(tmp_path, force=True)
    # a missing folder is refused, naming the first missing one, and nothing is created (fresh-user trial, item 5)
    with pytest.raises(InputError, match=f"the folder {tmp_path / 'new'} does not exist"):
        prepare_output_file(tmp_path / "new" / "deeper" / "out.json", force=False)
    assert not (tmp_path / "new").exists()
    prepare_output_file(tmp_path / "out.json", force=False)  # an existing folder is fine


def test_a_link_out_of_the_output_folder_is_refused_then_warned_about(tmp_path, capsys):
    outside = tmp_path / "elsewhere.json"
    outside.write_text("keep me")
    run = tmp_path / "run"
    run.mkdir()
    os.symlink(outside, run / "records.json")
    with pytest.raises(InputError, match="refusing to replace it"):
        prepare_output_dir(run, ["records.json"], force=False)
    prepare_output_dir(run, ["records.json"], force=True)
    assert "outside the output folder" in capsys.readouterr().err
    write_text_atomic(run / "records.json", "new")  # replaces the link, not the file it pointed to
    assert outside.read_text() == "keep me" and (run / "records.json").read_text() == "new"


def test_impossible_results_are_refused_loudly_not_printed():
    from types import SimpleNamespace

    from kvledger.errors import KvLedgerError
    from kvledger.invariants import ImpossibleResultError, check_goodput_result, check_sim_summary

    ok = SimpleNamespace(source="f", attainment=0.3, attainment_upper=None, attainment_of_completed=0.5, num_good=3,
                         num_completed=6,
                         num_requests=10, duration_s=2.0, goodput_req_per_s=1.5, throughput_req_per_s=3.0,
                             goodput_output_tok_per_s=10.0,
                         throughput_output_tok_per_s=20.0, goodput_input_tok_per_s=None,
                             throughput_input_tok_per_s=None)
    check_goodput_result(ok)
    for bad in ({"attainment": 1.2}, {"num_good": 7}, {"goodput_req_per_s": 3.5}, {"duration_s": -1.0}):
        with pytest.raises(ImpossibleResultError):
            check_goodput_result(SimpleNamespace(**{**vars(ok), **bad}))
    assert not issubclass(ImpossibleResultError, KvLedgerError)  # a bug shows its traceback; it is not an input error
    s = {"num_requests": 3, "num_finished": 3, "num_rejected": 0, "duration_s": 1.0, "kv_usage": {"mean": 0.22,
        "max": 0.43},
         "ttft_s": SimpleNamespace(p50=0.1, p90=0.2, p99=0.3)}
    check_sim_summary(SimpleNamespace(**s))
    # the fast-path bug of issue 9 in reverse (a mean above the maximum) and a usage above 100 %
    for bad in ({"kv_usage": {"mean": 0.84, "max": 0.43}}, {"kv_usage": {"mean": 0.5, "max": 1.3}},
                {"ttft_s": SimpleNamespace(p50=0.3, p90=0.2)}, {"num_finished": 4}):
        with pytest.raises(ImpossibleResultError):
            check_sim_summary(SimpleNamespace(**{**s, **bad}))


def test_the_python_api_and_the_cli_refuse_with_one_range():
    # kvledger.ranges is the one table: a lower layer (web app, Python API) that checks a value again reads the same
    # Range, so the refusal is word for word the CLI's. --pue 0.5 is below [1, 3]; --rate inf is no load to size for
    # in search (its table entry has no allow_inf, unlike simulate's); --evict 1 would evict every token ([0, 1)).
    from kvledger.analyses.judgments.kv_eviction import evict
    from kvledger.analyses.search import SearchSpec
    from kvledger.ledgers.host_bill import HostBill

    cases = [(lambda: HostBill(pue=0.5).check(), "cost", {"pue": 0.5},
              r"^--pue 0\.5 is out of range; allowed: \[1, 3\] \(facility power ÷ IT power\)$"),
             (lambda: SearchSpec(model="m", slo="ttft=1s", rate_req_per_s=math.inf).check(), "search",
              {"rate": math.inf}, r"^--rate inf is not finite; allowed: \(0, 1,000,000\] req/s$")]
    for api_call, command, values, message in cases:
        with pytest.raises(InputError, match=message):
            api_call()
        with pytest.raises(InputError, match=message):
            check_options(command, values)
    with pytest.raises(InputError, match=r"^--evict 1 is out of range; allowed: \[0, 1\) \(share of tokens evicted\)$"):
        evict(1024, 16, 2048, "scattered", evict_fraction=1.0)


def test_a_fraction_given_as_a_percentage_is_answered_with_the_fraction():
    # a newcomer's trial: `plan … --gpu-memory-utilization 90` said only "allowed: (0, 1] (fraction)"; a share between
    # 5 and 100 reads as a percentage and the error names the fraction meant; 1.5, 2 (twice?) or 950 are not read as one
    # (a range whose words give the percentage's fraction already, --target's, needs no hint)
    from typer.testing import CliRunner

    res = CliRunner().invoke(app, ["plan", "llama-3.1-8b", "--gpu", "H100", "--gpu-memory-utilization", "90"])
    assert isinstance(res.exception, InputError)  # exit status 2, by kvledger.cli.main
    assert str(res.exception) == ("--gpu-memory-utilization 90 is out of range; allowed: (0, 1] (fraction); did you "
                                  "mean --gpu-memory-utilization 0.9 (90 %)?")
    with pytest.raises(InputError, match=r"--max-utilization 0\.8 \(80 %\)\?$"):
        check_options("cost", {"max_utilization": 80}, {"max_utilization": "--max-utilization"})
    with pytest.raises(InputError, match=r"e\.g\. 0\.9 for 90 %\)$"):  # its range says it already: no hint
        check_options("goodput", {"target": 90}, {"target": "--target"})
    for value in (1.5, 2, 950):
        with pytest.raises(InputError) as err:
            check_options("plan", {"gpu_memory_utilization": value})
        assert "did you mean" not in str(err.value)
