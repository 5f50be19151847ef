"""A search ledger written before the JSON took one name per quantity (`capacity.boundary_rate_req_per_s`, now
`slo_capacity_req_per_s`, as cost names it) resumes under the current names, in place, so the resumed search reads it
(the ranking and CSV read `slo_capacity_req_per_s`) and prints what a fresh run prints."""

from __future__ import annotations

import json

from kvledger.analyses.search.ledger_file import LEDGER_FORMAT, resumable_entries


def test_an_older_ledgers_capacity_resumes_under_its_current_name(tmp_path):
    header = {"format": LEDGER_FORMAT, "spec": {"model": "m"}, "candidates": ["a", "b"]}
    old = {"id": "a", "status": "feasible", "capacity": {"boundary_rate_req_per_s": 18.5, "attainment": 0.956},
           "offload": {"base_boundary_rate_req_per_s": 12.0}}
    path = tmp_path / "ledger.jsonl"
    path.write_text("".join(json.dumps(x) + "\n" for x in (header, old, {"id": "b", "status": "error"})))
    got = resumable_entries(path, header)
    assert list(got) == ["a"]  # the failed one is rerun
    assert got["a"]["capacity"] == {"slo_capacity_req_per_s": 18.5, "attainment": 0.956}  # the key in its place
    assert got["a"]["offload"] == {"base_slo_capacity_req_per_s": 12.0}


def test_an_older_ledgers_sizing_and_bound_resume_under_costs_names(tmp_path):
    # sizing.capacity_req_per_s was cost's capacity.sizing_req_per_s and sizing.monthly_usd cost's rental_usd_per_month
    # (the rented replicas on whole instances + their KV tiers, no people); bounds.capacity_req_per_s, the capacity's
    # upper bound, another quantity, is goodput's and cost's capacity_bound_req_per_s
    header = {"format": LEDGER_FORMAT, "spec": {"model": "m"}, "candidates": ["a"]}
    band = {"capacity_multiplier": 0.8, "slo_capacity_req_per_s": 14.8, "replicas": 3, "monthly_usd": 5891.1}
    old = {"id": "a", "status": "feasible", "bounds": {"capacity_req_per_s": 26.3},
           "sizing": {"rate_req_per_s": 30.0, "capacity_req_per_s": 18.5, "replicas": 2, "monthly_usd": 3927.4,
                      "at_band_low": band}}
    path = tmp_path / "ledger.jsonl"
    path.write_text("".join(json.dumps(x) + "\n" for x in (header, old)))
    got = resumable_entries(path, header)["a"]
    assert got["bounds"] == {"capacity_bound_req_per_s": 26.3}
    assert list(got["sizing"].items()) == [("rate_req_per_s", 30.0), ("sizing_req_per_s", 18.5), ("replicas", 2),
                                           ("rental_usd_per_month", 3927.4), ("at_band_low", {
                                               "capacity_multiplier": 0.8, "sizing_req_per_s": 14.8,
                                               "replicas": 3, "rental_usd_per_month": 5891.1})]


def test_an_older_ledgers_capacity_gets_the_sized_rate_keys_as_null_where_it_left_them_out(tmp_path):
    # written before the sized-rate keys were always there: no bound capped the rate found, so they were left out; the
    # resumed entry has them null where a fresh run writes them (after the attainment; the sized run's goodput after
    # goodput_req_per_s), the run's own goodput moved beside them
    header = {"format": LEDGER_FORMAT, "spec": {"model": "m"}, "candidates": ["a"]}
    cap = {"slo_capacity_req_per_s": 18.5, "attainment": 0.956, "goodput_req_per_s": 17.686,
           "goodput_at_boundary_req_per_s": 16.9, "goodput_output_tok_per_s": 4000.0}
    path = tmp_path / "ledger.jsonl"
    path.write_text("".join(json.dumps(x) + "\n" for x in (header, {"id": "a", "status": "feasible",
                                                                    "capacity": cap})))
    got = resumable_entries(path, header)["a"]["capacity"]
    assert list(got.items()) == [("slo_capacity_req_per_s", 18.5), ("attainment", 0.956), ("sized_on_req_per_s", None),
                                 ("attainment_at_sized_rate", None), ("goodput_at_boundary_req_per_s", 16.9),
                                 ("sustained_good_req_per_s_at_boundary", None), ("at_volume_load", None),
                                 ("goodput_req_per_s", 17.686), ("goodput_at_sized_rate_req_per_s", None),
                                 ("goodput_output_tok_per_s", 4000.0)]


def test_a_ledger_with_the_sized_keys_but_no_volume_load_gets_it_as_null(tmp_path):
    # written after the sized-rate keys were always there but before at_volume_load was (no load priced: left out):
    # null where a fresh run writes it, before goodput_req_per_s; nothing else moves
    header = {"format": LEDGER_FORMAT, "spec": {"model": "m"}, "candidates": ["a"]}
    cap = {"slo_capacity_req_per_s": 18.5, "attainment": 0.956, "sized_on_req_per_s": None,
           "sustained_good_req_per_s_at_boundary": None, "goodput_req_per_s": 17.686}
    path = tmp_path / "ledger.jsonl"
    path.write_text("".join(json.dumps(x) + "\n" for x in (header, {"id": "a", "status": "feasible",
                                                                    "capacity": cap})))
    got = resumable_entries(path, header)["a"]["capacity"]
    assert list(got) == ["slo_capacity_req_per_s", "attainment", "sized_on_req_per_s",
                         "sustained_good_req_per_s_at_boundary", "at_volume_load", "goodput_req_per_s"]
    assert got["at_volume_load"] is None and got["goodput_req_per_s"] == 17.686
